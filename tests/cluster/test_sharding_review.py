"""Holes the review of the allocation table found (each test failed before its fix):
a leaving region reported its leave done while it still held its own senders'
messages (dead letters at its stop), and a hand-over stream append retried after a
lost reply was appended twice."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import gevent
import gevent.event
import pytest
from gevent.queue import Queue

pytest.importorskip("redis")

from gactors.cluster._redis import RedisBackend
from gactors.cluster._seam import AllocationStore, AllocationTable, BackendUnavailable
from gactors.cluster._sharding._alloc_io import AllocIO
from gactors.cluster._sharding._handover import RegionState, Table

pytestmark = [pytest.mark.timeout(60)]


# -- 4. A leaving region reports its leave done while it still holds its own messages --
def test_a_leaving_region_is_not_done_while_it_holds_messages() -> None:
    from gactors.cluster._sharding._handover import DEAD, LEFT

    sm = RegionState("cart", 1, "c", True)
    sm.table(Table(3, ("a",), {}, 2, frozenset({"a", "b", "c"}), ("a", "b", "c")))
    assert sm.route(0, "e", "m1", None) == "a"
    sm.out.clear()
    sm.leave()
    # a leaves too (a rolling restart): shard 0 moves a -> b; c drains a, then acks.
    sm.table(Table(4, ("a",), {0: ("a", "b")}, 3, frozenset({"a", "b", "c"}), ("b",)))
    sm.route(0, "e", "m2", None)  # c's own sender: held until the flip
    assert (LEFT,) not in sm.out, (
        "LEFT while m2 is held: the region stops and drop_all makes it a dead letter "
        f"(the rolling-restart fault run's 10 dead letters); out={sm.out}"
    )
    assert not any(c[0] == DEAD for c in sm.out)


# -- 2. A hand-over stream write retried after a lost reply is written twice --------------
class _LostReplyOnce:
    """The real store; the first stream append runs, then its reply is 'lost'."""

    def __init__(self, store: AllocationStore) -> None:
        self._store = store
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def stream_append(
        self, type_name: str, shard: int, items: Any, token: str, from_node: str
    ) -> bool:
        appended = self._store.stream_append(type_name, shard, items, token, from_node)
        if not self.failed:
            self.failed = True
            raise BackendUnavailable("redis://x", "timeout reading the reply", maybe_sent=True)
        return appended


@pytest.fixture
def backend(redis_url: str) -> Iterator[RedisBackend]:
    b = RedisBackend(redis_url, f"rev{uuid.uuid4().hex[:8]}")
    try:
        yield b
    finally:
        b.close()


def test_a_stream_write_retried_after_a_lost_reply_is_not_duplicated(
    backend: RedisBackend,
) -> None:
    backend.membership().join("a", ())
    backend.membership().join("b", ())
    store = backend.allocations()
    store.register("cart", "b", True, 1)
    tables: Queue[AllocationTable] = Queue()
    io = AllocIO(_LostReplyOnce(store), "cart", "a", True, 1, tables.put, 0.1)  # type: ignore[arg-type]
    t = tables.get(timeout=10)  # registered
    t = store.plan("cart", t.version, t.epoch, ["a"])
    assert store.plan("cart", t.version, t.epoch, ["b"]).moving == {0: ("a", "b")}
    io.stream(0, [(1, b"payload-1")], from_node="a")
    done = gevent.event.Event()
    io.after(done.set)
    assert done.wait(10), "the stream write is done (retried once)"
    io.close(unregister=False)
    taken = [(sid, p) for _id, sid, p in backend.allocations().stream_read("cart", 0)]
    assert taken == [(1, b"payload-1")], f"hand-over entries: {taken}"


class _Unreachable:
    """The real store, but every stream append fails before it is sent."""

    def __init__(self, store: AllocationStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def stream_append(
        self, type_name: str, shard: int, items: Any, token: str, from_node: str
    ) -> bool:
        raise BackendUnavailable("redis://x", "connection refused", maybe_sent=False)


def test_stream_appends_that_never_ran_are_dead_letters_when_the_io_closes(
    backend: RedisBackend,
) -> None:
    backend.membership().join("a", ())
    tables: Queue[AllocationTable] = Queue()
    dropped: list[Any] = []
    io = AllocIO(
        _Unreachable(backend.allocations()),  # type: ignore[arg-type]
        "cart",
        "a",
        True,
        1,
        tables.put,
        0.1,
        dropped=dropped.extend,
    )
    tables.get(timeout=10)  # registered
    io.stream(0, [(1, b"p1")], [("m1", None)])  # retried while it fails
    io.stream(1, [(1, b"p2")], [("m2", None)])  # queued behind it
    gevent.sleep(0.3)
    io.close(unregister=False)
    gevent.sleep(0.3)
    assert sorted(m for m, _s in dropped) == ["m1", "m2"]

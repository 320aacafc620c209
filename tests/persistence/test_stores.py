"""The store contract (gactors/persistence/_memory.py, _sqlite.py), the same tests for
every built-in store: sequence and fencing refusals are atomic per write and leave the
other writes of a batch alone; replay bounds; deletion keeps the highest number;
snapshots; durable state revisions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gevent
import pytest
from zope.interface.verify import verifyObject

from gactors.interfaces import IDurableStateStore, IJournal, ISnapshotStore
from gactors.persistence import (
    AtomicWrite,
    FencedError,
    PersistenceConflict,
    PersistenceSettings,
    StateWrite,
)
from gactors.persistence._memory import MemoryStore
from gactors.persistence._redis_store import redis_store
from gactors.persistence._sqlite import sqlite_store


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        prefix = request.getfixturevalue("redis_key_prefix")
        r = redis_store(PersistenceSettings(url=url), SimpleNamespace(name=prefix, settings=None))
        try:
            yield r
        finally:
            r.close()
        return
    s = sqlite_store(PersistenceSettings(path=str(tmp_path / "store.sqlite3")))
    try:
        yield s
    finally:
        s.close()


def w(pid: str, after: int, *payloads: bytes, token: int | None = None) -> AtomicWrite:
    return AtomicWrite(pid, after, token, payloads, 1.5)


def seqs(store: Any, pid: str) -> list[tuple[int, bytes]]:
    return [(e.sequence_nr, e.payload) for e in store.replay(pid, 1, None, None)]


def test_provides_the_three_interfaces(store: Any) -> None:
    assert verifyObject(IJournal, store)
    assert verifyObject(ISnapshotStore, store)
    assert verifyObject(IDurableStateStore, store)


def test_a_batch_refuses_stale_writes_atomically_and_keeps_the_others(store: Any) -> None:
    assert store.write_batch([w("a", 0, b"1", b"2"), w("b", 0, b"x", token=5)]) == [None, None]
    results = store.write_batch(
        [
            w("a", 1, b"stale", b"stale"),  # a holds 2
            w("b", 1, b"old", token=4),  # b has seen token 5
            w("c", 0, b"c1"),
            w("b", 1, b"y", token=5),
        ]
    )
    assert isinstance(results[0], PersistenceConflict) and "'a'" in str(results[0])
    assert isinstance(results[1], FencedError) and "token 4" in str(results[1])
    assert results[2:] == [None, None]
    assert seqs(store, "a") == [(1, b"1"), (2, b"2")]
    assert seqs(store, "b") == [(1, b"x"), (2, b"y")]
    assert seqs(store, "c") == [(1, b"c1")]
    assert store.highest_sequence_nr("a") == 2
    # A higher token is stored as the new fence: the old one is refused from now on.
    assert store.write_batch([w("b", 2, b"z", token=9)]) == [None]
    assert isinstance(store.write_batch([w("b", 3, b"q", token=5)])[0], FencedError)
    assert isinstance(store.write_batch([w("b", 3, b"q")])[0], FencedError)  # no token at all
    assert sorted(store.persistence_ids()) == ["a", "b", "c"]


def test_replay_bounds_and_deletion(store: Any) -> None:
    store.write_batch([w("p", 0, *(bytes([i]) for i in range(1, 11)))])
    assert [e.sequence_nr for e in store.replay("p", 3, 6, None)] == [3, 4, 5, 6]
    assert [e.sequence_nr for e in store.replay("p", 3, None, 2)] == [3, 4]
    assert store.replay("p", 1, None, None)[0].timestamp == 1.5
    store.delete_to("p", 10, None)
    assert store.replay("p", 1, None, None) == []
    assert store.highest_sequence_nr("p") == 10  # the sequence goes on after deletion
    assert isinstance(store.write_batch([w("p", 0, b"again")])[0], PersistenceConflict)
    assert store.write_batch([w("p", 10, b"11")]) == [None]
    assert store.highest_sequence_nr("nobody") == 0 and store.replay("nobody", 1, None, None) == []


def test_snapshots(store: Any) -> None:
    assert store.load("s", None) is None
    for n in (3, 6, 9):
        store.save("s", n, float(n), b"snap%d" % n, None)
    assert store.load("s", None)[:2] == (9, b"snap9")
    assert store.load("s", 8)[:2] == (6, b"snap6")
    store.delete("s", 6)
    assert store.load("s", 8) is None and store.load("s", None)[0] == 9
    store.write_batch([w("s", 0, b"e", token=3)])
    with pytest.raises(FencedError):
        store.save("s", 1, 0.0, b"old", 2)


def test_durable_state_revisions(store: Any) -> None:
    assert store.get("d") is None
    assert store.write_batch([StateWrite("d", 0, None, b"v1", 2.0)]) == [None]
    r = store.write_batch(
        [StateWrite("d", 0, None, b"again", 2.0), StateWrite("d", 1, 4, b"v2", 3.0)]
    )
    assert isinstance(r[0], PersistenceConflict) and r[1] is None
    assert store.get("d")[:2] == (2, b"v2")
    assert isinstance(store.write_batch([StateWrite("d", 2, 3, b"old", 3.0)])[0], FencedError)
    assert store.write_batch([StateWrite("d", 2, 4, None, 4.0)]) == [None]  # deleted
    assert store.get("d")[:2] == (3, None)


def test_sqlite_batches_are_one_transaction_and_run_off_the_hub(tmp_path: Path) -> None:
    store = sqlite_store(PersistenceSettings(path=str(tmp_path / "t.sqlite3")))
    try:
        ticks = 0

        def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                # Not sleep(0): a greenlet that never waits keeps the GIL from the
                # writer thread (CI saw the write take over 60 s on a loaded machine).
                gevent.sleep(0.001)

        t = gevent.spawn(ticker)
        gevent.sleep(0)
        before = ticks
        store.write_batch([w(f"id{i}", 0, b"x" * 100) for i in range(2000)])
        t.kill()
        # The hub ran the ticker while the thread wrote: the greenlet waited, not the hub.
        assert ticks > before
        assert len(store.persistence_ids()) == 2000
    finally:
        store.close()

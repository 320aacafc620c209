"""Reminders on a cluster node in this process (SPEC section 20): entity and singleton
targets on a real Redis-protocol server, passivated entities started by a reminder,
``self.context.reminders`` in an entity and in a singleton."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from gactors import Actor, ActorSystem, Props
from gactors.cluster import ClusterSharding, ClusterSingleton
from gactors.reminders import Reminders
from gactors.reminders._model import Target

pytestmark = [pytest.mark.timeout(90)]

FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0, "lease_ttl": 1.5}
TICK = 0.25

#: (wall time, who, event, message) of every entity and singleton of these tests.
SEEN: list[tuple[float, str, str, Any]] = []


class Cart(Actor):
    def pre_start(self) -> None:
        SEEN.append((time.time(), str(self.context.entity_id), "start", None))

    def receive(self, m: Any) -> None:
        if isinstance(m, tuple) and m[0] == "remind-me":
            self.context.reminders.register(m[1], ("self", m[1]), due=m[2], period=m[3])
            self.sender.tell(self.context.reminders.names())
        else:
            SEEN.append((time.time(), str(self.context.entity_id), "msg", m))


class Allocator(Actor):
    def receive(self, m: Any) -> None:
        if isinstance(m, tuple) and m[0] == "remind-me":
            self.context.reminders.register(m[1], ("self", m[1]), due=m[2], period=m[3])
            self.sender.tell(self.context.reminders.names())
        else:
            SEEN.append((time.time(), "singleton", "msg", m))


@pytest.fixture
def node(redis_url: str) -> Iterator[ActorSystem]:
    SEEN.clear()
    system = ActorSystem(
        f"r{uuid.uuid4().hex[:10]}",
        config={"cluster": dict(FAST, url=redis_url), "reminders": {"tick": TICK}},
    )
    try:
        yield system
    finally:
        system.terminate()
        system.await_termination(15)


def seen(who: str, event: str = "msg") -> list[tuple[float, Any]]:
    return [(t, m) for t, w, e, m in list(SEEN) if w == who and e == event]


def wait_seen(who: str, n: int, limit: float, event: str = "msg") -> list[tuple[float, Any]]:
    deadline = time.monotonic() + limit
    while len(seen(who, event)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return seen(who, event)


def test_entity_register_names_unregister_and_errors(node: ActorSystem) -> None:
    r = Reminders(node)
    with pytest.raises(ValueError, match="no sharding region 'cart'"):
        r.register("a", "m", entity=("cart", "c1"), due=60)
    ClusterSharding(node).start("cart", Props(Cart), number_of_shards=8)
    r.register("a", "m", entity=("cart", "c1"), due=60)
    r.register("b", "m", entity=("cart", "c1"), due=60, period=10)
    r.register("a", "m", entity=("cart", "c2"), due=60)
    r.register("z", "m", singleton="alloc", due=60)
    assert r.names(entity=("cart", "c1")) == ["a", "b"]
    assert r.names(entity=("cart", "c2")) == ["a"]
    assert r.names(singleton="alloc") == ["z"]
    assert r.unregister("b", entity=("cart", "c1")) is True
    assert r.unregister("b", entity=("cart", "c1")) is False
    assert r.names(entity=("cart", "c1")) == ["a"]
    with pytest.raises(ValueError, match="single process on the SQLite store"):
        r.register("p", "m", path="/user/x", due=1)
    with pytest.raises(TypeError, match=r"entity= must be a tuple"):
        r.register("p", "m", entity="cart/c1", due=1)  # type: ignore[arg-type]


def test_entity_reminder_fires_after_due_and_periodically(node: ActorSystem) -> None:
    ClusterSharding(node).start("cart", Props(Cart), number_of_shards=8)
    r = Reminders(node)
    start = time.time()
    r.register("beat", "beat", entity=("cart", "c7"), due=1.0, period=0.6)
    got = wait_seen("c7", 4, 10)
    assert len(got) >= 4, SEEN
    for k, (t, m) in enumerate(got[:4]):
        due = start + 1.0 + 0.6 * k
        assert m == "beat"
        assert t >= due - 0.01, f"firing {k} came {due - t:.3f} s early"
        assert t <= due + TICK + 0.5, f"firing {k} came {t - due:.3f} s late"


def test_a_passivated_entity_is_started_by_its_reminder(node: ActorSystem) -> None:
    ClusterSharding(node).start("cart", Props(Cart), number_of_shards=8, passivate_idle_after=0.3)
    r = Reminders(node)
    ClusterSharding(node).entity_ref("cart", "sleepy").tell("hello")
    assert len(wait_seen("sleepy", 1, 5, "start")) == 1
    r.register("wake", "wake-up", entity=("cart", "sleepy"), due=2.0)
    # Passivated (idle 0.3 s) well before its reminder is due ...
    got = wait_seen("sleepy", 1, 10, "start")
    assert len(got) == 1
    # ... and started again by it.
    msgs = wait_seen("sleepy", 2, 10)
    assert [m for _, m in msgs] == ["hello", "wake-up"]
    assert len(seen("sleepy", "start")) == 2


def test_context_reminders_in_an_entity_and_a_singleton(node: ActorSystem) -> None:
    ClusterSharding(node).start("cart", Props(Cart), number_of_shards=8)
    proxy = ClusterSingleton(node).init("alloc", Props(Allocator))
    cart = ClusterSharding(node).entity_ref("cart", "c9")
    assert cart.ask(("remind-me", "later", 0.5, None), timeout=10) == ["later"]
    assert Reminders(node).names(entity=("cart", "c9")) == ["later"]
    assert proxy.ask(("remind-me", "nightly", 0.5, None), timeout=10) == ["nightly"]
    assert Reminders(node).names(singleton="alloc") == ["nightly"]
    assert [m for _, m in wait_seen("c9", 1, 10)] == [("self", "later")]
    assert [m for _, m in wait_seen("singleton", 1, 10)] == [("self", "nightly")]
    # One-shots: gone after their firing.
    deadline = time.monotonic() + 5
    while Reminders(node).names(entity=("cart", "c9")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Reminders(node).names(entity=("cart", "c9")) == []


def test_advance_is_once_per_due_time_read_and_never_over_a_new_registration(
    node: ActorSystem,
) -> None:
    # What two nodes that both believe they own a shard after a rebalance do: both
    # read the same due reminder, both try to advance it; one wins.
    ClusterSharding(node).start("cart", Props(Cart), number_of_shards=8)
    r = Reminders(node)
    r.register("x", "m", entity=("cart", "c3"), due=600, period=60)
    store = r._store
    keys = r._keys(Target("entity", type_name="cart", entity_id="c3"))
    member = store.member(Target("entity", type_name="cart", entity_id="c3"), "x")
    (items,) = store.due([keys[0]], 10**15, 10)
    assert [m for m, _ in items] == [member]
    due = items[0][1]
    (record,) = store.records(keys[1], [member])
    assert record is not None
    assert store.advance_many([(keys, member, due, record, due + 60_000)]) == [True]
    assert store.advance_many([(keys, member, due, record, due + 60_000)]) == [False]
    (items,) = store.due([keys[0]], 10**15, 10)
    assert items[0][1] == due + 60_000  # advanced once, by one period
    # Registered again (same name, same due time, another message) between a read
    # and the advance: the advance of the old read changes nothing.
    r.register("x", "other", entity=("cart", "c3"), due=600, period=60)
    (items,) = store.due([keys[0]], 10**15, 10)
    new_due = items[0][1]
    assert store.advance_many([(keys, member, new_due, record, None)]) == [False]
    assert r.names(entity=("cart", "c3")) == ["x"]

"""gactors.routing: the pools of SPEC section 10, Broadcast, routee supervision."""

from __future__ import annotations

from collections import Counter
from typing import Any

import gevent.event
import pytest

from gactors import (
    Actor,
    ActorRef,
    ActorSystem,
    DeadLetter,
    Directive,
    OneForOneStrategy,
    PoisonPill,
    Props,
    Terminated,
)
from gactors.routing import (
    AdjustPoolSize,
    Broadcast,
    BroadcastPool,
    ConsistentHashable,
    ConsistentHashableEnvelope,
    ConsistentHashingPool,
    GetRoutees,
    RandomPool,
    RoundRobinPool,
    Routees,
    SmallestMailboxPool,
)
from gactors.testkit import TestProbe, event_filter


class Worker(Actor):
    """Replies ``(message, own ref)``; counts what it processed; fails on "fail"."""

    started: Counter[str] = Counter()

    def __init__(self) -> None:
        self.count = 0

    def pre_start(self) -> None:
        Worker.started[self.ref.path.name] += 1

    def receive(self, message: Any) -> None:
        if message == "fail":
            raise ValueError("routee failed")
        self.count += 1
        if message == "count":
            self.sender.tell(("count", self.count, self.ref))
        else:
            self.sender.tell((message, self.ref))


@pytest.fixture(autouse=True)
def _reset() -> None:
    Worker.started.clear()


def routees_of(router: ActorRef, probe: TestProbe) -> tuple[ActorRef, ...]:
    probe.send(router, GetRoutees)
    reply = probe.expect_msg_type(Routees)
    return reply.routees


def test_round_robin(actor_system: ActorSystem, probe: TestProbe) -> None:
    router = actor_system.actor_of(RoundRobinPool(3).props(Props(Worker)), "rr")
    routees = routees_of(router, probe)
    assert len(routees) == 3 and len(set(routees)) == 3
    assert all(r.path.parent == router.path for r in routees)
    for i in range(6):
        probe.send(router, i)
    replies = dict(probe.receive_n(6))
    # Message i went to routee i mod 3, and the routee replied to the original sender.
    assert {i: replies[i] for i in range(6)} == {i: routees[i % 3] for i in range(6)}


def test_random(actor_system: ActorSystem, probe: TestProbe) -> None:
    router = actor_system.actor_of(RandomPool(4).props(Props(Worker)))
    routees = set(routees_of(router, probe))
    for i in range(60):
        probe.send(router, i)
    used = [ref for _, ref in probe.receive_n(60)]
    assert set(used) <= routees
    assert len(set(used)) >= 2  # all 60 to one routee: probability 4 * 4**-60


def test_broadcast_pool(actor_system: ActorSystem, probe: TestProbe) -> None:
    router = actor_system.actor_of(BroadcastPool(3).props(Props(Worker)))
    routees = set(routees_of(router, probe))
    probe.send(router, "all")
    got = probe.receive_n(3)
    assert {m for m, _ in got} == {"all"}
    assert {ref for _, ref in got} == routees
    probe.expect_no_message(0.05)


def test_broadcast_message_reaches_every_routee(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    router = actor_system.actor_of(RoundRobinPool(4).props(Props(Worker)))
    routees = set(routees_of(router, probe))
    probe.send(router, Broadcast("hello"))
    got = probe.receive_n(4)
    assert {m for m, _ in got} == {"hello"}
    assert {ref for _, ref in got} == routees


class Blocker(Actor):
    """Blocks on "hold" until the event is set; replies ``(message, self)`` otherwise."""

    def __init__(self, release: gevent.event.Event, target: ActorRef) -> None:
        self.release = release
        self.target = target

    def receive(self, message: Any) -> None:
        if message == "hold":
            self.target.tell(("holding", self.ref))
            self.release.wait(10)
        else:
            self.target.tell((message, self.ref))


def test_smallest_mailbox(actor_system: ActorSystem, probe: TestProbe) -> None:
    release = gevent.event.Event()
    router = actor_system.actor_of(SmallestMailboxPool(3).props(Props(Blocker, release, probe.ref)))
    r0, r1, r2 = routees_of(router, probe)
    try:
        # r0 and r1 are busy; r0 also has two messages waiting, r1 one.
        for r in (r0, r1):
            r.tell("hold")
            assert probe.expect_msg(("holding", r))
        r0.tell("backlog")
        r0.tell("backlog")
        r1.tell("backlog")
        # The idle r2 with an empty mailbox wins.
        probe.send(router, "first")
        assert probe.expect_msg(("first", r2))
        r2.tell("hold")
        assert probe.expect_msg(("holding", r2))
        r2.tell("backlog")
        r2.tell("backlog")
        r2.tell("backlog")
        # All busy now: the smallest mailbox (r1: one waiting) wins.
        router.tell("second")
        routees_of(router, probe)  # the router handled "second" before this
        mailboxes = [len(r._cell.mailbox) for r in (r0, r1, r2)]  # type: ignore[attr-defined]
        assert mailboxes == [2, 2, 3]
    finally:
        release.set()
    got = probe.receive_n(7)
    assert ("second", r1) in got


class Keyed(ConsistentHashable):
    def __init__(self, key: str) -> None:
        self.key = key

    @property
    def consistent_hash_key(self) -> Any:
        return self.key


def test_consistent_hashing_sends_equal_keys_to_the_same_routee(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    pool = ConsistentHashingPool(5, hash_mapping=lambda m: m[0] if isinstance(m, tuple) else None)
    router = actor_system.actor_of(pool.props(Props(Worker)))
    keys = [f"user-{i}" for i in range(20)]
    for rnd in range(3):
        for k in keys:
            probe.send(router, (k, rnd))
    by_key: dict[str, set[ActorRef]] = {}
    for (key, _), ref in probe.receive_n(60):
        by_key.setdefault(key, set()).add(ref)
    assert all(len(refs) == 1 for refs in by_key.values()), by_key
    assert len({next(iter(refs)) for refs in by_key.values()}) >= 2  # keys are spread


def test_consistent_hashing_key_sources(actor_system: ActorSystem, probe: TestProbe) -> None:
    router = actor_system.actor_of(ConsistentHashingPool(4).props(Props(Worker)))
    # The envelope is unwrapped: the routee gets the inner message.
    probe.send(router, ConsistentHashableEnvelope("payload", hash_key="k1"))
    msg, first = probe.expect_msg_type(tuple)
    assert msg == "payload"
    probe.send(router, ConsistentHashableEnvelope("again", hash_key="k1"))
    assert probe.expect_msg_type(tuple) == ("again", first)
    # A ConsistentHashable message routes by its own key.
    a, b = Keyed("k2"), Keyed("k2")
    probe.send(router, a)
    probe.send(router, b)
    (m1, ref1), (m2, ref2) = probe.receive_n(2)
    assert (m1, m2) == (a, b) and ref1 == ref2


def test_consistent_hashing_without_a_key_goes_to_dead_letters(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    dead = TestProbe(actor_system)
    actor_system.event_stream.subscribe(dead.ref, DeadLetter)
    router = actor_system.actor_of(ConsistentHashingPool(2).props(Props(Worker)))
    with event_filter(actor_system, message="no routee for message of type str", level="WARNING"):
        probe.send(router, "no key")
    letter = dead.expect_msg_type(DeadLetter)
    assert (letter.message, letter.sender, letter.recipient) == ("no key", probe.ref, router)


def test_default_strategy_escalates_and_the_router_restart_restarts_all_routees(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    router = actor_system.actor_of(RoundRobinPool(3).props(Props(Worker)), "pool")
    routees = routees_of(router, probe)
    for _ in range(3):
        probe.send(router, "count")
    probe.receive_n(3)
    # The failure is escalated: /user's default strategy restarts the router, which
    # is logged once, as the router's failure.
    with event_filter(actor_system, ValueError, source=router):
        routees[0].tell("fail")
    # Every routee was restarted (state cleared), not only the failing one...
    for _ in range(3):
        probe.send(router, "count")
    assert sorted(c for _, c, _ in probe.receive_n(3)) == [1, 1, 1]
    assert sorted(Worker.started.values()) == [2, 2, 2]
    # ... and the pool kept its size and its routees.
    assert routees_of(router, probe) == routees


def test_custom_strategy_handles_routee_failures_in_the_pool(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    strategy = OneForOneStrategy({ValueError: Directive.RESUME})
    router = actor_system.actor_of(
        RoundRobinPool(2, supervisor_strategy=strategy).props(Props(Worker))
    )
    r0, r1 = routees_of(router, probe)
    probe.send(r0, "x")
    probe.expect_msg(("x", r0))
    with event_filter(actor_system, ValueError, level="WARNING", source=r0):
        r0.tell("fail")
    probe.send(r0, "count")
    assert probe.expect_msg_type(tuple) == ("count", 2, r0)  # resumed: state kept
    assert Worker.started == Counter({r0.path.name: 1, r1.path.name: 1})


def test_pool_of_one_as_an_extra_supervision_level(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    # Restart the single worker up to twice; then it stops, and the pool with it.
    strategy = OneForOneStrategy(max_retries=2)
    router = actor_system.actor_of(
        RoundRobinPool(1, supervisor_strategy=strategy).props(Props(Worker))
    )
    probe.watch(router)
    with event_filter(actor_system, ValueError, occurrences=3):
        for _ in range(3):
            router.tell("fail")
        probe.expect_terminated(router)


def test_stopped_routees_are_removed_and_the_last_one_stops_the_pool(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    router = actor_system.actor_of(RoundRobinPool(3).props(Props(Worker)))
    r0, r1, r2 = routees_of(router, probe)
    probe.watch(router)
    r1.tell(PoisonPill)
    watcher = TestProbe(actor_system)
    watcher.watch(r1)
    watcher.expect_terminated(r1)
    assert routees_of(router, probe) == (r0, r2)
    for i in range(4):
        probe.send(router, i)
    assert {ref for _, ref in probe.receive_n(4)} == {r0, r2}
    actor_system.stop(r0)
    r2.tell(PoisonPill)
    probe.expect_terminated(router)


def test_broadcast_poison_pill_stops_the_pool(actor_system: ActorSystem, probe: TestProbe) -> None:
    router = actor_system.actor_of(BroadcastPool(3).props(Props(Worker)))
    routees = routees_of(router, probe)
    for r in routees:
        probe.watch(r)
    probe.watch(router)
    router.tell(Broadcast(PoisonPill))
    stopped = {probe.expect_msg_type(Terminated).actor for _ in range(4)}
    assert stopped == {*routees, router}


def test_poison_pill_to_the_router_stops_its_routees(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    router = actor_system.actor_of(RoundRobinPool(2).props(Props(Worker)))
    routees = routees_of(router, probe)
    for r in routees:
        probe.watch(r)
    router.tell(PoisonPill)
    assert {probe.expect_msg_type(Terminated).actor for _ in range(2)} == set(routees)


def test_adjust_pool_size(actor_system: ActorSystem, probe: TestProbe) -> None:
    router = actor_system.actor_of(RoundRobinPool(2).props(Props(Worker)))
    first = routees_of(router, probe)
    router.tell(AdjustPoolSize(3))
    grown = routees_of(router, probe)
    assert len(grown) == 5 and grown[:2] == first
    removed = grown[-2:]
    for r in removed:
        probe.watch(r)
    router.tell(AdjustPoolSize(-2))
    assert {probe.expect_msg_type(Terminated).actor for _ in range(2)} == set(removed)
    assert routees_of(router, probe) == grown[:3]
    probe.watch(router)
    router.tell(AdjustPoolSize(-3))  # removing every routee stops the pool
    probe.expect_terminated(router)


def test_ask_through_a_router(actor_system: ActorSystem) -> None:
    router = actor_system.actor_of(RoundRobinPool(2).props(Props(Worker)))
    assert router.ask("q", timeout=3)[0] == "q"


def test_validation() -> None:
    with pytest.raises(ValueError):
        RoundRobinPool(0)
    with pytest.raises(ValueError):
        RandomPool(True)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RoundRobinPool(1, supervisor_strategy="stop")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RoundRobinPool(1).props(Worker)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ConsistentHashingPool(2, hash_mapping="key")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ConsistentHashingPool(2, virtual_nodes_factor=0)
    assert Broadcast("x") == Broadcast("x") and Broadcast("x") != Broadcast("y")
    assert repr(RoundRobinPool(3)) == "RoundRobinPool(3)"

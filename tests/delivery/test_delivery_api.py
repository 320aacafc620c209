"""ReliableSender, Delivery and ReliableEntity in one cluster node (this process), on a
real server; persistence on the memory store (SPEC §20)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from gactors import Actor, ActorSystem, Props
from gactors.cluster import ClusterSharding
from gactors.delivery import Delivery, ReliableEntity, ReliableSender
from gactors.delivery._metrics import counts
from gactors.persistence import PersistentActor, RecoveryCompleted, SnapshotOffer
from gactors.testkit.persistence import MEMORY_CONFIG, MemoryPersistence

pytestmark = [pytest.mark.timeout(60)]

FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0, "lease_ttl": 1.5}

#: What the entities of a test processed: entity id -> [(producer, seq, message)].
LOG: dict[str, list[tuple[str, int, Any]]] = defaultdict(list)


@pytest.fixture
def node(redis_url: str, memory_persistence: MemoryPersistence) -> Iterator[ActorSystem]:
    LOG.clear()
    system = ActorSystem(
        f"d{uuid.uuid4().hex[:10]}",
        config={"cluster": dict(FAST, url=redis_url), "persistence": dict(MEMORY_CONFIG)},
    )
    try:
        yield system
    finally:
        system.terminate()
        system.await_termination(15)
        LOG.clear()


def wait_until(cond: Any, timeout: float = 15.0) -> None:
    with gevent.Timeout(timeout, AssertionError(f"not within {timeout} s")):
        while not cond():
            gevent.sleep(0.05)


class Counter(ReliableEntity, Actor):
    def receive(self, m: Any) -> None:
        d = self.delivery
        assert d is not None
        LOG[self.context.entity_id or "?"].append((d.producer_id, d.sequence_nr, m))


class Ledger(ReliableEntity, PersistentActor):
    """Persists each message; fails (and is restarted) on ``"boom"`` once per incarnation
    after it persisted, before the confirm could leave."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def receive_recover(self, event: Any) -> None:
        if isinstance(event, list):
            self.values.append(event[0])

    def receive_command(self, m: Any) -> None:
        d = self.delivery
        assert d is not None
        self.persist([m], lambda e: self._done(e, d))

    def _done(self, e: Any, d: Delivery) -> None:
        self.values.append(e[0])
        LOG[self.context.entity_id or "?"].append((d.producer_id, d.sequence_nr, e[0]))
        if e[0] == "boom" and self.values.count("boom") == 1:
            raise RuntimeError("crash after the write, before the confirm")


class Silent(Actor):
    """Takes deliveries without confirming them (until told to)."""

    def receive(self, m: Any) -> None:
        if isinstance(m, Delivery):
            LOG[self.context.entity_id or "?"].append((m.producer_id, m.sequence_nr, m.message))
            if m.message == "confirm":
                m.confirm()


def in_order(entity: str, producer: str) -> list[int]:
    return [s for p, s, _ in LOG[entity] if p == producer]


def test_each_message_once_in_order_and_nothing_pending(node: ActorSystem) -> None:
    ClusterSharding(node).start("Cnt", Props(Counter), passivate_idle_after=None)
    sender = ReliableSender(node, "Cnt", "p1", window=10, durable=False)
    for i in range(300):
        assert sender.send(f"e{i % 5}", i) == i // 5 + 1
    wait_until(lambda: all(sender.pending(f"e{k}") == 0 for k in range(5)))
    for k in range(5):
        assert in_order(f"e{k}", "p1") == list(range(1, 61))
        assert [m for _, _, m in LOG[f"e{k}"]] == list(range(k, 300, 5))


def test_duplicates_and_overtaking_copies_are_dropped_and_confirmed(node: ActorSystem) -> None:
    ClusterSharding(node).start("Cnt", Props(Counter), passivate_idle_after=None)
    ref = ClusterSharding(node).entity_ref("Cnt", "x")
    sender = ReliableSender(node, "Cnt", "p2", durable=False)
    copies = [Delivery(f"m{s}", "p2", s, "x", 5, 1, sender.ref) for s in (1, 1, 3, 2, 2, 3)]
    for c in copies:
        ref.tell(c, None)
    wait_until(lambda: len(LOG["x"]) >= 3)
    gevent.sleep(0.3)
    # 1 processed, 1 again dropped, 3 overtook 2 (dropped), 2, 2 dropped, 3.
    assert LOG["x"] == [("p2", 1, "m1"), ("p2", 2, "m2"), ("p2", 3, "m3")]
    # Counted for the system (Prometheus: test_prometheus_counts_resent_and_duplicates).
    assert counts(node).duplicates_dropped == 2


def scrape(registry: Any) -> dict[tuple[str, str], float]:
    """A real scrape through metrics_app: (sample name, system label) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    from gactors.contrib.prometheus import metrics_app

    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/metrics",
        "QUERY_STRING": "",
        "SERVER_NAME": "t",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
    }
    body = b"".join(metrics_app(registry)(environ, lambda status, headers: None))
    return {
        (sample.name, sample.labels.get("system", "")): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_prometheus_counts_resent_and_duplicates(node: ActorSystem) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from gactors.contrib.prometheus import ActorSystemMetrics

    registry = prometheus_client.CollectorRegistry()
    ActorSystemMetrics(node, registry=registry, interval=None)
    resent_key = ("gactors_delivery_resent_total", node.name)
    dropped_key = ("gactors_delivery_duplicates_dropped_total", node.name)
    # Absent until the system uses reliable delivery.
    assert resent_key not in scrape(registry)
    ClusterSharding(node).start("Sil", Props(Silent), passivate_idle_after=None)
    ClusterSharding(node).start("Cnt", Props(Counter), passivate_idle_after=None)
    sender = ReliableSender(node, "Sil", "p12", durable=False, resend_after=0.2)
    first = scrape(registry)
    assert first[resent_key] == 0 and first[dropped_key] == 0  # exported at 0 at once
    sender.send("quiet", "never confirmed")
    wait_until(lambda: sender.stats.resent >= 3)
    sender.stop()
    gevent.sleep(0.3)
    ref = ClusterSharding(node).entity_ref("Cnt", "d")
    for s in (1, 1, 2, 2, 2):  # three duplicates
        ref.tell(Delivery(s, "p13", s, "d", 9, 1, None), None)
    wait_until(lambda: counts(node).duplicates_dropped == 3)
    values = scrape(registry)
    assert values[resent_key] == sender.stats.resent
    assert values[dropped_key] == 3
    assert scrape(registry)[dropped_key] == 3  # a second scrape adds nothing


def test_window_blocks_send_and_unconfirmed_messages_are_resent(node: ActorSystem) -> None:
    ClusterSharding(node).start("Sil", Props(Silent), passivate_idle_after=None)
    sender = ReliableSender(node, "Sil", "p3", window=3, durable=False, resend_after=0.3)
    for i in range(3):
        sender.send("s", i)
    assert sender.pending("s") == 3
    with pytest.raises(gevent.Timeout):
        sender.send("s", "confirm", timeout=0.5)
    # The blocked message is queued by now? No: it waits for room (and is not lost).
    assert sender.pending("s") == 3
    wait_until(lambda: len(LOG["s"]) >= 6)  # resent at least once
    assert sender.stats.resent >= 3
    assert {s for _, s, _ in LOG["s"]} == {1, 2, 3}


def test_confirm_frees_the_window_and_releases_a_blocked_send(node: ActorSystem) -> None:
    ClusterSharding(node).start("Sil", Props(Silent), passivate_idle_after=None)
    sender = ReliableSender(node, "Sil", "p4", window=2, durable=False)
    sender.send("s", "a")
    sender.send("s", "confirm")  # confirms 1 and 2 (cumulative)
    wait_until(lambda: sender.pending("s") == 0)
    blocked = gevent.spawn(sender.send, "s", "b")
    assert blocked.get(timeout=5) == 3


def test_persistent_entity_crash_after_write_processes_once(node: ActorSystem) -> None:
    ClusterSharding(node).start("Led", Props(Ledger), passivate_idle_after=None)
    sender = ReliableSender(node, "Led", "p5", window=5, durable=False, resend_after=0.3)
    msgs = ["a", "b", "boom", "c", "d", "e"]
    for m in msgs:
        sender.send("l", m)
    wait_until(lambda: sender.pending("l") == 0)
    gevent.sleep(0.5)
    # "boom" was stored, the entity crashed before its confirm, the resend found it in
    # the recovered books: processed once, and everything after it too.
    assert [m for _, _, m in LOG["l"]] == msgs
    assert in_order("l", "p5") == [1, 2, 3, 4, 5, 6]


def test_durable_sender_resends_after_restart(node: ActorSystem) -> None:
    ClusterSharding(node).start("Sil", Props(Silent), passivate_idle_after=None)
    first = ReliableSender(node, "Sil", "p6", window=10, resend_after=30)
    assert first.durable
    for m in ("a", "b"):
        first.send("s", m)
    wait_until(lambda: len(LOG["s"]) == 2)
    first.stop()
    gevent.sleep(0.3)  # the name is free once it stopped (or creating it again raises)
    second = ReliableSender(node, "Sil", "p6", window=10, resend_after=30)
    # The restarted producer resends what was not confirmed, same numbers and epoch.
    wait_until(lambda: len(LOG["s"]) == 4)
    assert LOG["s"][2:] == [("p6", 1, "a"), ("p6", 2, "b")]
    assert second.pending("s") == 2
    assert second.send("s", "confirm") == 3
    wait_until(lambda: second.pending("s") == 0)


def test_bad_arguments_are_named(node: ActorSystem) -> None:
    with pytest.raises(ValueError, match="window"):
        ReliableSender(node, "T", "p", window=0)
    with pytest.raises(ValueError, match="producer_id"):
        ReliableSender(node, "T", "")
    with pytest.raises(ValueError, match="resend_after"):
        ReliableSender(node, "T", "p", resend_after=0)
    s = ReliableSender(node, "T", "p", durable=False)
    with pytest.raises(TypeError, match="entity_id"):
        s.send(3, "x")  # type: ignore[arg-type]


class SnapLedger(ReliableEntity, PersistentActor):
    """Snapshots after every 2 events; books what recovery gave it."""

    snapshot_every = 2

    def __init__(self) -> None:
        self.values: list[Any] = []

    def snapshot_state(self) -> Any:
        return list(self.values)

    def receive_recover(self, event: Any) -> None:
        if isinstance(event, SnapshotOffer):
            LOG["offers"].append(("snapshot", 0, event.snapshot))
            self.values = list(event.snapshot)
        elif isinstance(event, str):
            self.values.append(event)
        elif event is RecoveryCompleted:
            LOG["recovered"].append(("", 0, list(self.values)))

    def receive_command(self, m: Any) -> None:
        if m == "stop":
            self.context.stop(self.ref)
            return
        d = self.delivery
        assert d is not None
        self.persist(m, lambda e: self._done(e, d))

    def _done(self, e: Any, d: Delivery) -> None:
        self.values.append(e)
        LOG[self.context.entity_id or "?"].append((d.producer_id, d.sequence_nr, e))


def test_books_survive_a_restart_through_snapshots_and_events(node: ActorSystem) -> None:
    ClusterSharding(node).start("Snap", Props(SnapLedger), passivate_idle_after=None)
    ref = ClusterSharding(node).entity_ref("Snap", "k")
    sender = ReliableSender(node, "Snap", "p7", durable=False)
    for m in ("a", "b", "c", "d"):
        sender.send("k", m)
    wait_until(lambda: sender.pending("k") == 0)
    ref.tell("stop", None)  # not a delivery: passes through to receive_command
    gevent.sleep(0.5)
    epoch = sender.protocol.epoch
    # The snapshot after the 4th event holds the books alone (no event after it).
    # Copies of 3 and 4 again (as after lost confirms, low 3), then 5: only 5 is
    # processed. Without the books in the snapshot, 3 would be processed again.
    for s, m in ((3, "c"), (4, "d"), (5, "e")):
        ref.tell(Delivery(m, "p7", s, "k", epoch, 3, sender.ref), None)
    wait_until(lambda: len(LOG["k"]) >= 5)
    gevent.sleep(0.3)
    assert [m for _, _, m in LOG["k"]] == ["a", "b", "c", "d", "e"]
    # The entity saw its own snapshot (not the wrapper with the books).
    assert LOG["offers"] and LOG["offers"][-1][2] == ["a", "b", "c", "d"]
    assert LOG["recovered"][-1][2] == ["a", "b", "c", "d"]


def test_a_restarted_storeless_sender_starts_a_new_epoch_that_is_accepted(
    node: ActorSystem,
) -> None:
    ClusterSharding(node).start("Led", Props(Ledger), passivate_idle_after=None)
    first = ReliableSender(node, "Led", "p8", durable=False)
    first.send("z", "one")
    wait_until(lambda: first.pending("z") == 0)
    first.stop()
    gevent.sleep(0.3)
    second = ReliableSender(node, "Led", "p8", durable=False)
    assert second.protocol.epoch > first.protocol.epoch
    assert second.send("z", "two") == 1
    wait_until(lambda: second.pending("z") == 0)
    assert [(s, m) for _, s, m in LOG["z"]] == [(1, "one"), (1, "two")]


def test_a_durable_state_actor_is_refused_with_the_reason() -> None:
    from gactors.persistence import DurableStateActor

    with pytest.raises(TypeError, match="DurableStateActor"):

        class Bad(ReliableEntity, DurableStateActor):
            pass


def test_durable_sender_snapshots_hold_only_stored_messages(
    node: ActorSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gactors.delivery import _producer

    # A snapshot every 3 events while sends keep writes in flight: a snapshot of the
    # live queues would hold messages whose events come after it (recovery then sees
    # them twice and fails).
    monkeypatch.setattr(_producer._DurableProducer, "snapshot_every", 3)
    ClusterSharding(node).start("Sil", Props(Silent), passivate_idle_after=None)
    first = ReliableSender(node, "Sil", "p9", window=100, resend_after=30)
    gevent.joinall([gevent.spawn(first.send, f"s{i % 4}", i) for i in range(40)], timeout=10)
    first.stop()
    gevent.sleep(0.3)
    second = ReliableSender(node, "Sil", "p9", window=100, resend_after=30).ready(10)
    assert sum(second.pending(f"s{k}") for k in range(4)) == 40
    assert second.send("s0", "next") == 11


def test_durable_sender_refuses_a_message_the_store_cannot_take(node: ActorSystem) -> None:
    from gactors.persistence import WriteRejected

    ClusterSharding(node).start("Sil", Props(Silent), passivate_idle_after=None)
    sender = ReliableSender(node, "Sil", "p10", resend_after=30)
    with pytest.raises(WriteRejected, match="p10"):
        sender.send("s", object(), timeout=5)
    # Nothing was numbered: the next message is 1.
    assert sender.pending("s") == 0
    assert sender.send("s", "ok", timeout=5) == 1


def test_durable_sender_sends_no_copy_before_its_event_is_stored(
    node: ActorSystem, memory_persistence: MemoryPersistence, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resend timeout while a ``Queued`` write is slow must not send that message:
    the write then fails (the producer stops), so ``send`` never returned for it, and a
    copy processed as seq 1 would make the next producer's seq 1 -- another message,
    whose ``send`` does return -- a duplicate the entity drops (found by the protocol
    model)."""
    store = memory_persistence.store
    write_batch = store.write_batch
    slow = {"on": False}

    def slow_then_fail(writes: Any) -> Any:
        if slow["on"]:
            slow["on"] = False
            gevent.sleep(0.8)  # several resend timeouts (resend_after=0.1)
            raise RuntimeError("the store went away")
        return write_batch(writes)

    monkeypatch.setattr(store, "write_batch", slow_then_fail)
    ClusterSharding(node).start("Cnt", Props(Counter), passivate_idle_after=None)
    first = ReliableSender(node, "Cnt", "p11", resend_after=0.1).ready(10)
    slow["on"] = True
    lost = gevent.spawn(first.send, "c", "lost")
    gevent.sleep(1.2)  # the slow write failed, the producer stopped
    lost.kill()
    second = ReliableSender(node, "Cnt", "p11", resend_after=0.1).ready(10)
    assert second.send("c", "kept", timeout=5) == 1
    wait_until(lambda: second.pending("c") == 0)
    assert LOG["c"] == [("p11", 1, "kept")]


def test_a_sender_with_a_target_delivers_to_a_singleton(node: ActorSystem) -> None:
    """``target=``: copies go to that ref (a singleton's proxy), each processed once in
    order, confirmed back (nothing pending)."""
    from gactors.cluster import ClusterSingleton

    proxy = ClusterSingleton(node).init("desk", Props(Counter))
    sender = ReliableSender(node, "desk", "p14", window=5, durable=False, target=proxy)
    for i in range(40):
        assert sender.send("desk", i) == i + 1
    wait_until(lambda: sender.pending("desk") == 0)
    assert LOG["?"] == [("p14", i + 1, i) for i in range(40)]
    with pytest.raises(TypeError, match="target"):
        ReliableSender(node, "desk", "p15", target="desk")  # type: ignore[arg-type]

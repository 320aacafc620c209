"""PersistentActor (gactors/persistence/_actor.py) on the memory store: recovery,
stashing, persist_all, persist_async, defer_async, snapshots and retention, deletion,
conflicts and fencing, the failure hooks, bad input."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gactors import Actor, ActorSystem, Props
from gactors.cluster._lease import LeasedProps
from gactors.persistence import (
    AtomicWrite,
    DeleteMessagesFailure,
    DeleteMessagesSuccess,
    DeleteSnapshotsSuccess,
    FencedError,
    PersistenceConflict,
    PersistenceError,
    PersistentActor,
    Recovery,
    SaveSnapshotFailure,
    SaveSnapshotSuccess,
    WriteRejected,
)
from gactors.testkit import TestProbe
from gactors.testkit.persistence import MemoryPersistence

from ._recorder import Recorder

T = 5.0


def start(
    system: ActorSystem,
    pid: Any,
    probe: TestProbe | None = None,
    cls: type = Recorder,
    props: Any = None,
) -> tuple[Any, list[Any]]:
    trace: list[Any] = []
    p = props if props is not None else Props(cls, pid, trace, probe.ref if probe else None)
    return system.actor_of(p), trace


def persist_n(probe: TestProbe, ref: Any, events: list[Any]) -> None:
    for e in events:
        probe.send(ref, ("persist", e))
    for e in events:
        msg = probe.receive_one(T)
        assert msg[:2] == ("done", e), msg


def stopped(system: ActorSystem, ref: Any) -> None:
    watcher = TestProbe(system)
    watcher.watch(ref)
    watcher.expect_terminated(ref, T)


# -- recovery ----------------------------------------------------------------------------
def test_recovery_replays_every_event_in_order_then_completed_then_stashed_commands(
    psys: ActorSystem,
) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "r1")
    persist_n(probe, a, ["a", "b", "c"])
    psys.stop(a)
    stopped(psys, a)

    b, trace = start(psys, "r1")
    # Sent at once: these arrive while the actor recovers and must wait for it.
    probe.send(b, "x")
    probe.send(b, ("persist", "d"))
    probe.send(b, "get")
    assert probe.receive_one(T) == ("done", "d", 4)
    assert probe.receive_one(T) == (["a", "b", "c", "d"], 4, 0)
    assert trace[:4] == [
        ("recover", "a", 1, True),
        ("recover", "b", 2, True),
        ("recover", "c", 3, True),
        ("completed", 3, False),
    ]
    assert trace[4:] == [
        ("cmd", "x"),
        ("cmd", ("persist", "d")),
        ("handler", "d", 4),
        ("cmd", "get"),
    ]


def test_recovery_from_a_snapshot_offers_it_first_then_only_later_events(psys: ActorSystem) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "r2", probe)
    persist_n(probe, a, [1, 2, 3])
    probe.send(a, ("snap",))
    ok = probe.expect_msg_type(SaveSnapshotSuccess, T)
    assert (ok.metadata.persistence_id, ok.metadata.sequence_nr) == ("r2", 3)
    persist_n(probe, a, [4])
    psys.stop(a)
    stopped(psys, a)

    b, trace = start(psys, "r2", probe)
    probe.send(b, "get")
    assert probe.receive_one(T) == ([1, 2, 3, 4], 4, 3)
    assert trace[:3] == [
        ("snapshot", 3, [1, 2, 3]),
        ("recover", 4, 4, True),
        ("completed", 4, False),
    ]


class _Limited(Recorder):
    recovery = Recovery(to_sequence_nr=2)


class _NoRecovery(Recorder):
    recovery = Recovery.none()


def test_recovery_settings_bound_the_replay_but_new_events_follow_the_highest(
    psys: ActorSystem,
) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "r3")
    persist_n(probe, a, ["a", "b", "c"])
    psys.stop(a)
    stopped(psys, a)

    b, trace = start(psys, "r3", cls=_Limited)
    probe.send(b, ("persist", "d"))
    assert probe.receive_one(T) == ("done", "d", 4)
    assert [t for t in trace if t[0] == "recover"] == [
        ("recover", "a", 1, True),
        ("recover", "b", 2, True),
    ]
    psys.stop(b)
    stopped(psys, b)

    c, trace = start(psys, "r3", cls=_NoRecovery)
    probe.send(c, ("persist", "e"))
    assert probe.receive_one(T) == ("done", "e", 5)
    assert trace[0] == ("completed", 4, False)


# -- stashing and ordering -------------------------------------------------------------------
def test_persist_holds_commands_until_its_handler_ran(psys: ActorSystem) -> None:
    probe = TestProbe(psys)
    a, trace = start(psys, "s1")
    probe.send(a, ("persist", "a"))
    probe.send(a, "between")
    probe.send(a, ("persist", "b"))
    probe.send(a, "get")
    assert probe.receive_n(3, T)[-1] == (["a", "b"], 2, 0)
    cmds = [t for t in trace if t[0] in ("cmd", "handler")]
    assert cmds == [
        ("cmd", ("persist", "a")),
        ("handler", "a", 1),
        ("cmd", "between"),
        ("cmd", ("persist", "b")),
        ("handler", "b", 2),
        ("cmd", "get"),
    ]


def test_persist_async_lets_commands_flow_and_runs_handlers_in_call_order(
    psys: ActorSystem,
) -> None:
    probe = TestProbe(psys)
    a, trace = start(psys, "s2")
    for i in range(5):
        probe.send(a, ("async", i))
    probe.send(a, "flowing")
    got = probe.receive_n(5, T)
    assert got == [("done", i, i + 1) for i in range(5)]
    steps = [t for t in trace if t[0] in ("cmd", "handler")]
    # The command after the five calls ran before their handlers: nothing was held back.
    assert steps.index(("cmd", "flowing")) < steps.index(("handler", 0, 1))
    assert [t for t in steps if t[0] == "handler"] == [("handler", i, i + 1) for i in range(5)]


def test_defer_async_runs_after_the_handlers_called_before_it(psys: ActorSystem) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "s3")
    probe.send(a, ("defer", "alone"))  # nothing pending: at once
    probe.send(a, ("async", "e1"))
    probe.send(a, ("defer", "after-e1"))
    probe.send(a, ("async", "e2"))
    got = probe.receive_n(4, T)
    assert got == [
        ("deferred", "alone"),
        ("done", "e1", 1),
        ("deferred", "after-e1"),
        ("done", "e2", 2),
    ]
    assert mem_events(a, psys) == ["e1", "e2"]  # defer stored nothing


def mem_events(_ref: Any, _system: ActorSystem) -> list[Any]:
    return MemoryPersistence().events("s3")


# -- persist_all ----------------------------------------------------------------------------
def test_persist_all_stores_all_events_in_one_write(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "pa1")
    probe.send(a, ("persist_all", ["x", "y", "z"]))
    assert probe.receive_n(3, T) == [("done", "x", 1), ("done", "y", 2), ("done", "z", 3)]
    assert mem.events("pa1") == ["x", "y", "z"]
    assert mem.store.batches[-1] == 1  # one atomic write


def test_persist_all_is_all_or_nothing(psys: ActorSystem, mem: MemoryPersistence) -> None:
    probe = TestProbe(psys)
    a, trace = start(psys, "pa2", probe)
    # One event cannot be encoded: none of the three is stored, no handler runs.
    probe.send(a, ("persist_all", ["x", object(), "z"]))
    rejected = [probe.receive_one(T) for _ in range(3)]
    assert all(r[0] == "rejected" for r in rejected)
    assert mem.highest_sequence_nr("pa2") == 0
    # A refused write of the store: again nothing of it.
    mem.reject_next_write()
    probe.send(a, ("persist_all", ["p", "q"]))
    assert [probe.receive_one(T)[0] for _ in range(2)] == ["rejected", "rejected"]
    assert mem.events("pa2") == []
    assert not [t for t in trace if t[0] == "handler"]
    # The actor goes on, with no gap in its sequence numbers.
    probe.send(a, ("persist", "ok"))
    assert probe.receive_one(T) == ("done", "ok", 1)


# -- snapshots, retention, deletion ---------------------------------------------------------------
class _Every3(Recorder):
    snapshot_every = 3
    keep_snapshots = 2
    delete_events_on_snapshot = True


def test_snapshot_every_keeps_the_last_snapshots_and_deletes_older_events(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "snap1", cls=_Every3)
    persist_n(probe, a, list(range(1, 10)))  # snapshots after 3, 6 and 9
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        snaps = [s.sequence_nr for s in mem.store._ids["snap1"].snapshots]
        if snaps == [6, 9] and mem.events("snap1") == [7, 8, 9]:
            break
        TestProbe(psys).expect_no_message(0.02)
    assert [s.sequence_nr for s in mem.store._ids["snap1"].snapshots] == [6, 9]
    assert mem.events("snap1") == [7, 8, 9]  # up to the oldest kept snapshot: gone
    psys.stop(a)
    stopped(psys, a)
    b, trace = start(psys, "snap1", cls=_Every3)
    probe.send(b, "get")
    assert probe.receive_one(T) == (list(range(1, 10)), 9, 9)
    assert trace[0] == ("snapshot", 9, list(range(1, 10)))


def test_delete_messages_and_snapshots_reply_and_keep_the_sequence(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "del1", probe)
    persist_n(probe, a, ["a", "b", "c"])
    probe.send(a, ("delete", 9))
    fail = probe.expect_msg_type(DeleteMessagesFailure, T)
    assert fail.to_sequence_nr == 9 and "last sequence number is 3" in str(fail.cause)
    probe.send(a, ("delete", 3))
    assert probe.expect_msg_type(DeleteMessagesSuccess, T).to_sequence_nr == 3
    assert mem.events("del1") == []
    probe.send(a, ("snap",))
    probe.expect_msg_type(SaveSnapshotSuccess, T)
    probe.send(a, ("delete_snaps", 3))
    assert probe.expect_msg_type(DeleteSnapshotsSuccess, T).max_sequence_nr == 3
    assert mem.store.load("del1", None) is None
    psys.stop(a)
    stopped(psys, a)
    b, _ = start(psys, "del1")
    probe.send(b, ("persist", "d"))
    assert probe.receive_one(T) == ("done", "d", 4)  # deleted events still count


# -- one writer: conflicts and fencing ----------------------------------------------------------
def test_two_writers_on_one_id_the_second_is_refused_and_stores_nothing(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "dup", probe)
    b, trace_b = start(psys, "dup", probe)
    for ref in (a, b):  # both recovered (nothing stored yet)
        probe.send(ref, "get")
        assert probe.receive_one(T) == ([], 0, 0)
    persist_n(probe, a, ["from-a"])
    probe.send(b, ("persist", "from-b"))
    failure = probe.receive_one(T)
    assert failure[0] == "failure" and isinstance(failure[1], PersistenceConflict)
    assert "'dup'" in str(failure[1]) and failure[3] == 1
    stopped(psys, b)
    assert mem.events("dup") == ["from-a"]
    assert not [t for t in trace_b if t[0] == "handler"]


def test_a_lower_fencing_token_is_refused(psys: ActorSystem, mem: MemoryPersistence) -> None:
    probe = TestProbe(psys)
    new_trace: list[Any] = []
    new = psys.actor_of(LeasedProps.of(Props(Recorder, "fenced", new_trace, probe.ref), None, 7))
    persist_n(probe, new, ["new-1"])
    old_trace: list[Any] = []
    old = psys.actor_of(LeasedProps.of(Props(Recorder, "fenced", old_trace, probe.ref), None, 6))
    # Its recovery records its token first (the store's fence): refused, it never runs.
    failure = probe.receive_one(T)
    assert failure[0] == "recovery_failure", failure
    assert "token 6" in str(failure[1]) and "token 7" in str(failure[1])
    stopped(psys, old)
    assert not [t for t in old_trace if t[0] == "cmd"]
    # A write with an older token (here made by hand) is refused by the store itself.
    (refused,) = mem.store.write_batch([AtomicWrite("fenced", 1, 6, (b"x",), 0.0)])
    assert isinstance(refused, FencedError), refused
    assert mem.events("fenced") == ["new-1"]
    persist_n(probe, new, ["new-2"])
    assert mem.events("fenced") == ["new-1", "new-2"]


def test_a_recovered_newer_incarnation_fences_the_older_one_before_it_writes(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    # The paused-host case: the old incarnation (token 6) recovered first and still
    # runs; the new one (token 7) has recovered but written nothing yet. The store knows
    # token 7 from the recovery, so the old one's write is refused and stores nothing.
    probe = TestProbe(psys)
    old = psys.actor_of(LeasedProps.of(Props(Recorder, "woke", [], probe.ref), None, 6))
    probe.send(old, "get")
    assert probe.receive_one(T) == ([], 0, 0)
    new = psys.actor_of(LeasedProps.of(Props(Recorder, "woke", [], probe.ref), None, 7))
    probe.send(new, "get")
    assert probe.receive_one(T) == ([], 0, 0)
    probe.send(old, ("persist", "late"))
    failure = probe.receive_one(T)
    assert failure[0] == "failure" and isinstance(failure[1], FencedError), failure
    stopped(psys, old)
    assert mem.events("woke") == []
    persist_n(probe, new, ["new-1"])
    assert mem.events("woke") == ["new-1"]
    # And an incarnation older than the token stored fails its recovery.
    stale = psys.actor_of(LeasedProps.of(Props(Recorder, "woke", [], probe.ref), None, 5))
    failure = probe.receive_one(T)
    assert failure[0] == "recovery_failure" and "token 5" in str(failure[1]), failure
    stopped(psys, stale)


# -- failure hooks ------------------------------------------------------------------------------
def test_a_failed_write_calls_on_persist_failure_and_stops(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a, trace = start(psys, "f1", probe)
    persist_n(probe, a, ["a"])
    mem.fail_next_write(OSError("store unreachable"))
    probe.send(a, ("persist", "b"))
    probe.send(a, "after")
    failure = probe.receive_one(T)
    assert failure[0] == "failure" and isinstance(failure[1], OSError)
    assert failure[2:] == ("b", 2)
    stopped(psys, a)
    assert ("handler", "b", 2) not in trace and ("cmd", "after") not in trace
    assert mem.events("f1") == ["a"]


def test_a_rejected_write_calls_on_persist_rejected_and_goes_on(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "f2", probe)
    mem.reject_next_write()
    probe.send(a, ("persist", "refused"))
    probe.send(a, ("persist", "kept"))
    rejected = probe.receive_one(T)
    assert rejected[0] == "rejected" and isinstance(rejected[1], WriteRejected)
    assert rejected[2:] == ("refused", 1)
    assert probe.receive_one(T) == ("done", "kept", 1)
    assert mem.events("f2") == ["kept"]


def test_an_event_that_cannot_be_encoded_is_rejected_naming_its_type(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, "enc", probe)
    probe.send(a, ("persist", {"k": object()}))
    rejected = probe.receive_one(T)
    assert rejected[0] == "rejected" and isinstance(rejected[1], WriteRejected)
    assert "'enc'" in str(rejected[1]) and "object" in str(rejected[1])
    probe.send(a, ("persist", "fine"))
    assert probe.receive_one(T) == ("done", "fine", 1)


def test_a_write_timeout_is_a_failure(mem: MemoryPersistence) -> None:
    from .conftest import memory_config

    slow = {"n": 0}
    real = mem.store.write_batch

    def stalled(writes: Any) -> Any:
        slow["n"] += 1
        import gevent

        gevent.sleep(1.0)
        return real(writes)

    mem.store.write_batch = stalled  # type: ignore[method-assign]
    try:
        with ActorSystem("timeouts", config=memory_config(write_timeout=0.1)) as system:
            probe = TestProbe(system)
            a, _ = start(system, "slow", probe)
            probe.send(a, ("persist", "x"))
            failure = probe.receive_one(T)
            assert failure[0] == "failure" and isinstance(failure[1], PersistenceError)
            assert "within 0.1 s" in str(failure[1])
    finally:
        del mem.store.write_batch


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("pid", ["", None, 42, b"bytes"])
def test_a_bad_persistence_id_is_a_recovery_failure(psys: ActorSystem, pid: Any) -> None:
    probe = TestProbe(psys)
    a, _ = start(psys, pid, probe)
    failure = probe.receive_one(T)
    assert failure[0] == "recovery_failure"
    assert "persistence_id" in str(failure[1])
    stopped(psys, a)


def test_an_undecodable_event_fails_recovery_naming_id_and_sequence_nr(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    good = mem.store  # two good events, then garbage at 3
    from gactors.persistence._codec import codec

    enc = codec().encode
    assert good.write_batch([AtomicWrite("bad", 0, None, (enc("a"), enc("b"), b"\xc1"), 0.0)]) == [
        None
    ]
    probe = TestProbe(psys)
    a, trace = start(psys, "bad", probe)
    failure = probe.receive_one(T)
    assert failure[0] == "recovery_failure" and isinstance(failure[1], PersistenceError)
    assert "event 3 of persistence id 'bad'" in str(failure[1])
    stopped(psys, a)
    assert [t[1] for t in trace if t[0] == "recover"] == ["a", "b"]


def test_persist_during_recovery_is_refused(psys: ActorSystem, mem: MemoryPersistence) -> None:
    from gactors.persistence._codec import codec

    mem.store.write_batch([AtomicWrite("eager", 0, None, (codec().encode("stored"),), 0.0)])

    class Eager(PersistentActor):
        def __init__(self, probe: Any) -> None:
            self.persistence_id = "eager"
            self.probe = probe

        def receive_recover(self, event: Any) -> None:
            if event != "stored":
                return
            try:
                self.persist(event, lambda e: None)
            except Exception as e:
                self.probe.tell(e)

    probe = TestProbe(psys)
    psys.actor_of(Props(Eager, probe.ref))
    from gactors.exceptions import IllegalStateError

    err = probe.expect_msg_type(IllegalStateError, T)
    assert "while recovering" in str(err)


# -- the documented recipe: restart after a failed write under a backoff supervisor -------------
def test_under_a_backoff_supervisor_a_failed_write_restarts_with_the_stored_state(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    from gactors.backoff import BackoffOpts, BackoffSupervisor

    probe = TestProbe(psys)
    trace: list[Any] = []
    opts = BackoffOpts.on_stop(Props(Recorder, "cart", trace), "cart", 0.05, 1.0, 0.0)
    sup = psys.actor_of(BackoffSupervisor.props(opts), "cart-supervisor")
    probe.send(sup, ("persist", "apple"))
    assert probe.receive_one(T) == ("done", "apple", 1)
    mem.fail_next_write(OSError("store down"))
    probe.send(sup, ("persist", "pear"))  # fails: the child stops, the supervisor waits
    reply: Any = None
    deadline = time.monotonic() + T
    while time.monotonic() < deadline and reply is None:
        probe.send(sup, "get")  # dropped while there is no child
        try:
            reply = probe.receive_one(0.2)
        except AssertionError:
            continue
    assert reply == (["apple"], 1, 0)  # a new child, recovered from the store
    probe.send(sup, ("persist", "fig"))
    assert probe.receive_one(T) == ("done", "fig", 2)
    assert mem.events("cart") == ["apple", "fig"]


class _FailingHandler(Recorder):
    def handled(self, event: Any) -> None:
        if event == "boom":
            raise ValueError("handler failed")
        super().handled(event)


def test_commands_held_during_a_persist_survive_a_restart(psys: ActorSystem) -> None:
    probe = TestProbe(psys)
    a, trace = start(psys, "held", cls=_FailingHandler)
    probe.send(a, ("persist", "boom"))  # stored, then its handler fails: a restart
    probe.send(a, "x")  # held while "boom" was being stored
    probe.send(a, ("persist", "after"))
    # The new incarnation recovers "boom" and then gets the held commands, in order.
    assert probe.receive_one(T) == ("done", "after", 2)
    assert trace[-4:] == [
        ("completed", 1, False),
        ("cmd", "x"),
        ("cmd", ("persist", "after")),
        ("handler", "after", 2),
    ]


# -- default persistence ids, batching, limits ----------------------------------------------------
class _Anonymous(Recorder):
    def __init__(self, trace: list[Any], probe: Any) -> None:
        self.trace, self.probe, self.state = trace, probe, []


class _Parent(Actor):
    def __init__(self, child_name: str, props: Any) -> None:
        self.context.actor_of(props, child_name)


def test_default_persistence_ids_of_entities_and_singletons(psys: ActorSystem) -> None:
    probe = TestProbe(psys)
    entity = LeasedProps.of(Props(_Anonymous, [], probe.ref), "42", 3)
    region = psys.actor_of(Props(_Parent, "shard-1", Props(_Parent, "42", entity)), "sharding-cart")
    singleton = LeasedProps.of(Props(_Anonymous, [], probe.ref), None, 5)
    manager = psys.actor_of(Props(_Parent, "singleton", singleton), "singletonManager-allocator")
    plain = psys.actor_of(Props(_Anonymous, [], probe.ref))
    failure = probe.receive_one(T)  # the plain actor has no default: a recovery failure
    assert failure[0] == "recovery_failure" and "has no persistence_id" in str(failure[1])
    for path, pid in [
        (region.path / "shard-1" / "42", "cart|42"),
        (manager.path / "singleton", "singleton|allocator"),
    ]:
        ref = psys.lookup(path)
        assert ref is not None
        probe.send(ref, ("persist", "e"))
        assert probe.receive_one(T) == ("done", "e", 1)
        assert MemoryPersistence().events(pid) == ["e"]
    stopped(psys, plain)


def test_writes_of_many_actors_in_one_hub_turn_are_one_batch(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    refs = [start(psys, f"many{i}")[0] for i in range(50)]
    for ref in refs:  # all recovered
        probe.send(ref, "get")
    probe.receive_n(50, T)
    mem.store.batches.clear()
    for ref in refs:  # 50 commands sent in one go: the actors run in one turn
        probe.send(ref, ("persist", "x"))
    probe.receive_n(50, T)
    assert sum(mem.store.batches) == 50
    assert max(mem.store.batches) > 1, mem.store.batches
    assert len(mem.store.batches) < 50, mem.store.batches


def test_a_snapshot_over_the_size_limit_fails_to_save(mem: MemoryPersistence) -> None:
    from .conftest import memory_config

    with ActorSystem("limits", config=memory_config(max_payload_size=64)) as system:
        probe = TestProbe(system)
        a, _ = start(system, "big", probe)
        probe.send(a, ("persist", "x" * 40))
        assert probe.receive_one(T)[0] == "done"
        probe.send(a, ("persist", "y" * 40))
        assert probe.receive_one(T)[0] == "done"
        probe.send(a, ("snap",))  # both events in one snapshot: over 64 bytes
        failure = probe.expect_msg_type(SaveSnapshotFailure, T)
        assert isinstance(failure.cause, WriteRejected)
        assert "over the limit of 64 bytes" in str(failure.cause)
        assert mem.store.load("big", None) is None
        probe.send(a, ("persist", "z" * 100))
        rejected = probe.receive_one(T)
        assert rejected[0] == "rejected" and "over the limit" in str(rejected[1])

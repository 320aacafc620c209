"""A hypothesis stateful model of the reliable-delivery protocol (gactors.delivery._protocol).

One producer (durable: its journal of queued and confirmed messages survives its
restarts; writes are asynchronous and in order, as ``persist_async`` does them, so a
restart loses the writes still in flight, and a copy leaves only once its ``Queued``
event is stored) sends to two entities: ``p`` keeps its processed messages and its consumer
books in one atomic store (a persistent entity), ``v`` keeps them in memory only. The
network loses, duplicates and reorders anything in flight (copies and confirms);
either side restarts at any time. Checked after every step and once everything is
drained:

* the window is never exceeded;
* ``p`` processes each message exactly once, in order, and it is the message queued
  under that sequence number;
* ``v`` processes in increasing order within each incarnation and skips nothing: when
  it processes ``s``, every message before ``s`` was processed already, by this or an
  earlier incarnation (it may process a message again -- a copy in flight when it
  restarted -- since it keeps no books);
* in the end every queued message is processed and confirmed.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gactors.delivery._protocol import Consumer, Outgoing, Producer, Verdict, WindowFull

WINDOW = 3
ENTITIES = ("p", "v")
EPOCH = 7


class Entity:
    def __init__(self, eid: str, persistent: bool) -> None:
        self.eid = eid
        self.persistent = persistent
        self.consumer = Consumer()
        #: the store of a persistent entity: processed (seq, message), with the books.
        self.stored: list[tuple[int, Any]] = []
        #: every processing, per incarnation (a volatile entity loses nothing here: the
        #: test's own record of what was processed).
        self.runs: list[list[tuple[int, Any]]] = [[]]
        #: every processing in time order: (incarnation, seq).
        self.log: list[tuple[int, int]] = []

    def restart(self) -> None:
        self.consumer = Consumer()
        if self.persistent:
            for seq, _ in self.stored:
                self.consumer.restore("prod", EPOCH, seq)
        self.runs.append([])


class DeliveryModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        #: the stored journal, and the writes in flight after it (in order).
        self.journal: list[tuple[str, str, int, Any]] = []
        self.in_flight: list[tuple[str, Outgoing | None, tuple[str, str, int, Any]]] = []
        self.producer = Producer(EPOCH, WINDOW)
        self.entities = {"p": Entity("p", True), "v": Entity("v", False)}
        self.net: list[tuple[str, Any]] = []  # ("d", Outgoing) | ("c", (eid, epoch, seq))
        #: what ``send`` returned for: seq -> message (its ``Queued`` event is stored).
        self.queued: dict[str, dict[int, Any]] = {e: {} for e in ENTITIES}
        self.counter = 0

    # -- producer -------------------------------------------------------------------------
    @rule(eid=st.sampled_from(ENTITIES))
    def send(self, eid: str) -> None:
        if not self.producer.can_queue(eid):
            with pytest.raises(WindowFull):
                self.producer.queue(eid, "x")
            return
        self.counter += 1
        msg = (eid, self.counter)
        out = self.producer.queue(eid, msg, held=True)  # as the durable producer does
        self.in_flight.append(("q", out, ("q", eid, out.seq, msg)))

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def journal_write(self, data: st.DataObject) -> None:
        """The first ``n`` writes in flight are stored (in order); a stored ``Queued``
        completes its ``send`` and its copy leaves."""
        n = data.draw(st.integers(1, len(self.in_flight)))
        self._store(n)

    def _store(self, n: int) -> None:
        for kind, out, entry in self.in_flight[:n]:
            self.journal.append(entry)
            if kind == "q":
                assert out is not None
                self.queued[out.entity_id][out.seq] = out.message
                self.producer.release(out.entity_id, out.seq)
                self.net.append(("d", out))
        del self.in_flight[:n]

    @rule(eid=st.sampled_from(ENTITIES))
    def timeout_resend(self, eid: str) -> None:
        self.net.extend(("d", o) for o in self.producer.resend(eid))

    @rule()
    def producer_restart(self) -> None:
        # What was not stored is lost: those sends never returned, those confirms come
        # again (or their messages are resent and confirmed as duplicates).
        self.in_flight.clear()
        p = Producer(EPOCH, WINDOW)
        if self.journal and len(self.journal) % 2:
            # Half the time through a snapshot of a replayed copy: restore() too.
            tmp = Producer(EPOCH, WINDOW)
            self._replay(tmp)
            p.restore(tmp.snapshot())
        else:
            self._replay(p)
        self.producer = p
        for eid in ENTITIES:
            self.net.extend(("d", o) for o in p.resend(eid))

    def _replay(self, p: Producer) -> None:
        for kind, eid, seq, msg in self.journal:
            if kind == "q":
                p.apply_queued(eid, seq, msg)
            else:
                p.apply_confirmed(eid, seq)

    # -- network --------------------------------------------------------------------------
    @precondition(lambda self: self.net)
    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.net) - 1))
        kind, item = self.net.pop(i)
        if kind == "d":
            self._arrive(item)
        else:
            self._confirm(*item)

    @precondition(lambda self: self.net)
    @rule(data=st.data())
    def lose(self, data: st.DataObject) -> None:
        self.net.pop(data.draw(st.integers(0, len(self.net) - 1)))

    @precondition(lambda self: self.net)
    @rule(data=st.data())
    def duplicate(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.net) - 1))
        self.net.append(self.net[i])

    def _arrive(self, out: Outgoing) -> None:
        ent = self.entities[out.entity_id]
        verdict = ent.consumer.offer("prod", out.epoch, out.seq, out.low)
        if verdict is Verdict.PROCESS:
            ent.runs[-1].append((out.seq, out.message))
            ent.log.append((len(ent.runs) - 1, out.seq))
            if ent.persistent:
                ent.stored.append((out.seq, out.message))  # with the books, atomically
        if verdict in (Verdict.PROCESS, Verdict.DUPLICATE):
            last = ent.consumer.last("prod")
            assert last is not None
            self.net.append(("c", (out.entity_id, last[0], last[1])))

    def _confirm(self, eid: str, epoch: int, seq: int) -> None:
        if self.producer.confirm(eid, epoch, seq):
            self.in_flight.append(("c", None, ("c", eid, seq, None)))

    # -- consumers ------------------------------------------------------------------------
    @rule(eid=st.sampled_from(ENTITIES))
    def consumer_restart(self, eid: str) -> None:
        self.entities[eid].restart()

    # -- checks ---------------------------------------------------------------------------
    @invariant()
    def window_respected(self) -> None:
        for eid in ENTITIES:
            assert self.producer.pending(eid) <= WINDOW

    @invariant()
    def processed_in_order(self) -> None:
        p = self.entities["p"]
        processed = [s for run in p.runs for s, _ in run]
        assert processed == list(range(1, len(processed) + 1)), processed
        for run in p.runs:
            for s, m in run:
                assert self.queued["p"][s] == m
        v = self.entities["v"]
        for run in v.runs:
            seqs = [s for s, _ in run]
            assert seqs == sorted(set(seqs)), seqs
            for s, m in run:
                assert self.queued["v"][s] == m
        # Nothing skipped: each processing finds every earlier message processed before
        # it, by this incarnation or an earlier one (not only the one just before).
        done: set[int] = set()
        for run_index, s in v.log:
            assert done >= set(range(1, s)), (run_index, s, sorted(done))
            done.add(s)

    def teardown(self) -> None:
        # Drain: the journal writes complete, a loss-free network, resends until
        # everything is confirmed.
        for _ in range(50):
            self._store(len(self.in_flight))
            while self.net:
                kind, item = self.net.pop(0)
                if kind == "d":
                    self._arrive(item)
                else:
                    self._confirm(*item)
            if not any(self.producer.pending(e) for e in ENTITIES):
                break
            for eid in ENTITIES:
                self.net.extend(("d", o) for o in self.producer.resend(eid))
        self.processed_in_order()
        for eid in ENTITIES:
            assert self.producer.pending(eid) == 0, eid
            done = {s for run in self.entities[eid].runs for s, _ in run}
            assert done == set(self.queued[eid]), eid


# derandomize: CI runs the same examples every time (a failure is reproducible, never
# flaky). Random runs are done by hand when the protocol changes (derandomize=False,
# max_examples in the thousands, several --hypothesis-seed values); the failures they
# found are the explicit regression tests below, which CI runs every time.
DeliveryModel.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
TestDeliveryModel = DeliveryModel.TestCase


def test_the_model_notices_a_consumer_without_dedup() -> None:
    """The model's checks are not vacuous: a consumer that processes every copy fails."""

    class NoDedup(Consumer):
        def offer(self, producer_id: str, epoch: int, seq: int, low: int) -> Verdict:
            super().offer(producer_id, epoch, seq, low)
            self.seen[producer_id] = (epoch, seq)
            return Verdict.PROCESS

    model = DeliveryModel()
    model.entities["p"].consumer = NoDedup()
    model.send("p")
    _write_all(model)
    model.duplicate(_Draw(0))
    model.deliver(_Draw(0))
    model.deliver(_Draw(0))
    with pytest.raises(AssertionError):
        model.processed_in_order()


class _Draw:
    """A stand-in for ``st.data()`` that always draws ``value``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def draw(self, _strategy: Any) -> int:
        return self.value


def _write_all(model: DeliveryModel) -> None:
    """Every journal write in flight is stored (the copies of stored sends leave)."""
    model.journal_write(_Draw(len(model.in_flight)))


def _drain(model: DeliveryModel) -> None:
    model.processed_in_order()
    model.window_respected()
    model.teardown()


def test_regression_stale_copy_after_a_volatile_restart_does_not_stall() -> None:
    """Found by a random run: ``v`` processes 1 and 2, the producer has both confirmed,
    ``v`` restarts and a stale copy of 1 (low 1) reaches the new incarnation, which
    processes it again (it keeps no books). Its books say 1 while the producer's lowest
    unconfirmed is 3: seq 3 with low 3 used to be 'missing' forever (``pending('v') ==
    1`` at teardown, the window stuck)."""
    model = DeliveryModel()
    model.send("v")
    model.send("v")
    _write_all(model)
    model.duplicate(_Draw(0))  # net: d1 d2 d1
    model.deliver(_Draw(0))  # v processes 1 -> c1
    model.deliver(_Draw(0))  # v processes 2 -> c2
    model.deliver(_Draw(2))  # c2 reaches the producer: 1 and 2 confirmed
    model.consumer_restart("v")
    model.deliver(_Draw(0))  # the stale d1 (low 1): processed again by the new v
    model.send("v")  # d3, low 3
    _write_all(model)
    _drain(model)
    assert model.producer.pending("v") == 0


def test_regression_volatile_check_counts_every_earlier_incarnation() -> None:
    """Found by a random run (the model's check, not the protocol): ``v`` processed 1
    and 2, then 1 again from a stale copy in a second incarnation, then 3 in a third.
    Nothing was skipped -- 2 was processed by the first -- but the check compared with
    the previous incarnation only and failed with ``(2, [3], 1)``."""
    model = DeliveryModel()
    model.send("v")
    model.send("v")
    _write_all(model)
    model.duplicate(_Draw(0))
    model.deliver(_Draw(0))
    model.deliver(_Draw(0))
    model.deliver(_Draw(2))  # c2: 1 and 2 confirmed
    model.consumer_restart("v")
    model.deliver(_Draw(0))  # stale d1 processed by the second incarnation
    model.consumer_restart("v")
    model.send("v")  # d3 with low 3: the third incarnation starts there
    _write_all(model)
    _drain(model)


def _resend_before_the_write(model: DeliveryModel) -> None:
    """Two sends whose ``Queued`` events are still being written, a resend timeout, a
    crash that loses both writes, a new send that gets seq 1 again, then the first copy
    on the network arrives."""
    model.send("p")
    model.send("p")
    model.timeout_resend("p")
    model.producer_restart()
    model.send("p")
    _write_all(model)
    if model.net:
        model.deliver(_Draw(0))
    _drain(model)


def test_regression_no_copy_leaves_before_its_event_is_stored() -> None:
    """Found by the model once it wrote the journal asynchronously (as ``persist_async``
    does): the resend timer sent every unconfirmed message, also one whose ``Queued``
    event was not stored yet. After a crash lost that event, its copy was processed as
    seq 1 -- a message whose ``send`` never returned -- and the next message, queued as
    seq 1 again, was dropped as a duplicate: lost although ``send`` returned. A held
    message now leaves only once released."""
    p = Producer(EPOCH, WINDOW)
    p.queue("e", "a", held=True)
    assert p.resend("e") == []
    p.release("e", 1)
    assert [o.message for o in p.resend("e")] == ["a"]
    _resend_before_the_write(DeliveryModel())


def test_the_model_notices_a_resend_before_the_write() -> None:
    """The scenario above fails with a producer that does not hold unstored messages."""

    class NoHold(Producer):
        def queue(self, entity_id: str, message: Any, now: float = 0.0, **_: Any) -> Outgoing:
            return super().queue(entity_id, message, now)

    class Model(DeliveryModel):
        def __init__(self) -> None:
            super().__init__()
            self.producer = NoHold(EPOCH, WINDOW)

        def producer_restart(self) -> None:
            super().producer_restart()
            restarted = NoHold(EPOCH, WINDOW)
            restarted.restore(self.producer.snapshot())
            self.producer = restarted

    with pytest.raises(AssertionError):
        _resend_before_the_write(Model())

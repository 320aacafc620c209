"""``ReliableSender``: the producer side, an actor driving :class:`Producer`.

The actor (``/user/delivery-<type>-<producer id>``) owns the state machine: it numbers
and queues what ``send`` gives it, tells each copy to the entity through sharding,
resends an entity's unconfirmed messages when ``resend_after`` passed without a
confirm, and frees the window on confirms. ``send`` waits (cooperatively, on a gevent
``AsyncResult``) until its message is queued -- for a durable producer, until the
``Queued`` event is stored -- which is how the window blocks it.

The durable variant is a ``PersistentActor`` (persistence id
``delivery|<type>|<producer id>``) whose journal holds ``Epoch``, ``Queued`` and
``Confirmed`` events and a snapshot every ``SNAPSHOT_EVERY`` events (older events
deleted), so recovery replays a bounded journal and resends what is unconfirmed.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gevent.event import AsyncResult

from gactors._actor import Actor
from gactors._props import Props
from gactors.delivery import _metrics
from gactors.delivery._messages import Confirm, Confirmed, Delivery, Epoch, Queued
from gactors.delivery._protocol import Outgoing, Producer
from gactors.persistence import PersistentActor, RecoveryCompleted, SnapshotOffer, WriteRejected
from gactors.persistence._codec import codec

if TYPE_CHECKING:
    from gactors._context import ActorContext
    from gactors._ref import ActorRef
    from gactors._system import ActorSystem
    from gactors._timers import TimerScheduler
    from gactors.cluster import EntityRef

__all__ = ["ReliableSender"]

_log = logging.getLogger("gactors.delivery")

#: A durable producer snapshots its queues after this many journal events.
SNAPSHOT_EVERY = 2000


class _Send:
    __slots__ = ("entity_id", "message", "result")

    def __init__(self, entity_id: str, message: Any, result: AsyncResult) -> None:
        self.entity_id = entity_id
        self.message = message
        self.result = result


class _Ready:
    __slots__ = ("result",)

    def __init__(self, result: AsyncResult) -> None:
        self.result = result


class _Tick:
    """The resend timer's message."""


_TICK = _Tick()


class _Stats:
    """Counters of one sender (the system's sum is exported to Prometheus)."""

    __slots__ = ("duplicates_confirmed", "resent", "sent")

    def __init__(self) -> None:
        self.sent = 0
        self.resent = 0
        self.duplicates_confirmed = 0


class _ProducerLogic:
    """What both producer actors share; ``self`` is an ``Actor``."""

    sender_obj: ReliableSender
    machine: Producer
    waiting: dict[str, deque[_Send]]
    refs: dict[str, EntityRef]
    # Each producer queues and confirms in its own way (the durable one persists first).
    _queue: Callable[[_Send], None]
    _confirm: Callable[[Confirm], None]

    if TYPE_CHECKING:  # what the Actor the logic is mixed into provides

        @property
        def ref(self) -> ActorRef: ...
        @property
        def context(self) -> ActorContext: ...
        @property
        def timers(self) -> TimerScheduler: ...
        def unhandled(self, message: Any) -> None: ...

    def _setup(self, sender_obj: ReliableSender) -> None:
        self.sender_obj = sender_obj
        self.machine = sender_obj.protocol
        # Shared with the sender object: its fast path queues directly when nobody waits.
        self.waiting = sender_obj.waiting
        self.refs = sender_obj.refs

    def _ref_of(self, entity_id: str) -> EntityRef | ActorRef:
        target = self.sender_obj.target
        if target is not None:
            return target
        ref = self.refs.get(entity_id)
        if ref is None:
            from gactors.cluster import ClusterSharding

            system = self.context.system
            ref = self.refs[entity_id] = ClusterSharding(system).entity_ref(
                self.sender_obj.type_name, entity_id
            )
        return ref

    def tell_copy(self, out: Outgoing) -> None:
        s = self.sender_obj
        self._ref_of(out.entity_id).tell(
            Delivery(
                out.message,
                s.producer_id,
                out.seq,
                out.entity_id,
                out.epoch,
                out.low,
                self.ref,
            ),
            None,
        )

    def _start_ticks(self) -> None:
        every = max(0.05, self.sender_obj.resend_after / 4)
        self.timers.start_timer_with_fixed_delay("resend", _TICK, every)

    def _tick(self) -> None:
        now = time.monotonic()
        s = self.sender_obj
        for eid in self.machine.due(now, s.resend_after):
            outs = self.machine.resend(eid, now)
            s.stats.resent += len(outs)
            s.counts.resent += len(outs)
            _log.debug("%s: resending %d message(s) to %r", s, len(outs), eid)
            for out in outs:
                self.tell_copy(out)

    def _resend_all(self) -> None:
        now = time.monotonic()
        for eid in list(self.machine.queues):
            outs = self.machine.resend(eid, now)
            self.sender_obj.stats.resent += len(outs)
            self.sender_obj.counts.resent += len(outs)
            for out in outs:
                self.tell_copy(out)

    def _handle(self, m: Any) -> None:
        """The producer's commands, the same for the volatile and the durable one."""
        if type(m) is _Send:
            if not self._park(m):
                self._queue(m)
        elif type(m) is Confirm:
            self._confirm(m)
        elif m is _TICK:
            self._tick()
        elif type(m) is _Ready:
            m.result.set(True)
        else:
            self.unhandled(m)  # the Actor side

    def _park(self, m: _Send) -> bool:
        """Queue ``m`` now if the window allows and nobody waits before it."""
        w = self.waiting.get(m.entity_id)
        if (w is None or not w) and self.machine.can_queue(m.entity_id):
            return False
        self.waiting.setdefault(m.entity_id, deque()).append(m)
        return True

    def _fail_waiting(self) -> None:
        err = RuntimeError(f"{self.sender_obj} stopped before the message was queued")
        for w in self.waiting.values():
            for m in w:
                m.result.set_exception(err)
        self.waiting.clear()


class _VolatileProducer(_ProducerLogic, Actor):
    """A producer without a store: its queues live as long as its process."""

    def __init__(self, sender_obj: ReliableSender) -> None:
        self._setup(sender_obj)
        sender_obj.fast_path = self

    def pre_start(self) -> None:
        self._start_ticks()
        self._resend_all()  # after a restart by supervision: the queues are the sender's

    def post_stop(self) -> None:
        if self.sender_obj.fast_path is self:
            self.sender_obj.fast_path = None
        self._fail_waiting()

    def receive(self, m: Any) -> None:
        self._handle(m)

    def _queue(self, m: _Send) -> None:
        out = self.machine.queue(m.entity_id, m.message, time.monotonic())
        self.sender_obj.stats.sent += 1
        m.result.set(out.seq)
        self.tell_copy(out)

    def _confirm(self, m: Confirm) -> None:
        if self.machine.confirm(m.entity_id, m.epoch, m.sequence_nr, time.monotonic()):
            w = self.waiting.get(m.entity_id)
            while w and self.machine.can_queue(m.entity_id):
                self._queue(w.popleft())


class _DurableProducer(_ProducerLogic, PersistentActor):
    """A producer whose queues are journaled: what was queued and not confirmed is sent
    again after any restart, with the same sequence numbers and epoch."""

    snapshot_every = SNAPSHOT_EVERY
    keep_snapshots = 1
    delete_events_on_snapshot = True

    def __init__(self, sender_obj: ReliableSender) -> None:
        self._setup(sender_obj)
        self.persistence_id = f"delivery|{sender_obj.type_name}|{sender_obj.producer_id}"
        self.machine.restore({"epoch": 0, "queues": {}})
        # What the journal holds, event for event (changed only by recovery and by the
        # handlers, which run once a write is stored): the snapshots are taken of it.
        # ``machine`` runs ahead of it by the writes in flight, which a snapshot must
        # not contain (a message in it whose event was never stored would be sent
        # after a restart although ``send`` never returned for it).
        self.stored = Producer(0, sender_obj.window)
        self.epoch_stored = False

    def post_stop(self) -> None:
        self._fail_waiting()

    def snapshot_state(self) -> Any:
        return self.stored.snapshot()

    def receive_recover(self, event: Any) -> None:
        t = type(event)
        if t is Queued:
            self.stored.apply_queued(event.entity_id, event.sequence_nr, event.message)
        elif t is Confirmed:
            self.stored.apply_confirmed(event.entity_id, event.sequence_nr)
        elif t is Epoch:
            self.stored.epoch = event.epoch
            self.epoch_stored = True
        elif t is SnapshotOffer:
            self.stored.restore(event.snapshot)
            self.epoch_stored = True
        elif event is RecoveryCompleted:
            self.machine.restore(self.stored.snapshot())
            if not self.epoch_stored:
                self.machine.epoch = self.stored.epoch = time.time_ns()
                self.persist(Epoch(self.machine.epoch), lambda _: None)
            n = sum(len(q.unconfirmed) for q in self.machine.queues.values())
            if n:
                _log.info("%s recovered %d unconfirmed message(s): resending", self.sender_obj, n)
            self._resend_all()
            self._start_ticks()

    def receive_command(self, m: Any) -> None:
        self._handle(m)

    def _queue(self, m: _Send) -> None:
        # A message the journal would refuse (not encodable, too large) must not get a
        # sequence number: the numbers it would leave behind could never be filled.
        q = self.machine.queues.get(m.entity_id)
        seq = 1 if q is None else q.next_seq
        try:
            codec().encode_for_store(
                Queued(m.entity_id, seq, m.message),
                f"a message of {self.sender_obj}",
                self._persistence.settings.max_payload_size,
            )
        except WriteRejected as e:
            m.result.set_exception(e)
            return
        # The window counts it at once; the send returns and the copy leaves once the
        # event is stored (persist_async: many sends share one write).
        # Held: a resend (tick) must not send it before its event is stored.
        out = self.machine.queue(m.entity_id, m.message, time.monotonic(), held=True)

        def stored(_: Any, out: Outgoing = out, m: _Send = m) -> None:
            self.stored.apply_queued(out.entity_id, out.seq, out.message)
            self.machine.release(out.entity_id, out.seq)
            self.sender_obj.stats.sent += 1
            m.result.set(out.seq)
            self.tell_copy(out)

        self.persist_async(Queued(out.entity_id, out.seq, out.message), stored)

    def _confirm_stored(self, event: Confirmed) -> None:
        self.stored.apply_confirmed(event.entity_id, event.sequence_nr)

    def _confirm(self, m: Confirm) -> None:
        if self.machine.confirm(m.entity_id, m.epoch, m.sequence_nr, time.monotonic()):
            self.persist_async(Confirmed(m.entity_id, m.sequence_nr), self._confirm_stored)
            w = self.waiting.get(m.entity_id)
            while w and self.machine.can_queue(m.entity_id):
                self._queue(w.popleft())


class ReliableSender:
    """Effectively-once delivery from this process to the entities of a sharded type.

    ``send(entity_id, message)`` numbers the message (1, 2, 3, ... per entity), keeps it
    until the entity confirms it, and sends it again every ``resend_after`` seconds
    without progress. At most ``window`` messages per entity are unconfirmed: ``send``
    blocks (cooperatively) until there is room. The entity gets a :class:`Delivery`
    (the :class:`ReliableEntity` mixin unwraps it, drops duplicates and confirms).

    ``durable``: keep the queues in the persistence journal (SPEC section 19) so that
    what was queued and not confirmed is sent again after this process restarts. The
    default (None) is durable when the system's config has a ``persistence`` table.
    Two senders with the same ``type_name`` and ``producer_id`` must never run at the
    same time (a durable one is refused by the journal's one-writer rule only if it is
    a sharded entity or singleton; here it is your deployment's promise).

    ``target``: send every copy to this ref instead of the entity of ``type_name`` --
    a cluster singleton's proxy (``ClusterSingleton(system).init(...)``), which moves
    with its lease. ``type_name`` then only names the producer, and ``entity_id`` of
    ``send`` names the receiver in both sides' books (use one, e.g. the singleton's
    name). The receiver is a :class:`ReliableEntity` as for an entity.

    Call ``send`` from a greenlet of the system's process (an actor, a request handler),
    not from a foreign OS thread.
    """

    def __init__(
        self,
        system: ActorSystem,
        type_name: str,
        producer_id: str,
        window: int = 100,
        *,
        durable: bool | None = None,
        resend_after: float = 1.0,
        target: ActorRef | None = None,
    ) -> None:
        for what, v in (("type_name", type_name), ("producer_id", producer_id)):
            if not isinstance(v, str) or not v:
                raise ValueError(f"{what} must be a non-empty str, not {v!r}")
        if "|" in producer_id:
            raise ValueError(f"producer_id must not contain '|': {producer_id!r}")
        if isinstance(resend_after, bool) or not isinstance(resend_after, (int, float)):
            raise TypeError(f"resend_after must be a number of seconds, not {resend_after!r}")
        if not resend_after > 0:
            raise ValueError(f"resend_after must be > 0 seconds, not {resend_after!r}")
        if target is not None and not hasattr(target, "tell"):
            raise TypeError(f"target must be an ActorRef (or None), not {target!r}")
        self.target = target
        self.system = system
        self.type_name = type_name
        self.producer_id = producer_id
        self.window = window
        self.resend_after = float(resend_after)
        self.protocol = Producer(time.time_ns(), window)  # ValueError for a bad window
        if durable is None:
            durable = "persistence" in system.settings.extension_tables
        self.durable = bool(durable)
        self.stats = _Stats()
        #: the system's counters (Prometheus: gactors.contrib.prometheus)
        self.counts = _metrics.counts(system)
        self.waiting: dict[str, deque[_Send]] = {}
        self.refs: dict[str, EntityRef] = {}
        self.fast_path: _VolatileProducer | None = None  # the running producer without a store
        cls = _DurableProducer if self.durable else _VolatileProducer
        name = f"delivery-{type_name}-{producer_id}"
        self._ref: ActorRef = system.actor_of(Props(cls, self), name=name)

    protocol: Producer
    """The producer state machine (read it; only the producer actor changes it)."""

    @property
    def ref(self) -> ActorRef:
        """The producer actor (confirms go to it)."""
        return self._ref

    def send(self, entity_id: str, message: Any, *, timeout: float | None = None) -> int:
        """Queue ``message`` for ``entity_id`` and return its sequence number once it is
        queued (durable: stored; a message the store cannot take raises
        :class:`~gactors.persistence.WriteRejected` and is not queued). Blocks while
        ``window`` messages to that entity are unconfirmed; ``timeout`` (seconds, None:
        no limit) bounds the wait, then ``gevent.Timeout`` is raised and the message is
        *not* withdrawn."""
        if not isinstance(entity_id, str):
            raise TypeError(f"entity_id must be a str, not {type(entity_id).__name__}")
        actor = self.fast_path
        if actor is not None and not self.waiting.get(entity_id):
            # Without a store, queueing is a change of memory only: done here, in the
            # caller's greenlet (the hub runs one greenlet at a time), it saves two
            # switches per message. Waiting for room still goes through the actor.
            protocol = self.protocol
            if protocol.can_queue(entity_id):
                out = protocol.queue(entity_id, message, time.monotonic())
                self.stats.sent += 1
                actor.tell_copy(out)
                return out.seq
        result: AsyncResult = AsyncResult()
        self._ref.tell(_Send(entity_id, message, result), None)
        return int(result.get(timeout=timeout))

    def ready(self, timeout: float | None = None) -> ReliableSender:
        """Wait until the producer runs (a durable one: recovered, its unconfirmed
        messages sent again); returns self. ``gevent.Timeout`` after ``timeout``."""
        result: AsyncResult = AsyncResult()
        self._ref.tell(_Ready(result), None)
        result.get(timeout=timeout)
        return self

    def pending(self, entity_id: str) -> int:
        """How many messages to ``entity_id`` are queued and not yet confirmed."""
        return self.protocol.pending(entity_id)

    def stop(self) -> None:
        """Stop the producer actor (a durable one's queues stay in the journal)."""
        self.system.stop(self._ref)

    def __repr__(self) -> str:
        kind = "durable " if self.durable else ""
        return f"<{kind}ReliableSender {self.producer_id!r} -> {self.type_name!r}>"

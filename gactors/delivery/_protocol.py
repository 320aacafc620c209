"""The reliable-delivery protocol as two pure state machines (no I/O, no actors, no clock).

The actors of :mod:`gactors.delivery` drive them; the hypothesis model of
``tests/delivery/test_protocol_model.py`` drives them through lost, duplicated and
reordered messages and restarts of either side.

Wire terms (what a copy of a message carries besides the message):

* ``epoch`` -- the producer's incarnation. A durable producer keeps one for good (its
  sequence numbers continue across restarts); a producer without a store takes a new,
  greater one each time it starts (its numbering starts again at 1).
* ``seq`` -- 1, 2, 3, ... per (producer, entity) within an epoch.
* ``low`` -- the producer's lowest unconfirmed sequence number when this copy was sent:
  everything below it was confirmed, so a consumer that knows nothing of this producer
  (or of this epoch) may start there.

Consumer rule, per producer, with ``(epoch, last)`` the newest message it processed:

* same epoch, ``seq == last + 1`` -> process (then confirm);
* same epoch, ``seq <= last`` -> duplicate: drop, confirm ``last`` again (the confirm of
  the first copy may have been lost);
* same epoch, ``seq > last + 1`` and ``seq == low`` -> process: the producer had
  everything below ``low`` confirmed, so it was processed -- by an earlier incarnation
  of an entity that keeps no books, whose new books came from a stale copy (an entity
  that stores its books with its state never has them behind ``low - 1``);
* same epoch, ``seq > last + 1``, ``seq != low`` -> an earlier message is missing:
  drop, the producer resends from its lowest unconfirmed one;
* greater epoch or unknown producer -> process only ``seq == low``, else drop as above;
* smaller epoch -> a copy from a producer incarnation that is gone: drop, no confirm.

Confirms are cumulative: ``confirm(seq)`` confirms every sequence number up to ``seq``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Consumer",
    "Outgoing",
    "Producer",
    "Verdict",
    "WindowFull",
]


class WindowFull(Exception):
    """``Producer.queue`` with ``window`` messages to that entity unconfirmed."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One copy to send: ``message`` as ``seq`` of ``epoch`` to ``entity_id``."""

    entity_id: str
    epoch: int
    seq: int
    low: int
    message: Any


@dataclass(slots=True)
class _Queue:
    next_seq: int = 1
    #: seq -> message, in sequence order (only ever appended in order, popped in order).
    unconfirmed: dict[int, Any] = field(default_factory=dict)
    #: the clock reading of the last send or confirm progress (for resend timeouts).
    progress_at: float = 0.0
    #: the highest seq whose copy may leave: a durable producer's queued message is
    #: held until its ``Queued`` event is stored (see ``Producer.queue``).
    released: int = 0

    @property
    def low(self) -> int:
        return next(iter(self.unconfirmed), self.next_seq)


class Producer:
    """The producer side for one producer id: one queue per entity.

    ``queue`` assigns the next sequence number (refusing beyond ``window`` unconfirmed),
    ``confirm`` drops what an entity confirmed, ``resend``/``due`` say what to send
    again. ``apply_queued``/``apply_confirmed`` are the same transitions for replaying a
    durable producer's journal. Times are arguments (``now``), never read here.
    """

    def __init__(self, epoch: int, window: int) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, not {window!r}")
        self.epoch = epoch
        self.window = window
        self.queues: dict[str, _Queue] = {}

    def _q(self, entity_id: str) -> _Queue:
        q = self.queues.get(entity_id)
        if q is None:
            q = self.queues[entity_id] = _Queue()
        return q

    def pending(self, entity_id: str) -> int:
        """How many messages to ``entity_id`` are queued and not confirmed."""
        q = self.queues.get(entity_id)
        return 0 if q is None else len(q.unconfirmed)

    def can_queue(self, entity_id: str) -> bool:
        """Whether ``queue`` would accept a message to ``entity_id`` now."""
        return self.pending(entity_id) < self.window

    def queue(
        self, entity_id: str, message: Any, now: float = 0.0, *, held: bool = False
    ) -> Outgoing:
        """Give ``message`` the next sequence number to ``entity_id`` and keep it until
        confirmed; returns the copy to send. Raises :class:`WindowFull`.

        ``held``: the copy must not leave yet (a durable producer's ``Queued`` event is
        still being written): :meth:`resend` skips it until :meth:`release`. A copy of a
        message whose event is then lost with a crash would otherwise be processed
        under a sequence number that the restarted producer gives to another message,
        which the entity then drops as a duplicate."""
        q = self._q(entity_id)
        if len(q.unconfirmed) >= self.window:
            raise WindowFull(entity_id)
        seq = q.next_seq
        released = q.released
        self.apply_queued(entity_id, seq, message)
        if held:
            q.released = released
        if len(q.unconfirmed) == 1:
            q.progress_at = now
        return Outgoing(entity_id, self.epoch, seq, q.low, message)

    def apply_queued(self, entity_id: str, seq: int, message: Any) -> None:
        """Replay (or do) the queueing of ``seq``; sequence numbers must follow."""
        q = self._q(entity_id)
        if seq != q.next_seq:
            raise ValueError(f"{entity_id!r}: queued seq {seq} does not follow {q.next_seq - 1}")
        q.unconfirmed[seq] = message
        q.next_seq = seq + 1
        q.released = seq

    def release(self, entity_id: str, seq: int) -> None:
        """The held messages to ``entity_id`` up to ``seq`` may be sent (their events
        are stored)."""
        q = self.queues.get(entity_id)
        if q is not None and seq > q.released:
            q.released = min(seq, q.next_seq - 1)

    def confirm(self, entity_id: str, epoch: int, seq: int, now: float = 0.0) -> int:
        """``entity_id`` confirmed everything up to ``seq`` of ``epoch``; returns how many
        messages that freed (0 for a stale or repeated confirm)."""
        if epoch != self.epoch:
            return 0
        freed = self.apply_confirmed(entity_id, seq)
        if freed:
            self.queues[entity_id].progress_at = now
        return freed

    def apply_confirmed(self, entity_id: str, seq: int) -> int:
        """Drop the unconfirmed messages up to ``seq``; returns how many."""
        q = self.queues.get(entity_id)
        if q is None:
            return 0
        if seq >= q.next_seq:
            # A confirm of what was never queued: the consumer's books belong to another
            # producer with the same id, or to a lost journal. Confirm what exists.
            seq = q.next_seq - 1
        freed = 0
        while q.unconfirmed:
            first = next(iter(q.unconfirmed))
            if first > seq:
                break
            del q.unconfirmed[first]
            freed += 1
        return freed

    def resend(self, entity_id: str, now: float = 0.0) -> list[Outgoing]:
        """Every unconfirmed message to ``entity_id`` that is not held, in order, to
        send again."""
        q = self.queues.get(entity_id)
        if q is None or not q.unconfirmed:
            return []
        q.progress_at = now
        low = q.low
        return [
            Outgoing(entity_id, self.epoch, s, low, m)
            for s, m in q.unconfirmed.items()
            if s <= q.released
        ]

    def due(self, now: float, after: float) -> list[str]:
        """The entities with unconfirmed messages and no progress for ``after`` seconds."""
        return [
            eid for eid, q in self.queues.items() if q.unconfirmed and now - q.progress_at >= after
        ]

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain data (for a durable producer's snapshot)."""
        return {
            "epoch": self.epoch,
            "queues": {
                eid: [q.next_seq, [[s, m] for s, m in q.unconfirmed.items()]]
                for eid, q in self.queues.items()
                if q.unconfirmed or q.next_seq > 1
            },
        }

    def restore(self, data: dict[str, Any]) -> None:
        """The state of :meth:`snapshot` (replacing the current one)."""
        self.epoch = int(data["epoch"])
        self.queues = {}
        for eid, (next_seq, items) in data["queues"].items():
            q = self.queues[eid] = _Queue(next_seq=int(next_seq), released=int(next_seq) - 1)
            for s, m in items:
                q.unconfirmed[int(s)] = m


class Verdict(enum.Enum):
    """What a consumer does with a copy (see the module docstring)."""

    PROCESS = "process"
    DUPLICATE = "duplicate"
    MISSING = "missing"
    STALE = "stale"


class Consumer:
    """The consumer side of one entity: the newest ``(epoch, seq)`` processed per
    producer. ``offer`` decides and, for ``PROCESS``, records the message as processed
    (a persistent entity stores that record with the effects of processing it)."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int]] = {}

    def offer(self, producer_id: str, epoch: int, seq: int, low: int) -> Verdict:
        """The verdict on a copy; records it when the verdict is ``PROCESS``."""
        known = self.seen.get(producer_id)
        if known is not None and epoch < known[0]:
            return Verdict.STALE
        if known is not None and epoch == known[0]:
            last = known[1]
            if seq <= last:
                return Verdict.DUPLICATE
            # ``seq == low`` beyond ``last + 1``: these books are behind what the
            # producer knows to be processed (a volatile entity restarted and took a
            # stale copy since). Without this the entity waits for ``last + 1``, which
            # the producer never sends again: the window to it stalls for good.
            if seq != last + 1 and seq != low:
                return Verdict.MISSING
        elif seq != low:
            return Verdict.MISSING
        self.seen[producer_id] = (epoch, seq)
        return Verdict.PROCESS

    def restore(self, producer_id: str, epoch: int, seq: int) -> None:
        """Replay the record of a processed message (recovery of a persistent entity)."""
        known = self.seen.get(producer_id)
        if known is None or (epoch, seq) > known:
            self.seen[producer_id] = (epoch, seq)

    def last(self, producer_id: str) -> tuple[int, int] | None:
        """``(epoch, seq)`` of the newest message processed from ``producer_id``."""
        return self.seen.get(producer_id)

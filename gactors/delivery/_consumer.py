"""``ReliableEntity``: the consumer side, as a mixin of an entity class.

For an ``Actor``: ``receive`` gets the message of each new :class:`Delivery` (the
delivery itself is ``self.delivery`` meanwhile); once ``receive`` returned, the mixin
confirms -- at once when the mailbox is empty, else after the next messages (at most
``CONFIRM_EVERY`` deliveries later, or when the mailbox runs empty), with one
cumulative confirm per producer for all of them. Duplicates and out-of-order copies
never reach ``receive``. The books (the last processed sequence number per producer)
live in memory: a restarted entity starts from what the producer still has unconfirmed.

For a ``PersistentActor``: ``receive_command`` gets the message. Every event it
persists while handling the delivery is stored wrapped with the delivery's
``(producer_id, epoch, sequence_nr)`` -- in the same atomic write as the command's
other events -- and unwrapped before ``receive_recover`` sees it, so the books are
rebuilt with the state. A delivery whose handling persists nothing stores a small
record of its own. **The confirm is sent only after that write is confirmed by the
store** (after the handlers of the command's persist calls ran). So:

* crash before the write is stored -> nothing of the message is kept, no confirm was
  sent, the producer resends, the message is processed (once);
* crash after the write, before the confirm left -> the recovered books know the
  message, the resend is dropped as a duplicate and confirmed then.

Snapshots carry the books too (``save_snapshot`` and ``snapshot_every`` wrap the
snapshot; ``receive_recover`` gets the ``SnapshotOffer`` with the user's snapshot).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, cast

from gactors.delivery import _metrics
from gactors.delivery._messages import Delivery, Seen, Tagged, TaggedSnapshot
from gactors.delivery._protocol import Consumer, Verdict
from gactors.persistence import DurableStateActor, PersistentActor, SnapshotOffer
from gactors.persistence._actor import _DEFER

__all__ = ["ReliableEntity"]

_log = logging.getLogger("gactors.delivery")

#: Marks a handler the mixin wrapped already (a subclass inherits it wrapped).
_MARK = "_gactors_reliable"


def _consumer_of(self: Any) -> Consumer:
    c = self.__dict__.get("_gactors_consumer")
    if c is None:
        c = self.__dict__["_gactors_consumer"] = Consumer()
        # Once per incarnation: the system's counters exist (exported at 0) from the
        # first delivery on, and a duplicate counts without a lookup.
        self.__dict__["_gactors_counts"] = _metrics.counts(self.context.system)
    return cast(Consumer, c)  # the only value ever stored under that key


def _answer_copy(self: Any, d: Delivery) -> bool:
    """Decide on copy ``d``; True: process it (recorded in the books)."""
    verdict = _consumer_of(self).offer(d.producer_id, d.epoch, d.sequence_nr, d.low)
    if verdict is Verdict.PROCESS:
        return True
    if verdict is Verdict.DUPLICATE:
        self.duplicates_dropped = getattr(self, "duplicates_dropped", 0) + 1
        self._gactors_counts.duplicates_dropped += 1
        _confirm_last(self, d)
    return False


def _confirm_last(self: Any, d: Delivery) -> None:
    last = _consumer_of(self).last(d.producer_id)
    if last is not None and d.reply_to is not None:
        from gactors.delivery._messages import Confirm

        d.reply_to.tell(Confirm(d.producer_id, d.entity_id, last[0], last[1]), None)


#: A plain entity confirms when its mailbox is empty, or after this many deliveries.
CONFIRM_EVERY = 16


def _wrap_receive(f: Any) -> Any:
    def receive(self: Any, message: Any) -> None:
        try:
            if type(message) is not Delivery:
                f(self, message)
                return
            if not _answer_copy(self, message):
                return
            self.delivery = message
            try:
                f(self, message.message)
            finally:
                self.delivery = None
            # Confirms are cumulative: while more messages wait in the mailbox, the
            # newest processed delivery per producer is confirmed once for all of them.
            to_confirm = self.__dict__.get("_gactors_to_confirm")
            if to_confirm is None:
                to_confirm = self.__dict__["_gactors_to_confirm"] = {}
            to_confirm[message.producer_id] = message
            self._gactors_unconfirmed = self.__dict__.get("_gactors_unconfirmed", 0) + 1
        finally:
            to_confirm = self.__dict__.get("_gactors_to_confirm")
            if to_confirm and (
                not self._gactors_cell.mailbox or self._gactors_unconfirmed >= CONFIRM_EVERY
            ):
                for d in to_confirm.values():
                    d.confirm()
                to_confirm.clear()
                self._gactors_unconfirmed = 0

    setattr(receive, _MARK, True)
    receive.__doc__ = f.__doc__
    return receive


def _wrap_command(f: Any) -> Any:
    def receive_command(self: Any, message: Any) -> None:
        if type(message) is not Delivery:
            f(self, message)
            return
        if not _answer_copy(self, message):
            return
        self.delivery = message
        self._gactors_tagged = False
        try:
            f(self, message.message)
        finally:
            self.delivery = None
        if self._gactors_tagged:
            # After the handlers of this command's writes: the confirm follows the store.
            self.defer_async(message, Delivery.confirm)
        else:
            m = message
            self.persist(Seen(m.producer_id, m.epoch, m.sequence_nr), lambda _: m.confirm())

    setattr(receive_command, _MARK, True)
    receive_command.__doc__ = f.__doc__
    return receive_command


def _wrap_recover(f: Any) -> Any:
    def receive_recover(self: Any, event: Any) -> None:
        t = type(event)
        if t is Tagged:
            _consumer_of(self).restore(event.producer_id, event.epoch, event.sequence_nr)
            f(self, event.event)
        elif t is Seen:
            _consumer_of(self).restore(event.producer_id, event.epoch, event.sequence_nr)
        elif t is SnapshotOffer and type(event.snapshot) is TaggedSnapshot:
            c = _consumer_of(self)
            for pid, (epoch, seq) in event.snapshot.seen.items():
                c.restore(pid, epoch, seq)
            f(self, SnapshotOffer(event.metadata, event.snapshot.snapshot))
        else:
            f(self, event)

    setattr(receive_recover, _MARK, True)
    receive_recover.__doc__ = f.__doc__
    return receive_recover


def _wrap_snapshot_state(f: Any) -> Any:
    def snapshot_state(self: Any) -> Any:
        return _tag_snapshot(self, f(self))

    setattr(snapshot_state, _MARK, True)
    return snapshot_state


def _tag_snapshot(self: Any, snapshot: Any) -> Any:
    if type(snapshot) is TaggedSnapshot:
        return snapshot
    seen = {pid: [e, s] for pid, (e, s) in _consumer_of(self).seen.items()}
    return TaggedSnapshot(snapshot, seen)


_WRAPPERS = {
    "receive_command": _wrap_command,
    "receive_recover": _wrap_recover,
    "snapshot_state": _wrap_snapshot_state,
}


class ReliableEntity:
    """Mixin for an entity that receives from a :class:`ReliableSender`: put it first,
    ``class Cart(ReliableEntity, PersistentActor)`` or ``class Counter(ReliableEntity,
    Actor)``.

    Each message arrives once, in order per producer: the mixin unwraps the
    :class:`Delivery` (``self.delivery`` while it is processed, None otherwise), drops
    duplicates (counted in ``self.duplicates_dropped``) and copies that overtook a
    missing one, and confirms after ``receive`` (``receive_command``) returns -- for a
    ``PersistentActor`` only once the events persisted meanwhile, which carry the
    delivery's sequence number, are stored. Messages that are not deliveries pass
    through unchanged. Events of one delivery are stored atomically only if they are
    persisted in the same call of ``receive_command`` (as ``persist`` calls of one
    command always are).
    """

    delivery: Delivery | None = None
    duplicates_dropped: int = 0
    _gactors_reliable_persistent: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if issubclass(cls, DurableStateActor):
            # Its whole state is one value written at once: the books would have to be
            # part of it, which the mixin cannot do behind the class's back.
            raise TypeError(
                f"{cls.__qualname__}: ReliableEntity works with an Actor or a PersistentActor, "
                "not a DurableStateActor (take Delivery messages yourself and keep the last "
                "sequence_nr per producer_id in your state, then call delivery.confirm())"
            )
        persistent = issubclass(cls, PersistentActor)
        cls._gactors_reliable_persistent = persistent
        wrappers = _WRAPPERS if persistent else {"receive": _wrap_receive}
        for name, wrap in wrappers.items():
            f = cls.__dict__.get(name)
            if f is not None and not getattr(f, _MARK, False):
                setattr(cls, name, wrap(f))
        if persistent:
            # The books must be rebuilt even when the class keeps the default handlers.
            for name, wrap in _WRAPPERS.items():
                if name == "snapshot_state":
                    continue
                if getattr(getattr(cls, name), _MARK, False):
                    continue
                setattr(cls, name, wrap(getattr(cls, name)))

    # PersistentActor hooks (used only when the class is one) -------------------------------
    def _call(self, kind: int, events: list[Any], handler: Any) -> None:
        d = self.delivery
        if d is not None and kind != _DEFER:
            self._gactors_tagged = True
            events = [Tagged(e, d.producer_id, d.epoch, d.sequence_nr) for e in events]
            inner = handler

            def handler(e: Any, _inner: Any = inner) -> Any:
                return _inner(e.event)

        super()._call(kind, events, handler)  # type: ignore[misc]

    def save_snapshot(self, snapshot: Any) -> None:
        """Save ``snapshot`` with the delivery books (see ``PersistentActor``)."""
        super().save_snapshot(_tag_snapshot(self, snapshot))  # type: ignore[misc]

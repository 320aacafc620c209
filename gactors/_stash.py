"""The ``Stash`` mixin: set messages aside and take them back later (docs/concepts/actors.md).

The stashed messages live in the actor's cell (``cell.stash_obj``), not in the
instance, so they survive a restart: when an instance is discarded the cell puts the
stash back at the head of the mailbox, in order, before the fresh instance processes
anything (``StashStore.unstash_all`` called from the cell's ``instance_discarded``).
On stop the same happens just before the mailbox is drained, so stashed messages
reach dead letters, ahead of the rest of the mailbox.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from gactors._messages import Terminated
from gactors.exceptions import IllegalStateError, StashOverflowException

if TYPE_CHECKING:
    from gactors._ref import ActorRef
    from gactors._spi import CellSPI

__all__ = ["Stash", "StashStore", "stash_of"]

Envelope = tuple[Any, "ActorRef | None"]

# The cell's current message once stashed (a message is never None, nor this).
_STASHED: Any = object()


class StashStore:
    """The stashed envelopes of one actor (kept across its incarnations)."""

    __slots__ = ("_cell", "queue")

    def __init__(self, cell: CellSPI) -> None:
        self._cell = cell
        self.queue: deque[Envelope] = deque()

    def stash(self) -> None:
        cell = self._cell
        message = cell.current_message
        if message is None:
            raise IllegalStateError(
                f"{cell.path}: stash() can only be called while processing a message"
            )
        if message is _STASHED:
            raise IllegalStateError(f"{cell.path}: cannot stash the same message twice")
        queue = self.queue
        capacity = cell.system.settings.stash_capacity
        if capacity is not None and len(queue) >= capacity:
            raise StashOverflowException(
                f"{cell.path}: stash capacity ({capacity}, setting stash_capacity) exceeded"
            )
        queue.append((message, cell.sender))
        # Until the next message: stashing it again is an error, not a duplicate.
        cell.current_message = _STASHED

    def _prepend(self, envelopes: list[Envelope]) -> None:
        cell = self._cell
        for message, _ in envelopes:
            if type(message) is Terminated:
                # Delivering it took it off the watch bookkeeping; back in the mailbox
                # it is queued again (as Akka's Stash does), or it would be dropped as
                # stale when it comes round.
                cell.terminated_queued_for(message.actor)
        cell.ensure_mailbox().extendleft([m for m, _ in reversed(envelopes)])
        cell.senders.extendleft([s for _, s in reversed(envelopes)])
        if not cell.scheduled and not cell.dead and cell.has_work():
            cell.dispatcher.schedule(cell)

    def unstash(self) -> None:
        if self.queue:
            self._prepend([self.queue.popleft()])

    def unstash_all(self) -> None:
        queue = self.queue
        if queue:
            envelopes = list(queue)
            queue.clear()
            self._prepend(envelopes)

    def clear(self) -> list[Any]:
        messages = [m for m, _ in self.queue]
        self.queue.clear()
        return messages


def stash_of(cell: CellSPI) -> StashStore:
    """The cell's stash, created on first use."""
    store: StashStore | None = cell.stash_obj
    if store is None:
        store = cell.stash_obj = StashStore(cell)
    return store


class Stash:
    """Mixin giving an actor a stash: ``class Buffering(Stash, Actor): ...``.

    :meth:`stash` keeps the message being processed; :meth:`unstash_all` puts every
    stashed message back at the head of the mailbox in the order they were stashed.
    Stashed messages survive restarts (they are processed by the fresh instance before
    anything else) and go to dead letters when the actor stops. At most
    ``stash_capacity`` (a setting; ``None``: unbounded) messages can be stashed.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        _gactors_cell: CellSPI

    def stash(self) -> None:
        """Keep the current message for later.

        Raises :class:`~gactors.StashOverflowException` over capacity and
        :class:`~gactors.IllegalStateError` when the message is already stashed or when
        no message is being processed.
        """
        stash_of(self._gactors_cell).stash()

    def unstash(self) -> None:
        """Put the oldest stashed message back at the head of the mailbox."""
        stash_of(self._gactors_cell).unstash()

    def unstash_all(self) -> None:
        """Put every stashed message back at the head of the mailbox, oldest first."""
        stash_of(self._gactors_cell).unstash_all()

    def clear_stash(self) -> list[Any]:
        """Drop every stashed message; returns them, oldest first."""
        return stash_of(self._gactors_cell).clear()

    @property
    def stash_size(self) -> int:
        """How many messages are stashed."""
        store = self._gactors_cell.stash_obj
        return len(store.queue) if store is not None else 0

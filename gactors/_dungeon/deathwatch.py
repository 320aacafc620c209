"""DeathWatch: watch/unwatch, and delivering ``Terminated`` exactly once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gactors import _sysmsg as sm
from gactors._dungeon._state import EMPTY, CellState
from gactors._messages import Terminated
from gactors._ref import ActorRef
from gactors.exceptions import IllegalStateError


class DeathWatch(CellState):
    """Mixin of ActorCell.

    ``watching`` maps each watched ref to its custom message (None: ``Terminated``);
    ``watched_by`` holds the watchers; ``terminated_queued`` remembers a ``Terminated``
    already put into the mailbox, so that ``unwatch`` can still cancel it.
    """

    if not TYPE_CHECKING:  # mypy would check every attribute against the empty slots
        __slots__ = ()

    def watch(self, ref: ActorRef, message: Any) -> ActorRef:
        if not isinstance(ref, ActorRef):
            raise TypeError(f"watch() needs an ActorRef, not {type(ref).__name__}")
        if ref == self.ref:
            return ref  # watching oneself means nothing, as in Akka
        watching = self.watching
        if ref in watching:
            if watching[ref] != message:
                raise IllegalStateError(
                    f"{self.path} already watches {ref.path} with message "
                    f"{watching[ref]!r}; unwatch it before watching with {message!r}"
                )
            return ref
        if watching is EMPTY:
            watching = self.watching = {}
        watching[ref] = message
        ref._send_system(sm.Watch(ref, self.ref))
        return ref

    def unwatch(self, ref: ActorRef) -> ActorRef:
        if not isinstance(ref, ActorRef):
            raise TypeError(f"unwatch() needs an ActorRef, not {type(ref).__name__}")
        if ref in self.watching:
            del self.watching[ref]
            ref._send_system(sm.Unwatch(ref, self.ref))
        if ref in self.terminated_queued:
            del self.terminated_queued[ref]
        return ref

    # -- system messages ------------------------------------------------------------------------
    def add_watcher(self, watchee: ActorRef, watcher: ActorRef) -> None:
        if watchee == self.ref and watcher != self.ref:
            if self.watched_by is EMPTY:
                self.watched_by = {}
            self.watched_by[watcher] = None

    def rem_watcher(self, watchee: ActorRef, watcher: ActorRef) -> None:
        if watchee == self.ref and watcher in self.watched_by:
            del self.watched_by[watcher]

    def watched_actor_terminated(
        self, actor: ActorRef, existence_confirmed: bool, address_terminated: bool
    ) -> None:
        watching = self.watching
        if actor in watching:
            message = watching.pop(actor)
            if not self.is_terminating:
                # Through the ordinary mailbox, behind what was sent before, as in Akka.
                self.enqueue(Terminated(actor, existence_confirmed, address_terminated), actor)
                if self.terminated_queued is EMPTY:
                    self.terminated_queued = {}
                self.terminated_queued[actor] = message
        if self.child_cell_of(actor) is not None:
            self.handle_child_terminated(actor)

    def terminated_queued_for(self, actor: ActorRef) -> None:
        """A ``Terminated`` for ``actor`` is (again) in the mailbox, to be delivered."""
        if self.terminated_queued is EMPTY:
            self.terminated_queued = {}
        self.terminated_queued.setdefault(actor, None)

    def system_dead_letter(self, message: sm.SystemMessage) -> None:
        """A system message for this cell after it terminated (the rest are dropped)."""
        if (
            type(message) is sm.Watch
            and message.watchee == self.ref
            and message.watcher != self.ref
        ):
            # Watching an actor that is already dead: Terminated at once, unconfirmed.
            message.watcher._send_system(sm.DeathWatchNotification(self.ref, False, False))

    # -- the auto-received Terminated --------------------------------------------------------------
    def received_terminated(self, t: Terminated) -> None:
        queued = self.terminated_queued
        if t.actor in queued:
            custom = queued.pop(t.actor)
            self.receive_message(t if custom is None else custom)
        # else: unwatched meanwhile, or not ours: dropped on purpose.

    # -- on stop ----------------------------------------------------------------------------
    def tell_watchers_we_died(self) -> None:
        watchers = self.watched_by
        if watchers:
            parent = self.parent
            self.watched_by = EMPTY
            for w in watchers:
                # The parent learns of it from the notification every child sends it.
                if w != parent:
                    w._send_system(sm.DeathWatchNotification(self.ref, True, False))

    def unwatch_watched_actors(self) -> None:
        watching = self.watching
        if watching:
            me = self.ref
            for ref in list(watching):
                ref._send_system(sm.Unwatch(ref, me))
            self.watching = EMPTY
        self.terminated_queued = EMPTY

"""Fault handling: suspension, failure reports, restart and stop.

Documented for users in docs/concepts/supervision.md and docs/concepts/restart.md.

This is the one place where restarts happen (``fault_recreate`` then
``finish_recreate``) and where actors stop (``terminate`` then ``finish_terminate``).
The suspend counter must stay balanced: every Suspend (own failure, parent's
failure, all-for-one sibling restart, termination) is matched by exactly one resume
(Resume, the end of a restart or re-creation) unless the actor dies.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from greenlet import GreenletExit

from gactors import _sysmsg as sm
from gactors._dungeon._state import CellState
from gactors._dungeon.children import CREATION, TERMINATION, ChildrenView, Recreation
from gactors._text import failure_text, safe_str
from gactors.exceptions import (
    ActorInitializationException,
    PostRestartException,
    PreRestartException,
)

if TYPE_CHECKING:
    from gactors._ref import ActorRef

_OWN_TB: Any = object()

FATAL = (KeyboardInterrupt, SystemExit, GreenletExit)
"""Never supervised: they stop the system and propagate where gevent would."""


class FaultHandling(CellState):
    """Mixin of ActorCell."""

    if not TYPE_CHECKING:  # mypy would check every attribute against the empty slots
        __slots__ = ()

    # -- suspension ------------------------------------------------------------------------
    def suspend_non_recursive(self) -> None:
        self.suspend_count += 1

    def resume_non_recursive(self) -> None:
        if self.suspend_count > 0:
            self.suspend_count -= 1

    def suspend_children(self, except_for: tuple[ActorRef, ...] = ()) -> None:
        for c in list(self.child_cells.values()):
            if c.ref not in except_for:
                c.ref._send_system(sm.Suspend())

    def resume_children(self, caused_by_failure: BaseException | None, perp: Any) -> None:
        for c in list(self.child_cells.values()):
            child = c.ref
            child._send_system(sm.Resume(caused_by_failure if child == perp else None))

    # -- system messages -------------------------------------------------------------------
    def fault_suspend(self) -> None:
        self.suspend_non_recursive()
        self.suspend_children()

    def fault_resume(self, caused_by_failure: BaseException | None) -> None:
        if self.actor is None:
            # Creation failed earlier: resuming means trying to create it again.
            self.fault_create()
            return
        perp = self.failed
        self.resume_non_recursive()
        if caused_by_failure is not None:
            self.failed = None
            self.failed_message = None
        self.resume_children(caused_by_failure, perp)

    def fault_recreate(self, cause: BaseException, survivor: bool = False) -> None:
        if self.actor is None:
            self.fault_create()
            return
        if not self.is_normal:
            self.fault_resume(None)  # terminating anyway: keep the counter balanced
            return
        failed_actor = self.actor
        self.lifecycle_debug("restarting")
        # docs/concepts/restart.md: only a restart decided on this actor's own failure passes
        # the failing message; sibling, child and escalation restarts pass None.
        message = None if survivor else self.failed_message
        try:
            failed_actor.pre_restart(cause, message)
        except FATAL:
            raise
        except BaseException as e:
            self.log_failure(
                f"pre_restart failed, the restart goes on: {failure_text(e)}",
                PreRestartException(self.ref, e, cause, message),
            )
        finally:
            self.failed_message = None
            self.instance_discarded()
        if not self.set_children_termination_reason(Recreation(cause)):
            self.finish_recreate(cause)

    def finish_recreate(self, cause: BaseException) -> None:
        # Snapshot the survivors before the new instance creates new children.
        to_die = self.to_die
        survivors = tuple(c.ref for c in self.child_cells.values() if c.ref not in to_die)
        try:
            self.resume_non_recursive()
            self.failed = None
            fresh = self.new_actor()
            self.install_actor(fresh)
            fresh.post_restart(cause)
        except FATAL:
            raise
        except BaseException as e:
            self.actor = None  # the next attempt is a fresh creation
            self.handle_invoke_failure(PostRestartException(self.ref, e, cause), survivors)
            return
        self.restarts += 1
        self.check_receive_timeout()
        self.lifecycle_debug("restarted")
        for child in survivors:
            stats = self.stats_for(child)
            if stats is not None:
                # A failure this child reported before now (waiting in our stash) is
                # settled by this restart: it must not be decided on again
                # (docs/concepts/supervision.md).
                stats.settled_seq = stats.cell.failure_seq
            child._send_system(sm.Recreate(cause, survivor=True))

    def fault_create(self) -> None:
        self.cancel_receive_timeout()
        self.stop_all_children()
        if not self.set_children_termination_reason(CREATION):
            self.finish_create()

    def finish_create(self) -> None:
        self.resume_non_recursive()
        self.failed = None
        self.failed_message = None
        try:
            self.create()
        except FATAL:
            raise
        except BaseException as e:
            self.handle_invoke_failure(e)

    def create(self) -> None:
        try:
            instance = self.new_actor()
            self.install_actor(instance)
            instance.pre_start()
        except FATAL:
            raise
        except BaseException as e:
            self.actor = None
            self.instance_discarded()
            raise ActorInitializationException(
                self.ref, f"exception during creation: {failure_text(e)}", e
            ) from e
        self.check_receive_timeout()
        self.lifecycle_debug("started")

    def terminate(self) -> None:
        self.cancel_receive_timeout()
        self.unwatch_watched_actors()
        self.stop_all_children()
        was_terminating = self.is_terminating
        if self.set_children_termination_reason(TERMINATION):
            if not was_terminating:
                self.suspend_non_recursive()  # no more user messages while children stop
                self.failed = self.ref  # and failures during shutdown go nowhere
                self.lifecycle_debug("stopping")
        else:
            self.finish_terminate()

    def finish_terminate(self) -> None:
        if self.dead:
            return
        a = self.actor
        try:
            if a is not None:
                a.post_stop()
        except FATAL:
            raise
        except BaseException as e:
            self.log_failure(f"post_stop failed: {failure_text(e)}", e)
        finally:
            self.dead = True
            self.open = False
            self.termination_reason = None
            self.instance_discarded()
            self.cancel_receive_timeout()
            self.parent._send_system(sm.DeathWatchNotification(self.ref, True, False))
            self.tell_watchers_we_died()
            self.unwatch_watched_actors()
            self.lifecycle_debug("stopped")
            self.actor = None
            self.behavior = None
            self.drain_to_dead_letters()

    # -- failures --------------------------------------------------------------------------
    def log_failure(
        self, text: str, cause: BaseException | None, level: int = logging.ERROR
    ) -> None:
        """A record of the supervision log category (and on the event stream) from this
        actor: what went wrong in the lifecycle or in failure handling itself."""
        self.system.publish_log(level, str(self.path), text, cause, category="supervision")

    def handle_invoke_failure(
        self, exc: BaseException, skip: tuple[ActorRef, ...] = (), tb: Any = _OWN_TB
    ) -> None:
        """This actor failed: suspend it and its subtree, report to the parent.

        ``tb``: the traceback of the failure, when ``exc.__traceback__`` may no longer
        be only this actor's (see ``ActorCell.user_failure``).
        """
        if self.failed is not None:
            return  # already reported (or terminating): the parent decides once
        if tb is _OWN_TB:
            tb = exc.__traceback__
        try:
            self.suspend_non_recursive()
            cur = self.current_sys
            if type(cur) is sm.Failed:
                # Escalating a child's failure: that child is the perpetrator and is
                # already suspended.
                self.failed = cur.child
                skip = (*skip, cur.child)
            else:
                self.failed = self.ref
            self.suspend_children(except_for=skip)
            self.failure_seq += 1
            self.parent._send_system(sm.Failed(self.ref, exc, self.uid, self.failure_seq, tb))
        except Exception as e:
            self.log_failure(
                "emergency stop: exception in failure handling for "
                f"{type(exc).__name__}: {safe_str(e)}",
                e,
            )
            try:
                self.stop_all_children()
            finally:
                self.finish_terminate()

    def handle_failure(self, f: sm.Failed) -> None:
        """A child reported a failure: let the strategy decide."""
        child = f.child
        stats = self.stats_for(child)
        if stats is None or child in self.to_die:
            self.log_failure(
                f"dropping Failed({type(f.cause).__name__}) from unknown or stopping child "
                f"{child.path} (uid {f.uid})",
                None,
                logging.DEBUG,
            )
            return
        child_cell = stats.cell
        if (
            child_cell.failed is None
            or child_cell.failure_seq != f.seq
            or f.seq <= stats.settled_seq
        ):
            # Already settled by a restart of this actor: the child was suspended once
            # more for this failure than it has been resumed, so balance it.
            child._send_system(sm.Resume(None))
            return
        # While the strategy decides, the supervisor's sender is the failing child.
        self.sender = child
        if self.actor is not None:
            self.actor.sender = child
        strategy = self.strategy()
        system = self.system
        # The strategy logs the failure: with the child's traceback, as it was when the
        # child failed (see Failed.tb).
        outer = system.failure_tb
        system.failure_tb = (f.cause, f.tb)
        try:
            handled = strategy.handle_failure(
                self.context, child, f.cause, stats, self.live_child_stats()
            )
        finally:
            system.failure_tb = outer
        if not handled:
            # Escalate: fail with the very same exception object (and the child's side
            # of its traceback).
            raise f.cause.with_traceback(f.tb)

    def handle_child_terminated(self, ref: ActorRef) -> None:
        status = self.remove_child_and_get_state_change(ref)
        if self.actor is not None:
            try:
                self.strategy().handle_child_terminated(self.context, ref, ChildrenView(self))
            except FATAL:
                raise
            except BaseException as e:
                if self.failed is not None:
                    # Already failed or stopping: no supervisor will decide on this one,
                    # so it must at least be logged rather than vanish.
                    self.log_failure(f"handle_child_terminated failed: {failure_text(e)}", e)
                else:
                    self.handle_invoke_failure(e)
        if status is TERMINATION:
            self.finish_terminate()
        elif isinstance(status, Recreation):
            self.finish_recreate(status.cause)
        elif status is CREATION:
            self.finish_create()

    def instance_discarded(self) -> None:
        """The current instance is going away (restart or stop): cancel its timers and
        put its stash back at the head of the mailbox (for the next instance, or for
        dead letters on stop)."""
        timers = self.timers_obj
        if timers is not None:
            timers.cancel_all()
        stash = self.stash_obj
        if stash is not None:
            stash.unstash_all()

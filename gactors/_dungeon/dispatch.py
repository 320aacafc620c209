"""The cell's queues: the slow paths of ``tell``, the system queue, and running it.

The fast path of ``tell`` (an open mailbox, the hub thread) is inlined in
``gactors._ref.LocalActorRef.tell``; everything else a send can meet (the mailbox not
allocated yet, a bounded or closed mailbox, a dead cell, another OS thread, a forked
process) comes here. System messages always go through :meth:`Dispatch.send_system`
and are run by :meth:`Dispatch.process_system` before any user message of a batch
(the batch loop is ``gactors._dispatch.Dispatcher._run``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from gactors import _sysmsg as sm
from gactors._dungeon._state import CellState
from gactors._dungeon.faulthandling import FATAL
from gactors._threads import get_ident
from gactors._timers import TimerMsg
from gactors.exceptions import AskTimeoutError

if TYPE_CHECKING:
    from gactors._ref import ActorRef

__all__ = ["NO_MAILBOX", "NO_STASH", "NO_SYSQ", "Dispatch"]

NO_MAILBOX: Final[Any] = ()
"""Falsy and empty, like an empty deque: the mailbox until the first message."""
NO_STASH: Final[Any] = []
"""The system stash until first used: shared and never appended to."""
NO_SYSQ: Final[Any] = None
"""The system queue when drained. It is a list while it holds messages: most actors
get one system message (Create) in their whole life. ``None``, not an empty tuple: the
worker loop tests it several times per batch, and ``None`` is the cheapest falsy
value to test."""

# What process_system does with a message while the cell is in this state.
_NORMAL, _SUSPENDED, _WAITING = 0, 1, 2


class Dispatch(CellState):
    """Mixin of ActorCell: the mailbox and the system queue."""

    if not TYPE_CHECKING:  # mypy would check every attribute against the empty slots
        __slots__ = ()

    def has_work(self) -> bool:
        return bool(self.sysq) or (bool(self.mailbox) and not self.suspend_count and not self.dead)

    # -- system messages ------------------------------------------------------------------------
    def _state(self) -> int:
        if self.termination_reason is not None and self.waiting_for_children:
            return _WAITING
        return _SUSPENDED if self.suspend_count else _NORMAL

    def process_system(self) -> None:
        sysq = self.sysq
        stash = self.sys_stash
        self.current_message = None  # lifecycle hooks run here: no current message
        # Read by index, not with pop(0): the queue is usually one message, but a parent
        # of 100,000 stopping children gets 100,000 notifications, and pop(0) would make
        # that quadratic. Handled messages are cut off now and then (memory stays flat).
        i = 0
        try:
            while i < len(sysq):
                if i >= 1024:
                    del sysq[:i]
                    i = 0
                    self.dispatcher.pause()
                msg = sysq[i]
                i += 1
                if self.dead:
                    self.system_dead_letter(msg)
                    continue
                state = self._state()
                if (state == _SUSPENDED and msg.stash_when_failed) or (
                    state == _WAITING and msg.stash_when_waiting
                ):
                    if stash is NO_STASH:
                        stash = self.sys_stash = []
                    stash.append(msg)
                    continue
                self.current_sys = msg
                try:
                    _SYSTEM_HANDLERS[type(msg)](self, msg)
                except FATAL:
                    raise
                except BaseException as exc:
                    self.handle_invoke_failure(exc)
                finally:
                    self.current_sys = None
                if stash and self._state() < state:
                    # Walking up the state chain: what waited may be processed now, first.
                    sysq[i:i] = stash
                    stash.clear()
        finally:
            # What was handled goes, also when a fatal exception escapes (the cell is
            # then requeued with the rest).
            if i:
                del sysq[:i]
        self.sysq = NO_SYSQ  # drained (and a handler's own sends went into the list)
        if self.dead and stash:
            for msg in stash:
                self.system_dead_letter(msg)
            stash.clear()

    def send_system(self, message: sm.SystemMessage) -> None:
        if get_ident() != self.tid:
            self.system.run_in_hub_async(self.send_system, message)
            return
        if self.dead:
            self.system_dead_letter(message)
            return
        sysq = self.sysq
        if sysq is NO_SYSQ:
            self.sysq = [message]
        else:
            sysq.append(message)
        if not self.scheduled:
            self.dispatcher.schedule(self)

    def after_fork(self) -> None:
        """In the child of ``os.fork()``: drop what the parent had queued for this actor
        (a copied worker may hold the very mailbox, so it is emptied in place) and the
        hub timers that would tell it something."""
        self.open = False
        mailbox = self.mailbox
        if mailbox:
            mailbox.clear()
            self.senders.clear()
        if self.sysq:
            self.sysq.clear()
        if self.sys_stash:
            self.sys_stash.clear()
        self.scheduled = False
        timer = self.rt_timer
        self.rt_timer = None
        self.rt_seconds = None
        if timer is not None:
            try:
                timer.close()
            except Exception:  # pragma: no cover - depends on the loop's state after fork
                pass

    # -- slow paths of tell ---------------------------------------------------------------------
    def enqueue_closed(self, message: Any, sender: ActorRef | None) -> None:
        """tell() in the hub thread when the mailbox is not open: not allocated yet,
        bounded, or the cell is dead (dead letter) or the process forked (raise)."""
        if self.system.forked:
            raise self.system.fork_error()
        if self.dead:
            self.system.publish_dead_letter(message, sender, self.ref)
            if sender is not None:
                _fail_ask(sender, self.ref, message, already=True)
            return
        capacity = self.capacity
        if capacity is not None and len(self.mailbox) >= capacity:
            self.system.publish_dead_letter(message, sender, self.ref)
            return
        self.enqueue(message, sender)
        if not self.scheduled:
            self.dispatcher.schedule(self)

    def enqueue(self, message: Any, sender: ActorRef | None) -> None:
        """Append to the mailbox, allocating it if need be (hub thread; the caller
        schedules the cell)."""
        self.ensure_mailbox().append(message)
        self.senders.append(sender)

    def ensure_mailbox(self) -> deque[Any]:
        """The mailbox deque, allocated on first use (hub thread only).

        A message's sender is not in the mailbox with it but in ``senders``, at the
        same position: two deques in step cost no object per message, where a
        ``(message, sender)`` tuple per message was a fifth of ``tell``'s cost once a
        mailbox holds many (docs/performance.md, Round 2)."""
        mailbox = self.mailbox
        if mailbox is NO_MAILBOX:
            mailbox = self.mailbox = deque()
            self.senders = deque()
            self.open = self.capacity is None and not self.dead and not self.system.forked
        return mailbox

    def enqueue_foreign(self, message: Any, sender: ActorRef | None) -> None:
        """tell() from another OS thread: the hub thread finishes the job."""
        if self.system.forked:
            raise self.system.fork_error()
        # Only the hub thread touches the mailbox: one system-wide queue keeps every
        # foreign sender's messages in order and needs no locking in the cell.
        self.system.tell_from_thread(self.ref, message, sender)

    def drain_to_dead_letters(self) -> None:
        mailbox = self.mailbox
        senders = self.senders
        dead_letter = self.system.publish_dead_letter
        me = self.ref
        while mailbox:
            message = mailbox.popleft()
            sender = senders.popleft()
            if isinstance(message, TimerMsg):
                continue  # its timer was cancelled with the instance: never delivered
            dead_letter(message, sender, me)
            if sender is not None:
                _fail_ask(sender, me, message, already=False)


def _fail_ask(sender: ActorRef, me: ActorRef, message: Any, *, already: bool) -> None:
    """An ask of this (dead) actor will never be answered: fail it now, not at its timeout.

    Akka fails an ask of a terminated actor at once; the same holds here for an ask
    still queued when the actor stopped (its constructor failed, say), since no code
    of the actor saw the question. Only an ask of this very actor: a question that
    reached it through another actor (a router, a region) is that actor's to answer.
    """
    from gactors._ref import PromiseRef

    if type(sender) is PromiseRef and sender._target == me:  # noqa: SLF001  the ask's target
        when = "had already terminated" if already else "terminated before processing it"
        sender.complete_exc(
            AskTimeoutError(
                f"ask of {me.path} failed at once: the actor {when} (message of type "
                f"{type(message).__name__}, now a dead letter)"
            )
        )


_SYSTEM_HANDLERS: Final[dict[type, Callable[[CellState, Any], None]]] = {
    sm.Create: lambda c, m: c.create(),
    sm.Recreate: lambda c, m: c.fault_recreate(m.cause, m.survivor),
    sm.Suspend: lambda c, m: c.fault_suspend(),
    sm.Resume: lambda c, m: c.fault_resume(m.caused_by_failure),
    sm.Terminate: lambda c, m: c.terminate(),
    sm.Watch: lambda c, m: c.add_watcher(m.watchee, m.watcher),
    sm.Unwatch: lambda c, m: c.rem_watcher(m.watchee, m.watcher),
    sm.Failed: lambda c, m: c.handle_failure(m),
    sm.DeathWatchNotification: lambda c, m: c.watched_actor_terminated(
        m.actor, m.existence_confirmed, m.address_terminated
    ),
}

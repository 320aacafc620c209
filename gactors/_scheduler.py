"""``system.scheduler``: messages (or calls) after a delay, once or repeatedly (docs/api/time.md).

Every task is a one-shot timer of the system's gevent hub, re-armed after each run, so
an idle scheduler costs no greenlet and nothing runs between two firings. Callbacks run
in the hub itself: a scheduled ``tell`` never blocks and never switches greenlets, and
a scheduled callable must not block either (it should tell an actor instead).

The scheduler may be used from any OS thread; a task scheduled from another thread
starts once the hub's thread has picked it up. When the actor system terminates, the
scheduler cancels every outstanding task and refuses new ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from time import monotonic
from typing import TYPE_CHECKING, Any

from gactors._duration import seconds
from gactors._ref import ActorRef
from gactors._threads import get_ident
from gactors.exceptions import IllegalStateError, InvalidMessageException

if TYPE_CHECKING:
    from gactors._spi import SystemSPI

__all__ = ["Cancellable", "Scheduler"]

_log = logging.getLogger("gactors.scheduler")

_MISSING: Any = object()

# What a task does when it fires, and how it is re-armed.
_ONCE, _FIXED_DELAY, _FIXED_RATE = 0, 1, 2


def _seconds(value: float | timedelta, what: str, *, positive: bool) -> float:
    # A negative initial delay means "as soon as possible", as in Akka.
    return seconds(value, what, negative_is_now=not positive)


class Cancellable:
    """A scheduled task. :meth:`cancel` stops it; safe to call from any thread.

    ``cancel()`` returns True if this call cancelled the task, False if it was already
    cancelled or, for a one-shot task, had already run. :attr:`cancelled` tells
    whether the task was cancelled (a task that ran to completion is not).
    """

    __slots__ = (
        "_action",
        "_args",
        "_deadline",
        "_interval",
        "_kind",
        "_scheduler",
        "_state",
        "_timer",
    )

    def __init__(
        self,
        scheduler: Scheduler,
        kind: int,
        interval: float,
        action: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        self._scheduler = scheduler
        self._kind = kind
        self._interval = interval
        self._action = action
        self._args = args
        self._timer: Any = None
        self._deadline = 0.0
        # "cancelled" is a plain flag, set at once by cancel() in whatever thread: a
        # timer that fires before the hub thread closed it sees the flag and does nothing.
        self._state = 0  # 0 pending/running, 1 cancelled, 2 done

    @property
    def cancelled(self) -> bool:
        """True once the task was cancelled (by :meth:`cancel` or system termination)."""
        return self._state == 1

    def cancel(self) -> bool:
        """Cancel the task; True if this call cancelled it."""
        if self._state != 0:
            return False
        self._state = 1
        scheduler = self._scheduler
        if get_ident() == scheduler._system._tid:
            self._close()
        else:
            scheduler._system.run_in_hub_async(self._close)
        return True

    # -- hub thread ------------------------------------------------------------------------
    def _close(self) -> None:
        timer = self._timer
        if timer is not None:
            self._timer = None
            timer.close()
        self._scheduler._tasks.discard(self)  # noqa: SLF001  Cancellable and Scheduler are one unit

    def _arm(self, delay: float) -> None:
        loop = self._scheduler._system._hub.loop
        timer = self._timer = loop.timer(delay)
        # update=True: measure the delay from now, not from the loop's cached time (a
        # long-running greenlet would otherwise make the task fire early).
        timer.start(self._fire, update=True)

    def _start(self, delay: float) -> None:
        if self._state != 0:
            return
        scheduler = self._scheduler
        if scheduler._closed:  # noqa: SLF001  Cancellable and Scheduler are one unit
            self._state = 1
            return
        scheduler._tasks.add(self)  # noqa: SLF001  Cancellable and Scheduler are one unit
        self._deadline = monotonic() + delay
        self._arm(delay)

    def _fire(self) -> None:
        timer = self._timer
        self._timer = None
        if timer is not None:
            timer.close()
        if self._state != 0:
            return
        kind = self._kind
        if kind == _ONCE:
            self._state = 2
            self._scheduler._tasks.discard(self)  # noqa: SLF001  Cancellable and Scheduler are one unit
        try:
            self._action(*self._args)
        except Exception:
            # As in Akka: a failing repeated task is not run again.
            _log.exception("scheduled task %r failed; it will not run again", self)
            if self._state == 0:
                self._state = 1
                self._close()
            return
        if self._state != 0:
            return  # the action cancelled its own task
        if kind == _FIXED_DELAY:
            self._arm(self._interval)
        elif kind == _FIXED_RATE:
            # Keep to the original grid; when late (a busy hub), catch up without overlap.
            self._deadline += self._interval
            self._arm(max(0.0, self._deadline - monotonic()))

    def __repr__(self) -> str:
        state = ("active", "cancelled", "done")[self._state]
        what = ("once", "fixed-delay", "fixed-rate")[self._kind]
        return f"<Cancellable {what} {state} {self._action!r}>"


def _tell(receiver: ActorRef, message: Any, sender: ActorRef | None) -> None:
    receiver.tell(message, sender)


class Scheduler:
    """``system.scheduler``: tell a message (or call a function) later.

    Each method takes either ``receiver, message`` (an :class:`~gactors.ActorRef` and
    the message to tell it) or a single callable as ``receiver`` with no message (called
    with no arguments in the hub; it must not block). Delays are float seconds or
    :class:`~datetime.timedelta`. Every method returns a :class:`Cancellable`.
    """

    __slots__ = ("_closed", "_system", "_tasks")

    def __init__(self, system: SystemSPI) -> None:
        self._system = system
        self._tasks: set[Cancellable] = set()
        self._closed = False

    def schedule_once(
        self,
        delay: float | timedelta,
        receiver: ActorRef | Callable[[], Any],
        message: Any = _MISSING,
        sender: ActorRef | None = None,
    ) -> Cancellable:
        """Tell ``message`` to ``receiver`` (from ``sender``) once, after ``delay``."""
        return self._schedule(_ONCE, delay, 0.0, receiver, message, sender)

    def schedule_with_fixed_delay(
        self,
        initial_delay: float | timedelta,
        delay: float | timedelta,
        receiver: ActorRef | Callable[[], Any],
        message: Any = _MISSING,
        sender: ActorRef | None = None,
    ) -> Cancellable:
        """Tell ``message`` after ``initial_delay``, then ``delay`` after each send."""
        return self._schedule(
            _FIXED_DELAY,
            initial_delay,
            _seconds(delay, "delay", positive=True),
            receiver,
            message,
            sender,
        )

    def schedule_at_fixed_rate(
        self,
        initial_delay: float | timedelta,
        interval: float | timedelta,
        receiver: ActorRef | Callable[[], Any],
        message: Any = _MISSING,
        sender: ActorRef | None = None,
    ) -> Cancellable:
        """Tell ``message`` after ``initial_delay``, then every ``interval`` seconds
        measured from the start (a late send does not shift the following ones)."""
        return self._schedule(
            _FIXED_RATE,
            initial_delay,
            _seconds(interval, "interval", positive=True),
            receiver,
            message,
            sender,
        )

    @property
    def active_tasks(self) -> int:
        """How many tasks are scheduled and not yet cancelled or finished."""
        return len(self._tasks)

    # -- internals ---------------------------------------------------------------------------
    def _schedule(
        self,
        kind: int,
        delay: float | timedelta,
        interval: float,
        receiver: Any,
        message: Any,
        sender: ActorRef | None,
    ) -> Cancellable:
        first = _seconds(delay, "initial delay" if kind != _ONCE else "delay", positive=False)
        action: Callable[..., Any]
        args: tuple[Any, ...]
        if isinstance(receiver, ActorRef):
            if message is _MISSING or message is None:
                raise InvalidMessageException(
                    "the scheduler needs a message to tell (None is not a valid message)"
                )
            if sender is not None and not isinstance(sender, ActorRef):
                raise TypeError(f"sender must be an ActorRef or None, not {type(sender).__name__}")
            action, args = _tell, (receiver, message, sender)
        elif callable(receiver):
            if message is not _MISSING:
                raise TypeError("a scheduled callable takes no message")
            action, args = receiver, ()
        else:
            raise TypeError(
                f"the scheduler needs an ActorRef or a callable, not {type(receiver).__name__}"
            )
        if self._closed:
            raise IllegalStateError(
                f"the scheduler of actor system {self._system.name!r} is closed "
                "(the system terminated)"
            )
        task = Cancellable(self, kind, interval, action, args)
        if get_ident() == self._system._tid:
            task._start(first)  # noqa: SLF001  Cancellable and Scheduler are one unit
        else:
            self._system.run_in_hub_async(task._start, first)  # noqa: SLF001  Cancellable and Scheduler are one unit
        return task

    def _after_fork(self) -> None:
        """In the child of ``os.fork()``: the parent's tasks must never fire here (their
        hub timers were copied with the loop). Closed without running anything."""
        self._closed = True
        for task in list(self._tasks):
            task._state = 1  # noqa: SLF001  Cancellable and Scheduler are one unit
            task._close()  # noqa: SLF001  Cancellable and Scheduler are one unit
        self._tasks.clear()

    def _close(self) -> None:
        """The system terminated: cancel every outstanding task (hub thread)."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()

    def __repr__(self) -> str:
        return f"<Scheduler of {self._system.name!r}: {len(self._tasks)} active>"

"""``self.timers``: per-actor timers identified by keys (docs/api/time.md).

Each timer is a task of ``system.scheduler`` that tells the actor an internal envelope
(:class:`TimerMsg`) carrying the timer's key and generation. The cell unwraps it when
it is processed (an auto-received message, see ``gactors._cell``) and delivers the
user's message only if that timer still exists with that generation. So a message
from a timer that was cancelled or replaced is never delivered, even when its
envelope was already in the mailbox; that includes every timer of an instance that
was restarted or stopped (the cell calls :meth:`TimerScheduler.cancel_all`).

The scheduler object lives in the cell (``cell.timers_obj``), created on first use.
Use it only from inside the actor.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gactors._messages import NotInfluenceReceiveTimeout
from gactors._scheduler import _seconds
from gactors.exceptions import InvalidMessageException

if TYPE_CHECKING:
    from gactors._scheduler import Cancellable
    from gactors._spi import CellSPI

__all__ = ["TimerMsg", "TimerMsgNotInfluenceReceiveTimeout", "TimerScheduler", "timers_of"]


class TimerMsg:
    """Internal envelope of a timer's message; never seen by user code."""

    __slots__ = ("generation", "key", "message", "owner")

    def __init__(self, key: Hashable, generation: int, message: Any, owner: TimerScheduler):
        self.key = key
        self.generation = generation
        self.message = message
        self.owner = owner

    def __repr__(self) -> str:
        return f"TimerMsg({self.key!r}, {self.generation}, {self.message!r})"


class TimerMsgNotInfluenceReceiveTimeout(TimerMsg, NotInfluenceReceiveTimeout):
    """The envelope of a message that does not reset the receive timeout (so that the
    envelope does not reset it either)."""

    __slots__ = ()


def _initial(initial_delay: float | timedelta | None, default: float) -> float:
    if initial_delay is None:
        return default
    return _seconds(initial_delay, "initial_delay", positive=False)


class _Timer:
    __slots__ = ("envelope", "repeat", "task")

    def __init__(self, envelope: TimerMsg, repeat: bool, task: Cancellable) -> None:
        self.envelope = envelope
        self.repeat = repeat
        self.task = task


class TimerScheduler:
    """``self.timers``: start, replace and cancel timers by key.

    Starting a timer with the key of an active timer replaces it: the old timer's
    message will not be delivered any more, even if it is already queued.
    """

    __slots__ = ("_cell", "_generations", "_timers")

    def __init__(self, cell: CellSPI) -> None:
        self._cell = cell
        self._timers: dict[Hashable, _Timer] = {}
        # Never reused, so an envelope from any earlier timer can never match.
        self._generations = itertools.count(1)

    # -- the public API ------------------------------------------------------------------------
    def start_single_timer(self, key: Hashable, message: Any, delay: float | timedelta) -> None:
        """Send ``message`` to this actor once, after ``delay`` seconds."""
        self._start(key, message, _seconds(delay, "delay", positive=False), None)

    def start_timer_with_fixed_delay(
        self,
        key: Hashable,
        message: Any,
        delay: float | timedelta,
        initial_delay: float | timedelta | None = None,
    ) -> None:
        """Send ``message`` every ``delay`` seconds (first after ``initial_delay``,
        default ``delay``), measuring each delay from the previous send."""
        d = _seconds(delay, "delay", positive=True)
        first = _initial(initial_delay, d)
        self._start(key, message, first, ("delay", d))

    def start_timer_at_fixed_rate(
        self,
        key: Hashable,
        message: Any,
        interval: float | timedelta,
        initial_delay: float | timedelta | None = None,
    ) -> None:
        """Send ``message`` every ``interval`` seconds (first after ``initial_delay``,
        default ``interval``), on a fixed grid: a late send does not shift the next."""
        i = _seconds(interval, "interval", positive=True)
        first = _initial(initial_delay, i)
        self._start(key, message, first, ("rate", i))

    def is_timer_active(self, key: Hashable) -> bool:
        """True while the timer exists: until it is cancelled or replaced, or, for a
        single timer, until its message has been delivered."""
        return key in self._timers

    def cancel(self, key: Hashable) -> None:
        """Cancel the timer ``key`` (nothing happens if there is none); its message
        will not be delivered, even if already queued."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.task.cancel()

    def cancel_all(self) -> None:
        """Cancel every timer of this actor."""
        timers = self._timers
        if timers:
            self._timers = {}
            for timer in timers.values():
                timer.task.cancel()

    @property
    def active_keys(self) -> tuple[Hashable, ...]:
        """The keys of the active timers."""
        return tuple(self._timers)

    # -- internals ---------------------------------------------------------------------------
    def _start(
        self,
        key: Hashable,
        message: Any,
        first: float,
        repeat: tuple[str, float] | None,
    ) -> None:
        if message is None:
            raise InvalidMessageException("a timer needs a message, not None")
        hash(key)  # an unhashable key fails here, not later
        cell = self._cell
        if cell.dead:
            return  # a stopped actor has no timers
        self.cancel(key)
        cls = (
            TimerMsgNotInfluenceReceiveTimeout
            if isinstance(message, NotInfluenceReceiveTimeout)
            else TimerMsg
        )
        envelope = cls(key, next(self._generations), message, self)
        scheduler = cell.system.scheduler
        ref = cell.ref
        task: Cancellable
        if repeat is None:
            task = scheduler.schedule_once(first, ref, envelope)
        elif repeat[0] == "delay":
            task = scheduler.schedule_with_fixed_delay(first, repeat[1], ref, envelope)
        else:
            task = scheduler.schedule_at_fixed_rate(first, repeat[1], ref, envelope)
        self._timers[key] = _Timer(envelope, repeat is not None, task)

    def intercept(self, envelope: TimerMsg) -> Any:
        """The message to deliver for ``envelope``, or None when its timer is gone."""
        if envelope.owner is not self:
            return None  # from another incarnation's timers (cannot normally happen)
        timer = self._timers.get(envelope.key)
        if timer is None or timer.envelope is not envelope:
            return None  # cancelled or replaced after this envelope was sent
        if not timer.repeat:
            del self._timers[envelope.key]
        return envelope.message

    def __repr__(self) -> str:
        return f"<TimerScheduler {self._cell.path}: {list(self._timers)!r}>"


def timers_of(cell: CellSPI) -> TimerScheduler:
    """The cell's timers, created on first use."""
    timers: TimerScheduler | None = cell.timers_obj
    if timers is None:
        timers = cell.timers_obj = TimerScheduler(cell)
    return timers

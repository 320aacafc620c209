"""Hub-blocking detection: the ``blocking_threshold`` setting and ``HubBlocked``.

An actor that calls blocking code gevent has not patched (a C extension doing I/O,
``time.sleep`` taken from before ``patch_all()``, a busy loop) holds the whole hub:
no other actor, request or timer of that thread runs meanwhile. This module makes
that visible, naming the actor.

How it works, and why it is shaped like this:

* gevent already has the machinery: a per-hub *monitoring thread* (a real OS thread)
  and a greenlet trace function installed in the hub's thread that counts switches.
  gevent's own check runs once per ``gevent.config.max_blocking_time`` and notices a
  block only when no switch happened during a whole period, i.e. often only blocks of
  twice the threshold (issue 29). On the thread we start for the hub of every system
  with a ``blocking_threshold`` (:class:`_Monitor`, stopped again when the last such
  system on that hub terminates) our own check replaces it: it polls four times per
  threshold and knows within one poll when the block began, so every block longer
  than the threshold plus that resolution is noticed (settings refuse thresholds
  below ``MIN_BLOCKING_THRESHOLD``, where the resolution would exceed them). We still
  set ``max_blocking_time`` to the smallest live threshold, for a monitor the
  application enabled itself (``gevent.config.monitor_thread``): that one is used as
  configured, through its ``EventLoopBlocked`` events (``zope.event``), with gevent's
  coarser resolution.
* Which actor is blocking is read off the blocked thread's stack
  (``sys._current_frames()``): the frame of the dispatcher's worker loop holds the cell being
  run, and the frames below it are the actor's own code, which is the stack we report.
  Asking the current greenlet would not help (the event is notified in the monitoring
  thread), and the greenlet the event names is only the last one gevent's tracer saw being switched
  to, which is usually the dispatcher :class:`~gactors._dispatch.Worker` running the
  actor, but not always. When the stack has no worker-loop frame (the actor switched
  into a greenlet of its own, whose frames stop at that greenlet), the actor is the one
  of the worker that greenlet was started from, if any.
* gevent reports again every period while the hub stays blocked. Consecutive reports
  for the same greenlet running the same actor are one *episode*, with one warning:
  logged when the episode ends, from the hub's thread, with its real duration; or, for
  an episode still going on after ``STILL_BLOCKED`` seconds, at once from the
  monitoring thread (the hub thread is blocked, and for a hub that stays blocked
  forever that log line is the only sign of life). The episode ends when the hub runs
  again: an unreferenced async watcher, poked at the first report, fires then, and the
  ``HubBlocked`` event is published in the hub's thread with the episode's total
  duration (subscribers run in the hub's thread anyway, so publishing any earlier
  would not reach them any sooner).
* The start of an episode is the last poll that saw a switch (our monitor; a block is
  never reported longer than it was) or, from gevent's events, read off the loop's
  clock, which is not refreshed while the hub is blocked: its lag behind the real
  clock is how long the hub has not run.
* Our monitor builds and prints none of gevent's report: our warning says the same,
  naming the actor. A monitor the application enabled itself is left as configured.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
from collections.abc import Callable
from time import perf_counter
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import gevent
from gevent._monitor import PeriodicMonitoringThread
from gevent.events import EventLoopBlocked, subscribers
from greenlet import getcurrent

from gactors._dispatch import Dispatcher, Worker
from gactors._dungeon._state import CellState
from gactors._messages import HubBlocked
from gactors._threads import allocate_lock, get_ident

if TYPE_CHECKING:
    from gevent.hub import Hub

    from gactors._eventstream import EventStream

__all__ = ["is_monitoring", "start_monitoring", "stop_monitoring"]


class _Settings(Protocol):
    @property
    def blocking_threshold(self) -> float | None: ...


class MonitoredSystem(Protocol):
    """What the monitor uses of an actor system (``gactors._system.ActorSystem``, which
    starts it, is above this module in the layers of docs/internals.md)."""

    name: str
    _hub: Any
    _tid: int
    event_stream: EventStream

    @property
    def settings(self) -> _Settings: ...
    def publish_log(
        self,
        level: int,
        source: str,
        message: str,
        cause: BaseException | None = None,
        logger_class: type | None = None,
        *,
        category: str = "supervision",
    ) -> None: ...
    def register_on_termination(self, fn: Callable[[], Any]) -> None: ...


_log = logging.getLogger("gactors.hub")

_WORKER_LOOP_CODE = Dispatcher._run.__code__  # noqa: SLF001  identifies the worker loop's frames
_EPSILON = 1e-6
MIN_POLL = 0.002
"""Seconds: the shortest interval at which our monitoring thread polls the hub."""
MAX_POLL = 0.05
"""Seconds: the longest (for large thresholds: a block is still timed within it)."""
STILL_BLOCKED = 0.5
"""Seconds: a block is logged while it lasts once it is this old (and over the
threshold); a shorter one is logged when it ends, with its real duration."""

# Process-wide state, guarded by _lock (a real lock: the monitoring threads read it).
_lock = allocate_lock()
_watches: dict[int, _HubWatch] = {}
_saved_config: dict[str, Any] | None = None
_subscribed = False


class _Episode:
    """One continuous block of the hub by one greenlet running one actor (or none)."""

    __slots__ = ("cell", "end", "greenlet", "logged", "stack", "start")

    def __init__(self, greenlet: Any, cell: CellState | None, start: float, stack: str) -> None:
        self.greenlet = greenlet
        self.cell = cell
        self.start = start
        self.end: float | None = None
        self.stack = stack
        self.logged: set[MonitoredSystem] = set()


class _HubWatch:
    """The monitored systems of one hub, and the episode in progress on it."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.tid: int = hub.thread_ident
        self.systems: dict[MonitoredSystem, float] = {}
        self.episode: _Episode | None = None
        self.finished: list[_Episode] = []
        self.thread: Any = None
        self.owns_thread = False
        self.poll_period = MAX_POLL
        self.ran_at = 0.0  # when _hub_ran last ran (perf_counter): the hub switched then
        """Seconds between two polls of our monitor: a quarter of the smallest threshold."""
        # Fires in the hub's thread once the hub runs again: the episode is over. It
        # must not keep the hub alive by itself.
        self.async_ = hub.loop.async_()
        self.async_.ref = False
        self.async_.start(self._hub_ran)

    # -- hub thread -------------------------------------------------------------------------
    def ensure_thread(self) -> None:
        hub = self.hub
        thread: Any = hub.periodic_monitoring_thread
        if thread is None:
            if gevent.config.monitor_thread:
                # The application asked for gevent's monitor: gevent starts it its way,
                # and it stays the application's.
                thread = hub.start_periodic_monitoring_thread()
                self.owns_thread = False
            else:
                # Ours, for blocking detection only. Not through
                # hub.start_periodic_monitoring_thread(): it would also set up memory
                # monitoring (trying to import psutil) and announce the thread to entry
                # points (scanning the installed distributions), both in the hub's thread
                # with the monitor already running: slow enough, on a busy machine, to be
                # reported as blocking the hub.
                thread = _Monitor(hub, self)
                hub.periodic_monitoring_thread = thread
                self.owns_thread = True
        self.thread = thread

    def close(self) -> None:
        self.async_.stop()
        self.async_.close()
        hub = self.hub
        if self.owns_thread and self.thread is not None:
            self.thread.kill()  # uninstalls the greenlet tracer: must run in the hub thread
            if hub.periodic_monitoring_thread is self.thread:
                hub.periodic_monitoring_thread = None
        self.thread = None

    def _hub_ran(self) -> None:
        now = perf_counter()
        with _lock:
            self.ran_at = now
            ep = self.episode
            if ep is not None:
                self.episode = None
                ep.end = now
                self.finished.append(ep)
            done, self.finished = self.finished, []
            systems = dict(self.systems)
        for ep in done:
            assert ep.end is not None
            seconds = max(ep.end - ep.start, 0.0)
            path = str(ep.cell.path) if ep.cell is not None else None
            for system, threshold in systems.items():
                if system not in ep.logged:
                    if seconds + _EPSILON < threshold:
                        continue
                    # Not logged while it lasted (shorter than STILL_BLOCKED, or the
                    # threshold was reached between two reports of the monitor): logged
                    # now, with how long it really lasted.
                    _warn(system, ep, seconds, threshold, ongoing=False)
                system.event_stream.publish(HubBlocked(path, seconds, ep.stack))

    # -- monitoring thread ------------------------------------------------------------------
    def blocked(self, greenlet: Any, period: float, since: float | None = None) -> None:
        """The hub has not switched greenlets for ``period`` seconds (at least).

        ``since``: when the block began, if the caller knows it better than ``period``
        (perf_counter time; our own monitor's estimate, see :class:`_Monitor`).
        """
        now = perf_counter()
        # The actor is read off the blocked thread's stack rather than off the greenlet
        # gevent names: that is the last greenlet its tracer saw being switched to, which
        # goes stale after a switch the tracer does not see (such as the garbage collector
        # killing a parked greenlet and resuming the current one).
        stack, cell = _inspect(self.tid)
        if cell is None:
            cell = _worker_cell(greenlet)
        due: list[tuple[MonitoredSystem, float]] = []
        with _lock:
            if since is not None and self.ran_at > now - period:
                # The hub ran (ending the episode) after the poll that saw no switch
                # read the switch count: the block that poll saw is over, and was
                # reported with that episode.
                return
            ep = self.episode
            start = now - period
            if ep is not None and (ep.greenlet is not greenlet or ep.cell is not cell):
                # The same worker went on to another actor without the hub running.
                ep.end = start
                self.finished.append(ep)
                ep = None
            elif ep is None:
                start = since if since is not None else now - self._blocked_for(period)
            if ep is None:
                ep = self.episode = _Episode(greenlet, cell, start, stack)
            elapsed = now - ep.start
            for system, threshold in self.systems.items():
                if system not in ep.logged and elapsed + _EPSILON >= max(threshold, STILL_BLOCKED):
                    ep.logged.add(system)
                    due.append((system, threshold))
        # Publishing must not wait for the logging below (which may wait for a lock).
        self.async_.send()
        for system, threshold in due:
            _warn(system, ep, elapsed, threshold, ongoing=True)

    def _blocked_for(self, period: float) -> float:
        """How long the hub has been blocked, seen from the monitoring thread.

        The loop's clock is refreshed whenever the hub runs (and when a timer is armed),
        never while code holds the hub: its lag behind the real clock is how long the
        hub has not run. gevent itself only says that no switch happened during the
        last whole period, a lower bound that can be far too low.
        """
        try:
            lag = time.time() - float(self.hub.loop.now())
        except Exception:  # pragma: no cover - a loop being destroyed
            lag = 0.0
        return max(period, lag)


class _Entry:
    """A monitoring function of :class:`_Monitor` (the shape gevent's loop reads)."""

    __slots__ = ("function", "last_run_time", "period")

    def __init__(self, function: Any, period: float) -> None:
        self.function = function
        self.period = period
        self.last_run_time = 0.0


class _Monitor(PeriodicMonitoringThread):  # type: ignore[misc]
    """gevent's monitoring thread with our own check, polled at :func:`poll_period`.

    gevent's check runs once per ``max_blocking_time`` and only says that no greenlet
    switched during that whole period: a block is noticed only if a full period fits
    in it, and its start is unknown. Ours polls several times per threshold and keeps
    the time of the last poll that saw a switch (or the hub idle): a block began between
    that poll and the one before it. Its start is taken to be that last poll, the
    latest it can be: a block is never reported longer than it was (so never one
    shorter than the threshold), and one longer than the threshold plus the resolution
    (one poll interval, plus the interpreter's switch interval for code that holds the
    GIL: docs/settings.md) is always noticed.

    Nothing of gevent's own report is built or printed; memory monitoring is off.
    """

    min_sleep_time = MIN_POLL

    def __init__(self, hub: Hub, watch: _HubWatch) -> None:
        # Set before gevent's __init__ starts the thread, which reads them at once.
        self._watch = watch
        now = perf_counter()
        self._last_poll = now
        self._switch_between = (now, now)
        self._entries = [_Entry(self._poll, watch.poll_period / 2)]
        super().__init__(hub)

    def monitoring_functions(self) -> list[_Entry]:
        # The entry's period is half the sleep, so that a wake-up a little early never
        # skips a poll (gevent runs an entry when its period has passed since its last run).
        self._entries[0].period = self._watch.poll_period / 2
        return self._entries

    def calculate_sleep_time(self) -> float:
        return max(self._watch.poll_period, MIN_POLL)

    def _poll(self, hub: Any) -> None:
        now = perf_counter()
        did_block = self._greenlet_tracer.did_block_hub(hub)  # resets the switch count
        if not did_block:
            # A switch (or the hub waiting for I/O) since the previous poll: whatever
            # block comes next began after that poll.
            self._switch_between = (self._last_poll, now)
            self._last_poll = now
            return
        previous, self._last_poll = self._last_poll, now
        latest = self._switch_between[1]
        watch = self._watch
        if not self.should_run or watch.thread is not self:
            return
        try:
            # No switch since the previous poll; the block began at `latest` or before.
            watch.blocked(did_block[1], now - previous, since=latest)
        except Exception:  # never let an error escape into the monitoring thread
            _log.exception("hub-blocking report failed")


def _warn(
    system: MonitoredSystem, ep: _Episode, seconds: float, threshold: float, *, ongoing: bool
) -> None:
    if ep.cell is not None:
        source = str(ep.cell.path)
        who = f"actor {source}"
    else:
        source = "gevent-hub"
        who = "code outside any actor"
    system.publish_log(
        logging.WARNING,
        source,
        f"{who} {'has been blocking' if ongoing else 'blocked'} the gevent hub for "
        f"{seconds:.3f} s{' so far' if ongoing else ''} (blocking_threshold {threshold} s): "
        "no other greenlet of this thread runs meanwhile; is it calling "
        f"blocking code that gevent did not patch? Stack:\n{ep.stack}",
        category="hub",
    )


def _worker_cell(greenlet: Any) -> CellState | None:
    """The actor run by ``greenlet``, or by the worker it was started from."""
    g = greenlet
    while g is not None:
        if type(g) is Worker:
            cell = g.cell
            return cell if isinstance(cell, CellState) else None
        g = getattr(g, "parent", None)
    return None


def _inspect(tid: int) -> tuple[str, CellState | None]:
    """The blocked hub thread's stack from the actor's code down, and the actor's cell.

    Runs in the monitoring thread. The dispatcher frames above the worker loop
    (``Dispatcher._run``) are left out; that frame's ``cell`` is the actor being run.
    """
    frame: FrameType | None = sys._current_frames().get(tid)  # noqa: SLF001  the only way to read another thread's stack
    frames: list[FrameType] = []
    cell: CellState | None = None
    try:
        while frame is not None:
            if frame.f_code is _WORKER_LOOP_CODE:
                running = frame.f_locals.get("cell")
                cell = running if isinstance(running, CellState) else None
                break
            frames.append(frame)
            frame = frame.f_back
        frames.reverse()
        summary = traceback.StackSummary.extract((f, f.f_lineno) for f in frames)
        return "".join(summary.format()), cell
    finally:
        del frame, frames


def _on_zope_event(event: Any) -> None:
    # Runs in a monitoring thread, for every zope.event of the process: be quick.
    if not isinstance(event, EventLoopBlocked):
        return
    ref = getattr(getcurrent(), "gevent_monitoring_thread", None)
    monitor = ref() if ref is not None else None
    hub = getattr(event, "hub", None)  # gevent >= 25 passes the hub
    if hub is None and monitor is not None:
        hub = monitor.hub
    watch = _watches.get(id(hub)) if hub is not None else None
    if watch is None or watch.hub is not hub:
        return
    if monitor is not None and (monitor is not watch.thread or not monitor.should_run):
        # A monitor stopped with an earlier watch of this hub, finishing a report it
        # began before it was stopped (building gevent's report can take a while): its
        # tracer is gone, so what it says about the greenlet is stale. Not ours to tell.
        return
    try:
        watch.blocked(event.greenlet, float(event.blocking_time))
    except Exception:  # never let an error escape into gevent's monitoring thread
        _log.exception("hub-blocking report failed")


def poll_period(threshold: float) -> float:
    """How often the hub is polled for a ``threshold``: four times per threshold, within
    [MIN_POLL, MAX_POLL]."""
    return min(max(threshold / 4, MIN_POLL), MAX_POLL)


def _apply_config_locked() -> None:
    """Make gevent's blocking period the smallest live threshold (call with _lock held)."""
    global _saved_config
    config = gevent.config
    thresholds = [t for w in _watches.values() for t in w.systems.values()]
    for w in _watches.values():
        if w.systems:
            w.poll_period = poll_period(min(w.systems.values()))
    if thresholds:
        if _saved_config is None:
            _saved_config = {"max_blocking_time": config.max_blocking_time}
        config.max_blocking_time = min(thresholds)
    elif _saved_config is not None:
        for key, value in _saved_config.items():
            setattr(config, key, value)
        _saved_config = None


def start_monitoring(system: MonitoredSystem) -> None:
    """Watch ``system``'s hub for blocking longer than its ``blocking_threshold``.

    Called by the system at start (in its hub's thread) when the setting is not None;
    the matching :func:`stop_monitoring` runs as a termination hook.
    """
    global _subscribed
    threshold = system.settings.blocking_threshold
    if threshold is None:
        return
    if get_ident() != system._tid:  # pragma: no cover - systems start in their own thread
        raise RuntimeError("start_monitoring must run in the system's hub thread")
    hub = system._hub
    with _lock:
        if not _subscribed:
            subscribers.append(_on_zope_event)  # gevent's alias of zope.event's
            _subscribed = True
        watch = _watches.get(id(hub))
        if watch is None or watch.hub is not hub:
            watch = _watches[id(hub)] = _HubWatch(hub)
        watch.systems[system] = threshold
        _apply_config_locked()
    watch.ensure_thread()
    system.register_on_termination(lambda: stop_monitoring(system))


def stop_monitoring(system: MonitoredSystem) -> None:
    """Stop watching ``system`` (in its hub's thread); idempotent."""
    hub = system._hub
    closing: _HubWatch | None = None
    with _lock:
        watch = _watches.get(id(hub))
        if watch is None or watch.hub is not hub or system not in watch.systems:
            return
        del watch.systems[system]
        if not watch.systems:
            del _watches[id(hub)]
            closing = watch
        _apply_config_locked()
    if closing is not None:
        closing.close()


def is_monitoring(system: MonitoredSystem) -> bool:
    """True while ``system``'s hub is watched for ``system``."""
    watch = _watches.get(id(system._hub))
    return watch is not None and system in watch.systems

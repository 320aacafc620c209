"""The hub-level dispatcher: runs ready mailboxes on worker greenlets.

Design (why it is shaped like this):

* An idle actor owns no greenlet. A cell with work sits in the dispatcher's ready
  queue; worker greenlets pop cells and run a batch of up to ``throughput`` messages
  each, then put the cell back at the tail if it still has work.
* One worker normally does everything, with no greenlet switch between actors: when
  actor A tells actor B, B is appended to the ready queue and runs right after A in
  the same loop. That is what makes actor-to-actor messaging cheaper than a gevent
  ``Queue`` ping-pong between two greenlets.
* When an actor blocks inside ``receive`` (monkey-patched I/O, ``gevent.sleep``,
  an ``ask``), its worker parks on the hub. A "watchdog" hub callback is armed
  whenever a cell is queued and none is pending; the hub only gets to run it once
  every running worker is parked, and it then spawns one more worker if work is
  waiting. So a blocked actor never delays the others, and the watchdog costs
  nothing while a worker is busy (it stays armed, untouched, until the hub runs).
* A worker that has run for ``YIELD_INTERVAL`` seconds yields to the hub so that
  non-actor greenlets (web requests, I/O callbacks) stay responsive; workers exit as
  soon as the ready queue is empty.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any

import gevent
from greenlet import greenlet

if TYPE_CHECKING:
    from gevent.hub import Hub

    from gactors._cell import ActorCell
    from gactors._ref import ActorRef

__all__ = ["YIELD_INTERVAL", "Dispatcher", "Worker", "current_cell"]

YIELD_INTERVAL = 0.01
"""Seconds a worker may run before it lets other greenlets have the hub."""


class Worker(greenlet):  # type: ignore[misc]
    """A dispatcher worker greenlet; ``cell`` is the actor it is running (it stays set
    while the worker is parked inside that actor, e.g. blocked on I/O)."""

    __slots__ = ("cell", "dispatcher")

    cell: ActorCell | None
    dispatcher: Dispatcher


def current_cell() -> ActorCell | None:
    """The cell whose message is being processed in the current greenlet, if any."""
    g = greenlet.getcurrent()
    return g.cell if type(g) is Worker else None


class Dispatcher:
    """Runs the cells of one actor system on the hub of the system's thread.

    ``ready`` and ``armed`` are read by ``LocalActorRef.tell``, which inlines the
    common case of :meth:`schedule` (a call less per message on the hottest path).
    """

    __slots__ = (
        "_hub",
        "_on_fatal",
        "_run_callback",
        "_yielding",
        "armed",
        "name",
        "ready",
        "throughput",
        "workers",
    )

    def __init__(
        self,
        hub: Hub,
        throughput: int,
        on_fatal: Callable[[ActorCell, BaseException], None],
        name: str = "default",
    ) -> None:
        self.name = name
        self.throughput = throughput
        self._hub = hub
        self._run_callback = hub.loop.run_callback
        self.ready: deque[ActorCell] = deque()
        self._on_fatal = on_fatal
        self.armed = False
        self._yielding = 0
        self.workers: set[Worker] = set()

    # -- scheduling (hub thread only) ---------------------------------------------------------
    def schedule(self, cell: ActorCell) -> None:
        """Queue an idle cell that has work. Never blocks and never switches."""
        cell.scheduled = True
        self.ready.append(cell)
        if not self.armed:
            self.kick()

    def kick(self) -> None:
        """Work was queued and no watchdog is pending: start a worker if there is none,
        else arm the watchdog (it adds a worker if every running one gets parked)."""
        if not self.workers:
            self._spawn()
        else:
            self.armed = True
            self._run_callback(self._watchdog)

    def _watchdog(self) -> None:
        # Runs in the hub: every worker is parked (blocked in an actor, yielding, or
        # about to start). Add a worker unless one is only yielding and will be back.
        self.armed = False
        if self.ready and not self._yielding:
            self._spawn()
            # The new worker starts before this callback would run again; if it also
            # blocks while work is still queued, the next round adds one more.
            self.armed = True
            self._run_callback(self._watchdog)

    def _spawn(self) -> None:
        w = Worker(self._run, self._hub)
        w.cell = None
        w.dispatcher = self
        self.workers.add(w)
        self._run_callback(w.switch)

    @property
    def queued(self) -> int:
        """Cells waiting for a worker."""
        return len(self.ready)

    # -- the worker loop --------------------------------------------------------------------
    def _run(self) -> None:
        w: Any = greenlet.getcurrent()
        ready = self.ready
        throughput = range(self.throughput)
        deadline = perf_counter() + YIELD_INTERVAL
        batches = 0
        try:
            while ready:
                cell = ready.popleft()
                w.cell = cell
                try:
                    # The cell puts itself back on `ready` if it still has work.
                    cell.run_batch(throughput, ready)
                except BaseException as exc:
                    # Only fatal exceptions (KeyboardInterrupt, SystemExit, GreenletExit)
                    # escape a batch; the cell stays consistent, then they propagate.
                    self._requeue(cell, cell.has_work())
                    self._on_fatal(cell, exc)
                    raise
                batches += 1
                if not batches & 31 and perf_counter() > deadline:
                    self._yielding += 1
                    try:
                        gevent.sleep(0)
                    finally:
                        self._yielding -= 1
                    if ready and not self.armed:
                        # A watchdog that fired while we yielded did not add a worker;
                        # if we now block, the rest of the queue must not wait for us.
                        self.armed = True
                        self._run_callback(self._watchdog)
                    deadline = perf_counter() + YIELD_INTERVAL
        finally:
            w.cell = None
            self.workers.discard(w)

    def _requeue(self, cell: ActorCell, more: bool) -> None:
        if more:
            self.ready.append(cell)
        else:
            cell.scheduled = False

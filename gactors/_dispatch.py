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
  non-actor greenlets (web requests, I/O callbacks) stay responsive. A worker that
  runs out of work lingers for ``LINGER`` to twice ``LINGER`` seconds (at most one per
  dispatcher) before it ends, so request/response traffic does not create a greenlet per request.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING, Any

from greenlet import greenlet

from gactors._messages import NotInfluenceReceiveTimeout

if TYPE_CHECKING:
    from gevent.hub import Hub

    from gactors._ref import ActorRef
    from gactors._spi import CellSPI

# The handlers take the cell the system made (an ActorCell, which the dispatcher sees
# as a CellSPI): typed by what they accept, not narrowed here.
AutoHandler = Callable[[Any, Any], None]

__all__ = ["LINGER", "YIELD_INTERVAL", "Dispatcher", "Worker"]

YIELD_INTERVAL = 0.01
"""Seconds a worker may run before it lets other greenlets have the hub."""

CLOCK_EVERY = 32
"""Batches a worker runs between two looks at the clock (reading it costs a call)."""

LINGER = 0.05
"""Seconds a worker with nothing to do waits for new work before it ends."""


class Worker(greenlet):  # type: ignore[misc]
    """A dispatcher worker greenlet; ``cell`` is the actor it is running (it stays set
    while the worker is parked inside that actor, e.g. blocked on I/O)."""

    __slots__ = ("cell", "dispatcher")

    cell: CellSPI | None
    dispatcher: Dispatcher


class _ForkedWorker(Worker):
    """A worker copied into the child of ``os.fork()``: it must never run again.

    The copy may be parked anywhere inside an actor's code (a socket wait, a sleep, an
    ask) with a hub watcher that will wake it in the child. Unwinding it (throwing
    ``GreenletExit``) would run the actor's ``finally`` and ``with`` blocks in the
    child, which are side effects of the parent's work too; so instead the hub's
    attempts to wake it (``switch``/``throw``, looked up on the object by gevent's
    waiters, timeouts and the dispatcher) do nothing, and the frozen greenlet is kept
    referenced for the life of the process so that it is never collected (collecting
    a suspended greenlet throws ``GreenletExit`` into it).
    """

    __slots__ = ()

    def switch(self, *args: Any, **kwargs: Any) -> None:
        return None

    def throw(self, *args: Any, **kwargs: Any) -> None:
        return None


_FROZEN: list[Worker] = []
"""Every worker frozen by :meth:`Dispatcher.after_fork` in this process (see above)."""


def _unlink_bound_switches(frozen: list[Worker]) -> None:
    """Remove the frozen workers from the waits of gevent's linkables.

    ``Event``, ``AsyncResult``, the locks and ``Greenlet.join`` wake a waiting greenlet
    through its ``switch`` method bound before the fork: a C method that the frozen
    class cannot override, so code running on in the child (a greenlet the actor had
    spawned, an event set by the child) would resume the worker there. Finding those
    links means a walk over the heap, done only when a worker was copied mid-message.
    """
    try:
        from gevent import Greenlet
        from gevent._abstract_linkable import AbstractLinkable
    except ImportError:  # pragma: no cover - gevent moved its internals
        return
    switches = [greenlet.switch.__get__(w) for w in frozen]
    kinds = (AbstractLinkable, Greenlet)
    for obj in gc.get_objects():
        if isinstance(obj, kinds):
            for switch in switches:
                try:
                    obj.unlink(switch)
                except Exception:  # pragma: no cover - a linkable in a broken state
                    pass


class Dispatcher:
    """Runs the cells of one actor system on the hub of the system's thread.

    ``ready`` and ``armed`` are read by ``LocalActorRef.tell``, which inlines the
    common case of :meth:`schedule` (a call less per message on the hottest path).
    """

    __slots__ = (
        "_auto_get",
        "_dead_letters",
        "_hub",
        "_linger",
        "_lingering",
        "_on_fatal",
        "_parks",
        "_parks_seen",
        "_run_callback",
        "_yielding",
        "armed",
        "home",
        "name",
        "parked",
        "processed",
        "ready",
        "throughput",
        "workers",
    )

    def __init__(
        self,
        hub: Hub,
        throughput: int,
        on_fatal: Callable[[Any, BaseException], None],
        auto_received: Mapping[type, AutoHandler],
        dead_letters: ActorRef,
        name: str = "default",
    ) -> None:
        """``auto_received`` maps the types of messages the cell handles itself
        (``PoisonPill``, ``Kill``, ``Identify``, ...) to their handlers;
        ``dead_letters`` is what an actor's ``sender`` is for a message without one."""
        self.name = name
        self.throughput = throughput
        self._hub = hub
        self._run_callback = hub.loop.run_callback
        self.ready: deque[CellSPI] = deque()
        self._on_fatal = on_fatal
        self._auto_get = auto_received.get
        self._dead_letters = dead_letters
        self.armed = False
        self._yielding = 0
        self.workers: set[Worker] = set()
        self.parked: Worker | None = None
        # User messages run so far (dashboard and metrics). Each worker counts in its
        # local `done` per batch and adds it here when it parks, yields or ends; a
        # reader adds the `done` of workers blocked inside an actor (off their frames,
        # gactors._observer), so the hot loop never writes an attribute for it.
        self.processed = 0
        # The last greenlet that is not a worker seen telling in the hub's thread. A
        # greenlet never changes threads, so when it tells again, `tell` needs no
        # get_ident() call to know where it runs (a tenth of a tell from a plain
        # greenlet). It holds that greenlet until another one replaces it.
        self.home: Any = None
        # One repeating timer, unref'd so a lingering worker never keeps the loop alive.
        # It is not stopped and restarted at every park and unpark (two libev calls per
        # ask of a request/response pattern): it ticks every LINGER while a worker may
        # be parked, and a tick retires the parked worker if it did not park again
        # since the previous tick (so it retires after LINGER to 2 x LINGER of idleness).
        self._linger = hub.loop.timer(LINGER, LINGER)
        self._linger.ref = False
        self._lingering = False  # the timer is ticking
        self._parks = 0  # times a worker parked
        self._parks_seen = 0  # _parks at the previous tick

    # -- scheduling (hub thread only) ---------------------------------------------------------
    def schedule(self, cell: CellSPI) -> None:
        """Queue an idle cell that has work. Never blocks and never switches."""
        cell.scheduled = True
        self.ready.append(cell)
        if not self.armed:
            self.kick()

    def kick(self) -> None:
        """Work was queued and no watchdog is pending: wake the lingering worker, or
        start one if there is none and arm the watchdog (it adds a worker if every
        running one gets parked inside an actor).

        Waking the lingering worker arms no watchdog (a hub callback less per ask of a
        request/response pattern): every cell queued after it comes through here
        again (schedule, the inlined tell), finds no lingering worker and arms one;
        as a safety net, a worker also arms it when it starts a batch with other cells
        queued behind it (see _run).
        """
        parked = self.parked
        if parked is not None:
            # _unpark, written out (a call less per ask of a request/response pattern).
            self.parked = None
            self._run_callback(parked.switch, True)
            return
        if not self.workers:
            self._spawn()
        self.armed = True
        self._run_callback(self._watchdog)

    def _watchdog(self) -> None:
        # Runs in the hub: every worker is parked (blocked in an actor, yielding,
        # lingering, or about to start). Add one unless one is only yielding.
        self.armed = False
        if self.ready and not self._yielding:
            parked = self.parked
            if parked is not None:
                self._unpark(parked)
            else:
                self._spawn()
            # The worker starts before this callback would run again; if it also
            # blocks while work is still queued, the next round adds one more.
            self.armed = True
            self._run_callback(self._watchdog)

    def _spawn(self) -> None:
        w = Worker(self._run, self._hub)
        w.cell = None
        w.dispatcher = self
        self.workers.add(w)
        self._run_callback(w.switch)

    def _unpark(self, w: Worker) -> None:
        self.parked = None
        self._run_callback(w.switch, True)

    def _stop_linger(self) -> None:
        if self._lingering:
            self._lingering = False
            self._linger.stop()

    def _retire(self) -> None:
        # A tick of the linger timer (see __init__).
        w = self.parked
        if w is None:
            # Every worker is busy or gone: no ticks until one parks again.
            self._stop_linger()
        elif self._parks != self._parks_seen:
            # It parked again since the previous tick: not idle for LINGER yet.
            self._parks_seen = self._parks
        else:
            # Parked through a whole tick with no new work: the worker ends.
            self.parked = None
            self._stop_linger()
            w.switch(False)

    def pause(self) -> None:
        """Inside a worker running a long loop over system messages or children (a
        parent stopping or burying a huge number of children, about a thousand steps
        between two calls): let the hub and the other actors run for a moment, as
        the worker loop does between batches."""
        w = greenlet.getcurrent()
        if type(w) is Worker and w.dispatcher is self:
            self._yield_to_hub()

    def after_fork(self) -> None:
        """In the child of ``os.fork()``: nothing this dispatcher had queued or was
        running may run here (docs/gunicorn.md). Every worker except the one that forked
        (it goes on with the child's own code) is frozen where it stands."""
        self.ready.clear()
        self.parked = None
        self.home = None
        # The watchdog may still be pending: armed, it adds no worker (nothing is ready).
        self.armed = True
        try:
            self._stop_linger()
        except Exception:  # pragma: no cover - depends on the loop's state after fork
            pass
        current = greenlet.getcurrent()
        frozen = []
        for w in list(self.workers):
            if w is not current and not w.dead:
                w.__class__ = _ForkedWorker
                frozen.append(w)
                self.workers.discard(w)
        if frozen:
            _FROZEN.extend(frozen)
            _unlink_bound_switches(frozen)

    @property
    def queued(self) -> int:
        """Cells waiting for a worker."""
        return len(self.ready)

    # -- the worker loop --------------------------------------------------------------------
    def _run(self) -> None:
        """A worker: pop a ready cell, run one batch of it, repeat.

        A batch is the mailbox processing of Akka's ``Mailbox.run``: the cell's system
        messages first, then up to ``throughput`` user messages, checking the system
        queue again after each one, so that system messages always overtake ordinary
        ones. What a system message or a failure does is the cell's business
        (``process_system``, ``user_failure``); this loop only decides what runs next.
        It is written out in one function, without a call per batch, because it is the
        hottest code of the runtime. ``cell`` is the local the hub monitor reads.
        """
        w: Any = greenlet.getcurrent()
        ready = self.ready
        throughput = self.throughput
        auto_get = self._auto_get
        dead = self._dead_letters
        # The auto-received handler of the last message's type (a table that never
        # changes): consistent from the start, None is no message and no such type.
        last_type: type = type(None)
        last_handler: AutoHandler | None = None
        deadline = perf_counter() + YIELD_INTERVAL
        # Batches until the next look at the clock (a countdown stays a small int).
        countdown = CLOCK_EVERY
        hub_switch = self._hub.switch
        done = 0  # messages run since the last flush into self.processed
        after_break = throughput + 1  # messages run = after_break - left, at a break
        try:
            while True:
                if not ready:
                    self.processed += done
                    done = 0
                    # Linger instead of ending at once: a request/response pattern
                    # (an ask, a web request) would otherwise pay for a new greenlet
                    # every time. Idle actors still own no greenlet, and at most one
                    # worker lingers.
                    if self.parked is not None:
                        break
                    self.parked = w
                    self._parks += 1
                    if not self._lingering:
                        self._lingering = True
                        self._linger.start(self._retire)
                    if not hub_switch():
                        break
                    continue
                countdown -= 1
                if countdown == 0:
                    countdown = CLOCK_EVERY
                    if perf_counter() > deadline:
                        self.processed += done
                        done = 0
                        self._yield_to_hub()
                        deadline = perf_counter() + YIELD_INTERVAL
                        continue  # the queue may have been emptied meanwhile
                cell = ready.popleft()
                if ready and not self.armed:
                    # More work waits behind this batch: should the batch block, the
                    # watchdog adds a worker (kick arms none when it wakes this one;
                    # cells queued after that arm it in kick, this is a safety net).
                    self.armed = True
                    self._run_callback(self._watchdog)
                w.cell = cell
                try:
                    # cell.sysq is read afresh each time: a drained queue is replaced by
                    # a shared empty one, and a new message by a new list.
                    if cell.sysq:
                        cell.process_system()
                    if cell.suspend_count or cell.dead:
                        if cell.sysq:
                            ready.append(cell)
                        else:
                            cell.scheduled = False
                        continue
                    mailbox = cell.mailbox
                    senders = cell.senders  # in step with the mailbox
                    influenced = idle = False
                    rt = cell.rt_seconds is not None
                    left = throughput if mailbox else 0
                    # The instance only changes when a system message is run (a
                    # restart): read again after process_system below.
                    actor: Any = cell.actor
                    while left:
                        message = cell.current_message = mailbox.popleft()
                        sender = cell.sender = senders.popleft()
                        try:
                            # The actor's `sender` is a plain attribute: reading a property
                            # would cost a call per message in user code. (No actor here
                            # fails like any other error of the actor.)
                            actor.sender = sender if sender is not None else dead
                            if type(message) is not last_type:  # most messages repeat a type
                                last_type = type(message)
                                last_handler = auto_get(last_type)
                            if last_handler is None:
                                behavior = cell.behavior
                                if behavior is None:  # receive, bound on first use
                                    behavior = cell.behavior = actor.receive
                                behavior(message)
                            else:
                                last_handler(cell, message)
                        except BaseException as exc:
                            cell.user_failure(exc, message, sender)  # re-raises fatal ones
                            done += after_break - left
                            break
                        if rt and not isinstance(message, NotInfluenceReceiveTimeout):
                            influenced = True
                        if cell.sysq:
                            cell.process_system()
                            if cell.suspend_count or cell.dead:
                                done += after_break - left
                                break
                            actor = cell.actor
                        if not mailbox:
                            # The common end of a batch. Counted here and in the other
                            # breaks (not per message): `left` was not decremented yet.
                            # No message and no system message is left (both were just
                            # tested): unless a receive timeout is to be re-armed, the
                            # cell goes idle without the has_work() test below.
                            done += after_break - left
                            idle = not influenced
                            break
                        left -= 1
                    else:
                        # A full batch (the mailbox still has messages), or none at all.
                        if mailbox:
                            done += throughput
                    cell.current_message = None
                    if idle:
                        cell.scheduled = False
                        continue
                    if influenced and cell.rt_seconds is not None:
                        cell.check_receive_timeout()
                    # cell.has_work(), written out (a call per batch saved).
                    if cell.sysq or (cell.mailbox and not cell.suspend_count and not cell.dead):
                        ready.append(cell)
                    else:
                        cell.scheduled = False
                except BaseException as exc:
                    # Only fatal exceptions (KeyboardInterrupt, SystemExit, GreenletExit)
                    # escape a batch; the cell stays consistent, then they propagate.
                    cell.current_message = None
                    self._requeue(cell, cell.has_work())
                    self._on_fatal(cell, exc)
                    raise
        finally:
            self.processed += done
            w.cell = None
            if self.parked is w:
                self.parked = None
                self._stop_linger()
            self.workers.discard(w)

    def _yield_to_hub(self) -> None:
        # Let other greenlets (web requests, I/O callbacks) have the hub for a moment.
        # Through a zero-length timer, not sleep(0): gevent runs up to 50 callbacks
        # (sleep(0) is one) before it looks at the clock, polls I/O and fires timers,
        # so a worker yielding every YIELD_INTERVAL with sleep(0) kept them waiting
        # for half a second at a time (seen while stopping 200,000 actors).
        self._yielding += 1
        hub = self._hub
        timer = hub.loop.timer(0.0)
        try:
            hub.wait(timer)
        finally:
            timer.close()
            self._yielding -= 1
        if self.ready and not self.armed:
            # A watchdog that fired while we yielded did not add a worker; if we now
            # block, the rest of the queue must not wait for us.
            self.armed = True
            self._run_callback(self._watchdog)

    def _requeue(self, cell: CellSPI, more: bool) -> None:
        if more:
            self.ready.append(cell)
        else:
            cell.scheduled = False

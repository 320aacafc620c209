"""The lingering worker (gactors/_dispatch.py): woken without a watchdog of its own, it
still never lets a blocked actor hold up work queued behind it, and it retires after
LINGER to 2 x LINGER seconds without work."""

from __future__ import annotations

import time
from typing import Any

import gevent
import gevent.event
from _actors import Echo

from gactors import Actor, ActorSystem, Props
from gactors._dispatch import LINGER


class Blocker(Actor):
    def __init__(self, gate: gevent.event.Event, entered: gevent.event.Event) -> None:
        self.gate = gate
        self.entered = entered

    def receive(self, message: Any) -> None:
        self.entered.set()
        self.gate.wait()  # parks this actor's worker on the hub
        self.sender.tell("released")


def _lingering(system: ActorSystem) -> Any:
    d = system.dispatcher
    deadline = time.monotonic() + 2
    while d.parked is None:
        assert time.monotonic() < deadline, "no worker lingers"
        gevent.sleep(0.001)
    return d.parked


def test_a_woken_lingering_worker_that_blocks_does_not_hold_up_the_cell_behind_it(
    system: ActorSystem,
) -> None:
    gate, entered = gevent.event.Event(), gevent.event.Event()
    blocker = system.actor_of(Props(Blocker, gate, entered))
    echo = system.actor_of(Props(Echo))
    assert echo.ask("warm-up", timeout=5) == "warm-up"
    worker = _lingering(system)
    # Both cells are queued before the lingering worker runs: it takes the blocker
    # first and parks inside it; the echo behind it must be answered meanwhile.
    released = blocker.ask("block", timeout=5, block=False)
    answer = echo.ask("ping", timeout=5, block=False)
    assert answer.get(3) == "ping"
    assert entered.is_set() and not released.done()
    assert worker.cell is not None  # the woken worker is the one blocked in the actor
    gate.set()
    assert released.get(3) == "released"


def test_the_lingering_worker_retires_after_one_to_two_linger_times(system: ActorSystem) -> None:
    echo = system.actor_of(Props(Echo))
    assert echo.ask("x", timeout=5) == "x"
    worker = _lingering(system)
    t0 = time.monotonic()
    while not worker.dead:
        assert time.monotonic() - t0 < 2 * LINGER + 0.5, "the lingering worker never retired"
        gevent.sleep(0.005)
    assert time.monotonic() - t0 >= LINGER * 0.9  # libev may round a little
    assert system.dispatcher.parked is None
    # Work after the retirement starts a new worker.
    assert echo.ask("y", timeout=5) == "y"


def test_a_worker_kept_busy_by_asks_is_not_retired_under_them(system: ActorSystem) -> None:
    echo = system.actor_of(Props(Echo))
    assert echo.ask(0, timeout=5) == 0
    worker = _lingering(system)
    t0 = time.monotonic()
    i = 0
    # Asks spaced well below LINGER for 3 x LINGER: the same worker serves them all.
    while time.monotonic() - t0 < 3 * LINGER:
        i += 1
        assert echo.ask(i, timeout=5) == i
        gevent.sleep(LINGER / 5)
    assert not worker.dead
    assert system.dispatcher.workers == {worker}

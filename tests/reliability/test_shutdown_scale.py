"""Stopping a very large number of actors keeps the hub responsive and memory flat.

Terminating 200,000 actors used to stall the hub for more than a second (the
/user guardian handled its children's death notifications in one go, popping from
the head of a list, and the workers' ``sleep(0)`` yields did not let gevent poll I/O
or fire timers) and to build a path object for every dying child.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Iterator

import gevent
import pytest

from gactors import Actor, ActorSystem, Props

N = 50_000


class Idle(Actor):
    def receive(self, message: object) -> None:
        pass


@pytest.fixture
def no_gc() -> Iterator[None]:
    # CPython's full collection walks the whole heap (a million objects here) in one
    # pause that no library can split; it would only add noise to what is measured.
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.timeout(120)
def test_terminating_many_actors_keeps_the_hub_responsive_and_memory_flat(no_gc: None) -> None:
    system = ActorSystem("many", {"shutdown_timeout": 60})
    for _ in range(N):
        system.actor_of(Props(Idle))
    gevent.sleep(0.2)  # every actor is created

    longest = [0.0]
    running = [True]

    def ticker() -> None:
        # A timer-driven greenlet, like a web server waiting on its sockets.
        last = time.perf_counter()
        while running[0]:
            gevent.sleep(0.002)
            now = time.perf_counter()
            longest[0] = max(longest[0], now - last)
            last = now

    tick = gevent.spawn(ticker)
    gevent.sleep(0.05)
    longest[0] = 0.0
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        system.terminate()
        assert system.await_termination(60)
        gevent.sleep(0.01)  # the ticker's last gap
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        running[0] = False
        tick.join(5)
    growth_per_actor = (peak - base) / N
    # Generous bounds: measured about 0.03 s and 150 bytes after the fix, against
    # more than a second and 330 bytes before it.
    assert longest[0] < 0.5, f"the hub was stalled for {longest[0]:.3f} s"
    assert growth_per_actor < 250, f"shutdown allocated {growth_per_actor:.0f} bytes per actor"

"""Two core numbers of gactors, standalone: ``python benchmarks/core_numbers.py``.

1. messages per second for one actor receiving 1,000,000 tells (time from the first
   tell until the actor processed the last one);
2. bytes per idle actor for 100,000 actors: RSS growth after ``gc.collect()``, divided
   by the number of actors (Linux ``/proc/self/statm``; the list holding the refs is
   included).

Options: ``--messages N`` and ``--actors N`` change the counts.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import argparse
import gc
import os
import time
from typing import Any

import gevent.event

from gactors import Actor, ActorSystem, Props


class Counter(Actor):
    """Counts messages and sets ``done`` at the last expected one."""

    def __init__(self, n: int, done: gevent.event.Event) -> None:
        self.left = n
        self.done = done

    def receive(self, message: Any) -> None:
        self.left -= 1
        if self.left == 0:
            self.done.set()


class Idle(Actor):
    """Does nothing but report that it started."""

    def __init__(self, started: list[Any]) -> None:
        self.started = started

    def pre_start(self) -> None:
        self.started[0] -= 1
        if self.started[0] == 0:
            self.started[1].set()


def rss() -> int:
    """Resident set size of this process in bytes (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def messages_per_second(n: int) -> float:
    """One actor receives ``n`` tells; returns messages per second."""
    with ActorSystem("bench") as system:
        done = gevent.event.Event()
        ref = system.actor_of(Props(Counter, n, done))
        t0 = time.perf_counter()
        for i in range(n):
            ref.tell(i)
        done.wait()
        return n / (time.perf_counter() - t0)


def bytes_per_idle_actor(n: int) -> float:
    """Create ``n`` idle actors; returns RSS growth per actor after a full gc."""
    with ActorSystem("bench") as system:
        started = [n, gevent.event.Event()]
        props = Props(Idle, started)
        gc.collect()
        before = rss()
        refs = [system.actor_of(props) for _ in range(n)]
        started[1].wait()
        gc.collect()
        grown = rss() - before
        del refs
        return grown / n


def main() -> None:
    """Print both numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--actors", type=int, default=100_000)
    args = parser.parse_args()
    print(f"tell: {messages_per_second(args.messages):,.0f} messages/s ({args.messages:,} tells)")
    print(
        f"memory: {bytes_per_idle_actor(args.actors):,.0f} bytes per idle actor "
        f"({args.actors:,} actors, RSS after gc.collect())"
    )


if __name__ == "__main__":
    main()

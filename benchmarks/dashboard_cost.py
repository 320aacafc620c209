"""What an open dashboard page costs the actors: tell throughput with and without it.

    python benchmarks/dashboard_cost.py [--rounds 10] [--messages 2000000] [--actors 1000]

One process, one actor system with ``--actors`` idle actors (the tree the dashboard
walks) and one counting actor. A *sample* sends ``--messages`` tells to the counter
from a plain greenlet, in chunks of 1,000 with a ``gevent.sleep(0)`` between chunks (as
a server's request greenlets would, so that other greenlets get the hub on time), and
measures messages per second until the counter processed the last one.

"page open" samples run while a poller greenlet in the same process requests
``/api/state`` over HTTP from the dashboard served by gevent's WSGI server on loopback,
at the page's rate (``POLL_INTERVAL``, with the same ``open`` and ``limit`` parameters as
a freshly opened page). "no page" samples run with the dashboard app created but nobody
polling. The two kinds are interleaved (ABBA) in one run, so that drift of the machine
affects both alike; the cost is ``1 - median(page open) / median(no page)``, both per
second of wall time and per second of the process's CPU time (the steadier one on a
shared machine).
Target (issue 17): under 2 %.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402  (the patch must come first)
import argparse
import http.client
import json
import statistics
import sys
import time
from typing import Any

import gevent
from gevent.event import Event
from gevent.pywsgi import WSGIServer

from gactors import Actor, ActorSystem, Props
from gactors.contrib.dashboard import POLL_INTERVAL, DashboardApp

CHUNK = 1_000


class Counter(Actor):
    """Counts messages; sets ``done`` at the last expected one."""

    def __init__(self) -> None:
        self.left = 0
        self.done: Event | None = None

    def receive(self, message: Any) -> None:
        if type(message) is tuple:  # ("expect", n, event)
            self.left, self.done = message[1], message[2]
            return
        self.left -= 1
        if self.left == 0 and self.done is not None:
            self.done.set()


def sample(counter: Any, n: int) -> tuple[float, float]:
    """Messages per second of wall time and of this process's CPU time, for ``n`` tells
    to ``counter`` sent in chunks."""
    done = Event()
    counter.tell(("expect", n, done))
    c0 = time.process_time()
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        for i in range(min(CHUNK, n - sent)):
            counter.tell(i)
        sent += CHUNK
        gevent.sleep(0)
    done.wait()
    wall = time.perf_counter() - t0
    return n / wall, n / (time.process_time() - c0)


def timed(app: Any, cpu: list[float]) -> Any:
    """``app``, recording the CPU time of each call in ``cpu`` (the dashboard answers
    without a greenlet switch, so nothing else runs meanwhile)."""

    def call(environ: Any, start_response: Any) -> Any:
        c0 = time.process_time()
        try:
            return app(environ, start_response)
        finally:
            cpu.append(time.process_time() - c0)

    return call


def poller(port: int, stop: Event, polls: list[int]) -> None:
    """Poll ``/api/state`` as an open page does, until ``stop`` is set."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    while not stop.is_set():
        conn.request("GET", "/api/state?open=%2F&open=%2Fuser&limit=100")
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200, body[:200]
        polls[0] += 1
        stop.wait(POLL_INTERVAL)
    conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="pairs of samples (default 10)")
    parser.add_argument("--messages", type=int, default=2_000_000, help="tells per sample")
    parser.add_argument("--actors", type=int, default=1_000, help="idle actors in the tree")
    parser.add_argument("--json", metavar="PATH", help="also write the samples as JSON")
    args = parser.parse_args(argv)

    with ActorSystem("bench") as system:
        for _ in range(args.actors):
            system.actor_of(Props(Actor))
        counter = system.actor_of(Props(Counter))
        app = DashboardApp(system)
        poll_cpu: list[float] = []
        server = WSGIServer(("127.0.0.1", 0), timed(app, poll_cpu), log=None)
        server.start()
        sample(counter, args.messages // 10)  # warm-up
        off: list[tuple[float, float]] = []
        on: list[tuple[float, float]] = []
        polls = [0]
        for r in range(args.rounds):
            order = ("off", "on") if r % 2 == 0 else ("on", "off")  # ABBA
            for kind in order:
                if kind == "off":
                    off.append(sample(counter, args.messages))
                    continue
                stop = Event()
                g = gevent.spawn(poller, server.server_port, stop, polls)
                try:
                    on.append(sample(counter, args.messages))
                finally:
                    stop.set()
                    g.join(10)
        server.stop()
    polled_seconds = sum(args.messages / wall for wall, _ in on)
    print(f"tell throughput, {args.rounds} interleaved pairs of {args.messages:,} tells")
    costs = []
    for i, clock in enumerate(("wall", "CPU")):
        a = [r[i] for r in off]
        b = [r[i] for r in on]
        m_off, m_on = statistics.median(a), statistics.median(b)
        costs.append(1 - m_on / m_off)
        print(f"  per {clock} second:")
        print(
            f"    no page:   median {m_off:12,.0f} msgs/s  (min {min(a):,.0f}, max {max(a):,.0f})"
        )
        print(f"    page open: median {m_on:12,.0f} msgs/s  (min {min(b):,.0f}, max {max(b):,.0f})")
        print(f"    cost of an open page: {costs[-1] * 100:+.2f} % (target: under 2 %)")
    print(f"  polls of /api/state while open: {polls[0]} in {polled_seconds:.1f} s")
    per_poll = statistics.median(poll_cpu)
    print(
        f"  CPU per answer of api/state (the direct figure): median {per_poll * 1000:.2f} ms, i.e. "
        f"{per_poll / POLL_INTERVAL * 100:.2f} % of one core at one poll per "
        f"{POLL_INTERVAL:g} s ({args.actors:,} idle actors)"
    )
    print(
        "  (CPU time is the steadier figure on a loaded machine: other processes stretch "
        "wall time, and with it the number of polls per message)"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "off": off,
                    "on": on,
                    "cost_wall": costs[0],
                    "cost_cpu": costs[1],
                    "polls": polls[0],
                    "cpu_per_poll": poll_cpu,
                    "args": vars(args),
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

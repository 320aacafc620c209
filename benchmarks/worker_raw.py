"""Raw gevent limits: what the primitives under every actor library cost.

Run as ``python worker_raw.py WORKLOAD N`` in a fresh interpreter; prints one JSON line.
These are not actor systems: they bound what a greenlet-based actor library can reach
when it adds nothing on top of the primitive it is built on.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import argparse
import collections
import time

import gevent
import gevent.event
import gevent.queue
import greenlet
from _worker_common import Result, rate_result, run_worker


def queue_oneway(args: argparse.Namespace) -> Result:
    """One producer puts N items on a ``gevent.queue.Queue``; one greenlet gets them."""
    n = args.n
    q: gevent.queue.Queue = gevent.queue.Queue()

    def consume() -> None:
        get = q.get
        for _ in range(n):
            get()

    consumer = gevent.spawn(consume)
    gevent.sleep(0)  # let the consumer start and block on the empty queue
    t0 = time.perf_counter()
    put = q.put
    for i in range(n):
        put(i)
    consumer.join()
    return rate_result(n, time.perf_counter() - t0)


def queue_ping_pong(args: argparse.Namespace) -> Result:
    """Two greenlets bounce a token through two ``gevent.queue.Queue`` objects N times."""
    n = args.n
    ping: gevent.queue.Queue = gevent.queue.Queue()
    pong: gevent.queue.Queue = gevent.queue.Queue()

    def ponger() -> None:
        for _ in range(n):
            pong.put(ping.get())

    def pinger() -> None:
        for i in range(n):
            ping.put(i)
            pong.get()

    p = gevent.spawn(ponger)
    gevent.sleep(0)
    t0 = time.perf_counter()
    gevent.spawn(pinger).join()
    seconds = time.perf_counter() - t0
    p.join()
    return rate_result(n, seconds)


def switch(args: argparse.Namespace) -> Result:
    """``greenlet.switch`` round trips between the caller and an echo greenlet."""
    n = args.n
    main = greenlet.getcurrent()

    def echo(value: int) -> None:
        while True:
            value = main.switch(value)

    g = greenlet.greenlet(echo)
    g.switch(0)
    t0 = time.perf_counter()
    sw = g.switch
    for i in range(n):
        sw(i)
    seconds = time.perf_counter() - t0
    g.throw(greenlet.GreenletExit)
    return rate_result(n, seconds)


def deque_call(args: argparse.Namespace) -> Result:
    """Append N items to a ``collections.deque``, then pop each and call a handler.

    The cheapest possible mailbox plus dispatch in pure Python: the ceiling for a
    single-threaded dispatcher.
    """
    n = args.n
    box: collections.deque[int] = collections.deque()
    seen = [0]

    def handle(message: int) -> None:
        seen[0] += 1

    t0 = time.perf_counter()
    append = box.append
    for i in range(n):
        append(i)
    popleft = box.popleft
    while box:
        handle(popleft())
    seconds = time.perf_counter() - t0
    assert seen[0] == n
    return rate_result(n, seconds)


def sleep(args: argparse.Namespace) -> Result:
    """N waiting greenlets are released at once; each calls the patched ``time.sleep``.

    Like the actors of the ``blocking`` workload, the greenlets exist (and the hub runs)
    before the clock starts; the wall time runs until the last one finished sleeping.
    """
    n = args.n
    delay = (args.per or 50) / 1000.0
    go = gevent.event.Event()

    def sleeper() -> None:
        go.wait()
        time.sleep(delay)

    greenlets = [gevent.spawn(sleeper) for _ in range(n)]
    gevent.sleep(0)
    t0 = time.perf_counter()
    go.set()
    gevent.joinall(greenlets)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "count": n, "metrics": {"seconds": seconds}}


WORKLOADS = {
    "queue_oneway": queue_oneway,
    "queue_ping_pong": queue_ping_pong,
    "switch": switch,
    "deque_call": deque_call,
    "sleep": sleep,
}


def _versions() -> dict[str, str]:
    return {"gevent": gevent.__version__, "greenlet": greenlet.__version__}


if __name__ == "__main__":
    run_worker("raw", WORKLOADS, _versions)

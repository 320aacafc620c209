"""Raw gevent limits: what the primitives under every actor library cost.

Run as ``python worker_raw.py WORKLOAD N`` in a fresh interpreter; prints one JSON line.
These are not actor systems. Two kinds of reference: the gevent-primitive baselines
(``queue_*``, ``greenlet_kill``, ``greenlet_restart``, ``sleep``: the same job done with
the gevent primitive an actor library would be built on) and the physical floors
(``switch``, ``deque_call``: the cheapest step the interpreter can take at all).
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import argparse
import collections
import time
from typing import Any

import gevent
import gevent.event
import gevent.queue
import greenlet
from _worker_common import Countdown, Result, latency_result, rate_result, run_worker


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


def queue_ask(args: argparse.Namespace) -> Result:
    """N sequential asks the plain-gevent way: a server greenlet gets ``(message,
    AsyncResult)`` from a ``gevent.queue.Queue`` and sets the result; the asker waits on
    it. The gevent-primitive baseline of the ``ask`` workload (no timeout armed: an
    actor ask also pays for one)."""
    n = args.n
    q: gevent.queue.Queue = gevent.queue.Queue()

    def serve() -> None:
        get = q.get
        while True:
            message, result = get()
            if message is None:
                return
            result.set(message)

    server = gevent.spawn(serve)
    new_result = gevent.event.AsyncResult
    put = q.put

    def loop() -> float:
        t0 = time.perf_counter()
        for i in range(n):
            r = new_result()
            put((i, r))
            r.get()
        return time.perf_counter() - t0

    seconds = gevent.spawn(loop).get()
    q.put((None, None))
    server.join()
    return rate_result(n, seconds)


def greenlet_kill(args: argparse.Namespace) -> Result:
    """N greenlets wait (as idle actors would); each is killed (``Greenlet.kill`` without
    blocking), time until each ran its ``finally`` (the ``post_stop`` analogue). The
    gevent-primitive baseline of the ``stop`` workload."""
    n = args.n
    done = Countdown(n, gevent.event.Event())
    park = gevent.get_hub().switch

    def idle() -> None:
        try:
            park()  # parked on the hub with no watcher (one shared Event would make
            # each kill an O(N) unlink from its waiter list)
        finally:
            done.hit()

    greenlets = [gevent.spawn(idle) for _ in range(n)]
    gevent.sleep(0)  # every greenlet started and waits
    t0 = time.perf_counter()
    for g in greenlets:
        g.kill(block=False)
    done.wait()
    return rate_result(n, time.perf_counter() - t0)


def greenlet_restart(args: argparse.Namespace) -> Result:
    """N cycles: a failing message ends the greenlet serving a ``Queue`` (fresh state
    each incarnation) after it spawned the next one, then an ask (``AsyncResult``) for
    a ping answers the new incarnation. Latency per cycle: the gevent-primitive
    baseline of the ``restart`` workload (no supervisor greenlet: the least switching
    a respawn can take)."""
    n = args.n
    q: gevent.queue.Queue = gevent.queue.Queue()
    new_result = gevent.event.AsyncResult
    spawn = gevent.spawn

    def serve(incarnation: int) -> None:
        get = q.get
        while True:
            message, result = get()
            if message is None:
                return
            try:
                if message == "boom":
                    raise RuntimeError("boom")
                result.set(incarnation)
            except RuntimeError:
                spawn(serve, incarnation + 1)  # the next incarnation; this one ends
                return

    spawn(serve, 1)
    first = new_result()
    q.put(("ping", first))
    last = first.get()
    samples: list[float] = []
    perf = time.perf_counter
    for _ in range(n):
        t0 = perf()
        q.put(("boom", None))
        r = new_result()
        q.put(("ping", r))
        incarnation = r.get()
        samples.append(perf() - t0)
        if incarnation != last + 1:
            raise AssertionError(f"expected incarnation {last + 1}, got {incarnation}")
        last = incarnation
    q.put((None, None))
    gevent.sleep(0)
    return latency_result(samples)


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


class _FloorCell:
    """The state a minimal actor needs for a tell: a mailbox, the senders in step, a
    scheduled flag."""

    __slots__ = ("mailbox", "scheduled", "senders")

    def __init__(self) -> None:
        self.mailbox: collections.deque[Any] = collections.deque()
        self.senders: collections.deque[Any] = collections.deque()
        self.scheduled = False


class _FloorRef:
    """The least a Python actor ref's ``tell`` can do and still keep each message's
    sender: reject None, append the message and its sender, mark the cell scheduled."""

    __slots__ = ("cell",)

    def __init__(self, cell: _FloorCell) -> None:
        self.cell = cell

    def tell(self, message: Any, sender: Any = None) -> None:
        if message is None:
            raise ValueError("None is not a message")
        cell = self.cell
        cell.mailbox.append(message)
        cell.senders.append(sender)
        if not cell.scheduled:
            cell.scheduled = True


class _FloorSink:
    """The benchmark's counting actor, without a framework around it."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.sender: Any = None

    def receive(self, message: Any) -> None:
        self.left -= 1
        if self.left == 0:
            self.sender = "done"


def sender_tell(args: argparse.Namespace) -> Result:
    """The pure-Python floor of an actor ``tell``: N tells through :class:`_FloorRef`,
    then the drain (pop the message and its sender, set the actor's ``sender``, call
    its ``receive``). No thread check, no implicit sender, no system messages, no
    supervision, no scheduler: what any Python actor library that keeps senders pays
    at least, per message."""
    n = args.n
    cell = _FloorCell()
    send = _FloorRef(cell).tell
    actor = _FloorSink(n)
    t0 = time.perf_counter()
    for i in range(n):
        send(i)
    mailbox, senders = cell.mailbox, cell.senders
    receive = actor.receive
    while mailbox:
        message = mailbox.popleft()
        actor.sender = senders.popleft()
        receive(message)
    seconds = time.perf_counter() - t0
    assert actor.left == 0
    return rate_result(n, seconds)


class _CheckedCell:
    """:class:`_FloorCell` plus the state the actor model's checks read: the greenlet
    known to tell from the cell's thread, the open flag, the system-message queue."""

    __slots__ = ("home", "mailbox", "open", "scheduled", "senders", "sysq")

    def __init__(self) -> None:
        self.mailbox: collections.deque[Any] = collections.deque()
        self.senders: collections.deque[Any] = collections.deque()
        self.scheduled = False
        self.open = True
        self.home: Any = None
        self.sysq: list[Any] | None = None


_IMPLICIT = object()


class _CheckedRef:
    """The least a tell does with the checks an Akka-style runtime cannot skip: the
    implicit sender (is the caller an actor? one ``getcurrent()`` and one identity
    test, the cached answer for a greenlet of the cell's thread), a mailbox that may
    be closed (dead letters), and the schedule flag."""

    __slots__ = ("cell",)

    def __init__(self, cell: _CheckedCell) -> None:
        self.cell = cell

    def tell(self, message: Any, sender: Any = _IMPLICIT) -> None:
        if message is None:
            raise ValueError("None is not a message")
        cell = self.cell
        if sender is _IMPLICIT:
            g = greenlet.getcurrent()
            if g is cell.home:
                snd = None
            else:  # first tell from this greenlet (the thread test would go here)
                cell.home = g
                snd = None
        else:
            snd = sender
        if cell.open:
            cell.mailbox.append(message)
            cell.senders.append(snd)
            if not cell.scheduled:
                cell.scheduled = True
        else:
            raise RuntimeError("closed: a dead letter")


def checked_tell(args: argparse.Namespace) -> Result:
    """:func:`sender_tell` plus the per-message checks an Akka-style runtime needs:
    the tell of :class:`_CheckedRef`, and a drain that bounds each batch
    (``throughput``), tests the message's type for the auto-received ones
    (``PoisonPill``, ``Kill``, ...) and the system queue after each message (system
    messages overtake), and gives the actor dead letters as the sender of a message
    without one. Nothing else of a runtime (no supervision, no scheduler, no failure
    handling): the floor of a conformant pure-Python tell."""
    n = args.n
    cell = _CheckedCell()
    send = _CheckedRef(cell).tell
    actor = _FloorSink(n)
    dead = object()
    auto: dict[type, Any] = {}
    throughput = 300
    t0 = time.perf_counter()
    for i in range(n):
        send(i)
    mailbox, senders = cell.mailbox, cell.senders
    receive = actor.receive
    last_type: type = type(None)
    last_handler = None
    while mailbox:
        left = throughput
        while left:
            message = mailbox.popleft()
            sender = senders.popleft()
            actor.sender = sender if sender is not None else dead
            if type(message) is not last_type:
                last_type = type(message)
                last_handler = auto.get(last_type)
            if last_handler is None:
                receive(message)
            else:
                last_handler(message)
            if cell.sysq:
                raise RuntimeError("no system messages in this benchmark")
            if not mailbox:
                break
            left -= 1
    seconds = time.perf_counter() - t0
    assert actor.left == 0
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
    "queue_ask": queue_ask,
    "greenlet_kill": greenlet_kill,
    "greenlet_restart": greenlet_restart,
    "switch": switch,
    "deque_call": deque_call,
    "sender_tell": sender_tell,
    "checked_tell": checked_tell,
    "sleep": sleep,
}


def _versions() -> dict[str, str]:
    return {"gevent": gevent.__version__, "greenlet": greenlet.__version__}


if __name__ == "__main__":
    run_worker("raw", WORKLOADS, _versions)

"""Pykka peers: 4.x ``ThreadingActor`` under ``patch_all()`` and 2.0.3 ``GeventActor``.

Run as ``python worker_pykka.py WORKLOAD N [--per K] --impl pykka4|pykka2`` inside the
peer's own virtual environment; prints one JSON line. Under ``gevent.monkey.patch_all()``
a ``ThreadingActor``'s thread is a greenlet and its inbox a gevent-aware queue.

Pykka has no supervision: an actor that raises in ``on_receive`` stops (or, for an
ask, returns the exception to the caller), so the ``restart`` workload is n/a here.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import argparse
import sys
import time
import warnings
from typing import Any

import gevent
import gevent.event
import pykka
from _worker_common import Countdown, Result, rate_result, rss_bytes, run_worker, settle

IMPL = "pykka2" if "pykka2" in sys.argv else "pykka4"
if IMPL == "pykka2":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pykka.gevent

    Base: Any = pykka.gevent.GeventActor
else:

    class Base(pykka.ThreadingActor):  # type: ignore[no-redef]
        """``ThreadingActor`` with daemon threads.

        Non-daemon threads make CPython maintain a shutdown lock per live thread, which
        is linear in the number of threads at every thread start (quadratic spawns).
        Daemon threads are a documented Pykka option and give Pykka its best showing.
        """

        use_daemon_thread = True


def countdown(n: int) -> Countdown:
    """A countdown over a fresh ``gevent.event.Event``."""
    return Countdown(n, gevent.event.Event())


class Sink(Base):  # type: ignore[misc,valid-type]
    """Counts messages; hits ``done`` at the last expected one."""

    def __init__(self, n: int, started: Countdown, done: Countdown) -> None:
        super().__init__()
        self.left = n
        self.started = started
        self.done = done

    def on_start(self) -> None:
        self.started.hit()

    def on_receive(self, message: Any) -> None:
        self.left -= 1
        if self.left == 0:
            self.done.hit()


class Ponger(Base):  # type: ignore[misc,valid-type]
    """Answers every ``"ping"`` with ``"pong"`` to its peer (Pykka has no sender)."""

    def __init__(self) -> None:
        super().__init__()
        self.peer: Any = None

    def on_receive(self, message: Any) -> None:
        if message == "ping":
            self.peer.tell("pong")
        else:
            self.peer = message[1]


class Pinger(Base):  # type: ignore[misc,valid-type]
    """Sends ``"ping"`` and waits for ``"pong"``, N times; then sets ``done``."""

    def __init__(self, ponger: Any, n: int, done: Countdown) -> None:
        super().__init__()
        self.ponger = ponger
        self.left = n
        self.done = done

    def on_receive(self, message: Any) -> None:
        if message == "pong":
            self.left -= 1
            if self.left == 0:
                self.done.hit()
                return
        self.ponger.tell("ping")


class Echo(Base):  # type: ignore[misc,valid-type]
    """Replies to every ask with the message itself."""

    def on_receive(self, message: Any) -> Any:
        return message


class Idle(Base):  # type: ignore[misc,valid-type]
    """Does nothing; reports start and stop."""

    def __init__(self, started: Countdown, stopped: Countdown) -> None:
        super().__init__()
        self.started = started
        self.stopped = stopped

    def on_start(self) -> None:
        self.started.hit()

    def on_stop(self) -> None:
        self.stopped.hit()


class Sleeper(Base):  # type: ignore[misc,valid-type]
    """Calls the monkey-patched ``time.sleep`` for every message, then reports."""

    def __init__(self, delay: float, started: Countdown, done: Countdown) -> None:
        super().__init__()
        self.delay = delay
        self.started = started
        self.done = done

    def on_start(self) -> None:
        self.started.hit()

    def on_receive(self, message: Any) -> None:
        time.sleep(self.delay)
        self.done.hit()


def tell(args: argparse.Namespace) -> Result:
    """N tells to one actor; time until the last one was processed."""
    n = args.n
    started, done = countdown(1), countdown(1)
    ref = Sink.start(n, started, done)
    started.wait()
    t0 = time.perf_counter()
    send = ref.tell
    for i in range(n):
        send(i)
    done.wait()
    seconds = time.perf_counter() - t0
    pykka.ActorRegistry.stop_all()
    return rate_result(n, seconds)


def ping_pong(args: argparse.Namespace) -> Result:
    """Two actors exchange N ping/pong round trips."""
    n = args.n
    done = countdown(1)
    ponger = Ponger.start()
    pinger = Pinger.start(ponger, n, done)
    ponger.ask(("peer", pinger))
    t0 = time.perf_counter()
    pinger.tell("start")
    done.wait()
    seconds = time.perf_counter() - t0
    pykka.ActorRegistry.stop_all()
    return rate_result(n, seconds)


def ask(args: argparse.Namespace) -> Result:
    """N sequential asks from a plain greenlet to one actor."""
    n = args.n
    ref = Echo.start()
    ref.ask(-1, timeout=10.0)

    def loop() -> float:
        t0 = time.perf_counter()
        for i in range(n):
            ref.ask(i, timeout=10.0)
        return time.perf_counter() - t0

    seconds = gevent.spawn(loop).get()
    pykka.ActorRegistry.stop_all()
    return rate_result(n, seconds)


def _spawn(n: int) -> tuple[list[Any], Countdown, float, int]:
    """Start N idle actors; return refs, their stop countdown, seconds and RSS delta."""
    started, stopped = countdown(n), countdown(n)
    refs: list[Any] = []
    settle()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    append = refs.append
    for _ in range(n):
        append(Idle.start(started, stopped))
    started.wait()
    seconds = time.perf_counter() - t0
    settle()
    return refs, stopped, seconds, rss_bytes() - rss0


def spawn(args: argparse.Namespace) -> Result:
    """Start N actors (until each ran ``on_start``); RSS per idle actor after gc."""
    _refs, _, seconds, delta = _spawn(args.n)
    return rate_result(args.n, seconds, bytes_per_actor=delta / args.n)


def stop(args: argparse.Namespace) -> Result:
    """Stop N started actors; time until each ran ``on_stop``."""
    refs, stopped, _, _ = _spawn(args.n)
    t0 = time.perf_counter()
    for ref in refs:
        ref.stop(block=False)
    stopped.wait()
    return rate_result(args.n, time.perf_counter() - t0)


def fan_out(args: argparse.Namespace) -> Result:
    """N actors receive ``per`` messages each (sent round-robin); msgs/s."""
    n, per = args.n, args.per or 100
    started, done = countdown(n), countdown(n)
    refs = [Sink.start(per, started, done) for _ in range(n)]
    started.wait()
    t0 = time.perf_counter()
    for i in range(per):
        for ref in refs:
            ref.tell(i)
    done.wait()
    seconds = time.perf_counter() - t0
    return rate_result(n * per, seconds)


def blocking(args: argparse.Namespace) -> Result:
    """N actors each sleep (patched ``time.sleep``) in receive; wall time until all done."""
    n = args.n
    delay = (args.per or 50) / 1000.0
    started, done = countdown(n), countdown(n)
    refs = [Sleeper.start(delay, started, done) for _ in range(n)]
    started.wait()
    t0 = time.perf_counter()
    for ref in refs:
        ref.tell("go")
    done.wait()
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "count": n, "metrics": {"seconds": seconds}}


WORKLOADS = {
    "tell": tell,
    "ping_pong": ping_pong,
    "ask": ask,
    "spawn": spawn,
    "stop": stop,
    "fan_out": fan_out,
    "blocking": blocking,
}


def _versions() -> dict[str, str]:
    try:
        from importlib.metadata import version

        pykka_version = version("pykka")
    except Exception:
        pykka_version = str(getattr(pykka, "__version__", "?"))
    return {"pykka": pykka_version, "gevent": gevent.__version__}


if __name__ == "__main__":
    run_worker(IMPL, WORKLOADS, _versions)

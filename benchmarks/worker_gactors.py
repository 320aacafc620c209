"""gactors workloads, written against the public API of the specification only.

Run as ``python worker_gactors.py WORKLOAD N [--per K]`` with gactors importable;
prints its JSON result line. Every workload runs inside ``with ActorSystem("bench")`` after
``gevent.monkey.patch_all()``; completion is signalled by the actors themselves
(a countdown setting a ``gevent.event.Event``, or an ask's answer), never by polling.
The result line is printed inside the ``with`` block; the time the system then takes to
terminate is reported on a second line as ``shutdown_s`` and is not part of any rate.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import argparse
import time
from typing import Any

import gevent
import gevent.event
from _worker_common import (
    Countdown,
    Result,
    latency_result,
    rate_result,
    report,
    report_after,
    rss_bytes,
    run_worker,
    settle,
)

import gactors
from gactors import Actor, ActorSystem, OneForOneStrategy, Props

ASK_TIMEOUT = 30.0
# The cluster workloads (remote_gactors.py), imported only when one of them runs.
REMOTE = ("remote_tell", "remote_ask", "remote_ask_100", "remote_detect", "remote_idle")


def countdown(n: int) -> Countdown:
    """A countdown over a fresh ``gevent.event.Event``."""
    return Countdown(n, gevent.event.Event())


class Sink(Actor):
    """Counts messages; hits ``done`` at the last expected one."""

    def __init__(self, n: int, started: Countdown, done: Countdown) -> None:
        self.left = n
        self.started = started
        self.done = done

    def pre_start(self) -> None:
        self.started.hit()

    def receive(self, message: Any) -> None:
        self.left -= 1
        if self.left == 0:
            self.done.hit()


class Ponger(Actor):
    """Answers every message to its sender."""

    def receive(self, message: Any) -> None:
        self.sender.tell("pong")


class Pinger(Actor):
    """Sends ``"ping"`` (sender: itself) and waits for ``"pong"``, N times."""

    def __init__(self, ponger: Any, n: int, done: Countdown) -> None:
        self.ponger = ponger
        self.left = n
        self.done = done

    def receive(self, message: Any) -> None:
        if message == "pong":
            self.left -= 1
            if self.left == 0:
                self.done.hit()
                return
        self.ponger.tell("ping")


class Echo(Actor):
    """Replies to every message with the message itself."""

    def receive(self, message: Any) -> None:
        self.sender.tell(message)


class Idle(Actor):
    """Does nothing; reports start and stop."""

    def __init__(self, started: Countdown, stopped: Countdown) -> None:
        self.started = started
        self.stopped = stopped

    def pre_start(self) -> None:
        self.started.hit()

    def post_stop(self) -> None:
        self.stopped.hit()


class Fragile(Actor):
    """Fails on ``"boom"``; otherwise answers its incarnation number."""

    incarnations = 0

    def __init__(self) -> None:
        Fragile.incarnations += 1
        self.incarnation = Fragile.incarnations

    def receive(self, message: Any) -> None:
        if message == "boom":
            raise RuntimeError("boom")
        self.sender.tell(self.incarnation)


class Parent(Actor):
    """Supervises one ``Fragile`` child (restart, failure logging off); answers its ref."""

    supervisor_strategy = OneForOneStrategy(logging_enabled=False)

    def __init__(self) -> None:
        self.child = self.context.actor_of(Props(Fragile), "fragile")

    def receive(self, message: Any) -> None:
        self.sender.tell(self.child)


class Sleeper(Actor):
    """Calls the monkey-patched ``time.sleep`` for every message, then reports."""

    def __init__(self, delay: float, started: Countdown, done: Countdown) -> None:
        self.delay = delay
        self.started = started
        self.done = done

    def pre_start(self) -> None:
        self.started.hit()

    def receive(self, message: Any) -> None:
        time.sleep(self.delay)
        self.done.hit()


class Bench:
    """``with ActorSystem("bench")``, reporting how long leaving the block took."""

    def __enter__(self) -> Any:
        self.cm = ActorSystem("bench")
        return self.cm.__enter__()

    def __exit__(self, *exc: object) -> None:
        t0 = time.perf_counter()
        self.cm.__exit__(*exc)
        report_after(shutdown_s=time.perf_counter() - t0)


def tell(args: argparse.Namespace) -> Result:
    """N tells to one actor; time until the last one was processed."""
    n = args.n
    with Bench() as system:
        started, done = countdown(1), countdown(1)
        ref = system.actor_of(Props(Sink, n, started, done))
        started.wait()
        t0 = time.perf_counter()
        send = ref.tell
        for i in range(n):
            send(i)
        done.wait()
        result = report(rate_result(n, time.perf_counter() - t0))
    return result


def ping_pong(args: argparse.Namespace) -> Result:
    """Two actors exchange N ping/pong round trips."""
    n = args.n
    with Bench() as system:
        done = countdown(1)
        ponger = system.actor_of(Props(Ponger))
        pinger = system.actor_of(Props(Pinger, ponger, n, done))
        ponger.ask("warm-up", timeout=ASK_TIMEOUT)
        t0 = time.perf_counter()
        pinger.tell("start")
        done.wait()
        result = report(rate_result(n, time.perf_counter() - t0))
    return result


def ask(args: argparse.Namespace) -> Result:
    """N sequential asks from a plain greenlet to one actor."""
    n = args.n
    with Bench() as system:
        ref = system.actor_of(Props(Echo))
        ref.ask(-1, timeout=ASK_TIMEOUT)

        def loop() -> float:
            t0 = time.perf_counter()
            for i in range(n):
                ref.ask(i, timeout=ASK_TIMEOUT)
            return time.perf_counter() - t0

        result = report(rate_result(n, gevent.spawn(loop).get()))
    return result


def _spawn(system: Any, n: int) -> tuple[list[Any], Countdown, float, int]:
    """Create N idle actors; return refs, their stop countdown, seconds and RSS delta."""
    started, stopped = countdown(n), countdown(n)
    props = Props(Idle, started, stopped)
    refs: list[Any] = []
    settle()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    append = refs.append
    actor_of = system.actor_of
    for _ in range(n):
        append(actor_of(props))
    started.wait()
    seconds = time.perf_counter() - t0
    settle()
    return refs, stopped, seconds, rss_bytes() - rss0


def spawn(args: argparse.Namespace) -> Result:
    """Create N actors (until each ran ``pre_start``); RSS per idle actor after gc."""
    with Bench() as system:
        _refs, _, seconds, delta = _spawn(system, args.n)
        result = report(rate_result(args.n, seconds, bytes_per_actor=delta / args.n))
    return result


def stop(args: argparse.Namespace) -> Result:
    """``system.stop`` N started actors; time until each ran ``post_stop``."""
    with Bench() as system:
        refs, stopped, _, _ = _spawn(system, args.n)
        t0 = time.perf_counter()
        for ref in refs:
            system.stop(ref)
        stopped.wait()
        result = report(rate_result(args.n, time.perf_counter() - t0))
    return result


def restart(args: argparse.Namespace) -> Result:
    """N cycles of a failing message followed by an ask; time until the new instance answers."""
    n = args.n
    with Bench() as system:
        parent = system.actor_of(Props(Parent), "parent")
        child = parent.ask("child", timeout=ASK_TIMEOUT)
        last = child.ask("ping", timeout=ASK_TIMEOUT)
        samples: list[float] = []
        perf = time.perf_counter
        for _ in range(n):
            t0 = perf()
            child.tell("boom")
            incarnation = child.ask("ping", timeout=ASK_TIMEOUT)
            samples.append(perf() - t0)
            if incarnation != last + 1:
                raise AssertionError(f"expected incarnation {last + 1}, got {incarnation}")
            last = incarnation
        result = report(latency_result(samples))
    return result


def fan_out(args: argparse.Namespace) -> Result:
    """N actors receive ``per`` messages each (sent round-robin); msgs/s."""
    n, per = args.n, args.per or 100
    with Bench() as system:
        started, done = countdown(n), countdown(n)
        props = Props(Sink, per, started, done)
        refs = [system.actor_of(props) for _ in range(n)]
        started.wait()
        t0 = time.perf_counter()
        for i in range(per):
            for ref in refs:
                ref.tell(i)
        done.wait()
        result = report(rate_result(n * per, time.perf_counter() - t0))
    return result


def blocking(args: argparse.Namespace) -> Result:
    """N actors each sleep (patched ``time.sleep``) in receive; wall time until all done."""
    n = args.n
    delay = (args.per or 50) / 1000.0
    with Bench() as system:
        started, done = countdown(n), countdown(n)
        props = Props(Sleeper, delay, started, done)
        refs = [system.actor_of(props) for _ in range(n)]
        started.wait()
        t0 = time.perf_counter()
        for ref in refs:
            ref.tell("go")
        done.wait()
        seconds = time.perf_counter() - t0
        result = report({"seconds": seconds, "count": n, "metrics": {"seconds": seconds}})
    return result


WORKLOADS = {
    "tell": tell,
    "ping_pong": ping_pong,
    "ask": ask,
    "spawn": spawn,
    "stop": stop,
    "restart": restart,
    "fan_out": fan_out,
    "blocking": blocking,
}


def _remote_workloads() -> dict[str, Any]:
    """The cluster workloads, or an explanation why this checkout cannot run them."""
    try:
        import gactors.cluster  # noqa: F401  (a checkout before the cluster has none)
    except ImportError as exc:
        why = f"this gactors has no cluster ({exc})"

        def not_available(args: argparse.Namespace) -> Result:
            return {"na": why}

        return dict.fromkeys(REMOTE, not_available)
    from remote_gactors import WORKLOADS as remote

    return remote


PERSISTENCE = (
    "persist_seq",
    "persist_concurrent",
    "persist_recovery",
    "persist_recovery_snap",
    "persist_sqlite",
)


def _persistence_workloads() -> dict[str, Any]:
    """The persistence workloads, or an explanation why this checkout cannot run them."""
    try:
        import gactors.persistence  # noqa: F401  (a checkout before persistence has none)
    except ImportError as exc:
        why = f"this gactors has no persistence ({exc})"

        def not_available(args: argparse.Namespace) -> Result:
            return {"na": why}

        return dict.fromkeys(PERSISTENCE, not_available)
    from persistence import WORKLOADS as persistence

    return persistence


#: Reminders and reliable delivery (SPEC section 20): delivery.py and reminders.py.
DELIVERY = ("delivery", "reminders_burst")


def _delivery_workloads() -> dict[str, Any]:
    """The §20 workloads, or an explanation why this checkout cannot run them."""
    try:
        # A checkout before §20 has neither.
        import gactors.delivery
        import gactors.reminders  # noqa: F401
    except ImportError as exc:
        why = f"this gactors has no reminders or reliable delivery ({exc})"

        def not_available(args: argparse.Namespace) -> Result:
            return {"na": why}

        return dict.fromkeys(DELIVERY, not_available)
    from delivery import WORKLOADS as delivery
    from reminders import WORKLOADS as reminders

    return {**delivery, **reminders}


def _versions() -> dict[str, str]:
    return {
        "gactors": str(getattr(gactors, "__version__", "?")),
        "gevent": gevent.__version__,
    }


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1 and sys.argv[1] in REMOTE:
        WORKLOADS.update(_remote_workloads())
    if len(sys.argv) > 1 and sys.argv[1] in PERSISTENCE:
        WORKLOADS.update(_persistence_workloads())
    if len(sys.argv) > 1 and sys.argv[1] in DELIVERY:
        WORKLOADS.update(_delivery_workloads())
    run_worker("gactors", WORKLOADS, _versions)

"""Soak test: many actors, millions of messages, random failures, for a set time.

    python benchmarks/soak.py --minutes 10 [--json soak.json]

Not part of the test suite. The tree is ``/user/sup-<i>/w-<j>``: supervisors (most
one-for-one, every fifth all-for-one, restarts unlimited) over workers. "Jobs" hop
from worker to random worker (``--hops`` messages each); each message fails its
worker with probability ``--failure-rate`` (the worker is restarted, the job ends as
failed). Every ``--churn-interval`` seconds a random worker is sent ``PoisonPill`` or
``Kill`` (stopped; its queued jobs become dead letters) and its supervisor creates
a new one under the same name. A fixed window of jobs is kept in flight.

At the end the pumps stop, the jobs in flight drain, and the run checks:

* accounting: every job sent ended exactly once, as done, failed or dead letter;
* the actor system terminates, and afterwards the number of live greenlets is back
  to the baseline taken before the system was created.

It reports throughput (messages processed per second), restarts, dead letters, RSS
at start, after warm-up and at the end, and live greenlets before and after
``terminate()``. The exit status is non-zero if a check fails.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402  (the patch must come first)
import argparse
import gc
import json
import logging
import os
import random
import resource
import sys
import time
from typing import Any

import gevent
import greenlet
from gevent.event import Event

from gactors import (
    Actor,
    ActorRef,
    ActorSystem,
    AllForOneStrategy,
    DeadLetter,
    Kill,
    OneForOneStrategy,
    PoisonPill,
    Props,
    SupervisorStrategy,
    Terminated,
)

log = logging.getLogger("soak")


class Injected(Exception):
    """The random failure."""


class Job:
    __slots__ = ("hops",)

    def __init__(self, hops: int) -> None:
        self.hops = hops


class Stats:
    """Counters shared by the actors and the pumps (one thread: no locking)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.sent = 0
        self.done = 0
        self.failed = 0
        self.dead_jobs = 0
        self.dead_letters = 0
        self.processed = 0
        self.restarts = 0
        self.churned = 0
        self.recreated = 0
        self.space = Event()

    @property
    def in_flight(self) -> int:
        return self.sent - self.done - self.failed - self.dead_jobs

    def ended(self) -> None:
        if self.in_flight <= self.window // 2:
            self.space.set()


class Worker(Actor):
    def __init__(self, stats: Stats, workers: list[ActorRef], rate: float) -> None:
        self.stats = stats
        self.workers = workers
        self.rate = rate

    def post_restart(self, reason: BaseException) -> None:
        self.stats.restarts += 1

    def receive(self, message: Any) -> None:
        stats = self.stats
        stats.processed += 1
        if random.random() < self.rate:
            stats.failed += 1
            stats.ended()
            raise Injected("random failure")
        if message.hops > 1:
            message.hops -= 1
            self.workers[random.randrange(len(self.workers))].tell(message)
        else:
            stats.done += 1
            stats.ended()


class Supervisor(Actor):
    """Creates its workers, and a new one whenever one stops."""

    def __init__(
        self, index: int, per: int, stats: Stats, workers: list[ActorRef], rate: float
    ) -> None:
        self.stats = stats
        self.workers = workers
        self.rate = rate
        self.slots: dict[str, int] = {}
        self._strategy: SupervisorStrategy = (
            AllForOneStrategy(logging_enabled=False)
            if index % 5 == 4
            else OneForOneStrategy(logging_enabled=False)
        )
        for j in range(per):
            name = f"w-{j}"
            self.slots[name] = index * per + j
            self._start(name)

    @property  # type: ignore[override]
    def supervisor_strategy(self) -> SupervisorStrategy:
        return self._strategy

    def _start(self, name: str) -> None:
        ref = self.context.actor_of(Props(Worker, self.stats, self.workers, self.rate), name)
        self.context.watch(ref)
        slot = self.slots[name]
        if slot < len(self.workers):
            self.workers[slot] = ref
        else:
            self.workers.append(ref)

    def receive(self, message: Any) -> None:
        if type(message) is Terminated:
            # The name is free again: the termination has been processed.
            self.stats.recreated += 1
            self._start(message.actor.name)
        else:
            self.unhandled(message)


# -- measurements -------------------------------------------------------------------------------
def rss_mb() -> float:
    """The current resident set size in MiB (Linux /proc; else the peak)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def live_greenlets() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, greenlet.greenlet) and not o.dead)


# -- the run ---------------------------------------------------------------------------------
def pump(stats: Stats, workers: list[ActorRef], hops: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        while stats.in_flight < stats.window:
            stats.sent += 1
            workers[random.randrange(len(workers))].tell(Job(hops))
        stats.space.clear()
        stats.space.wait(1.0)


def churn(stats: Stats, workers: list[ActorRef], interval: float, deadline: float) -> None:
    while time.monotonic() < deadline:
        gevent.sleep(interval)
        victim = workers[random.randrange(len(workers))]
        victim.tell(Kill if random.random() < 0.5 else PoisonPill)
        stats.churned += 1


def run(args: argparse.Namespace) -> dict[str, Any]:
    random.seed(args.seed)
    gevent.get_hub()
    greenlets_baseline = live_greenlets()
    rss_start = rss_mb()
    stats = Stats(args.window)
    workers: list[ActorRef] = []

    def on_dead_letter(event: DeadLetter) -> None:
        stats.dead_letters += 1
        if type(event.message) is Job:
            stats.dead_jobs += 1
            stats.ended()

    system = ActorSystem("soak", config={"log_dead_letters": 0})
    system.event_stream.subscribe(on_dead_letter, DeadLetter)
    for i in range(args.supervisors):
        system.actor_of(
            Props(Supervisor, i, args.workers, stats, workers, args.failure_rate), f"sup-{i}"
        )
    while len(workers) < args.supervisors * args.workers:
        gevent.sleep(0.01)
    rss_started = rss_mb()
    greenlets_running = live_greenlets()

    start = time.monotonic()
    deadline = start + args.minutes * 60
    tasks = [gevent.spawn(pump, stats, workers, args.hops, deadline) for _ in range(args.pumps)]
    tasks.append(gevent.spawn(churn, stats, workers, args.churn_interval, deadline))
    samples: list[dict[str, Any]] = []
    last_t, last_n = start, 0
    while time.monotonic() < deadline:
        gevent.sleep(min(args.report_every, max(0.0, deadline - time.monotonic())))
        now = time.monotonic()
        sample = {
            "t": round(now - start, 1),
            "processed": stats.processed,
            "msgs_per_s": round((stats.processed - last_n) / max(now - last_t, 1e-9)),
            "restarts": stats.restarts,
            "dead_letters": stats.dead_letters,
            "rss_mb": round(rss_mb(), 1),
            "greenlets": live_greenlets(),
        }
        last_t, last_n = now, stats.processed
        samples.append(sample)
        log.info("%s", sample)
    gevent.joinall(tasks, timeout=10)
    elapsed = time.monotonic() - start

    # Drain: every job in flight ends one way or another.
    drain_deadline = time.monotonic() + 60
    while stats.in_flight and time.monotonic() < drain_deadline:
        gevent.sleep(0.05)
    rss_end = rss_mb()
    greenlets_before_terminate = live_greenlets()
    restarts_of_live_actors = 0
    cells = [system.user_cell]
    while cells:
        cell = cells.pop()
        restarts_of_live_actors += cell.restarts
        cells.extend(cell.child_cells.values())

    system.terminate()
    terminated = system.await_termination(60)
    # The last worker greenlet lingers briefly for new work before it ends.
    wait_until = time.monotonic() + 5
    while system.dispatcher.workers and time.monotonic() < wait_until:
        gevent.sleep(0.01)
    greenlets_after = live_greenlets()
    rss_after = rss_mb()

    warm = samples[0]["rss_mb"] if samples else rss_started
    result = {
        "minutes": args.minutes,
        "elapsed_s": round(elapsed, 1),
        "actors": args.supervisors * (args.workers + 1),
        "messages_processed": stats.processed,
        "msgs_per_s": round(stats.processed / elapsed),
        "jobs_sent": stats.sent,
        "jobs_done": stats.done,
        "jobs_failed": stats.failed,
        "jobs_dead_lettered": stats.dead_jobs,
        "jobs_in_flight_at_end": stats.in_flight,
        "restarts": stats.restarts,
        "restarts_of_live_actors": restarts_of_live_actors,
        "workers_stopped_by_churn": stats.churned,
        "workers_recreated": stats.recreated,
        "dead_letters": stats.dead_letters,
        "rss_mb_start": round(rss_start, 1),
        "rss_mb_started": round(rss_started, 1),
        "rss_mb_after_warmup": warm,
        "rss_mb_end": round(rss_end, 1),
        "rss_mb_after_terminate": round(rss_after, 1),
        "rss_growth_after_warmup_mb": round(rss_end - warm, 1),
        "greenlets_baseline": greenlets_baseline,
        "greenlets_running": greenlets_running,
        "greenlets_before_terminate": greenlets_before_terminate,
        "greenlets_after_terminate": greenlets_after,
        "terminated": terminated,
        "samples": samples,
    }
    checks = {
        "every job accounted for": stats.in_flight == 0,
        "system terminated": terminated,
        "greenlets back to baseline": greenlets_after == greenlets_baseline,
    }
    result["checks"] = checks
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=1.0, help="how long to pump (default 1)")
    p.add_argument("--supervisors", type=int, default=50)
    p.add_argument("--workers", type=int, default=20, help="workers per supervisor")
    p.add_argument("--hops", type=int, default=10, help="messages per job")
    p.add_argument("--window", type=int, default=2000, help="jobs in flight")
    p.add_argument("--pumps", type=int, default=2)
    p.add_argument("--failure-rate", type=float, default=0.01)
    p.add_argument("--churn-interval", type=float, default=0.5)
    p.add_argument("--report-every", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("gactors").setLevel(logging.CRITICAL)  # the failures are expected

    result = run(args)
    shown = {k: v for k, v in result.items() if k != "samples"}
    for key, value in shown.items():
        print(f"{key:32} {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

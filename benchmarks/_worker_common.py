"""Helpers shared by the worker scripts.

Every worker runs in a fresh interpreter (possibly a peer's virtual environment), so
this module uses the standard library only and never imports the harness. A worker
runs exactly one workload and prints exactly one JSON result line on stdout, possibly
followed by one ``{"after": ...}`` line about its teardown (the gactors worker reports
how long the actor system took to terminate); everything else (logging, warnings) goes
to stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable, Mapping
from typing import Any

Result = dict[str, Any]
WorkloadFn = Callable[[argparse.Namespace], Result]


def rss_bytes() -> int:
    """Return the resident set size of this process in bytes.

    Reads ``/proc/self/statm`` (Linux). Elsewhere falls back to the peak RSS from
    ``getrusage``, which is only an upper bound but keeps the harness usable.
    """
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def settle() -> None:
    """Run a full garbage collection (three times, to clear chained garbage)."""
    for _ in range(3):
        gc.collect()


class Countdown:
    """Sets ``event`` once :meth:`hit` has been called ``n`` times.

    Used by actors to signal completion without polling. All implementations under
    test run in one OS thread (greenlets), so no lock is needed.
    """

    __slots__ = ("event", "left")

    def __init__(self, n: int, event: Any) -> None:
        """Count ``n`` hits, then set ``event`` (a ``gevent.event.Event``)."""
        self.left = n
        self.event = event
        if n <= 0:
            event.set()

    def hit(self) -> None:
        """Count one hit; set the event at the last one."""
        self.left -= 1
        if self.left == 0:
            self.event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block the calling greenlet until the count reached zero."""
        return bool(self.event.wait(timeout))


def rate_result(count: int, seconds: float, **extra: Any) -> Result:
    """Build the result of a throughput workload: ``count`` operations in ``seconds``."""
    metrics: dict[str, float] = {"rate": count / seconds if seconds > 0 else float("inf")}
    metrics.update(extra)
    return {"seconds": seconds, "count": count, "metrics": metrics}


def latency_result(samples_s: list[float]) -> Result:
    """Build the result of a latency workload from per-cycle samples in seconds."""
    ordered = sorted(samples_s)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return {
        "seconds": sum(samples_s),
        "count": len(samples_s),
        "metrics": {
            "median_us": statistics.median(ordered) * 1e6,
            "p90_us": p90 * 1e6,
            "min_us": ordered[0] * 1e6,
        },
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the common worker command line: ``WORKLOAD N [--per K]``."""
    parser = argparse.ArgumentParser(description="run one benchmark workload")
    parser.add_argument("workload")
    parser.add_argument("n", type=int, help="main count (messages, actors, cycles)")
    parser.add_argument("--per", type=int, default=0, help="secondary count")
    parser.add_argument("--impl", default="", help="implementation variant")
    return parser.parse_args(argv)


def emit(result: Result) -> None:
    """Print one JSON line on stdout."""
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


_meta: dict[str, Any] = {}
_reported: list[bool] = [False]


def report(result: Result) -> Result:
    """Emit ``result`` as this worker's one result line, now.

    A workload calls this itself when something slow follows the measurement (an actor
    system terminating), so the harness has the result even if that part hangs.
    """
    if not _reported[0]:
        emit({**result, **_meta})
        _reported[0] = True
    return result


def report_after(**fields: float) -> None:
    """Emit a supplementary line about what happened after the result (not measured)."""
    emit({"after": fields})


def run_worker(
    impl: str,
    workloads: Mapping[str, WorkloadFn],
    versions: Callable[[], dict[str, str]],
    argv: list[str] | None = None,
) -> None:
    """Run the workload named on the command line and emit its JSON result line.

    Exits through ``os._exit`` right after printing so that tearing down tens of
    thousands of actors at interpreter exit does not count against the time limit.
    """
    args = parse_args(argv)
    impl_name = args.impl or impl
    fn = workloads.get(args.workload)
    if fn is None:
        emit(
            {
                "impl": impl_name,
                "workload": args.workload,
                "na": f"{impl_name} has no workload {args.workload!r}",
            }
        )
        os._exit(0)
    _meta.update(
        {
            "impl": impl_name,
            "workload": args.workload,
            "n": args.n,
            "per": args.per,
            "versions": {"python": platform.python_version(), **versions()},
        }
    )
    report(fn(args))
    os._exit(0)

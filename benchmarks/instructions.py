"""Instructions per operation, counted by valgrind: ``python -m benchmarks.instructions``.

Wall-clock rates from a shared or noisy machine are not evidence for a change of a few
percent; instruction counts are (they do not depend on the load). Each workload's
worker runs twice under ``valgrind --tool=callgrind`` (no cache simulation), with N
and 2N operations; the difference of the two totals divided by N is the cost of one
operation, without the interpreter's start, the imports and the system's setup and
teardown. The workers are the harness's own (``worker_gactors.py``,
``worker_raw.py``). Needs ``valgrind`` on PATH; a run takes a minute or two.

Counts are comparable between two checkouts on the same interpreter and gevent build
(``--checkout DIR`` measures another one, e.g. a ``git worktree`` of main).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent

# (implementation, workload, N): the cost is (I(2N) - I(N)) / N.
DEFAULT: tuple[tuple[str, str, int], ...] = (
    ("gactors", "tell", 20_000),
    ("raw", "queue_oneway", 20_000),
    ("raw", "deque_call", 20_000),
    ("raw", "sender_tell", 20_000),
    ("raw", "checked_tell", 20_000),
    ("gactors", "ask", 4_000),
    ("raw", "queue_ask", 4_000),
    ("raw", "switch", 20_000),
    ("gactors", "ping_pong", 10_000),
    ("gactors", "stop", 4_000),
    ("raw", "greenlet_kill", 4_000),
    ("gactors", "restart", 1_000),
    ("raw", "greenlet_restart", 1_000),
)

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def count(worker: str, workload: str, n: int, env: dict[str, str]) -> int:
    """Instructions of one worker run (the whole process)."""
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(BENCH_DIR / worker),
        workload,
        str(n),
        "--per",
        "0",
        "--impl",
        "count",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(BENCH_DIR))
    m = _COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or m is None:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise RuntimeError(f"{workload}: valgrind failed ({proc.returncode}):\n{tail}")
    return int(m.group(1))


def per_op(impl: str, workload: str, n: int, env: dict[str, str]) -> float:
    """Instructions per operation: (I(2N) - I(N)) / N."""
    worker = "worker_gactors.py" if impl == "gactors" else "worker_raw.py"
    return (count(worker, workload, 2 * n, env) - count(worker, workload, n, env)) / n


def main(argv: list[str] | None = None) -> int:
    """Count, print one line per workload."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("--workloads", default="", help="comma-separated (default: all)")
    parser.add_argument("--checkout", default="", help="gactors of another checkout")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every N")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        sys.stderr.write("valgrind is not on PATH\n")
        return 2
    env = dict(os.environ)
    root = args.checkout or str(BENCH_DIR.parent)
    # The same hash seed in every run: string hashes and dict layouts stay put, so two
    # runs (and two checkouts) differ by their code, not by randomisation.
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    wanted = {w.strip() for w in args.workloads.split(",") if w.strip()}
    for impl, workload, n in DEFAULT:
        if wanted and workload not in wanted:
            continue
        n = max(1, int(n * args.scale))
        print(
            f"{impl:<8} {workload:<18} {per_op(impl, workload, n, env):>10,.0f} instr/op",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

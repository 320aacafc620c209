"""The benchmark harness: ``python -m benchmarks [options]``.

Runs every (implementation, workload) pair in a fresh subprocess, interleaving the
implementations round by round (A B C A B C ...), then prints per-workload medians,
the per-round ratios of gactors to the best peer, to the gevent-primitive baseline and
to the physical floor (median and minimum over the rounds), and the project's
performance targets with PASS/MISS (on the per-round minimum). The cluster section
(``remote_*`` against Thespian, ``redis_*``: the limits of redis-py) runs against one
local Redis-protocol server that the harness starts for the run. Uses the standard library only.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib.util
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .redis_server import LocalServer, ServerError
from .spec import (
    ACTOR_WORKLOADS,
    ALL_WORKLOADS,
    DELIVERY_ROWS,
    DELIVERY_WORKLOADS,
    IMPLS,
    LIMIT_IMPLS,
    NEEDS_REDIS,
    PEERS,
    PERSISTENCE_ROWS,
    PERSISTENCE_WORKLOADS,
    PLOT_VENV,
    RAW_REFERENCE,
    RAW_ROWS,
    RAW_WORKLOADS,
    REDIS_WORKLOADS,
    REF_NAMES,
    REMOTE_PEERS,
    REMOTE_ROWS,
    REMOTE_WORKLOADS,
    ROWS,
    Impl,
    Row,
)
from .venvs import VenvError, ensure_venv

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
NA = "n/a"
# How long a worker may take to tear down after printing its result before it is killed.
SHUTDOWN_GRACE_S = 60.0
# The environment variable that hands the server's URL to the workers.
REDIS_URL_ENV = "GACTORS_BENCH_REDIS_URL"
BASELINE = "baseline"


@dataclass
class Run:
    """The outcome of one subprocess: metrics, or why there are none."""

    impl: str
    workload: str
    round: int
    wall_s: float
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""
    warning: str = ""
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the run produced metrics."""
        return bool(self.metrics) and not self.error


@dataclass
class Runtime:
    """How to launch one implementation's worker, or why it is unavailable."""

    impl: Impl
    python: str = ""
    env: dict[str, str] = field(default_factory=dict)
    unavailable: str = ""


# ---------------------------------------------------------------- command line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the harness command line."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark gactors against Pykka and raw gevent limits.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: every count / 50, one round, 60 s per subprocess",
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3; quick 1)")
    parser.add_argument(
        "--only",
        default="",
        help=f"comma-separated implementations (of {','.join(IMPLS)})",
    )
    parser.add_argument(
        "--workloads",
        default="",
        help=f"comma-separated workloads (of {','.join(ALL_WORKLOADS)})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per subprocess (default 300; quick 60)",
    )
    parser.add_argument("--json", metavar="PATH", help="write all results as JSON")
    parser.add_argument("--plot", metavar="PATH", help="write a bar chart (PNG) of the medians")
    parser.add_argument("--list", action="store_true", help="list workloads and exit")
    parser.add_argument(
        "--redis-url",
        default="",
        help="use this Redis-protocol server for the cluster section (default: start one)",
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        default="",
        help="also run the workloads (single-process and remote) with the gactors of "
        "another checkout (e.g. a 'git worktree' of main), interleaved: before/after in "
        "one run",
    )
    args = parser.parse_args(argv)
    if args.baseline:
        base = Path(args.baseline).resolve()
        if not (base / "gactors" / "__init__.py").is_file():
            parser.error(f"--baseline: {base} has no gactors/__init__.py")
        args.baseline = str(base)
        IMPLS[BASELINE] = Impl(
            BASELINE,
            f"gactors of {base} (the same interpreter)",
            "worker_gactors.py",
            (*ACTOR_WORKLOADS, *REMOTE_WORKLOADS, *PERSISTENCE_WORKLOADS),
        )
    elif BASELINE in IMPLS:  # a previous call in the same process (tests)
        del IMPLS[BASELINE]
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.timeout is None:
        args.timeout = 60.0 if args.quick else 300.0
    args.impls = _split(args.only, IMPLS, parser, "--only") or list(IMPLS)
    if args.baseline and BASELINE not in args.impls:
        args.impls.append(BASELINE)
    args.workload_names = _split(args.workloads, ALL_WORKLOADS, parser, "--workloads") or list(
        ALL_WORKLOADS
    )
    return args


def _split(
    value: str, known: dict[str, Any], parser: argparse.ArgumentParser, opt: str
) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"{opt}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    return names


# ---------------------------------------------------------------- preparation


def _gactors_runtime(impl: Impl, checkout: str = "") -> Runtime:
    """gactors runs in this interpreter, importing the same gactors the parent would
    (or the one of ``checkout``, first on the path, for the baseline)."""
    spec = importlib.util.find_spec("gactors")
    env = dict(os.environ)
    if checkout or (spec is not None and spec.origin):
        pkg_parent = checkout or str(Path(spec.origin).resolve().parent.parent)  # type: ignore[union-attr]
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (pkg_parent, os.environ.get("PYTHONPATH", "")) if p
        )
    else:
        return Runtime(impl, unavailable="gactors is not importable from this interpreter")
    check = subprocess.run(
        [sys.executable, "-c", "from gactors import ActorSystem, Actor, Props, PoisonPill"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if check.returncode != 0:
        tail = check.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return Runtime(impl, unavailable=f"import gactors failed: {tail[0]}")
    return Runtime(impl, python=sys.executable, env=env)


def _redis_runtime(impl: Impl) -> Runtime:
    """redis-py runs in this interpreter (``gactors[cluster]`` installs it)."""
    check = subprocess.run(
        [sys.executable, "-c", "import redis"], capture_output=True, text=True, timeout=120
    )
    if check.returncode != 0:
        # An honest gap, not a failure: the cluster section needs the optional extra.
        why = "redis-py is not installed: pip install 'gactors[cluster]'"
        impl = dataclasses.replace(impl, na=dict.fromkeys(impl.workloads, why))
    return Runtime(impl, python=sys.executable, env=dict(os.environ))


def prepare(impl_names: list[str], baseline: str = "") -> dict[str, Runtime]:
    """Find or build the interpreter for every selected implementation."""
    runtimes: dict[str, Runtime] = {}
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for name in impl_names:
        impl = IMPLS[name]
        if name == "gactors":
            runtimes[name] = _gactors_runtime(impl)
        elif name == BASELINE:
            runtimes[name] = _gactors_runtime(impl, baseline)
        elif name == "redis":
            runtimes[name] = _redis_runtime(impl)
        elif impl.venv is None:
            runtimes[name] = Runtime(impl, python=sys.executable, env=base_env)
        else:
            try:
                python = ensure_venv(impl.venv)
            except VenvError as exc:
                runtimes[name] = Runtime(impl, unavailable=f"venv: {exc}")
            else:
                runtimes[name] = Runtime(impl, python=str(python), env=base_env)
    return runtimes


def schedule(impl_names: list[str], workload_names: list[str]) -> list[tuple[str, str]]:
    """The (implementation, workload) pairs of one round, in run order.

    For each actor workload (single-process, then remote) every selected implementation
    runs in turn, followed by its references (gevent-primitive baseline, physical floor),
    so that a round interleaves A B C A B C ...; the references of nothing come last.
    """
    tasks: list[tuple[str, str]] = []
    limits = {**RAW_WORKLOADS, **REDIS_WORKLOADS}
    done_raw: set[tuple[str, str]] = set()
    for w in workload_names:
        if not (
            w in ACTOR_WORKLOADS
            or w in REMOTE_WORKLOADS
            or w in PERSISTENCE_WORKLOADS
            or w in DELIVERY_WORKLOADS
        ):
            continue
        tasks.extend((i, w) for i in impl_names if i not in LIMIT_IMPLS and w in IMPLS[i].workloads)
        for ref in RAW_REFERENCE.get(w, ()):
            if ref[0] in impl_names and ref not in done_raw:
                tasks.append(ref)
                done_raw.add(ref)
    for w in workload_names:
        if w in limits:
            owner = "raw" if w in RAW_WORKLOADS else "redis"
            if owner in impl_names and (owner, w) not in done_raw:
                tasks.append((owner, w))
    return tasks


# ---------------------------------------------------------------- running


@dataclass
class Outcome:
    """What a worker process printed and how it ended."""

    result: dict[str, Any] | None = None
    after: dict[str, float] = field(default_factory=dict)
    stderr: str = ""
    stdout_other: str = ""
    code: int | None = None
    timed_out: bool = False  # no result within the time limit
    killed_after_result: bool = False  # result arrived, teardown exceeded the grace time


def _pump(stream: Any, sink: queue.Queue[str | None]) -> None:
    for line in stream:
        sink.put(line)
    sink.put(None)


def execute(cmd: list[str], env: dict[str, str], timeout: float, grace: float) -> Outcome:
    """Run a worker, reading its stdout as it comes.

    Waits up to ``timeout`` seconds for the result line, then up to ``grace`` seconds
    for the process to finish its teardown (reading any ``{"after": ...}`` line) before
    killing it. Returns everything that was seen.
    """
    out = Outcome()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(BENCH_DIR),
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    errs: list[str] = []
    t_out = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    t_err = threading.Thread(target=errs.extend, args=(proc.stderr,), daemon=True)
    t_out.start()
    t_err.start()
    deadline = time.monotonic() + timeout
    other: list[str] = []
    eof = False
    while not eof:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            eof = True
            break
        data = _json_line(line)
        if data is None:
            other.append(line)
        elif "after" in data:
            out.after.update({k: float(v) for k, v in data["after"].items()})
        elif "workload" in data and out.result is None:
            out.result = data
            # The measurement is done: what is left (teardown) gets the grace time.
            deadline = min(deadline, time.monotonic() + grace)
    if eof:
        try:
            out.code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    if out.code is None:
        proc.kill()
        proc.wait()
        if out.result is None:
            out.timed_out = True
        else:
            out.killed_after_result = True
    t_err.join(timeout=5)
    t_out.join(timeout=5)
    out.stderr = "".join(errs)
    out.stdout_other = "".join(other)
    return out


def _json_line(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_one(rt: Runtime, workload: str, rnd: int, quick: bool, timeout: float) -> Run:
    """Run one workload of one implementation in a fresh subprocess."""
    n, per = ALL_WORKLOADS[workload].counts(quick, rt.impl.n.get(workload))
    cmd = [
        rt.python,
        str(BENCH_DIR / rt.impl.worker),
        workload,
        str(n),
        "--per",
        str(per),
        "--impl",
        rt.impl.name,
    ]
    grace = min(timeout, SHUTDOWN_GRACE_S)
    started = time.perf_counter()
    out = execute(cmd, rt.env, timeout, grace)
    run = Run(rt.impl.name, workload, rnd, time.perf_counter() - started)
    data = out.result
    if data is not None and "na" in data:
        run.error = f"{NA}: {data['na']}"
        return run
    if data is not None and data.get("metrics"):
        run.metrics = {k: float(v) for k, v in data["metrics"].items()}
        run.metrics.update(out.after)
        run.versions = {k: str(v) for k, v in data.get("versions", {}).items()}
        if out.killed_after_result:
            run.warning = (
                f"measured, but teardown (actor system termination) did not finish within "
                f"{grace:.0f} s of the result; killed"
            )
        elif out.code:
            run.warning = f"measured, but the process exited with {out.code}:\n{_tail(out.stderr)}"
        return run
    if out.timed_out:
        run.error = f"timeout after {timeout:.0f} s\n{_tail(out.stderr)}"
    else:
        run.error = f"exit {out.code}, no result\n{_tail(out.stderr or out.stdout_other)}"
    return run


def _summary(run: Run) -> str:
    if not run.ok:
        return run.error.splitlines()[0] if run.error else "no result"
    parts = []
    for key, value in run.metrics.items():
        if key in ("p90_us", "min_us"):
            continue
        parts.append(f"{key}={_fmt_metric(key, value)}")
    return " ".join(parts) + (" (warning)" if run.warning else "")


def _fmt_metric(key: str, value: float) -> str:
    if key == "rate":
        return f"{value:,.0f}/s"
    if key.endswith("_us"):
        return f"{value:,.1f}µs"
    if key == "seconds" or key.endswith("_s"):
        return f"{value:.3f}s"
    if key.startswith("ratio"):
        return f"{value:.2f}"
    return f"{value:,.0f}"


# ---------------------------------------------------------------- analysis


Medians = dict[str, dict[str, dict[str, float]]]  # workload -> impl -> metric -> median


def medians(runs: list[Run]) -> Medians:
    """Median of every metric over the successful runs of each (workload, impl)."""
    grouped: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        if run.ok:
            grouped.setdefault((run.workload, run.impl), []).append(run)
    out: Medians = {}
    for (workload, impl), group in grouped.items():
        keys = {k for r in group for k in r.metrics}
        out.setdefault(workload, {})[impl] = {
            k: statistics.median(r.metrics[k] for r in group if k in r.metrics) for k in keys
        }
    return out


def per_round(runs: list[Run], workload: str, impl: str, metric: str) -> dict[int, float]:
    """Round number -> the value of one metric in that round's successful run."""
    return {
        r.round: r.metrics[metric]
        for r in runs
        if r.ok and r.workload == workload and r.impl == impl and metric in r.metrics
    }


@dataclass(frozen=True)
class Ratio:
    """How many times better gactors is than a reference, round by round.

    Round i of gactors is compared with round i of the reference (they ran next to
    each other, under the same load): ``median`` and ``minimum`` are over those
    per-round ratios. A target holds only if it holds in the worst round.
    """

    median: float
    minimum: float
    rounds: int

    def cell(self) -> str:
        """``median / minimum`` (just the ratio when one round ran)."""
        if self.rounds == 1:
            return f"{self.median:.2f}x"
        return f"{self.median:.2f}x / {self.minimum:.2f}x"


def round_ratio(
    runs: list[Run],
    workload: str,
    metric: str,
    other: tuple[str, str],
    higher_better: bool,
    impl: str = "gactors",
) -> Ratio | None:
    """gactors' ``workload`` against ``other`` = (implementation, workload), round by
    round (see :class:`Ratio`); None when no round has both."""
    mine = per_round(runs, workload, impl, metric)
    theirs = per_round(runs, other[1], other[0], metric)
    ratios = [
        a
        for rnd in sorted(mine.keys() & theirs.keys())
        if (a := advantage(mine[rnd], theirs[rnd], higher_better)) is not None
    ]
    if not ratios:
        return None
    return Ratio(statistics.median(ratios), min(ratios), len(ratios))


def worst_round(runs: list[Run], workload: str, metric: str, higher_better: bool) -> float | None:
    """gactors' worst value of a metric over the rounds (lowest rate, highest time)."""
    values = list(per_round(runs, workload, "gactors", metric).values())
    if not values:
        return None
    return min(values) if higher_better else max(values)


def ref_name(workload: str) -> str:
    """What a reference workload is, by name."""
    return REF_NAMES.get(workload, workload)


def value(med: Medians, workload: str, impl: str, metric: str) -> float | None:
    """The median of one metric, or None."""
    return med.get(workload, {}).get(impl, {}).get(metric)


def advantage(g: float | None, other: float | None, higher_better: bool) -> float | None:
    """How many times better gactors is than ``other`` (> 1 means gactors is better)."""
    if g is None or other is None or g <= 0 or other <= 0:
        return None
    return g / other if higher_better else other / g


def best_peer(med: Medians, row: Row, peers: list[str]) -> tuple[str, float] | None:
    """The best peer's median for ``row`` (highest rate or lowest time/size)."""
    found = [(p, v) for p in peers if (v := value(med, row.workload, p, row.metric)) is not None]
    if not found:
        return None
    pick = max if row.higher_better else min
    return pick(found, key=lambda pv: pv[1])


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return NA
    if unit == "s":
        return f"{v:.3f}"
    if unit == "µs":
        return f"{v:,.1f}"
    if unit == "x":
        return f"{v:.2f}"
    return f"{v:,.0f}"


def _fmt_ratio(r: float | None) -> str:
    return NA if r is None else f"{r:.2f}x"


def _fmt_round_ratio(r: Ratio | None) -> str:
    return NA if r is None else r.cell()


def _ref_cell(med: Medians, ref: tuple[str, str] | None, unit: str) -> str:
    """A reference's median, named: ``gevent Queue one-way 3,670,000``."""
    if ref is None:
        return ""
    v = value(med, ref[0], _limit_impl(ref[0]), ref[1])
    return f"{ref_name(ref[0])} {_fmt(v, unit)}"


def _cell(med: Medians, runs: list[Run], row: Row, impl: str, unit: str) -> str:
    v = value(med, row.workload, impl, row.metric)
    if v is not None:
        return _fmt(v, unit)
    reason = IMPLS[impl].na.get(row.workload)
    if reason:
        return NA
    mine = [r for r in runs if r.impl == impl and r.workload == row.workload]
    if not mine:
        return "-"
    if all(r.error.startswith(NA) for r in mine):
        return NA
    if any(r.error.startswith("timeout") for r in mine):
        return "timeout"
    return "error"


def _limit_impl(workload: str) -> str:
    return "redis" if workload in REDIS_WORKLOADS else "raw"


def table(
    med: Medians,
    runs: list[Run],
    impls: list[str],
    rows_spec: tuple[Row, ...] = ROWS,
    peer_names: tuple[str, ...] = PEERS,
) -> list[list[str]]:
    """The results table as rows of cells (first row is the header).

    Values are medians over the rounds. Each reference is named in its cell. The
    "vs" columns are per-round ratios (round i of gactors against round i of the
    other): ``median / minimum`` over the rounds, > 1 = gactors ahead. The best peer is
    the one with the best median. With a baseline (``--baseline``), a "vs baseline"
    column says how many times better this checkout is than the other one.
    """
    workloads = {r.workload for r in rows_spec}
    actor_impls = [
        i for i in impls if i not in LIMIT_IMPLS and any(w in IMPLS[i].workloads for w in workloads)
    ]
    peers = [p for p in peer_names if p in impls]
    with_base = BASELINE in actor_impls
    header = [
        "workload",
        "unit",
        *actor_impls,
        "primitive baseline",
        "physical floor",
        "vs best peer",
        "vs baseline",
        "vs floor",
    ]
    if with_base:
        header.append("vs old checkout")
    rows = [header]
    for row in rows_spec:
        if row.workload not in med and not any(r.workload == row.workload for r in runs):
            continue
        cells = [row.label, row.unit]
        cells += [_cell(med, runs, row, i, row.unit) for i in actor_impls]
        cells.append(_ref_cell(med, row.base, row.unit))
        cells.append(_ref_cell(med, row.floor, row.unit))
        bp = best_peer(med, row, peers)
        rr = round_ratio
        cells.append(
            _fmt_round_ratio(
                rr(runs, row.workload, row.metric, (bp[0], row.workload), row.higher_better)
            )
            if bp
            else NA
        )
        for ref in (row.base, row.floor):
            if ref is None:
                cells.append("")
                continue
            other = (_limit_impl(ref[0]), ref[0])
            cells.append(
                _fmt_round_ratio(rr(runs, row.workload, ref[1], other, row.higher_better))
                if ref[1] == row.metric
                else NA
            )
        if with_base:
            cells.append(
                _fmt_round_ratio(
                    rr(runs, row.workload, row.metric, (BASELINE, row.workload), row.higher_better)
                )
            )
        rows.append(cells)
    return rows


def raw_table(med: Medians) -> list[list[str]]:
    """The raw limits as rows of cells (first row is the header)."""
    rows = [["reference", "kind", "unit", "median", "what"]]
    floors = {"switch", "deque_call", "redis_evalsha"}
    for row in RAW_ROWS:
        v = value(med, row.workload, _limit_impl(row.workload), row.metric)
        if v is not None:
            kind = "physical floor" if row.workload in floors else "primitive baseline"
            if row.workload in ("sender_tell", "checked_tell"):
                kind = "pure-Python floor"
            rows.append(
                [
                    ref_name(row.workload),
                    kind,
                    row.unit,
                    _fmt(v, row.unit),
                    ALL_WORKLOADS[row.workload].description,
                ]
            )
    return rows


def numeric(cell: str) -> bool:
    """True for cells that hold a number (right-aligned in tables)."""
    return bool(cell) and (cell[0].isdigit() or cell in (NA, "timeout", "error", "-"))


def markdown(rows: list[list[str]]) -> str:
    """Render rows of cells as an aligned Markdown pipe table."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        cells = [
            c.rjust(w) if k and numeric(c) else c.ljust(w) for c, w in zip(r, widths, strict=True)
        ]
        out.append("| " + " | ".join(cells) + " |")
        if k == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


@dataclass(frozen=True)
class Target:
    """One performance target and its verdict."""

    name: str
    measured: str
    verdict: str  # PASS, MISS or n/a


def targets(med: Medians, runs: list[Run] | None = None) -> list[Target]:
    """The targets of issue #18 (:func:`core_targets`), then those of persistence
    (issue #25, :func:`persistence_targets`) when its workloads ran."""
    runs = runs or []
    return core_targets(med, runs) + persistence_targets(med, runs) + delivery_targets(runs)


def delivery_targets(runs: list[Run]) -> list[Target]:
    """The performance targets of issue #26 (SPEC section 20), on the worst round."""
    out: list[Target] = []
    checks = (
        ("reliable delivery ≥ 0.30x plain sharded tell", "delivery", "ratio", 0.30, True, "x"),
        ("reminders due in one second fired ≤ 2 s", "reminders_burst", "fired_s", 2.0, False, "s"),
    )
    for name, workload, metric, bound, hb, unit in checks:
        if not any(r.workload == workload for r in runs):
            continue
        v = worst_round(runs, workload, metric, hb)
        if v is None:
            out.append(Target(name, NA, NA))
            continue
        ok = v >= bound if hb else v <= bound
        out.append(Target(name, f"worst {_fmt(v, unit)} {unit}", "PASS" if ok else "MISS"))
    return out


def persistence_targets(med: Medians, runs: list[Run]) -> list[Target]:
    """The performance targets of issue #25 (SPEC section 19), on the worst round."""
    if not any(w in med for w in PERSISTENCE_WORKLOADS):
        return []
    out: list[Target] = []
    r = round_ratio(runs, "persist_seq", "rate", ("redis", "redis_evalsha"), True)
    name = "sequential persist ≥ 0.7x redis-py EVALSHA append"
    if r is None:
        out.append(Target(name, f"{NA} (missing data)", NA))
    else:
        measured = f"min {r.minimum:.2f}x, median {r.median:.2f}x ({r.rounds} round(s))"
        out.append(Target(name, measured, "PASS" if r.minimum >= 0.7 else "MISS"))
    # The same ratio with the floor measured in the persist_seq subprocess itself, in
    # alternating chunks (benchmarks/persistence.py): both under the same load.
    ratios = list(per_round(runs, "persist_seq", "gactors", "floor_ratio").values())
    name = "... floor interleaved in-process (chunks of 500)"
    if not ratios:
        out.append(Target(name, NA, NA))
    else:
        ratios.sort()
        measured = (
            f"min {ratios[0]:.2f}x, median {ratios[len(ratios) // 2]:.2f}x ({len(ratios)} round(s))"
        )
        out.append(Target(name, measured, "PASS" if ratios[0] >= 0.7 else "MISS"))
    limits = (
        ("1,000 actors persist ≥ 50,000 events/s", "persist_concurrent", "rate", 50_000, True),
        ("recovery of 10,000 events ≤ 0.5 s", "persist_recovery", "median_s", 0.5, False),
        ("... snapshot every 1,000 ≤ 50 ms", "persist_recovery_snap", "median_s", 0.05, False),
        ("SQLite, 1,000 actors ≥ 20,000 events/s", "persist_sqlite", "rate", 20_000, True),
        ("SQLite: hub never stalled > 50 ms", "persist_sqlite", "stall_ms", 50, False),
    )
    units = {"rate": "events/s", "median_s": "s", "stall_ms": "ms"}
    for name, workload, metric, bound, hb in limits:
        v = worst_round(runs, workload, metric, hb)
        if v is None:
            out.append(Target(name, NA, NA))
            continue
        ok = v >= bound if hb else v <= bound
        unit = units[metric]
        out.append(Target(name, f"worst {_fmt(v, unit)} {unit}", "PASS" if ok else "MISS"))
    return out


def core_targets(med: Medians, runs: list[Run] | None = None) -> list[Target]:
    """Evaluate the project's performance targets (issue #18) on this run.

    Every target must hold in each round, not only in the median: a ratio target is
    checked on the per-round minimum ratio (round i of gactors against round i of the
    other), a limit on gactors' worst round. ``measured`` shows both.
    """
    runs = runs or []
    rows = {r.label: r for r in ROWS}
    out: list[Target] = []

    def ratio_target(name: str, r: Ratio | None, need: float) -> None:
        if r is None:
            out.append(Target(name, f"{NA} (missing data)", NA))
        else:
            measured = f"min {r.minimum:.2f}x, median {r.median:.2f}x ({r.rounds} round(s))"
            out.append(Target(name, measured, "PASS" if r.minimum >= need else "MISS"))

    def vs_peer(label: str, peer: str | None = None) -> Ratio | None:
        row = rows[label]
        if peer is None:
            bp = best_peer(med, row, list(PEERS))
            if bp is None:
                return None
            peer = bp[0]
        return round_ratio(runs, row.workload, row.metric, (peer, row.workload), row.higher_better)

    def vs_ref(label: str, ref: str) -> Ratio | None:
        row = rows[label]
        return round_ratio(
            runs, row.workload, row.metric, (_limit_impl(ref), ref), row.higher_better
        )

    ratio_target("tell ≥ 2.5x best peer", vs_peer("tell"), 2.5)
    ratio_target("tell ≥ 0.6x gevent Queue one-way", vs_ref("tell", "queue_oneway"), 0.6)
    ratio_target(
        "ping_pong ≥ 4x gevent Queue ping-pong", vs_ref("ping_pong", "queue_ping_pong"), 4.0
    )
    ratio_target("ask ≥ 1.0x gevent Queue+AsyncResult ask", vs_ref("ask", "queue_ask"), 1.0)
    ratio_target("ask ≥ 1.6x Pykka 2.0.3 GeventActor", vs_peer("ask", "pykka2"), 1.6)
    ratio_target("spawn ≥ 5x best peer rate", vs_peer("spawn"), 5.0)
    ratio_target("stop ≥ 2x best peer", vs_peer("stop"), 2.0)
    # restart <= 1.3x the raw cycle's time: as an advantage, >= 1/1.3.
    r = vs_ref("restart", "greenlet_restart")
    name = "restart ≤ 1.3x greenlet respawn+ask"
    if r is None:
        out.append(Target(name, f"{NA} (missing data)", NA))
    else:
        out.append(
            Target(
                name,
                f"max {1 / r.minimum:.2f}x, median {1 / r.median:.2f}x ({r.rounds} round(s))",
                "PASS" if 1 / r.minimum <= 1.3 else "MISS",
            )
        )

    def limit_target(name: str, workload: str, metric: str, ok: Any, unit: str, hb: bool) -> None:
        v = worst_round(runs, workload, metric, hb)
        if v is None:
            v = value(med, workload, "gactors", metric)
        if v is None:
            out.append(Target(name, NA, NA))
        else:
            out.append(Target(name, f"worst {_fmt(v, unit)} {unit}", "PASS" if ok(v) else "MISS"))

    limit_target(
        "spawn ≤ 1.5 KiB per idle actor",
        "spawn",
        "bytes_per_actor",
        lambda v: v <= 1536,
        "B",
        False,
    )
    limit_target("restart median ≤ 50 µs", "restart", "median_us", lambda v: v <= 50, "µs", False)
    limit_target("blocking < 0.5 s", "blocking", "seconds", lambda v: v < 0.5, "s", False)
    if not any(w in med for w in ACTOR_WORKLOADS):
        out.clear()  # only the cluster section ran
    if not any(w in med for w in REMOTE_WORKLOADS):
        return out
    limit_target(
        "remote tell ≥ 200k msgs/s", "remote_tell", "rate", lambda v: v >= 200_000, "msgs/s", True
    )
    ratio_target(
        "remote tell ≥ 20x Thespian",
        round_ratio(runs, "remote_tell", "rate", ("thespian", "remote_tell"), True),
        20.0,
    )
    limit_target(
        "remote ask p50 ≤ 500 µs", "remote_ask", "median_us", lambda v: v <= 500, "µs", False
    )
    limit_target(
        "remote ask ≥ 2,000 asks/s", "remote_ask", "rate", lambda v: v >= 2000, "asks/s", True
    )
    limit_target(
        "100 concurrent askers ≥ 30k asks/s",
        "remote_ask_100",
        "rate",
        lambda v: v >= 30_000,
        "asks/s",
        True,
    )
    # Each round against its own bound.
    bounds = per_round(runs, "remote_detect", "gactors", "bound_s")
    detects = per_round(runs, "remote_detect", "gactors", "detect_s")
    both = sorted(bounds.keys() & detects.keys())
    name = "SIGKILL -> Terminated ≤ down + 2 beats"
    if not both:
        out.append(Target(name, NA, NA))
    else:
        worst = max(both, key=lambda rnd: detects[rnd] - bounds[rnd])
        ok = all(detects[rnd] <= bounds[rnd] for rnd in both)
        measured = f"worst {detects[worst]:.3f} s (bound {bounds[worst]:.3f} s)"
        out.append(Target(name, measured, "PASS" if ok else "MISS"))
    limit_target(
        "idle node ≤ 5 Redis commands per beat",
        "remote_idle",
        "per_beat",
        lambda v: v <= 5,
        "cmds",
        False,
    )
    return out


# ---------------------------------------------------------------- output


def machine_info() -> dict[str, Any]:
    """Where this ran."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_avg": load_avg(),
        "checkout": checkout(),
    }


def load_avg() -> str:
    """The 1/5/15-minute load averages, where the platform has them."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except (AttributeError, OSError):
        return "?"


def checkout() -> str:
    """``git describe --always --dirty`` of the repository, or ``?``."""
    try:
        proc = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            cwd=str(REPO_ROOT),
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return proc.stdout.strip() or "?"


def _versions_seen(runs: list[Run]) -> dict[str, dict[str, str]]:
    seen: dict[str, dict[str, str]] = {}
    for run in runs:
        if run.versions:
            seen.setdefault(run.impl, run.versions)
    return seen


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write the results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def plot(json_path: Path, out: Path) -> str:
    """Draw the chart with matplotlib, from this interpreter or the ``plot`` venv.

    Returns an empty string on success, else the reason it failed.
    """
    if importlib.util.find_spec("matplotlib") is not None:
        python = sys.executable
    else:
        try:
            python = str(ensure_venv(PLOT_VENV))
        except VenvError as exc:
            return f"cannot build the plot venv: {exc}"
    proc = subprocess.run(
        [python, str(BENCH_DIR / "plot.py"), str(json_path), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        return f"plot failed:\n{_tail(proc.stderr)}"
    return ""


def _rows_json(
    med: Medians, runs: list[Run], impls: list[str], spec: tuple[Row, ...]
) -> list[dict[str, Any]]:
    """The table's rows for the JSON file (and the plot): medians, each reference by
    name and kind, and the per-round ratios."""
    workloads = {r.workload for r in spec}
    shown = [
        i for i in impls if i not in LIMIT_IMPLS and any(w in IMPLS[i].workloads for w in workloads)
    ]

    def refs(row: Row) -> list[dict[str, Any]]:
        out = []
        for kind, ref in (("baseline", row.base), ("floor", row.floor)):
            if ref is None:
                continue
            r = (
                round_ratio(
                    runs, row.workload, row.metric, (_limit_impl(ref[0]), ref[0]), row.higher_better
                )
                if ref[1] == row.metric
                else None
            )
            out.append(
                {
                    "kind": kind,
                    "workload": ref[0],
                    "name": ref_name(ref[0]),
                    "value": value(med, ref[0], _limit_impl(ref[0]), ref[1]),
                    "ratio_median": r.median if r else None,
                    "ratio_min": r.minimum if r else None,
                }
            )
        return out

    return [
        {
            "label": row.label,
            "unit": row.unit,
            "higher_better": row.higher_better,
            "values": {i: value(med, row.workload, i, row.metric) for i in shown},
            "refs": refs(row),
        }
        for row in spec
    ]


def _run_rounds(
    args: argparse.Namespace,
    runtimes: dict[str, Runtime],
    tasks: list[tuple[str, str]],
    runs: list[Run],
    have_redis: bool,
) -> None:
    """Run every round of ``tasks``, appending to ``runs`` as they finish."""
    for rnd in range(1, args.rounds + 1):
        for impl_name, workload in tasks:
            rt = runtimes[impl_name]
            if rt.unavailable:
                continue
            if workload in rt.impl.na:
                if rnd == 1:
                    run = Run(impl_name, workload, rnd, 0.0, error=f"{NA}: {rt.impl.na[workload]}")
                    runs.append(run)
                    print(f"[{rnd}/{args.rounds}] {workload:<16} {impl_name:<8} {run.error}")
                continue
            if workload in NEEDS_REDIS and impl_name != "thespian" and not have_redis:
                # No server could be found (see the line printed at the start): a gap
                # shown as n/a, like an implementation that cannot run a workload.
                why = f"{NA}: no Redis-protocol server for the run"
                run = Run(impl_name, workload, rnd, 0.0, error=why)
            else:
                run = run_one(rt, workload, rnd, args.quick, args.timeout)
            runs.append(run)
            print(
                f"[{rnd}/{args.rounds}] {workload:<16} {impl_name:<8} "
                f"{_summary(run)}  ({run.wall_s:.1f} s)",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    """Run the harness; returns the process exit code."""
    args = parse_args(argv)
    if args.list:
        for w in ALL_WORKLOADS.values():
            kind = "raw" if w.name in RAW_WORKLOADS or w.name in REDIS_WORKLOADS else "actor"
            if w.name in PERSISTENCE_WORKLOADS:
                kind = "persist"
            if w.name in DELIVERY_WORKLOADS:
                kind = "§20"
            print(f"{w.name:<16} {kind:<5} n={w.n:<9,} per={w.per:<4} {w.description}")
        return 0
    t_start = time.perf_counter()
    info = machine_info()
    mode = "quick" if args.quick else "full"
    print(f"gactors benchmarks ({mode}), {info['date']}")
    print(f"  {info['cpus']} CPUs ({info['cpu']}), {info['platform']}, Python {info['python']}")
    print(f"  checkout {info['checkout']}, load average {info['load_avg']}")
    print(f"  rounds={args.rounds} timeout={args.timeout:.0f}s per subprocess")

    runtimes = prepare(args.impls, args.baseline)
    tasks = schedule(args.impls, args.workload_names)
    server: LocalServer | None = None
    redis_url = args.redis_url
    if not redis_url and any(w in NEEDS_REDIS for _, w in tasks):
        server = LocalServer()
        try:
            redis_url = server.start()
        except ServerError as exc:
            server = None
            print(f"  no Redis server: {exc}")
        else:
            print(f"  Redis server {redis_url} ({server.what})")
    elif redis_url:
        print(f"  Redis server {redis_url} (given)")
    for rt in runtimes.values():
        rt.env[REDIS_URL_ENV] = redis_url
    t_ready = time.perf_counter()
    for rt in runtimes.values():
        where = rt.unavailable or rt.python
        print(f"  {rt.impl.name:<8} {rt.impl.label}: {where}")
    available = [n for n, rt in runtimes.items() if not rt.unavailable]
    runs: list[Run] = []
    try:
        _run_rounds(args, runtimes, tasks, runs, bool(redis_url))
    finally:
        if server is not None:
            server.stop()

    med = medians(runs)
    impls_shown = [i for i in args.impls if i in available or runtimes[i].unavailable]
    print()
    print("Results: medians over rounds (rates: higher is better; s, µs, B: lower is better).")
    print("'vs ...': how many times better gactors is (> 1 = gactors ahead), per round")
    print("(round i against round i): median / minimum over the rounds.")
    print()
    if any(w in ACTOR_WORKLOADS for _, w in tasks):
        print(markdown(table(med, runs, impls_shown)))
    if any(w in REMOTE_WORKLOADS for _, w in tasks):
        print()
        print("Cluster: two node processes and one local Redis-protocol server")
        print("(baseline: redis-py alone on the same server; 'best peer': Thespian).")
        print()
        print(markdown(table(med, runs, impls_shown, REMOTE_ROWS, REMOTE_PEERS)))
    if any(w in PERSISTENCE_WORKLOADS for _, w in tasks):
        print()
        print("Persistence (gactors.persistence): the redis store on that server, and SQLite")
        print("(floor: redis-py EVALSHA of a minimal append script, one call after another).")
        print()
        print(markdown(table(med, runs, impls_shown, PERSISTENCE_ROWS, ())))
    if any(w in DELIVERY_WORKLOADS for _, w in tasks):
        print()
        print("Reminders and reliable delivery (SPEC §20): one cluster node on that server,")
        print("100 entities / shards; plain tell and reliable delivery interleaved in one run.")
        print()
        print(markdown(table(med, runs, impls_shown, DELIVERY_ROWS, ())))
    raw_rows = raw_table(med)
    if len(raw_rows) > 1:
        print()
        print(markdown(raw_rows))
    verdicts = targets(med, runs)
    print()
    print("Targets:")
    for t in verdicts:
        print(f"  {t.verdict:<4}  {t.name:<44} {t.measured}")
    problems = [r for r in runs if (r.error and not r.error.startswith(NA)) or r.warning]
    unavailable = {n: rt.unavailable for n, rt in runtimes.items() if rt.unavailable}
    if unavailable or problems:
        print()
        print("Notes:")
        for name, why in unavailable.items():
            print(f"  {name}: unavailable: {why}")
        for r in problems:
            text = (r.error or r.warning).rstrip()
            print(f"  round {r.round} {r.workload} {r.impl}: {text}".replace("\n", "\n      "))
    total = time.perf_counter() - t_start
    info["load_avg_end"] = load_avg()
    print()
    print(f"load average at the end: {info['load_avg_end']}")
    print(
        f"wall time {total:.1f} s (of which environments {t_ready - t_start:.1f} s, "
        f"{len([r for r in runs if r.wall_s])} subprocesses)"
    )

    payload = {
        "machine": info,
        "mode": mode,
        "rounds": args.rounds,
        "timeout_s": args.timeout,
        "wall_s": total,
        "implementations": {
            n: {"label": rt.impl.label, "python": rt.python, "unavailable": rt.unavailable}
            for n, rt in runtimes.items()
        },
        "versions": _versions_seen(runs),
        "counts": {
            w: dict(zip(("n", "per"), ALL_WORKLOADS[w].counts(args.quick), strict=True))
            for w in {r.workload for r in runs}
        },
        "runs": [r.__dict__ for r in runs],
        "medians": med,
        "rows": _rows_json(med, runs, args.impls, ROWS),
        "remote_rows": _rows_json(med, runs, args.impls, REMOTE_ROWS),
        "persistence_rows": _rows_json(med, runs, args.impls, PERSISTENCE_ROWS),
        "delivery_rows": _rows_json(med, runs, args.impls, DELIVERY_ROWS),
        "targets": [t.__dict__ for t in verdicts],
    }
    json_path = Path(args.json) if args.json else None
    if json_path:
        write_json(json_path, payload)
        print(f"results written to {json_path}")
    if args.plot:
        if json_path is None:
            fd, tmp = tempfile.mkstemp(suffix=".json", prefix="gactors-bench-")
            os.close(fd)
            json_path = Path(tmp)
            write_json(json_path, payload)
        err = plot(json_path, Path(args.plot))
        print(err if err else f"chart written to {args.plot}")
        if err:
            return 1
    # A smoke test must fail when something could not be measured (targets never fail it).
    return 1 if unavailable or [r for r in runs if r.error and not r.error.startswith(NA)] else 0

"""Draw the benchmark medians as a grid of bar charts.

Run as ``python plot.py RESULTS.json OUT.png`` with an interpreter that has matplotlib
(the harness uses its own, or builds ``benchmarks/.venvs/plot``). When the results have
the cluster section, it is drawn to a second file beside OUT: ``OUT-cluster.png``.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from typing import Any

COLORS = {
    "gactors": "#2b7bba",
    "baseline": "#76b7b2",
    "pykka4": "#f28e2b",
    "pykka2": "#e15759",
    "thespian": "#b07aa1",
    "raw": "#9c9c9c",
    "baseline-ref": "#9c9c9c",
    "floor-ref": "#cfcfcf",
}
NAMES = {
    "gactors": "gactors",
    "baseline": "gactors\nbaseline",
    "pykka4": "Pykka 4\nThreading",
    "pykka2": "Pykka 2.0.3\nGevent",
    "thespian": "Thespian\nmultiprocTCP",
    "raw": "raw\nlimit",
}


def _wrap(name: str, kind: str) -> str:
    """A reference's name on short lines, with its kind (gevent-primitive baseline or
    physical floor) below."""
    what = "(floor)" if kind == "floor" else "(gevent)"
    return textwrap.fill(name, 12) + "\n" + what


def _label(v: float, unit: str) -> str:
    if unit == "s":
        return f"{v:.3f}"
    if unit == "µs":
        return f"{v:.1f}"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    if v < 100:
        return f"{v:.1f}"
    return f"{v:.0f}"


def cluster_path(out: str) -> str:
    """Where the cluster section's chart goes: ``perf.png`` -> ``perf-cluster.png``."""
    stem, dot, ext = out.rpartition(".")
    return f"{stem}-cluster.{ext}" if dot else f"{out}-cluster"


def draw(results: dict[str, Any], out: str) -> None:
    """Render ``results`` (the harness JSON) to ``out`` (and its cluster section beside)."""
    m = results["machine"]
    when = f"{m['date']}, {m['cpus']} CPUs, Python {m['python']}, median of {results['rounds']}"
    if _has_values(results.get("rows", [])):
        _draw_rows(results["rows"], f"gactors benchmarks, {when} round(s)", out)
    if _has_values(results.get("remote_rows", [])):
        title = f"gactors cluster (two nodes, one Redis), {when} round(s)"
        _draw_rows(results["remote_rows"], title, cluster_path(out))


def _has_values(rows: list[dict[str, Any]]) -> bool:
    return any(v is not None for r in rows for v in r["values"].values())


def _draw_rows(all_rows: list[dict[str, Any]], title: str, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rows = [r for r in all_rows if any(v is not None for v in r["values"].values())]
    cols = 3
    nrows = max(1, math.ceil(len(rows) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    for ax in axes.flat[len(rows) :]:
        ax.axis("off")
    for ax, row in zip(axes.flat, rows, strict=False):
        names = list(row["values"])
        values = [row["values"][n] for n in names]
        labels = [NAMES.get(n, n) for n in names]
        colors = [COLORS.get(n, "#777777") for n in names]
        # Each reference by its name: the gevent-primitive baseline (same job, built on
        # the gevent primitive) and the physical floor (greenlet switch, deque + call).
        for ref in row.get("refs", []):
            if ref["value"] is None:
                continue
            values.append(ref["value"])
            labels.append(_wrap(ref["name"], ref["kind"]))
            colors.append(COLORS[f"{ref['kind']}-ref"])
        if row.get("raw") is not None:  # a results file of an older harness
            values.append(row["raw"])
            labels.append(NAMES["raw"])
            colors.append(COLORS["raw"])
        heights = [v if v is not None else 0.0 for v in values]
        bars = ax.bar(range(len(values)), heights, color=colors)
        top = max(heights) or 1.0
        for bar, v in zip(bars, values, strict=True):
            text = "n/a" if v is None else _label(v, row["unit"])
            ax.text(
                bar.get_x() + bar.get_width() / 2,
                bar.get_height() + top * 0.02,
                text,
                ha="center",
                va="bottom",
                fontsize=8,
            )
        better = "higher is better" if row["higher_better"] else "lower is better"
        ax.set_title(f"{row['label']} ({row['unit']}, {better})", fontsize=9)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(labels, fontsize=6)
        ax.set_ylim(0, top * 1.18)
        ax.tick_params(axis="y", labelsize=7)
        ax.yaxis.set_major_formatter(
            FuncFormatter(lambda v, _pos, unit=row["unit"]: _label(v, unit) if v else "0")
        )
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str]) -> int:
    """``plot.py RESULTS.json OUT.png``."""
    if len(argv) != 2:
        sys.stderr.write("usage: plot.py RESULTS.json OUT.png\n")
        return 2
    with open(argv[0], encoding="utf-8") as f:
        draw(json.load(f), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

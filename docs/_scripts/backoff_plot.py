"""Plot the delays of the built-in backoff policies (docs/_static/backoff-delays.png).

The points are real delays drawn from gactors' own policy classes (seeded, so the
picture is reproducible). Run from the repository root, then commit the PNG::

    python docs/_scripts/backoff_plot.py
"""

from __future__ import annotations

import random
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt

from gactors.backoff import (
    ConstantBackoff,
    DecorrelatedJitterBackoff,
    ExponentialBackoff,
    FullJitterBackoff,
)

OUT = Path(__file__).resolve().parent.parent / "_static" / "backoff-delays.png"
MIN, MAX, FACTOR = 3.0, 30.0, 0.2  # the example of the docs (and of Akka's)
RESTARTS = 8
RUNS = 60  # simulated supervisors, each restarting its child RESTARTS times


def sample(policy_cls: type, seed: int) -> list[list[float]]:
    """delays[n][run]: the delay before restart n+1 for each simulated supervisor."""
    rng = random.Random(seed)
    delays: list[list[float]] = [[] for _ in range(RESTARTS)]
    for _ in range(RUNS):
        policy = policy_cls(MIN, MAX, FACTOR, rng=rng)  # one policy per supervisor
        for n in range(RESTARTS):
            delays[n].append(policy.next_delay(n))
    return delays


def main() -> None:
    policies = [
        ("exponential (default)", ExponentialBackoff, "#2f6fde"),
        ("full-jitter", FullJitterBackoff, "#2f9e44"),
        ("decorrelated-jitter", DecorrelatedJitterBackoff, "#c98a1b"),
        ("constant", ConstantBackoff, "#7b8794"),
    ]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)

    # Left: the default policy, its band and the cumulative time to each restart.
    delays = sample(ExponentialBackoff, 1)
    xs = range(1, RESTARTS + 1)
    low = [min(MAX, MIN * 2**n) for n in range(RESTARTS)]
    left.fill_between(
        xs,
        low,
        [v * (1 + FACTOR) for v in low],
        color="#2f6fde",
        alpha=0.18,
        label="min(max, min·2ⁿ) · [1, 1 + random_factor)",
    )
    spread = random.Random(0)  # horizontal jitter, so that the points do not overlap
    for n, ds in enumerate(delays):
        left.scatter(
            [n + 1 + spread.uniform(-0.15, 0.15) for _ in ds], ds, s=6, color="#2f6fde", alpha=0.5
        )
    left.axhline(MAX, color="#d64545", lw=1, ls="--", label=f"max_backoff = {MAX:g} s")
    left.set_title(
        f'"exponential": min_backoff={MIN:g}, max_backoff={MAX:g}, random_factor={FACTOR:g}',
        fontsize=10,
    )
    left.set_xlabel("restart number (since the start or the last reset)")
    left.set_ylabel("delay before the restart (s)")
    left.set_xticks(list(xs))
    left.set_ylim(0, 40)
    left.legend(loc="upper left", fontsize=8, frameon=False)

    # Right: the four built-in policies, median and spread per restart.
    for label, cls, color in policies:
        ds = sample(cls, 2)
        med = [sorted(d)[len(d) // 2] for d in ds]
        lo = [min(d) for d in ds]
        hi = [max(d) for d in ds]
        right.plot(xs, med, marker="o", ms=3, color=color, label=label)
        right.fill_between(xs, lo, hi, color=color, alpha=0.12)
    right.set_title(
        f"the built-in policies ({RUNS} supervisors each: median and range)", fontsize=10
    )
    right.set_xlabel("restart number")
    right.set_ylabel("delay (s)")
    right.set_xticks(list(xs))
    right.set_ylim(0, 40)
    right.legend(loc="upper left", fontsize=8, frameon=False)

    for ax in (left, right):
        ax.grid(alpha=0.25)
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(OUT, facecolor="white", metadata={"Software": None})
    print("wrote", OUT)


if __name__ == "__main__":
    main()

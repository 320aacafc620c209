"""The built-in backoff policies: ``exponential``, ``full-jitter``,
``decorrelated-jitter`` and ``constant``.

Each is a class implementing :class:`~gactors.interfaces.IBackoffPolicy` whose
constructor is the factory signature ``(min_backoff, max_backoff, random_factor)``; an
optional ``rng`` (a :class:`random.Random`) makes the delays reproducible.
"""

from __future__ import annotations

import math
import random
from typing import Any

from zope.interface import implementer

from gactors.interfaces import IBackoffPolicy

__all__ = [
    "BUILTIN_POLICIES",
    "BackoffPolicy",
    "ConstantBackoff",
    "DecorrelatedJitterBackoff",
    "ExponentialBackoff",
    "FullJitterBackoff",
]


def _capped_exponential(min_backoff: float, max_backoff: float, restart_count: int) -> float:
    """``min(max_backoff, min_backoff * 2**restart_count)`` without overflowing."""
    if restart_count >= 1024 or min_backoff == 0:
        # 2**1024 overflows a float; the cap has long been reached anyway.
        return max_backoff if min_backoff > 0 else 0.0
    return min(max_backoff, min_backoff * math.ldexp(1.0, restart_count))


@implementer(IBackoffPolicy)
class BackoffPolicy:
    """Base class of the built-in policies: keeps the three parameters and a RNG."""

    def __init__(
        self,
        min_backoff: float,
        max_backoff: float,
        random_factor: float,
        rng: random.Random | None = None,
    ) -> None:
        self.min_backoff = float(min_backoff)
        self.max_backoff = float(max_backoff)
        self.random_factor = float(random_factor)
        self.rng: Any = rng if rng is not None else random

    def next_delay(self, restart_count: int) -> float:
        """Seconds to wait before restart number ``restart_count`` (0-based)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget any state (nothing, for a stateless policy)."""

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(min_backoff={self.min_backoff}, "
            f"max_backoff={self.max_backoff}, random_factor={self.random_factor})"
        )


class ExponentialBackoff(BackoffPolicy):
    """``"exponential"`` (the default), Akka's formula::

        delay(n) = min(max_backoff, min_backoff * 2**n) * (1 + random() * random_factor)

    so with 3 s / 30 s / 0.2 the delays fall in [3, 3.6), [6, 7.2), [12, 14.4),
    [24, 28.8), then [30, 36). Note that the random part may take a delay above
    ``max_backoff`` (by at most the factor ``1 + random_factor``).
    """

    def next_delay(self, restart_count: int) -> float:
        base = _capped_exponential(self.min_backoff, self.max_backoff, restart_count)
        return base * (1.0 + float(self.rng.random()) * self.random_factor)


class FullJitterBackoff(BackoffPolicy):
    """``"full-jitter"``: uniformly random in ``[0, min(max_backoff, min_backoff * 2**n)]``.

    The "full jitter" of the well-known AWS article on backoff and jitter: it spreads
    the restarts of many supervisors best, at the price of sometimes restarting at
    once. ``random_factor`` is not used (the delay is random by construction).
    """

    def next_delay(self, restart_count: int) -> float:
        cap = _capped_exponential(self.min_backoff, self.max_backoff, restart_count)
        return float(self.rng.uniform(0.0, cap))


class DecorrelatedJitterBackoff(BackoffPolicy):
    """``"decorrelated-jitter"``: ``min(max_backoff, uniform(min_backoff, previous * 3))``.

    Each delay depends on the previous one (starting from ``min_backoff``), not on
    the restart count; :meth:`reset` starts again from ``min_backoff``. So the delays
    always lie in ``[min_backoff, max_backoff]`` and grow by at most a factor 3 per
    restart. ``random_factor`` is not used.
    """

    def __init__(
        self,
        min_backoff: float,
        max_backoff: float,
        random_factor: float,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(min_backoff, max_backoff, random_factor, rng)
        self.previous = self.min_backoff

    def next_delay(self, restart_count: int) -> float:
        upper = max(self.min_backoff, self.previous * 3.0)
        delay = min(self.max_backoff, float(self.rng.uniform(self.min_backoff, upper)))
        self.previous = delay
        return delay

    def reset(self) -> None:
        """Start again from ``min_backoff``."""
        self.previous = self.min_backoff


class ConstantBackoff(BackoffPolicy):
    """``"constant"``: ``min_backoff * (1 + random() * random_factor)`` every time.

    ``max_backoff`` is not used.
    """

    def next_delay(self, restart_count: int) -> float:
        return self.min_backoff * (1.0 + float(self.rng.random()) * self.random_factor)


BUILTIN_POLICIES: dict[str, type[BackoffPolicy]] = {
    "exponential": ExponentialBackoff,
    "full-jitter": FullJitterBackoff,
    "decorrelated-jitter": DecorrelatedJitterBackoff,
    "constant": ConstantBackoff,
}
"""The built-in policies by registered name."""

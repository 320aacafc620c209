"""Values the bad-input tests feed the API (issue 8), shared by the modules that test
each entry point (``from _inputs import BAD_TIMEOUTS``); see ``_actors`` for why
``tests/`` is importable."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from gevent.threadpool import ThreadPool

__all__ = ["BAD_TIMEOUTS", "NAN", "NOT_DURATIONS", "WAIT", "in_thread", "short"]

WAIT = 5.0
"""Seconds any wait of these tests may take: nothing here may hang."""
NAN = float("nan")

BAD_TIMEOUTS = [0, -1, -0.5, NAN, math.inf, 10**400, 1e300, timedelta(seconds=-1)]
"""Durations refused (ValueError) wherever a positive number of seconds is required."""
NOT_DURATIONS = ["1", b"1", True, [1], object()]
"""Refused (TypeError) wherever a duration is required: not a number or a timedelta."""


def short(value: Any) -> str:
    """A test id that stays readable for 10**400."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} chars)"


def in_thread(fn: Any, *args: Any) -> Any:
    """Run ``fn`` in a real OS thread; the calling greenlet waits cooperatively."""
    pool = ThreadPool(1)
    try:
        return pool.spawn(fn, *args).get(timeout=WAIT * 2)
    finally:
        pool.kill()

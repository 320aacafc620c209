"""The one validator of durations (float seconds or ``timedelta``; docs/api/index.md).

Every timeout gactors takes goes through :func:`seconds`, so that each kind of mistake
gets the same error everywhere: :class:`TypeError` for a value that is not a duration
at all (a string, ``True``, a list), :class:`ValueError` for a duration gactors cannot
wait for (negative, zero where a wait must be positive, NaN, infinite or too large to
arm a timer or a lock with). The message names the parameter.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Final

from gevent import monkey

__all__ = ["MAX_SECONDS", "seconds"]

MAX_SECONDS: Final[float] = float(monkey.get_original("_thread", "TIMEOUT_MAX"))
"""The longest wait accepted: what a real lock can wait for (about 292 years on Linux).
Beyond it a lock wait raises OverflowError, and nobody means it."""


def _show(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    return repr(value)


def seconds(
    value: object, name: str, *, zero_ok: bool = False, negative_is_now: bool = False
) -> float:
    """``value`` (int, float or timedelta) as float seconds, or a clear error naming ``name``.

    ``zero_ok``: 0 is accepted (a poll, such as ``Future.get(0)``); otherwise the
    duration must be positive. ``negative_is_now``: a delay before something happens,
    where a negative one means "as soon as possible" (as in Akka's scheduler): 0.
    """
    if type(value) is float:  # the common cases first: this runs on every ask with a timeout
        result: float = value
    elif type(value) is int or (type(value) is not bool and isinstance(value, (int, float))):
        try:
            result = float(value)
        except OverflowError:
            result = math.inf  # an int beyond any float: refused as too large below
    elif isinstance(value, timedelta):
        result = value.total_seconds()
    else:
        raise TypeError(
            f"{name} must be a number of seconds or a timedelta, not {type(value).__name__} "
            f"{_show(value)}"
        )
    if 0 < result <= MAX_SECONDS:
        return result
    if result != result:
        raise ValueError(f"{name} must be a number of seconds, not NaN")
    if negative_is_now and result <= 0:
        return 0.0
    if result < 0 or (result == 0 and not zero_ok):
        raise ValueError(
            f"{name} must be {'>= 0' if zero_ok else '> 0'} seconds, not {_show(value)}"
        )
    if result > MAX_SECONDS:
        raise ValueError(
            f"{name} is too large: {_show(value)} (at most {MAX_SECONDS:.0f} s; gactors never "
            "waits without end)"
        )
    return result

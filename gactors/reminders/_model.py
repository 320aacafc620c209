"""Reminders' values: targets, due times, misfire plans (no I/O here)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = ["MAX_CATCH_UP", "MISFIRE", "Reminder", "Target", "due_ms", "period_ms", "plan", "target"]

MISFIRE = ("once", "all", "skip")
MAX_CATCH_UP = 1000
"""``misfire="all"`` fires at most this many missed due times on recovery."""


@dataclass(frozen=True)
class Target:
    """Who a reminder is for: ``kind`` is ``"entity"`` (``type_name``, ``entity_id``),
    ``"singleton"`` (``name``) or ``"path"`` (``path``)."""

    kind: str
    type_name: str = ""
    entity_id: str = ""
    name: str = ""
    path: str = ""

    def __str__(self) -> str:
        if self.kind == "entity":
            return f"entity {self.type_name}/{self.entity_id}"
        if self.kind == "singleton":
            return f"singleton {self.name}"
        return f"path {self.path}"


@dataclass(frozen=True)
class Reminder:
    """A stored reminder as the tick reads it (``due`` and ``period`` in ms)."""

    name: str
    target: Target
    message: Any
    due: int
    period: int | None
    misfire: str


def target(
    entity: Any = None, singleton: Any = None, path: Any = None, *, what: str = "target"
) -> Target:
    """The one target among ``entity=``, ``singleton=``, ``path=`` (ValueError/TypeError
    naming the problem otherwise)."""
    given = [
        k
        for k, v in (("entity", entity), ("singleton", singleton), ("path", path))
        if v is not None
    ]
    if not given:
        raise ValueError(
            f"a reminder {what} is needed: pass exactly one of entity=(type_name, entity_id), "
            "singleton=name or path='/user/...'"
        )
    if len(given) > 1:
        raise ValueError(
            f"a reminder has one {what}, got {' and '.join(given)}: pass exactly one of "
            "entity=, singleton=, path="
        )
    if entity is not None:
        if not (isinstance(entity, tuple) and len(entity) == 2):
            raise TypeError(f"entity= must be a tuple (type_name, entity_id), not {entity!r}")
        type_name, entity_id = entity
        if not isinstance(type_name, str) or not type_name or "/" in type_name:
            raise ValueError(
                f"entity type_name must be a non-empty str without '/', not {type_name!r}"
            )
        if not isinstance(entity_id, str) or "\x00" in entity_id:
            raise TypeError(f"entity_id must be a str (without NUL), not {entity_id!r}")
        return Target("entity", type_name=type_name, entity_id=entity_id)
    if singleton is not None:
        if not isinstance(singleton, str) or not singleton or "/" in singleton:
            raise ValueError(f"singleton= must be a non-empty str without '/', not {singleton!r}")
        return Target("singleton", name=singleton)
    p = str(path) if not isinstance(path, str) and hasattr(path, "elements") else path
    if not isinstance(p, str) or not p.startswith("/"):
        raise ValueError(
            "path= must be an absolute actor path of this system such as '/user/cart', "
            f"not {path!r}"
        )
    return Target("path", path=p)


def check_name(name: Any) -> str:
    """A reminder name: a non-empty str without NUL."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"a reminder name must be a non-empty str without NUL, not {name!r}")
    return name


def due_ms(due: Any, now: float | None = None) -> int:
    """``due`` (seconds from now, a ``timedelta`` or an aware ``datetime``) as epoch ms."""
    now = time.time() if now is None else now
    if isinstance(due, datetime):
        if due.tzinfo is None or due.tzinfo.utcoffset(due) is None:
            raise ValueError(
                f"due={due!r} is a naive datetime: give it a timezone (datetime.now(timezone.utc) "
                "+ ...), or pass seconds or a timedelta"
            )
        return math.ceil(due.timestamp() * 1000)
    if isinstance(due, timedelta):
        seconds = due.total_seconds()
    elif isinstance(due, (int, float)) and not isinstance(due, bool):
        seconds = float(due)
    else:
        raise TypeError(
            "due must be seconds (a number), a timedelta or an aware datetime, not "
            f"{type(due).__name__}"
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"due must be >= 0 seconds from now, not {due!r}")
    return math.ceil((now + seconds) * 1000)


def period_ms(period: Any) -> int | None:
    """``period`` (None, seconds or a ``timedelta``) in ms, > 0."""
    if period is None:
        return None
    if isinstance(period, timedelta):
        seconds = period.total_seconds()
    elif isinstance(period, (int, float)) and not isinstance(period, bool):
        seconds = float(period)
    else:
        raise TypeError(f"period must be None, seconds or a timedelta, not {type(period).__name__}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(
            f"period must be > 0 seconds (or None for a one-shot reminder), not {period!r}"
        )
    ms = round(seconds * 1000)
    if ms < 1:
        raise ValueError(f"period must be at least 1 ms, not {period!r}")
    return ms


def check_misfire(misfire: Any) -> str:
    if misfire not in MISFIRE:
        raise ValueError(f"misfire must be one of {', '.join(map(repr, MISFIRE))}, not {misfire!r}")
    return str(misfire)


def plan(
    due: int, period: int | None, misfire: str, now: int, grace: int
) -> tuple[int, int | None]:
    """What a tick at ``now`` does with a reminder due at ``due`` (<= now): ``(fires,
    next due or None)``. One due time passed: it fires once. Several passed (no node
    could run it meanwhile): ``once`` fires once, ``all`` once per passed time (at most
    :data:`MAX_CATCH_UP`), ``skip`` none of them -- except the latest when it is no
    more than ``grace`` ms late (an ordinary tick, not a recovery). A one-shot reminder
    fires once whatever its lateness. The next due time is always in the future."""
    if period is None:
        return 1, None
    passed = (now - due) // period + 1
    nxt = due + passed * period
    if passed == 1:
        return 1, nxt
    if misfire == "once":
        return 1, nxt
    if misfire == "all":
        return min(passed, MAX_CATCH_UP), nxt
    latest = nxt - period
    return (1 if now - latest <= grace else 0), nxt

"""The dashboard's views besides the tree: one actor in detail (``api/actor``), the
reliable-delivery producers and the reminders of this node (``api/state``).

Everything here reads; the views that read actors run in the system's hub thread (the
observer carries them over). The reminders come from their store (one Redis round trip
or one SQLite query): a request never waits for that I/O. It reads the last list,
and a stale list (older than :data:`REMINDERS_EVERY` seconds) is refreshed by a greenlet
of the system's hub, so the next poll has the new one.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, Any

import gevent

from gactors._drilldown import actor_in_hub, producer_of
from gactors._extension import ExtensionId
from gactors._observer import SystemObserver
from gactors._threads import get_ident

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = [
    "REMINDERS_EVERY",
    "REMINDERS_SHOWN",
    "actor_view",
    "delivery_view",
    "reminders_view",
    "sum_class_events",
]

_log = logging.getLogger("gactors.dashboard")

REMINDERS_EVERY = 2.0
"""Seconds a list of reminders read from the store is shown before it is read again."""

REMINDERS_SHOWN = 200
"""Reminders read, at most (the earliest due first)."""


# -- one actor ----------------------------------------------------------------------------------
def actor_view(obs: SystemObserver, path: str) -> dict[str, Any] | None:
    """One actor in detail, or None if there is no actor at ``path``: its row, its
    mailbox depth over time (sampled every second from the first time a page asked,
    for a minute after the last), its last failure with the traceback, its children,
    the actors it watches and that watch it, and, for a persistent actor, its
    persistence id, sequence number and fencing token (its row's ``persistence``)."""
    view = obs.in_hub(actor_in_hub, obs, path)
    if view is None:
        return None
    view["reminders"] = _reminders_of(obs.system, view["node"]["path"], view["entity"])
    return view


def delivery_view(obs: SystemObserver) -> list[dict[str, Any]]:
    """Every reliable-delivery producer of this node (the ``delivery-*`` actors under
    ``/user``): unconfirmed messages, per entity for the ones with the most."""
    if "gactors.delivery._producer" not in sys.modules:
        return []  # no ReliableSender was ever made in this process
    return obs.in_hub(_delivery_in_hub, obs)


def _delivery_in_hub(obs: SystemObserver) -> list[dict[str, Any]]:
    user = obs.cell_at("/user")
    out: list[dict[str, Any]] = []
    if user is None:
        return out
    for name, child in user.child_cells.items():
        if name.startswith("delivery-"):
            view = producer_of(child.actor)
            if view is not None:
                out.append(view)
    out.sort(key=lambda p: (p["type_name"], p["producer_id"]))
    return out


# -- reminders ----------------------------------------------------------------------------------
class _RemindersCache:
    """The last list of reminders read from the store, and the refresh in flight."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] | None = None
        self.read_at = 0.0  # monotonic
        self.as_of: float | None = None  # wall time of the read
        self.error: str | None = None
        self.busy = False

    def refresh(self, rem: Any) -> None:
        try:
            self.rows = rem.upcoming(REMINDERS_SHOWN)
            self.as_of = time.time()
            self.error = None
        except Exception as e:  # the store is down: the page says so
            self.error = f"{type(e).__name__}: {e}"
            _log.debug("reading the reminders failed", exc_info=True)
        finally:
            self.read_at = time.monotonic()
            self.busy = False


class _RemindersCacheExtension(ExtensionId[_RemindersCache]):
    def create(self, system: ActorSystem) -> _RemindersCache:
        return _RemindersCache()


def _reminders_ext(system: ActorSystem) -> Any:
    mod = sys.modules.get("gactors.reminders._extension")
    if mod is None or not system.has_extension(mod.RemindersExtension):
        return None
    return system.extension(mod.RemindersExtension)


def reminders_view(system: ActorSystem) -> dict[str, Any] | None:
    """The reminders this node fires, per target with its next due time, or None when
    the system does not use reminders: ``{"as_of", "error", "count", "targets":
    [{"target", "next_due", "names": [...]}]}`` (the earliest :data:`REMINDERS_SHOWN`)."""
    rem = _reminders_ext(system)
    if rem is None:
        return None
    cache = system.extension(_RemindersCacheExtension)
    if not cache.busy and time.monotonic() - cache.read_at >= REMINDERS_EVERY:
        cache.busy = True
        if get_ident() == system._tid:
            gevent.spawn(cache.refresh, rem)
        else:
            system.run_in_hub_async(gevent.spawn, cache.refresh, rem)
    targets: dict[str, dict[str, Any]] = {}
    for r in cache.rows or ():
        t = targets.get(r["target"])
        if t is None:
            t = targets[r["target"]] = {"target": r["target"], "next_due": r["due"], "names": []}
        t["names"].append({"name": r["name"], "due": r["due"]})
        t["next_due"] = min(t["next_due"], r["due"])
    return {
        "as_of": cache.as_of,
        "error": cache.error,
        "count": len(cache.rows or ()),
        "limit": REMINDERS_SHOWN,
        "targets": sorted(targets.values(), key=lambda t: t["next_due"]),
    }


def _reminders_of(
    system: ActorSystem, path: str, entity: tuple[str, str] | None
) -> list[Any] | None:
    """The reminders (from the last list read) whose target is this actor: its path in a
    single process, ``type/id`` for an entity, ``singleton name`` for a singleton."""
    view = reminders_view(system)
    if view is None:
        return None
    names = {path}
    if entity:
        names.add(f"{entity[0]}/{entity[1]}")
    if path.rpartition("/")[2] == "singleton" and "/singletonManager-" in path:
        names.add("singleton " + path.split("/singletonManager-")[1].split("/")[0])
    for t in view["targets"]:
        if t["target"] in names:
            return list(t["names"])
    return []


# -- the cluster ------------------------------------------------------------------------------
def sum_class_events(views: list[dict[str, Any] | None]) -> dict[str, Any]:
    """The nodes' restarts and dead letters per class and second (each node's
    ``class_events``), added up second by second; ``omitted`` is the largest of theirs."""
    per_class: dict[str, dict[str, dict[int, int]]] = {}
    end = 0
    omitted = 0
    for v in views:
        if not isinstance(v, dict):
            continue  # a node of an older gactors: not counted here
        end = max(end, v["end"])
        omitted = max(omitted, v.get("omitted", 0))
        for label, kinds in v["classes"].items():
            target = per_class.setdefault(label, {"restarts": {}, "dead_letters": {}})
            for kind, values in kinds.items():
                start = v["end"] - len(values) + 1
                acc = target.setdefault(kind, {})
                for i, n in enumerate(values):
                    acc[start + i] = acc.get(start + i, 0) + n
    end = end or int(time.time())
    first = min(
        (min(acc) for kinds in per_class.values() for acc in kinds.values() if acc),
        default=end + 1,
    )
    return {
        "end": end,
        "classes": {
            label: {
                kind: [acc.get(sec, 0) for sec in range(first, end + 1)]
                for kind, acc in kinds.items()
            }
            for label, kinds in per_class.items()
        },
        "omitted": omitted,
    }

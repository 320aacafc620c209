"""What the dashboard, the Prometheus metrics and the cluster's inspector read: the one
place that observes an actor system (an extension: one observer per system).

The observer subscribes to the event stream for the events that are not state but
history (``DeadLetter``, ``HubBlocked`` and the supervisors' ``FailureHandled``, which
carry their ``directive`` and are published whether or not the strategy logs) and keeps
a bounded record of them, grouped too, and a per-second history of the last ten minutes
(messages, restarts, dead letters), sampled by a one-second timer. The live state
(actors, mailbox depths, restart counts) is read by walking the cells on demand.

Why it is shaped like this:

* Walks run in the system's hub thread (cells are only ever touched there) and in one
  go, without a greenlet switch, so they see a consistent tree. A caller on another OS
  thread is carried over to the hub thread.
* Walks are iterative (trees can be thousands of levels deep) and bounded: the full walk
  that counts actors stops after :data:`MAX_WALK` cells, and its result is reused for
  :data:`TOTALS_TTL` seconds, or longer after a long walk (:data:`WALK_SHARE`), so any
  number of open pages cost two walks a second and 2 % of the hub's time at most. The
  tree view only visits the children of the nodes a page has open, at most ``limit``
  each.
* Nothing here costs the actors anything while nobody looks: the event callbacks run
  only when a failure, a dead letter or a hub block happens anyway.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from gactors._dispatch import Dispatcher
from gactors._extension import ExtensionId
from gactors._messages import DeadLetter, HubBlocked
from gactors._supervision import FailureHandled
from gactors._text import safe_str
from gactors._threads import get_ident
from gactors._timing import ClassEvents, TimingExtension

if TYPE_CHECKING:
    from gactors._cell import ActorCell
    from gactors._system import ActorSystem

_log = logging.getLogger("gactors.observer")
T = TypeVar("T")
P = ParamSpec("P")

__all__ = [
    "AUTO_EXPAND",
    "HISTORY_SECONDS",
    "MAX_WALK",
    "TOTALS_TTL",
    "WALK_SHARE",
    "ObserverExtension",
    "SystemObserver",
    "actor_label",
    "local_path",
    "observer_for",
]

MAX_WALK = 200_000
"""Cells the full walk visits at most (beyond: totals are marked ``truncated``)."""

TOTALS_TTL = 0.5
"""Seconds a full walk's totals are reused, at least, before a request walks again."""

WALK_SHARE = 0.02
"""At most this share of the hub's time goes to full walks for the dashboard: a walk
that took ``d`` seconds is reused for ``d / WALK_SHARE`` seconds if that is longer than
:data:`TOTALS_TTL` (10,000 actors: a walk per poll; 100,000: one every few seconds)."""

RECENT_RESTART = 30.0
"""Seconds an actor stays marked as recently restarted."""

HOT = 10
"""Entries of the "deepest mailboxes" and "most restarts" lists."""

AUTO_EXPAND = 300
"""A tree of at most this many actors is shown fully expanded; a larger one shows the
path to every hot actor (most restarts, deepest mailboxes, restarted recently)."""

HISTORY_SECONDS = 600
"""Seconds of per-second history kept (messages, restarts, dead letters per second)."""

_FAILURES_KEPT = 50
_BLOCKS_KEPT = 50
_GROUPS_KEPT = 200
_HISTORY_SECONDS = 60
_STACK_CHARS = 4000
_LAST_FAILURES_KEPT = 500
_TRACKED_MAX = 20
_TRACKED_FOR = 60.0

_WORKER_LOOP_CODE = Dispatcher._run.__code__  # noqa: SLF001  identifies the worker loop's frames


class ObserverExtension(ExtensionId["SystemObserver"]):
    """The observer of a system, created (and subscribed) on first use."""

    def create(self, system: ActorSystem) -> SystemObserver:
        return SystemObserver(system)


def observer_for(system: ActorSystem) -> SystemObserver:
    """The observer of ``system``, created (and subscribed) on first use."""
    return system.extension(ObserverExtension)


def local_path(path: str) -> str:
    """``gactors://shop@node/user/a`` -> ``/user/a`` (a local path is returned as is)."""
    i = path.find("://")
    if i < 0:
        return path or "/"
    j = path.find("/", i + 3)
    return path[j:] if j >= 0 else "/"


# gactors' own private actor classes, by qualified name: what to call them on a page
# (a function of the actor's name and its parent's name).
_LABELS: dict[str, Callable[[str, str], str]] = {
    "_RootGuardian": lambda name, parent: "root guardian",
    "_UserGuardian": lambda name, parent: "user guardian",
    "_SystemGuardian": lambda name, parent: "system guardian",
    "_Region": lambda name, parent: "shard region " + name.removeprefix("sharding-"),
    "_Shard": lambda name, parent: f"shard {name} of {parent.removeprefix('sharding-')}",
    "_SingletonManager": lambda name, parent: (
        "singleton manager " + name.removeprefix("singletonManager-")
    ),
    "_SingletonProxy": lambda name, parent: (
        "singleton proxy " + name.removeprefix("singletonProxy-")
    ),
    "_PoolRouter": lambda name, parent: "pool router",
    "_ProbeActor": lambda name, parent: "test probe",
}


def actor_label(qualname: str, name: str, parent_name: str) -> str:
    """What a page calls an actor of class ``qualname`` named ``name``.

    gactors' private classes are named for what they are ("shard region cart",
    "singleton manager order-numbers"); a class defined inside a function loses the
    ``f.<locals>.`` part of its qualified name (the full name is kept in ``actor``).
    """
    label = _LABELS.get(qualname)
    if label is not None:
        return label(name, parent_name)
    return qualname.rpartition(".<locals>.")[2]


def _cell_info(cell: ActorCell, path: str, parent: str | None) -> dict[str, Any]:
    actor = cell.actor
    factory = cell.props.factory
    cls = type(actor) if actor is not None else factory
    qualname = getattr(cls, "__qualname__", type(cls).__name__)
    parent_name = parent.rpartition("/")[2] if parent else ""
    info = {
        "path": path,
        "name": cell.name or "/",
        "parent": parent,
        "state": cell.state_name,
        "actor": qualname,
        "label": actor_label(qualname, cell.name or "/", parent_name),
        "mailbox": len(cell.mailbox),
        "restarts": cell.restarts,
        "children": len(cell.child_cells),
    }
    # What an actor kind adds about itself (a persistent actor: its persistence id,
    # last sequence number and fencing token). Looked up on the class, only here (a
    # page asking), so an ordinary actor pays nothing anywhere else.
    observe = getattr(type(actor), "_gactors_observe", None)
    if observe is not None:
        try:
            info.update(observe(actor))
        except Exception:  # pragma: no cover - an actor half made; the row still shows
            _log.debug("observing %s failed", path, exc_info=True)
    return info


def _class_label(cell: ActorCell) -> str:
    """The class label of a cell's actor (the one the timing uses: no ``<locals>``)."""
    actor = cell.actor
    cls = type(actor) if actor is not None else cell.props.factory
    qualname = getattr(cls, "__qualname__", None) or type(cls).__qualname__
    return qualname.rpartition(".<locals>.")[2]


def _recipient_label(ref: Any) -> str:
    """The class label of a dead letter's intended recipient: its actor's class for an
    actor of this process, else the kind of ref in parentheses ("(RemoteActorRef)",
    "(PromiseRef)" for a reply after its ask ended, "(none)")."""
    if ref is None:
        return "(none)"
    cell = getattr(ref, "_cell", None)
    if cell is None or not hasattr(cell, "props"):
        kind = type(ref).__name__
        return "(system.dead_letters)" if kind == "DeadLettersRef" else f"({kind})"
    return _class_label(cell)


def _bound(groups: dict[Any, dict[str, Any]]) -> None:
    """Keep at most _GROUPS_KEPT groups: drop the one seen last longest ago."""
    if len(groups) > _GROUPS_KEPT:
        oldest = min(groups, key=lambda k: groups[k].get("last", groups[k]["first"]))
        del groups[oldest]


def _subtree_sums(order: list[tuple[str, int, int, int, bool]]) -> dict[str, tuple[int, int]]:
    """(restarts, queued messages) below each actor with children, when not both 0."""
    restarts = [0] * len(order)
    queued = [0] * len(order)
    for i in range(len(order) - 1, 0, -1):  # children come after their parent
        _, parent, r, m, _ = order[i]
        if parent >= 0:
            restarts[parent] += restarts[i] + r
            queued[parent] += queued[i] + m
    return {
        order[i][0]: (restarts[i], queued[i])
        for i in range(len(order))
        if order[i][4] and (restarts[i] or queued[i])
    }


def _child_path(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


class SystemObserver:
    """History (failures, dead letters, hub blocks) and live views of one system.

    Event callbacks run in the hub thread (the event stream calls plain callables
    there); the views carry themselves over to it. ``listeners`` are extra callables
    told about each recorded event (the Prometheus counters use it).
    """

    def __init__(self, system: ActorSystem) -> None:
        self.system = system
        self.started = time.time()
        self.failures: deque[dict[str, Any]] = deque(maxlen=_FAILURES_KEPT)
        self.blocks: deque[dict[str, Any]] = deque(maxlen=_BLOCKS_KEPT)
        self.directives: dict[str, int] = {}
        self.dead_letters = 0
        self.hub_blocked = 0
        self.hub_blocked_seconds = 0.0
        self.listeners: list[Callable[[str, Any], None]] = []
        # Dead letters per whole second: (second, count), the current one last.
        self._dl_seconds: deque[list[int]] = deque(maxlen=_HISTORY_SECONDS + 1)
        self._restarted: dict[str, float] = {}
        self._totals: dict[str, Any] | None = None
        self._totals_at = 0.0
        self._totals_ttl = TOTALS_TTL
        self._rate_sample: tuple[float, int] | None = None
        self._rate = 0.0
        # Repeated failures and hub blocks, grouped: (path, exception, directive) and path.
        self.failure_groups: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.block_groups: dict[str | None, dict[str, Any]] = {}
        # Per-second history: [wall second, messages, restarts, dead letters] deltas.
        self.history: deque[tuple[int, int, int, int]] = deque(maxlen=HISTORY_SECONDS)
        self._sampled: tuple[int, int, int] | None = None
        #: Restarts and dead letters per actor class, per second (the charts per class).
        self.class_events = ClassEvents()
        # The last failure of each actor (bounded), with its traceback: the drill-down.
        self.last_failure: dict[str, dict[str, Any]] = {}
        # Actors a page has drilled into: path -> [last asked (monotonic), deque of
        # (wall second, mailbox depth)], sampled with the history while a page asks.
        self.tracked: dict[str, tuple[list[float], deque[tuple[int, int]]]] = {}
        stream = system.event_stream
        stream.subscribe(self._on_dead_letter, DeadLetter)
        stream.subscribe(self._on_hub_blocked, HubBlocked)
        stream.subscribe(self._on_failure, FailureHandled)
        if not system.is_terminated:
            # One sample a second while the system runs: a few counter reads, off the
            # message path (the history is there before anyone opens the page). The
            # first is the baseline: now if this is the hub thread, else as soon as the
            # scheduler runs it there (the counters are only read in the hub thread).
            if get_ident() == system._tid:
                self._sample()
                system.scheduler.schedule_with_fixed_delay(1.0, 1.0, self._sample)
            else:
                system.scheduler.schedule_with_fixed_delay(0.0, 1.0, self._sample)

    # -- events (hub thread) ----------------------------------------------------------------
    def _on_dead_letter(self, event: DeadLetter) -> None:
        self.dead_letters += 1
        self.class_events.count(_recipient_label(event.recipient), 1)
        sec = int(time.monotonic())
        buckets = self._dl_seconds
        if buckets and buckets[-1][0] == sec:
            buckets[-1][1] += 1
        else:
            buckets.append([sec, 1])
        for fn in self.listeners:
            fn("dead_letter", event)

    def _on_hub_blocked(self, event: HubBlocked) -> None:
        self.hub_blocked += 1
        self.hub_blocked_seconds += event.seconds
        stack = event.stack or ""
        if len(stack) > _STACK_CHARS:
            stack = "...\n" + stack[-_STACK_CHARS:]
        now = time.time()
        path = local_path(event.actor_path) if event.actor_path else None
        self.blocks.appendleft(
            {"time": now, "path": path, "seconds": round(event.seconds, 4), "stack": stack}
        )
        group = self.block_groups.get(path)
        if group is None:
            group = self.block_groups[path] = {
                "path": path,
                "count": 0,
                "seconds": 0.0,
                "max_seconds": 0.0,
                "first": now,
            }
            _bound(self.block_groups)
        group["count"] += 1
        group["seconds"] = round(group["seconds"] + event.seconds, 4)
        group["max_seconds"] = max(group["max_seconds"], round(event.seconds, 4))
        group["last"] = now
        group["stack"] = stack
        for fn in self.listeners:
            fn("hub_blocked", event)

    def _on_failure(self, event: FailureHandled) -> None:
        # Supervision's record of a decided failure (published whether or not the
        # strategy logs it).
        name = event.directive.name.lower()
        self.directives[name] = self.directives.get(name, 0) + 1
        path = local_path(event.source)
        cause = event.cause
        now = time.time()
        exception = type(cause).__name__
        message = safe_str(cause)
        self.failures.appendleft(
            {
                "time": now,
                "path": path,
                "directive": name,
                "exception": exception,
                "message": message,
            }
        )
        key = (path, exception, name)
        group = self.failure_groups.get(key)
        if group is None:
            group = self.failure_groups[key] = {
                "path": path,
                "exception": exception,
                "directive": name,
                "count": 0,
                "first": now,
            }
            _bound(self.failure_groups)
        group["count"] += 1
        group["last"] = now
        group["message"] = message
        last = self.last_failure.pop(path, None)
        if last is None or now - last["time"] >= 1.0 or last["exception"] != exception:
            # Formatted at most once a second per actor (an actor failing in a loop does
            # not pay for it on each failure); the exception itself is not kept (its
            # frames would hold whatever its locals held).
            tb = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
            if len(tb) > _STACK_CHARS:
                tb = "...\n" + tb[-_STACK_CHARS:]
            last = {"time": now, "exception": exception, "traceback": tb}
        last.update(time=now, directive=name, message=message, count=last.get("count", 0) + 1)
        self.last_failure[path] = last  # re-inserted: the dict is oldest first
        if len(self.last_failure) > _LAST_FAILURES_KEPT:
            del self.last_failure[next(iter(self.last_failure))]
        if name == "restart":
            cell = self.cell_at(path)
            if cell is not None:
                self.class_events.count(_class_label(cell), 0)
            restarted = self._restarted
            mono = time.monotonic()
            restarted[path] = mono
            if len(restarted) > 1000:
                # Bounded: forget the ones no page would highlight any more.
                for p in [p for p, t in restarted.items() if mono - t > RECENT_RESTART]:
                    del restarted[p]
        for fn in self.listeners:
            fn("failure", event)

    def _sample(self) -> None:
        # Called every second by the system's scheduler (hub thread).
        second = int(time.time())
        now = (self._processed(), self.directives.get("restart", 0), self.dead_letters)
        before = self._sampled
        self._sampled = now
        if before is not None:
            deltas = [max(0, a - b) for a, b in zip(now, before, strict=True)]
            self.history.append((second, deltas[0], deltas[1], deltas[2]))
        self.class_events.sample(second)
        if self.tracked:
            self._sample_tracked(second)

    def track(self, path: str) -> list[tuple[int, int]]:
        """Start (or keep) sampling the mailbox depth of the actor at ``path`` every
        second, for :data:`_TRACKED_FOR` seconds after the last call; returns what was
        sampled so far, ``(wall second, depth)`` oldest first. At most
        :data:`_TRACKED_MAX` actors are tracked (the one asked for longest ago goes)."""
        entry = self.tracked.get(path)
        mono = time.monotonic()
        if entry is None:
            if len(self.tracked) >= _TRACKED_MAX:
                oldest = min(self.tracked, key=lambda p: self.tracked[p][0][0])
                del self.tracked[oldest]
            entry = self.tracked[path] = ([mono], deque(maxlen=HISTORY_SECONDS))
        entry[0][0] = mono
        return list(entry[1])

    def _sample_tracked(self, second: int) -> None:
        mono = time.monotonic()
        for path in list(self.tracked):
            asked, samples = self.tracked[path]
            cell = self.cell_at(path)
            if cell is None or mono - asked[0] > _TRACKED_FOR:
                del self.tracked[path]
                continue
            samples.append((second, len(cell.mailbox)))

    def cell_at(self, path: str) -> ActorCell | None:
        """The cell at the local ``path`` (``/user/a/b``), or None (hub thread)."""
        cell = self.system.root_cell
        for name in (n for n in path.split("/") if n):
            child = cell.child_cells.get(name)
            if child is None:
                return None
            cell = child
        return cell

    def history_view(self, seconds: int = HISTORY_SECONDS) -> dict[str, Any]:
        """The per-second history, oldest first: ``{"end": wall second of the last
        sample, "messages": [...], "restarts": [...], "dead_letters": [...]}`` (one
        entry per second, the last ``seconds``; a second without a sample counts 0)."""
        samples = list(self.history)
        if not samples:
            return {"end": int(time.time()), "messages": [], "restarts": [], "dead_letters": []}
        end = samples[-1][0]
        start = end - min(seconds, HISTORY_SECONDS) + 1
        by_second = {s[0]: s for s in samples if s[0] >= start}
        span = range(max(start, samples[0][0]), end + 1)
        rows = [by_second.get(s, (s, 0, 0, 0)) for s in span]
        return {
            "end": end,
            "messages": [r[1] for r in rows],
            "restarts": [r[2] for r in rows],
            "dead_letters": [r[3] for r in rows],
        }

    def activity(self, totals: dict[str, Any]) -> dict[str, Any]:
        """This node's figures besides the tree, as one dict (what a dashboard shows
        for a node: its own, or another node's through its inspector)."""
        return {
            "messages_per_second": round(self.messages_per_second(), 1),
            "dead_letters": self.dead_letters,
            "dead_letters_per_second": self.dead_letters_per_second(),
            "hub_blocked": self.hub_blocked,
            "hub_blocked_seconds": round(self.hub_blocked_seconds, 4),
            "failures": self.grouped_failures(),
            "blocks": self.grouped_blocks(),
            "hot": {"mailbox": totals["deepest_mailboxes"], "restarts": totals["most_restarts"]},
            "history": self.history_view(),
            "classes": self.class_history(),
            "class_events": self.class_events.view(),
        }

    def class_history(self) -> dict[str, Any] | None:
        """Per timed actor class (:mod:`gactors._timing`), per second: messages and
        processing-time percentiles (ms); None when no class is timed."""
        system = self.system
        if not system.has_extension(TimingExtension):
            return None
        timing = system.extension(TimingExtension)
        if not timing.enabled:
            return None
        return timing.chart_view()

    def grouped_failures(self, n: int = 20) -> list[dict[str, Any]]:
        """Failures grouped by (actor, exception, directive), the latest first."""
        groups = sorted(self.failure_groups.values(), key=lambda g: g["last"], reverse=True)
        return [dict(g) for g in groups[:n]]

    def grouped_blocks(self, n: int = 10) -> list[dict[str, Any]]:
        """Hub blocks grouped by actor (None: code outside the actors), the latest first."""
        groups = sorted(self.block_groups.values(), key=lambda g: g["last"], reverse=True)
        return [dict(g) for g in groups[:n]]

    # -- views (any thread) -----------------------------------------------------------------
    def in_hub(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args)`` in the system's hub thread (at once if already there)."""
        system = self.system
        if get_ident() == system._tid:
            return fn(*args, **kwargs)
        return system.run_in_hub(fn, *args, **kwargs)

    def processed(self) -> int:
        """User messages processed so far by the system's dispatcher."""
        return self.in_hub(self._processed)

    def _processed(self) -> int:
        # The worker loop counts in a local per batch and adds it to the dispatcher's
        # total only when it parks, yields or ends (see gactors._dispatch): a worker
        # blocked inside an actor (I/O, a wait) still holds its count, read here off its
        # suspended frame. Every worker is suspended while this greenlet runs.
        dispatcher = self.system.dispatcher
        n = int(dispatcher.processed)
        for w in list(dispatcher.workers):
            frame = w.gr_frame
            while frame is not None and frame.f_code is not _WORKER_LOOP_CODE:
                frame = frame.f_back
            if frame is not None:
                n += int(frame.f_locals.get("done", 0))
        return n

    def dead_letters_per_second(self, window: int = 5) -> float:
        """Dead letters per second over the last ``window`` whole seconds."""
        now = int(time.monotonic())
        n = sum(c for s, c in self._dl_seconds if now - window <= s < now)
        return n / window

    def dead_letter_history(self) -> list[int]:
        """Dead letters in each of the last 60 whole seconds, oldest first."""
        now = int(time.monotonic())
        counts = dict((s, c) for s, c in self._dl_seconds)
        return [counts.get(s, 0) for s in range(now - _HISTORY_SECONDS, now)]

    def recently_restarted(self, path: str) -> bool:
        t = self._restarted.get(path)
        return t is not None and time.monotonic() - t < RECENT_RESTART

    def totals(self, max_age: float | None = None) -> dict[str, Any]:
        """Actors, queued messages, the deepest mailboxes and most restarted actors.

        One bounded walk of the whole tree, reused for ``max_age`` seconds (None: for
        :data:`TOTALS_TTL`, or longer after a long walk, see :data:`WALK_SHARE`).
        """
        now = time.monotonic()
        cached = self._totals
        if max_age is None:
            max_age = self._totals_ttl
        if cached is not None and now - self._totals_at < max_age:
            return cached
        totals: dict[str, Any] = self.in_hub(self._walk_totals)
        took = time.monotonic() - now
        self._totals = totals
        self._totals_at = now
        self._totals_ttl = max(TOTALS_TTL, took / WALK_SHARE)
        processed = self.processed()
        prev = self._rate_sample
        if prev is None or now - prev[0] >= 0.5:
            if prev is not None and processed >= prev[1]:
                self._rate = (processed - prev[1]) / (now - prev[0])
            self._rate_sample = (now, processed)
        return totals

    def messages_per_second(self) -> float:
        """Messages processed per second between the two latest :meth:`totals` walks."""
        return self._rate

    def _walk_totals(self) -> dict[str, Any]:
        actors = queued = max_depth = restarts = 0
        deep: list[tuple[int, str]] = []
        restarted: list[tuple[int, str]] = []
        truncated = False
        # Pre-order: (path, index of the parent, own restarts, own mailbox, has children);
        # summed bottom-up afterwards into each parent's subtree.
        order: list[tuple[str, int, int, int, bool]] = []
        stack: list[tuple[ActorCell, str, int]] = [(self.system.root_cell, "/", -1)]
        while stack:
            if actors >= MAX_WALK:
                truncated = True
                break
            cell, path, parent_index = stack.pop()
            actors += 1
            depth = len(cell.mailbox)
            if depth:
                queued += depth
                if depth > max_depth:
                    max_depth = depth
                # Paths are made only for the few that enter a top list.
                if len(deep) < HOT:
                    heapq.heappush(deep, (depth, path))
                elif depth > deep[0][0]:
                    heapq.heapreplace(deep, (depth, path))
            r = cell.restarts
            if r:
                restarts += r
                if len(restarted) < HOT:
                    heapq.heappush(restarted, (r, path))
                elif r > restarted[0][0]:
                    heapq.heapreplace(restarted, (r, path))
            children = cell.child_cells
            index = len(order)
            order.append((path, parent_index, r, depth, bool(children)))
            if children:
                for name, child in children.items():
                    stack.append((child, _child_path(path, name), index))
        return {
            "actors": actors,
            "mailbox": queued,
            "max_mailbox": max_depth,
            "restarts": restarts,
            "truncated": truncated,
            "deepest_mailboxes": [{"path": p, "mailbox": d} for d, p in sorted(deep, reverse=True)],
            "most_restarts": [
                {"path": p, "restarts": r} for r, p in sorted(restarted, reverse=True)
            ],
            "subtrees": _subtree_sums(order),
        }

    def hot_paths(self, totals: dict[str, Any]) -> set[str]:
        """The actors a page should not have to look for: the most restarted, the
        deepest mailboxes and the recently restarted ones."""
        paths = {e["path"] for e in totals["most_restarts"]}
        paths |= {e["path"] for e in totals["deepest_mailboxes"]}
        now = time.monotonic()
        paths |= {p for p, t in self._restarted.items() if now - t < RECENT_RESTART}
        return paths

    def auto_open(self, totals: dict[str, Any]) -> frozenset[str] | None:
        """What a page opens by itself: None (everything) for a tree of at most
        :data:`AUTO_EXPAND` actors, else every ancestor of a hot actor."""
        if totals["actors"] <= AUTO_EXPAND and not totals["truncated"]:
            return None
        opened: set[str] = set()
        for path in self.hot_paths(totals):
            while path not in ("", "/"):
                path = path.rpartition("/")[0] or "/"
                opened.add(path)
        return frozenset(opened)

    def tree(
        self,
        open_paths: Iterable[str],
        limit: int,
        max_rows: int | None = None,
        *,
        auto: bool = False,
        closed: Iterable[str] = (),
    ) -> list[dict[str, Any]]:
        """The visible part of the tree, flat, parents first (pre-order).

        The root is always there; the children of a node are listed (the first
        ``limit`` of them; ``more`` counts the rest) when the node and all of its
        ancestors are open: in ``open_paths`` or, with ``auto``, opened by
        :meth:`auto_open` (every node of a small tree, the path to every hot actor of
        a large one), unless in ``closed``. ``max_rows`` bounds the whole list (the
        nodes opened first in pre-order get their children first; ``more`` counts what
        the bound cut off). A node with children that are not listed carries
        ``subtree``: the restarts and queued messages of everything below it.
        """
        totals = self.totals()
        base = frozenset(open_paths)
        opened: frozenset[str] | None = base
        must_show: frozenset[str] = frozenset()
        if auto:
            extra = self.auto_open(totals)
            opened = None if extra is None else base | extra
            # A hot actor and its ancestors are listed even beyond ``limit``.
            must_show = frozenset(self.hot_paths(totals)) | (extra or frozenset())
        return self.in_hub(
            self._walk_tree,
            opened,
            frozenset(closed),
            limit,
            max_rows,
            totals["subtrees"],
            must_show,
        )

    def _walk_tree(
        self,
        open_paths: frozenset[str] | None,
        closed: frozenset[str],
        limit: int,
        max_rows: int | None,
        subtrees: dict[str, tuple[int, int]],
        must_show: frozenset[str] = frozenset(),
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        stack: list[tuple[ActorCell, str, str | None]] = [(self.system.root_cell, "/", None)]
        # Rows still allowed besides the root: every child pushed is output once.
        budget = max(0, max_rows - 1) if max_rows is not None else None
        while stack:
            cell, path, parent = stack.pop()
            info = _cell_info(cell, path, parent)
            info["recent_restart"] = self.recently_restarted(path)
            out.append(info)
            is_open = path == "/" or (
                path not in closed and (open_paths is None or path in open_paths)
            )
            if is_open and cell.child_cells:
                take = limit if budget is None else min(limit, budget)
                shown: list[tuple[ActorCell, str, str | None]] = []
                for name, child in cell.child_cells.items():
                    child_path = _child_path(path, name)
                    if len(shown) < take or (child_path in must_show and budget != 0):
                        shown.append((child, child_path, path))
                    elif not must_show:
                        break
                if budget is not None:
                    budget = max(0, budget - len(shown))
                info["more"] = len(cell.child_cells) - len(shown)
                stack.extend(reversed(shown))  # popped in their own order
            elif cell.child_cells:
                r, m = subtrees.get(path, (0, 0))
                info["subtree"] = {"restarts": r, "mailbox": m}
        return out

    def node(self, path: str, limit: int) -> dict[str, Any] | None:
        """One actor and its first ``limit`` children, or None if there is no such actor."""
        return self.in_hub(self._one_level, path, limit)

    def _one_level(self, path: str, limit: int) -> dict[str, Any] | None:
        cell = self.system.root_cell
        parent: str | None = None
        current = "/"
        for name in (n for n in path.split("/") if n):
            child = cell.child_cells.get(name)
            if child is None:
                return None
            parent, current, cell = current, _child_path(current, name), child
        info = _cell_info(cell, current, parent)
        info["recent_restart"] = self.recently_restarted(current)
        kids: list[dict[str, Any]] = []
        for name, child in cell.child_cells.items():
            if len(kids) == limit:
                break
            kid_path = _child_path(current, name)
            kid = _cell_info(child, kid_path, current)
            kid["recent_restart"] = self.recently_restarted(kid_path)
            kids.append(kid)
        return {"node": info, "children": kids, "more": len(cell.child_cells) - len(kids)}

    def system_info(self) -> dict[str, Any]:
        system = self.system
        return {
            "name": system.name,
            "pid": os.getpid(),
            "started": self.started,
            "terminated": system.is_terminated,
        }

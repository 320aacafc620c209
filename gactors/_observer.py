"""What the dashboard, the Prometheus metrics and the cluster's inspector read: the one
place that observes an actor system (an extension: one observer per system).

The observer subscribes to the event stream for the events that are not state but
history (``DeadLetter``, ``HubBlocked`` and the supervisors' failure ``LogEvent``\\ s,
which carry their ``directive``) and keeps a bounded record of them. The live state
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
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from gactors._dispatch import Dispatcher
from gactors._eventstream import LogEvent
from gactors._extension import ExtensionId
from gactors._messages import DeadLetter, HubBlocked
from gactors._text import safe_str
from gactors._threads import get_ident

if TYPE_CHECKING:
    from gactors._cell import ActorCell
    from gactors._system import ActorSystem

T = TypeVar("T")
P = ParamSpec("P")

__all__ = [
    "MAX_WALK",
    "TOTALS_TTL",
    "WALK_SHARE",
    "ObserverExtension",
    "SystemObserver",
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

_FAILURES_KEPT = 50
_BLOCKS_KEPT = 50
_HISTORY_SECONDS = 60
_STACK_CHARS = 4000

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


def _cell_info(cell: ActorCell, path: str, parent: str | None) -> dict[str, Any]:
    actor = cell.actor
    factory = cell.props.factory
    cls = type(actor) if actor is not None else factory
    return {
        "path": path,
        "name": cell.name or "/",
        "parent": parent,
        "state": cell.state_name,
        "actor": getattr(cls, "__qualname__", type(cls).__name__),
        "mailbox": len(cell.mailbox),
        "restarts": cell.restarts,
        "children": len(cell.child_cells),
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
        stream = system.event_stream
        stream.subscribe(self._on_dead_letter, DeadLetter)
        stream.subscribe(self._on_hub_blocked, HubBlocked)
        stream.subscribe(self._on_log, LogEvent)

    # -- events (hub thread) ----------------------------------------------------------------
    def _on_dead_letter(self, event: DeadLetter) -> None:
        self.dead_letters += 1
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
        self.blocks.appendleft(
            {
                "time": time.time(),
                "path": local_path(event.actor_path) if event.actor_path else None,
                "seconds": round(event.seconds, 4),
                "stack": stack,
            }
        )
        for fn in self.listeners:
            fn("hub_blocked", event)

    def _on_log(self, event: LogEvent) -> None:
        directive = event.directive
        if directive is None:
            return  # not a supervisor's decision on a failure
        name = directive.name.lower()
        self.directives[name] = self.directives.get(name, 0) + 1
        path = local_path(event.source)
        cause = event.cause
        self.failures.appendleft(
            {
                "time": time.time(),
                "path": path,
                "directive": name,
                "exception": type(cause).__name__ if cause is not None else None,
                "message": safe_str(cause) if cause is not None else event.message,
            }
        )
        if name == "restart":
            restarted = self._restarted
            now = time.monotonic()
            restarted[path] = now
            if len(restarted) > 1000:
                # Bounded: forget the ones no page would highlight any more.
                for p in [p for p, t in restarted.items() if now - t > RECENT_RESTART]:
                    del restarted[p]
        for fn in self.listeners:
            fn("failure", event)

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
        stack: list[tuple[ActorCell, str]] = [(self.system.root_cell, "/")]
        while stack:
            if actors >= MAX_WALK:
                truncated = True
                break
            cell, path = stack.pop()
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
            if children:
                for name, child in children.items():
                    stack.append((child, _child_path(path, name)))
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
        }

    def tree(
        self, open_paths: Iterable[str], limit: int, max_rows: int | None = None
    ) -> list[dict[str, Any]]:
        """The visible part of the tree, flat, parents first (pre-order).

        The root is always there; the children of a node are listed (the first
        ``limit`` of them; ``more`` counts the rest) when the node and all of its
        ancestors are in ``open_paths``. ``max_rows`` bounds the whole list (the nodes
        opened first in pre-order get their children first; ``more`` counts what the
        bound cut off).
        """
        return self.in_hub(self._walk_tree, frozenset(open_paths), limit, max_rows)

    def _walk_tree(
        self, open_paths: frozenset[str], limit: int, max_rows: int | None = None
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
            if path in open_paths and cell.child_cells:
                take = limit if budget is None else min(limit, budget)
                shown: list[tuple[ActorCell, str, str | None]] = []
                for name, child in cell.child_cells.items():
                    if len(shown) >= take:
                        break
                    shown.append((child, _child_path(path, name), path))
                if budget is not None:
                    budget -= len(shown)
                info["more"] = len(cell.child_cells) - len(shown)
                stack.extend(reversed(shown))  # popped in their own order
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

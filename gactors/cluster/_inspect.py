"""The node's inspector: a read-only view of this node for the other nodes' dashboards.

Every cluster node runs ``/system/inspector`` from its start (it costs nothing until
asked: no timer, no subscription). A dashboard on any node asks it with
:class:`InspectRequest` (which parts of the tree are open, how many children per
node) and gets an :class:`InspectReply`: this node's supervision tree, made by the
same bounded, iterative walk the dashboard uses for its own node (the children of the
open nodes only, at most ``limit`` each and :data:`MAX_ROWS` rows in all, so a node of
10,000 actors answers with a summary, not a dump), its totals, and where its
singletons and shards run (:func:`placement`).

It only reads: a request names paths to list and nothing else, and the inspector
changes nothing. Why an actor and not a Redis key: the tree is live state of the
node's hub, read consistently in one go in the hub thread; the request travels the
node's ordinary inbox, and an unreachable or blocked node simply does not answer
(the dashboard asks with a short timeout and says so).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gactors._actor import Actor
from gactors._props import Props
from gactors.cluster._serialization import register_message
from gactors.exceptions import SerializationError

if TYPE_CHECKING:
    from gactors._ref import ActorRef
    from gactors._system import ActorSystem

__all__ = [
    "INSPECTOR",
    "MAX_ROWS",
    "InspectActor",
    "InspectActorReply",
    "InspectReply",
    "InspectRequest",
    "Inspector",
    "placement",
    "snapshot",
    "start_inspector",
]

_log = logging.getLogger("gactors.cluster.inspect")

INSPECTOR = "/system/inspector"
"""The path of every node's inspector."""

MAX_ROWS = 2000
"""Tree rows one reply carries at most (halved while the reply is too large to send)."""

_MAX_OPEN = 500
_MAX_LIMIT = 1000


@register_message(tag="gactors.cluster.inspect.Request")
@dataclass(frozen=True, slots=True)
class InspectRequest:
    """Asks a node's inspector for an :class:`InspectReply`.

    ``open``: the paths whose children are listed (node-local, e.g. ``"/user/a"``);
    ``limit``: children listed per open node (1..1000); ``auto``: also open what the
    dashboard opens by itself (a small tree entirely, the path to every hot actor of a
    large one), except the ``closed`` paths.
    """

    open: tuple[str, ...] = ("/", "/user")
    limit: int = 100
    auto: bool = False
    closed: tuple[str, ...] = ()


@register_message(tag="gactors.cluster.inspect.ActorRequest")
@dataclass(frozen=True, slots=True)
class InspectActor:
    """Asks a node's inspector for one actor in detail (the dashboard's drill-down):
    answered with :class:`InspectActorReply`."""

    path: str


@register_message(tag="gactors.cluster.inspect.ActorReply")
@dataclass(frozen=True, slots=True)
class InspectActorReply:
    """One actor of the node (:func:`gactors._drilldown.actor_in_hub`), or None when
    the node has no actor at that path."""

    view: dict[str, Any] | None


@register_message(tag="gactors.cluster.inspect.Reply")
@dataclass(frozen=True, slots=True)
class InspectReply:
    """A node's view of itself (see :func:`snapshot`)."""

    address: str
    pid: int
    time: float
    tree: list[dict[str, Any]]
    totals: dict[str, Any]
    singletons: list[dict[str, Any]] = field(default_factory=list)
    sharding: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False


def placement(system: ActorSystem) -> dict[str, list[dict[str, Any]]]:
    """Where this node's singletons and shards run, as this node knows it.

    ``{"singletons": [...], "sharding": [...]}`` with the entries of
    :func:`gactors.cluster._singleton.local_singletons` and
    :func:`gactors.cluster._sharding.local_shards`. In the hub thread; no I/O.
    """
    from gactors.cluster._sharding import local_shards
    from gactors.cluster._singleton import local_singletons

    return {"singletons": local_singletons(system), "sharding": local_shards(system)}


def snapshot(
    system: ActorSystem,
    open_paths: tuple[str, ...],
    limit: int,
    max_rows: int = MAX_ROWS,
    *,
    auto: bool = False,
    closed: tuple[str, ...] = (),
) -> InspectReply:
    """This node's :class:`InspectReply` (in the hub thread).

    ``open_paths`` and ``limit`` are bounded here whatever the request says: at most
    500 open paths, 1..1000 children each, ``max_rows`` rows in all. The totals carry
    ``activity`` too (:meth:`~gactors._observer.SystemObserver.activity`: rates,
    grouped failures and hub blocks, hot spots, the per-second history), so that a
    dashboard on another node can show the cluster's figures.
    """
    # The dashboard's observer (imported only once a dashboard asks): its walks are
    # bounded and its totals cached, so asking often costs the node little.
    from gactors._observer import observer_for

    obs = observer_for(system)
    opened = {"/"}
    for p in open_paths[:_MAX_OPEN]:
        if isinstance(p, str) and p.startswith("/"):
            opened.add(p.rstrip("/") or "/")
    limit = min(max(1, limit), _MAX_LIMIT) if isinstance(limit, int) else 100
    shut = {p for p in closed[:_MAX_OPEN] if isinstance(p, str)}
    tree = obs.tree(opened, limit, max_rows, auto=auto is True, closed=shut)
    totals = obs.totals()
    where = placement(system)
    return InspectReply(
        address=str(system.address),
        pid=os.getpid(),
        time=time.time(),
        tree=tree,
        totals={
            **{k: totals[k] for k in ("actors", "mailbox", "max_mailbox", "restarts", "truncated")},
            "activity": obs.activity(totals),
        },
        singletons=where["singletons"],
        sharding=where["sharding"],
        truncated=len(tree) >= max_rows,
    )


class Inspector(Actor):
    """Answers :class:`InspectRequest` with :class:`InspectReply` (read-only)."""

    def receive(self, message: Any) -> None:
        if type(message) is InspectActor:
            self._actor(message)
            return
        if type(message) is not InspectRequest:
            self.unhandled(message)
            return
        sender: ActorRef | None = self.context.sender
        if sender is None:
            return
        rows = MAX_ROWS
        open_paths = message.open if isinstance(message.open, tuple) else ()
        while True:
            closed = message.closed if isinstance(message.closed, tuple) else ()
            reply = snapshot(
                self.context.system,
                open_paths,
                message.limit,
                rows,
                auto=message.auto is True,
                closed=closed,
            )
            try:
                sender.tell(reply, self.ref)
                return
            except SerializationError as e:
                # Too large for the wire (very long names): fewer rows, then give up
                # loudly rather than fail the inspector.
                if rows <= 50:
                    _log.warning("inspector cannot send its tree: %s", e)
                    return
                rows //= 4

    def _actor(self, message: InspectActor) -> None:
        sender: ActorRef | None = self.context.sender
        path = message.path
        if sender is None or not isinstance(path, str) or not path.startswith("/"):
            return
        from gactors._drilldown import actor_in_hub
        from gactors._observer import observer_for

        view = actor_in_hub(observer_for(self.context.system), path)
        try:
            sender.tell(InspectActorReply(view), self.ref)
        except SerializationError as e:
            _log.warning("inspector cannot send the details of %s: %s", path, e)


def start_inspector(system: ActorSystem) -> ActorRef:
    """Start ``/system/inspector`` on ``system`` (a cluster node; in its hub thread)."""
    ref: ActorRef = system.system_cell.attach_child(Props(Inspector), "inspector")
    return ref

"""How the cluster's own modules reach a system's node (without importing the node's
module: ``cluster_node`` is used by modules that ``_node.py`` itself imports, lazily).

They see the node as :class:`ClusterNode`, the protocol of what they use of it
(``gactors.cluster._node.ClusterNode`` has it all): typing them against the concrete
class put the singleton, sharding and the inspector into one import cycle with the
node's parts (docs/internals.md, "Layers").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from gactors.exceptions import ClusterError

if TYPE_CHECKING:
    from collections.abc import Callable

    from gactors._path import ActorPath, Address
    from gactors._ref import ActorRef
    from gactors._system import ActorSystem
    from gactors.cluster._events import CurrentClusterState, Member
    from gactors.cluster._seam import Backend
    from gactors.cluster._settings import ClusterSettings
    from gactors.cluster._wire import WireCodec

__all__ = ["ClusterNode", "cluster_node", "is_cluster_node"]


class ClusterNode(Protocol):
    """A system's cluster node as the singleton, sharding, the ``Cluster`` facade and
    the inspector use it."""

    @property
    def settings(self) -> ClusterSettings: ...
    @property
    def node_id(self) -> str: ...
    @property
    def address(self) -> Address: ...
    @property
    def backend(self) -> Backend: ...
    @property
    def codec(self) -> WireCodec: ...
    @property
    def leaving_nodes(self) -> frozenset[str]: ...
    @property
    def leave_hooks(self) -> list[Callable[[], Any]]: ...

    def members(self) -> tuple[Member, ...]: ...
    def member(self, node_id: str) -> Member | None: ...
    def state(self) -> CurrentClusterState: ...
    def subscribe(self, subscriber: ActorRef, classes: tuple[type, ...]) -> None: ...
    def unsubscribe(self, subscriber: ActorRef) -> None: ...
    def down(self, node: str) -> bool: ...
    def remote_ref(self, path: ActorPath, uid: int) -> ActorRef: ...


def is_cluster_node(system: object) -> bool:
    """True if ``system`` is an actor system whose settings have a ``cluster`` table."""
    settings = getattr(system, "settings", None)
    return "cluster" in getattr(settings, "extension_tables", ())


def cluster_node(system: ActorSystem) -> ClusterNode:
    """The cluster node of ``system``; :class:`~gactors.ClusterError` if it is none.

    A system with a ``cluster`` table has its node (``ClusterNodeExtension``, made
    while the system starts) as its ref provider."""
    if not is_cluster_node(system):
        raise ClusterError(
            f"actor system {getattr(system, 'name', system)!r} is not a cluster node (its "
            "settings have no 'cluster' table)"
        )
    return cast("ClusterNode", system.provider)

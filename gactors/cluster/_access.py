"""How the cluster's own modules reach a system's node (without importing the node's
module: ``cluster_node`` is used by modules that ``_node.py`` itself imports, lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from gactors.exceptions import ClusterError

if TYPE_CHECKING:
    from gactors._system import ActorSystem
    from gactors.cluster._node import ClusterNode

__all__ = ["cluster_node", "is_cluster_node"]


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

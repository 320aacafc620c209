"""The cluster as an extension of the actor system (docs/extensions.md).

The actor system knows no cluster: a ``cluster`` settings table names
:class:`ClusterNodeExtension` (through ``gactors.plugins.BUILTIN_EXTENSIONS``), whose
object, the :class:`~gactors.cluster._node.ClusterNode`, is the system's ref provider
(Akka's ``ActorRefProvider``): it gives the system's address its node id, joins when
the system starts, and leaves (with the singletons' and shards' hand-over) as the
first step of ``terminate()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gactors._extension import ExtensionId
from gactors.cluster._settings import load_cluster_settings
from gactors.exceptions import ClusterError

if TYPE_CHECKING:
    from gactors._system import ActorSystem
    from gactors.cluster._node import ClusterNode
    from gactors.cluster._settings import ClusterSettings

__all__ = ["ClusterNodeExtension", "cluster_node", "cluster_settings"]


class ClusterNodeExtension(ExtensionId["ClusterNode"]):
    """The cluster node of a system whose settings have a ``cluster`` table."""

    settings_key = "cluster"
    provides_refs = True

    def validate_settings(self, table: Any) -> Any:
        return load_cluster_settings(table)

    def create(self, system: ActorSystem) -> ClusterNode:
        settings = system.settings.extension_tables.get("cluster")
        if settings is None:
            raise ClusterError(
                f"actor system {system.name!r} is not a cluster node (its settings have no "
                "'cluster' table)"
            )
        from gactors.cluster._node import ClusterNode

        return ClusterNode(system, settings)

    def shutdown(self, extension: ClusterNode, proceed: Callable[[], None]) -> None:
        # Graceful leave: the node is "leaving" while its actors stop, and leaves the
        # membership once they stopped (a termination hook). Singletons and shards hand
        # over (their instances stop with their stop_message, leases released) before
        # the user actors stop.
        extension.begin_leave()
        extension.hand_over(proceed)


def cluster_node(system: ActorSystem) -> ClusterNode:
    """The cluster node of ``system``; :class:`~gactors.ClusterError` if it is none."""
    return system.extension(ClusterNodeExtension)


def cluster_settings(system: ActorSystem) -> ClusterSettings | None:
    """The ``cluster`` settings table of ``system``, or None."""
    settings: ClusterSettings | None = system.settings.extension_tables.get("cluster")
    return settings

"""The cluster members as this node sees them, for the dashboard and the Prometheus
metrics (the one place of :mod:`gactors.contrib` that asks :mod:`gactors.cluster` for
them; imported lazily, only on a cluster node: contrib works without the cluster extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = ["cluster_members"]


def cluster_members(system: ActorSystem) -> list[dict[str, Any]] | None:
    """The members as this node sees them (no I/O), or None without a cluster.

    ``[{"address": str, "status": "up" | "leaving" | "unreachable", "roles": [str]}]``,
    oldest first. Also what the Prometheus gauge ``gactors_cluster_members`` counts.
    Hub thread only.
    """
    if "cluster" not in system.settings.extension_tables:
        return None
    from gactors.cluster import Cluster

    return [
        {"address": str(m.address), "status": str(m.status), "roles": sorted(m.roles)}
        for m in Cluster(system).members
    ]

"""gactors.cluster: actor systems in several processes, on Redis (docs/cluster/concepts.md).

A system becomes a node with a ``cluster`` settings table::

    ActorSystem("shop", config={"cluster": {"url": "redis://127.0.0.1:6379/0"}})

Nothing of this package is imported by a system without one.
"""

from __future__ import annotations

from gactors._path import Address
from gactors._selection import ActorSelection
from gactors.cluster._cluster import Cluster
from gactors.cluster._events import (
    ClusterEvent,
    CurrentClusterState,
    Member,
    MemberRemoved,
    MemberUp,
    ReachableMember,
    UnreachableMember,
)
from gactors.cluster._remote import RemoteActorRef
from gactors.cluster._serialization import register_message
from gactors.cluster._sharding import ClusterSharding, EntityRef, ShardingEnvelope
from gactors.cluster._singleton import ClusterSingleton
from gactors.exceptions import ActorNotFound, ClusterError, RemoteError, SerializationError

__all__ = [
    "ActorNotFound",
    "ActorSelection",
    "Address",
    "Cluster",
    "ClusterError",
    "ClusterEvent",
    "ClusterSharding",
    "ClusterSingleton",
    "CurrentClusterState",
    "EntityRef",
    "Member",
    "MemberRemoved",
    "MemberUp",
    "ReachableMember",
    "RemoteActorRef",
    "RemoteError",
    "SerializationError",
    "ShardingEnvelope",
    "UnreachableMember",
    "register_message",
]

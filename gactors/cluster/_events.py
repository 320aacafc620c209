"""Members and membership events of the cluster (docs/cluster/concepts.md, "Membership")."""

from __future__ import annotations

from dataclasses import dataclass

from gactors._path import Address

__all__ = [
    "ClusterEvent",
    "CurrentClusterState",
    "Member",
    "MemberRemoved",
    "MemberUp",
    "ReachableMember",
    "UnreachableMember",
]


@dataclass(frozen=True)
class Member:
    """A node of the cluster as this node sees it.

    ``status`` is ``"up"``, ``"leaving"`` (a graceful leave started) or
    ``"unreachable"`` (no heartbeat for ``unreachable_after`` seconds); the member of a
    :class:`MemberRemoved` event has ``"removed"``.
    """

    address: Address
    roles: tuple[str, ...]
    status: str

    def has_role(self, role: str) -> bool:
        """True if the node joined with ``role``."""
        return role in self.roles


class ClusterEvent:
    """Base class of the membership events (subscribe to it to get them all)."""

    __slots__ = ()


@dataclass(frozen=True)
class MemberUp(ClusterEvent):
    """A node joined the cluster (also sent for every member seen first by this node)."""

    member: Member


@dataclass(frozen=True)
class UnreachableMember(ClusterEvent):
    """A member missed its heartbeats for ``unreachable_after`` seconds."""

    member: Member


@dataclass(frozen=True)
class ReachableMember(ClusterEvent):
    """An unreachable member beats again."""

    member: Member


@dataclass(frozen=True)
class MemberRemoved(ClusterEvent):
    """A member left gracefully or was downed: it never comes back under its address.
    Every actor of it that was watched gets ``Terminated(ref, True, True)``."""

    member: Member


@dataclass(frozen=True)
class CurrentClusterState:
    """The first message a :meth:`Cluster.subscribe` subscriber gets: every member
    (oldest first) and the unreachable ones among them."""

    members: tuple[Member, ...]
    unreachable: tuple[Member, ...]

"""``Cluster(system)``: the public face of a system's cluster node (docs/cluster/concepts.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import gevent
from greenlet import getcurrent

from gactors._extension import ExtensionId
from gactors._future import Future
from gactors._path import Address
from gactors._ref import ActorRef
from gactors.cluster._access import cluster_node, is_cluster_node
from gactors.cluster._events import ClusterEvent, CurrentClusterState, Member
from gactors.exceptions import ClusterError

if TYPE_CHECKING:
    from gactors._system import ActorSystem
    from gactors.cluster._access import ClusterNode

T = TypeVar("T")
P = ParamSpec("P")

__all__ = ["Cluster"]


class _ClusterExtension(ExtensionId["Cluster"]):
    """The one ``Cluster`` object of a cluster node's system."""

    def create(self, system: ActorSystem) -> Cluster:
        facade = object.__new__(Cluster)
        facade._node = cluster_node(system)
        facade._system = system
        return facade


class Cluster:
    """The cluster membership of ``system`` (the same object each time).

    Raises :class:`~gactors.ClusterError` if the system has no ``cluster`` settings
    table.
    """

    __slots__ = ("_node", "_system")

    _node: ClusterNode
    _system: ActorSystem

    def __new__(cls, system: ActorSystem) -> Cluster:
        if not is_cluster_node(system):
            raise ClusterError(
                f"actor system {getattr(system, 'name', system)!r} is not a cluster node "
                "(its settings have no 'cluster' table)"
            )
        return system.extension(_ClusterExtension)

    def _in_hub(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        system = self._system
        if system._tid == _ident():
            return fn(*args, **kwargs)
        return system.run_in_hub(fn, *args, **kwargs)

    @property
    def self_address(self) -> Address:
        """This node's address (``gactors://<system>@<node>``)."""
        return self._node.address

    @property
    def self_member(self) -> Member:
        """This node as a :class:`Member`."""
        node = self._node
        m = node.member(node.node_id)
        if m is None:
            return Member(node.address, node.settings.roles, "removed")
        return m

    @property
    def members(self) -> tuple[Member, ...]:
        """Every member (oldest first), with status ``"up"``, ``"leaving"`` or
        ``"unreachable"``."""
        return self._in_hub(self._node.members)

    @property
    def state(self) -> CurrentClusterState:
        """The members and the unreachable ones, as subscribers get them first."""
        return self._in_hub(self._node.state)

    def subscribe(self, subscriber: ActorRef, *event_classes: type) -> None:
        """Send ``subscriber`` a :class:`CurrentClusterState`, then every membership
        event of ``event_classes`` (default: all of them)."""
        if not isinstance(subscriber, ActorRef):
            raise TypeError(f"subscribe() needs an ActorRef, not {type(subscriber).__name__}")
        for c in event_classes:
            if not (isinstance(c, type) and issubclass(c, ClusterEvent)):
                raise TypeError(
                    f"subscribe() takes cluster event classes (MemberUp, UnreachableMember, "
                    f"ReachableMember, MemberRemoved, ClusterEvent), not {c!r}"
                )
        self._in_hub(self._node.subscribe, subscriber, event_classes or (ClusterEvent,))

    def unsubscribe(self, subscriber: ActorRef) -> None:
        """Stop sending events to ``subscriber``."""
        self._in_hub(self._node.unsubscribe, subscriber)

    def leave(self) -> None:
        """Leave the cluster gracefully and terminate the actor system (the node is
        ``"leaving"`` while its actors stop, then removed)."""
        self._system.terminate()

    def down(self, address: Address | str) -> bool:
        """Remove the node at ``address`` from the cluster now (its watched actors
        terminate everywhere; it never comes back under that address). Downing this
        node terminates its system. True if this call removed it. Called in the hub
        greenlet itself (a callback), where it cannot wait, it returns a Future."""
        if isinstance(address, str):
            address = Address.parse(address)
        if not isinstance(address, Address):
            raise TypeError(f"down() needs an Address, not {type(address).__name__}")
        if address.system != self._system.name or address.node is None:
            raise ValueError(f"{address} is not a node of the cluster {self._system.name!r}")
        node = self._node
        system = self._system
        target: str = address.node
        if system._tid == _ident() and getcurrent() is not system._hub:
            return node.down(target)
        # From the hub greenlet or a foreign thread: the store's round trip runs in a
        # greenlet of the hub's thread; the caller waits for its outcome.
        fut: Future[bool] = Future(system._hub, system._tid)

        def run() -> None:
            try:
                fut._set_result(node.down(target))
            except BaseException as e:
                fut._set_exception(e)

        if system._tid == _ident():
            gevent.spawn(run)
            return fut  # type: ignore[return-value]  # cannot block the hub: a Future
        system.run_in_hub_async(gevent.spawn, run)
        return fut.get(10.0)

    def __repr__(self) -> str:
        return f"<Cluster {self._node.address}>"


def _ident() -> int:
    from gactors._threads import get_ident

    return get_ident()

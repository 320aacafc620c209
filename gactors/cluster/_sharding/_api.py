"""The public API: ``ClusterSharding`` (the extension) and ``EntityRef``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gevent.event import Event

from gactors._extension import ExtensionId
from gactors._messages import PoisonPill
from gactors._props import Props
from gactors._ref import IMPLICIT, ActorRef, _Implicit
from gactors._threads import get_ident
from gactors.cluster._access import cluster_node
from gactors.cluster._cluster import Cluster
from gactors.cluster._seam import LeaseStore
from gactors.cluster._sharding._protocol import ShardingEnvelope, _Leave
from gactors.cluster._sharding._region import _Kept, _Region

if TYPE_CHECKING:
    from gactors._system import ActorSystem


class EntityRef:
    """A reference to the entity ``entity_id`` of a sharded type: ``tell`` and ``ask``
    go through this node's region (created on first message wherever it runs)."""

    __slots__ = ("entity_id", "region", "type_name")

    def __init__(self, region: ActorRef, type_name: str, entity_id: str) -> None:
        self.region = region
        self.type_name = type_name
        self.entity_id = entity_id

    def tell(self, message: Any, sender: ActorRef | _Implicit | None = IMPLICIT) -> None:
        """Send ``message`` to the entity (at most once; in order per sender). Like
        ``ActorRef.tell``, the sender defaults to the calling actor (None outside one)."""
        self.region.tell(ShardingEnvelope(self.entity_id, message), sender)

    def ask(
        self, message: Any, *, timeout: float | timedelta | None = None, block: bool = True
    ) -> Any:
        """Send ``message`` and wait for the entity's reply (like ``ActorRef.ask``:
        same timeouts; ``block=False`` returns a Future)."""
        return self.region.ask(
            ShardingEnvelope(self.entity_id, message), timeout=timeout, block=block
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, EntityRef)
            and other.type_name == self.type_name
            and other.entity_id == self.entity_id
            and other.region == self.region
        )

    def __hash__(self) -> int:
        return hash((self.type_name, self.entity_id))

    def __repr__(self) -> str:
        return f"EntityRef({self.type_name!r}, {self.entity_id!r})"


class _ShardingExtension(ExtensionId["ClusterSharding"]):
    """The one ``ClusterSharding`` of a cluster node's system."""

    def create(self, system: ActorSystem) -> ClusterSharding:
        inst = object.__new__(ClusterSharding)
        inst._system = system
        inst._store = None
        inst._regions = {}
        return inst


class ClusterSharding:
    """The sharded entity types of ``system`` (the same object each time).

    Raises :class:`~gactors.ClusterError` if the system is not a cluster node.
    """

    __slots__ = ("__weakref__", "_regions", "_store", "_system")

    _system: ActorSystem
    _store: LeaseStore | None
    _regions: dict[str, ActorRef]

    def __new__(cls, system: ActorSystem) -> ClusterSharding:
        Cluster(system)  # ClusterError without a cluster
        return system.extension(_ShardingExtension)

    def start(
        self,
        type_name: str,
        entity_props: Props | Callable[[str], Props],
        extract_entity_id: Callable[[Any], tuple[str, Any]] | None = None,
        number_of_shards: int = 100,
        role: str | None = None,
        passivate_idle_after: float | None = 120.0,
        stop_message: Any = PoisonPill,
    ) -> ActorRef:
        """Host entities of ``type_name`` on this node and return its region.

        ``entity_props`` is a ``Props`` or a callable ``entity_id -> Props``. Messages
        to the region are :class:`ShardingEnvelope`\\ s unless ``extract_entity_id``
        (``message -> (entity_id, message)``) is given. Every hosting node calls it with
        the same ``number_of_shards`` and ``role`` (this node must have ``role``).
        Entities start on their first message, stop with ``stop_message`` after
        ``passivate_idle_after`` idle seconds (None: never), and move when nodes
        join or leave (their messages meanwhile are buffered and delivered in order).
        """
        if not (isinstance(entity_props, Props) or callable(entity_props)):
            raise TypeError(
                f"entity_props must be Props or a callable entity_id -> Props, not "
                f"{type(entity_props).__name__}"
            )
        if passivate_idle_after is not None and (
            isinstance(passivate_idle_after, bool)
            or not isinstance(passivate_idle_after, (int, float))
            or not passivate_idle_after > 0
        ):
            raise ValueError(
                f"passivate_idle_after must be None or a number of seconds > 0, not "
                f"{passivate_idle_after!r}"
            )
        self._check(type_name, extract_entity_id, number_of_shards, role)
        roles = cluster_node(self._system).settings.roles
        if role is not None and role not in roles:
            raise ValueError(
                f"start({type_name!r}) needs this node to have the role {role!r} (its roles: "
                f"{list(roles)}); a node that only sends calls start_proxy"
            )
        return self._start(
            type_name,
            entity_props,
            extract_entity_id,
            number_of_shards,
            role,
            None if passivate_idle_after is None else float(passivate_idle_after),
            stop_message,
        )

    def start_proxy(
        self,
        type_name: str,
        extract_entity_id: Callable[[Any], tuple[str, Any]] | None = None,
        number_of_shards: int = 100,
        role: str | None = None,
    ) -> ActorRef:
        """A region that only sends to the entities of ``type_name`` hosted elsewhere
        (on the nodes with ``role``, which this node must not have)."""
        self._check(type_name, extract_entity_id, number_of_shards, role)
        roles = cluster_node(self._system).settings.roles
        if role is None or role in roles:
            raise ValueError(
                f"start_proxy({type_name!r}, role={role!r}): this node would be one of the "
                "hosts (every member with the role hosts; role=None: every member); call "
                "start here, or give the hosts a role this node does not have"
            )
        return self._start(
            type_name, None, extract_entity_id, number_of_shards, role, None, PoisonPill
        )

    @staticmethod
    def _check(type_name: Any, extract: Any, n: Any, role: Any) -> None:
        if not isinstance(type_name, str) or not type_name or "/" in type_name:
            raise ValueError(f"type_name must be a non-empty str without '/', not {type_name!r}")
        if extract is not None and not callable(extract):
            raise TypeError(f"extract_entity_id must be callable, not {type(extract).__name__}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number_of_shards must be an int >= 1, not {n!r}")
        if role is not None and (not isinstance(role, str) or not role):
            raise ValueError(f"role must be None or a non-empty str, not {role!r}")

    def _start(self, *args: Any) -> ActorRef:
        system = self._system
        if system._tid == get_ident():
            return self._start_in_hub(*args)
        return system.run_in_hub(self._start_in_hub, *args)

    def _start_in_hub(
        self,
        type_name: str,
        entity_props: Any,
        extract: Any,
        n: int,
        role: str | None,
        passivate: float | None,
        stop_message: Any,
    ) -> ActorRef:
        known = self._regions.get(type_name)
        if known is not None:
            return known
        system = self._system
        node = cluster_node(system)
        if self._store is None:
            self._store = node.backend.leases(8)
        region = system.system_cell.attach_child(
            Props(
                _Region,
                type_name,
                entity_props,
                extract,
                n,
                role,
                passivate,
                stop_message,
                self._store,
                node.settings.lease_ttl,
                node.backend.allocations(),
                _Kept(),
            ),
            f"sharding-{type_name}",
        )
        self._regions[type_name] = region
        if entity_props is not None:

            def hand_off() -> Event:
                done = Event()
                region.tell(_Leave(done), None)
                return done

            node.leave_hooks.append(hand_off)
        return region

    def shard_region(self, type_name: str) -> ActorRef:
        """The region of ``type_name`` on this node (``start``/``start_proxy`` first)."""
        region = self._regions.get(type_name)
        if region is None:
            raise ValueError(
                f"no sharding region {type_name!r} on this node: call start or start_proxy first"
            )
        return region

    def entity_ref(self, type_name: str, entity_id: str) -> EntityRef:
        """An :class:`EntityRef` to ``entity_id`` of ``type_name`` (through this
        node's region)."""
        if not isinstance(entity_id, str):
            raise TypeError(f"entity_id must be a str, not {type(entity_id).__name__}")
        return EntityRef(self.shard_region(type_name), type_name, entity_id)

    def __repr__(self) -> str:
        return f"<ClusterSharding of {self._system.name!r}>"

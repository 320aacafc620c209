"""``ClusterSingleton``: one instance of an actor in the whole cluster.

Concepts and guarantees for users: docs/cluster/singleton-sharding.md.

Every node calls ``ClusterSingleton(system).init(name, props, ...)``, which starts two
system actors on that node:

* the *manager* ``/system/singletonManager-<name>`` (only on nodes with ``role``): it
  tries to acquire the lease ``singleton:<name>`` when its node is the oldest ``"up"``
  member with the role (as Akka prefers; the lease decides), or when the lease has been
  free for longer than ``lease_ttl`` (the preferred node does not run a manager). While
  it holds the lease, the instance runs as its child ``.../singleton``; the lease is
  renewed every ``lease_ttl / 3`` and, if it cannot be renewed before its local deadline,
  the instance is stopped before the lease can have expired in Redis (see
  :mod:`gactors.cluster._lease` for what that does and does not promise).
* the *proxy* ``/system/singletonProxy-<name>`` (every node): it finds the instance
  (lease holder -> node -> the manager's child there), forwards messages to it with
  their sender, buffers up to ``buffer_size`` messages in order while none is known
  (more are dead letters) and finds it again when it terminates.

Graceful leave (``Cluster.leave()`` / ``system.terminate()``): before the user actors
stop, the manager sends ``stop_message`` to the instance, waits for its termination,
*then* releases the lease, so the old instance has terminated before the next node can
acquire the lease and start the new one. After a crash the next node starts the
instance once the lease expired (at most ``lease_ttl`` after the last renewal).
"""

from __future__ import annotations

import logging
from collections import deque
from time import monotonic
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import Event
from greenlet import getcurrent

from gactors._actor import Actor
from gactors._extension import ExtensionId
from gactors._messages import PoisonPill, Terminated
from gactors._props import Props
from gactors._ref import ActorRef
from gactors._threads import get_ident
from gactors.cluster._cluster import Cluster
from gactors.cluster._events import CurrentClusterState, Member, MemberRemoved
from gactors.cluster._extension import cluster_node
from gactors.cluster._lease import LeasedProps, LeaseKeeper
from gactors.cluster._seam import BackendUnavailable, LeaseStore
from gactors.exceptions import ActorNotFound

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = ["ClusterSingleton", "local_singletons"]

_log = logging.getLogger("gactors.cluster.singleton")


def poll_interval(lease_ttl: float) -> float:
    """How often a waiting manager/proxy/shard looks at a lease (bounded, never busy):
    short, because after a hand-over the next holder should not idle; only what waits
    polls (one singleton name, the few shards that move)."""
    return min(0.25, max(0.05, lease_ttl / 20))


class _Tick:
    __slots__ = ()


_TICK = _Tick()


class _Acquired:
    __slots__ = ("token",)

    def __init__(self, token: int | None) -> None:
        self.token = token


class _Lost:
    __slots__ = ("token",)

    def __init__(self, token: int | None) -> None:
        self.token = token


class _Leave:
    __slots__ = ("done",)

    def __init__(self, done: Event) -> None:
        self.done = done


class _Free:
    __slots__ = ("free",)

    def __init__(self, free: bool) -> None:
        self.free = free


class _Released:
    __slots__ = ()


class _SingletonManager(Actor):
    """Holds the lease and runs the instance on this node (see the module docstring)."""

    def __init__(
        self,
        name: str,
        props: Props,
        role: str | None,
        stop_message: Any,
        store: LeaseStore,
        lease_ttl: float,
    ) -> None:
        self._name = name
        self._props = props
        self._role = role
        self._stop_message = stop_message
        self._lease_ttl = lease_ttl
        node = cluster_node(self.context.system)
        self._node_id: str = node.node_id
        self._keeper = LeaseKeeper(
            store, f"singleton:{name}", node.node_id, lease_ttl, self._on_lost
        )
        self._members: tuple[Member, ...] = ()
        self._busy = False  # an acquire/holder request is in flight
        self._free_since: float | None = None
        self._instance: ActorRef | None = None
        self._leaving: Event | None = None
        self._look: Any = None  # the greenlet reading the lease's holder

    # -- lifecycle ---------------------------------------------------------------------------
    def pre_start(self) -> None:
        Cluster(self.context.system).subscribe(self.ref)
        self.timers.start_timer_with_fixed_delay("tick", _TICK, poll_interval(self._lease_ttl))

    def post_stop(self) -> None:
        Cluster(self.context.system).unsubscribe(self.ref)
        look = self._look
        if look is not None and not look.dead:
            look.kill(block=False)  # a read: nothing to undo
        # The instance (a child) has terminated before post_stop: releasing now keeps
        # "old terminated before new started" also when the system stops the manager.
        self._keeper.let_go(blocking=getcurrent() is not self.context.system._hub)
        if self._leaving is not None:
            self._leaving.set()

    def _on_lost(self) -> None:
        # In the keeper's greenlet: only a message (the instance stops in receive).
        self.ref.tell(_Lost(None), None)

    # -- messages ----------------------------------------------------------------------------
    def receive(self, m: Any) -> None:
        t = type(m)
        if t is _Tick:
            self._tick()
        elif t is _Acquired:
            self._busy = False
            self._acquired(m.token)
        elif t is _Free:
            self._busy = False
            if self._leaving is not None:
                self._leaving.set()
            elif not m.free:
                self._free_since = None
            elif self._free_since is None:
                self._free_since = monotonic()
        elif t is Terminated:
            if m.actor == self._instance:
                self._instance = None
                _log.info("singleton %r on %s terminated", self._name, self._node_id)
                # Terminated before the lease is given up: the next one may start now.
                self._release_then()
        elif t is _Lost:
            inst = self._instance
            if inst is not None:
                _log.warning(
                    "singleton %r on %s: lease lost, stopping the instance now",
                    self._name,
                    self._node_id,
                )
                self.context.stop(inst)
        elif t is _Leave:
            self._leave(m.done)
        elif t is _Released:
            if self._leaving is not None:
                self._leaving.set()
        elif isinstance(m, CurrentClusterState):
            self._members = m.members
        else:
            self._members = Cluster(self.context.system).members

    def _preferred(self) -> str | None:
        role = self._role
        for mb in self._members:  # oldest first
            if mb.status == "up" and (role is None or role in mb.roles):
                return mb.address.node
        return None

    def _tick(self) -> None:
        if self._busy or self._leaving is not None or self._instance is not None:
            return
        if self._keeper.token is not None:
            return
        preferred = self._preferred()
        if preferred == self._node_id or (
            self._free_since is not None and monotonic() - self._free_since >= self._lease_ttl
        ):
            self._busy = True
            ref = self.ref
            self._keeper.acquire_in_background(lambda token: ref.tell(_Acquired(token), None))
        else:
            self._busy = True
            store, lease, ref = self._keeper.store, self._keeper.name, self.ref

            def look() -> None:
                try:
                    free = store.holder(lease) is None
                except BackendUnavailable:
                    free = False
                ref.tell(_Free(free), None)

            self._look = gevent.spawn(look)

    def _acquired(self, token: int | None) -> None:
        if token is None:
            return
        if self._leaving is not None:
            self._release_then()
            return
        self._free_since = None
        _log.info(
            "singleton %r starting on %s (fencing token %d)", self._name, self._node_id, token
        )
        inst = self._instance = self.context.actor_of(
            LeasedProps.of(self._props, None, token), "singleton"
        )
        self.context.watch(inst)

    def _leave(self, done: Event) -> None:
        self._leaving = done
        inst = self._instance
        if inst is not None:
            _log.info(
                "singleton %r on %s: handing over (stop message %r)",
                self._name,
                self._node_id,
                self._stop_message,
            )
            inst.tell(self._stop_message, self.ref)
        elif not self._busy:
            self._release_then()
        # else: the acquire in flight answers first; _acquired releases.

    def _release_then(self) -> None:
        ref = self.ref
        self._keeper.release_in_background(lambda: ref.tell(_Released(), None))


class _Found:
    __slots__ = ("ref",)

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref


class _SingletonProxy(Actor):
    """Forwards to the current instance; buffers in order while none is known."""

    def __init__(self, name: str, store: LeaseStore, lease_ttl: float, buffer_size: int) -> None:
        self._name = name
        self._store = store
        self._poll = poll_interval(lease_ttl)
        self._limit = buffer_size
        self._buffer: deque[tuple[Any, ActorRef | None]] = deque()
        self._target: ActorRef | None = None
        self._finder: Any = None
        system = self.context.system
        self._system_name = system.name
        self._node_id: str = cluster_node(system).node_id

    def pre_start(self) -> None:
        Cluster(self.context.system).subscribe(self.ref, MemberRemoved)
        self._find()

    def post_stop(self) -> None:
        Cluster(self.context.system).unsubscribe(self.ref)
        f = self._finder
        if f is not None and not f.dead:
            f.kill(block=False)
        system = self.context.system
        while self._buffer:
            msg, snd = self._buffer.popleft()
            system.publish_dead_letter(msg, snd, self.ref)

    def receive(self, m: Any) -> None:
        t = type(m)
        if t is _Found:
            self._finder = None
            self._target = m.ref
            self.context.watch(m.ref)
            buf = self._buffer
            while buf:
                msg, snd = buf.popleft()
                m.ref.tell(msg, snd)
        elif t is Terminated and m.actor == self._target:
            self._target = None
            self._find()
        elif t is MemberRemoved or t is CurrentClusterState:
            target = self._target
            if (
                t is MemberRemoved
                and target is not None
                and target.path.address.node == m.member.address.node
            ):
                self._target = None
                self._find()
        else:
            target = self._target
            if target is not None:
                target.tell(m, self.sender)
            elif len(self._buffer) < self._limit:
                self._buffer.append((m, self.context.sender))
            else:
                self.context.system.publish_dead_letter(m, self.context.sender, self.ref)

    def _find(self) -> None:
        if self._finder is not None:
            return
        system = self.context.system
        store, lease, ref, poll = self._store, f"singleton:{self._name}", self.ref, self._poll
        path = f"/system/singletonManager-{self._name}/singleton"
        own = self._node_id
        prefix = f"gactors://{self._system_name}@"

        def find() -> None:
            while True:
                try:
                    holder = store.holder(lease)
                except BackendUnavailable:
                    holder = None
                if holder is not None:
                    owner = holder[0]
                    found: ActorRef | None = None
                    if owner == own:
                        found = system.lookup(path)
                    else:
                        try:
                            found = system.actor_selection(prefix + owner + path).resolve_one(
                                max(1.0, poll * 4)
                            )
                        except (ActorNotFound, TimeoutError):
                            found = None
                        except Exception as e:  # a node gone meanwhile, Redis down
                            _log.debug("singleton proxy %r: %s", lease, e)
                            found = None
                    if found is not None:
                        ref.tell(_Found(found), None)
                        return
                gevent.sleep(poll)

        self._finder = gevent.spawn(find)


class _SingletonExtension(ExtensionId["ClusterSingleton"]):
    """The one ``ClusterSingleton`` of a cluster node's system."""

    def create(self, system: ActorSystem) -> ClusterSingleton:
        inst = object.__new__(ClusterSingleton)
        inst._system = system
        inst._store = None
        inst._proxies = {}
        return inst


class ClusterSingleton:
    """The cluster singletons of ``system`` (the same object each time).

    Raises :class:`~gactors.ClusterError` if the system is not a cluster node.
    """

    __slots__ = ("__weakref__", "_proxies", "_store", "_system")

    _system: ActorSystem
    _store: LeaseStore | None
    _proxies: dict[str, tuple[tuple[Any, ...], ActorRef]]

    def __new__(cls, system: ActorSystem) -> ClusterSingleton:
        Cluster(system)  # ClusterError without a cluster
        return system.extension(_SingletonExtension)

    def init(
        self,
        name: str,
        props: Props,
        role: str | None = None,
        stop_message: Any = PoisonPill,
        buffer_size: int = 1000,
    ) -> ActorRef:
        """Run one instance of ``props`` in the cluster (on a node with ``role``) and
        return this node's proxy to it; every node calls it with the same arguments.

        The instance runs under the lease ``singleton:<name>`` whose fencing token only
        grows. When its node leaves gracefully it gets ``stop_message`` and has
        terminated before another node starts the next one; after a crash the next
        one starts once the lease expired (``cluster.lease_ttl``). The proxy forwards
        with the sender kept, buffers up to ``buffer_size`` messages in order while no
        instance is known and makes dead letters of the rest.

        Calling it again with the same name returns the same proxy.
        """
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"a singleton name must be a non-empty str without '/', not {name!r}")
        if not isinstance(props, Props):
            raise TypeError(f"init() needs Props, not {type(props).__name__}")
        if role is not None and (not isinstance(role, str) or not role):
            raise ValueError(f"role must be None or a non-empty str, not {role!r}")
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 0:
            raise ValueError(f"buffer_size must be an int >= 0, not {buffer_size!r}")
        system = self._system
        if system._tid == get_ident():
            return self._init(name, props, role, stop_message, buffer_size)
        return system.run_in_hub(self._init, name, props, role, stop_message, buffer_size)

    def _init(
        self, name: str, props: Props, role: str | None, stop_message: Any, buffer_size: int
    ) -> ActorRef:
        known = self._proxies.get(name)
        if known is not None:
            return known[1]
        system = self._system
        node = cluster_node(system)
        settings = node.settings
        if self._store is None:
            self._store = node.backend.leases(8)
        store = self._store
        ttl = settings.lease_ttl
        syscell = system.system_cell
        if role is None or role in settings.roles:
            manager = syscell.attach_child(
                Props(_SingletonManager, name, props, role, stop_message, store, ttl),
                f"singletonManager-{name}",
            )

            def hand_over() -> Event:
                done = Event()
                manager.tell(_Leave(done), None)
                return done

            node.leave_hooks.append(hand_over)
        proxy = syscell.attach_child(
            Props(_SingletonProxy, name, store, ttl, buffer_size), f"singletonProxy-{name}"
        )
        self._proxies[name] = ((props, role, stop_message, buffer_size), proxy)
        return proxy

    def __repr__(self) -> str:
        return f"<ClusterSingleton of {self._system.name!r}>"


def local_singletons(system: ActorSystem) -> list[dict[str, Any]]:
    """What this node knows of its singletons, for the node's inspector (internal).

    One entry per singleton ``init``-ed on this node, oldest first: ``{"name": str,
    "role": str | None, "manager": bool, "running": bool, "token": int | None}`` —
    ``manager``: this node may run it (it has the role); ``running``: the instance
    runs here now; ``token``: the fencing token of the lease this node holds for it.
    Read in the hub thread (cells are only touched there), without any I/O.
    """
    if not system.has_extension(_SingletonExtension):
        return []
    inst = system.extension(_SingletonExtension)
    out: list[dict[str, Any]] = []
    children = system.system_cell.child_cells
    for name, (args, _proxy) in list(inst._proxies.items()):  # noqa: SLF001  this module's inspection of its own actors
        cell = children.get(f"singletonManager-{name}")
        manager = cell.actor if cell is not None else None
        running = token = None
        if isinstance(manager, _SingletonManager):
            running = manager._instance is not None  # noqa: SLF001  this module's inspection of its own actors
            token = manager._keeper.token  # noqa: SLF001  this module's inspection of its own actors
        out.append(
            {
                "name": name,
                "role": args[1],
                "manager": cell is not None,
                "running": bool(running),
                "token": token,
            }
        )
    return out

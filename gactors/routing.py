"""Pool routers (docs/api/routing.md): one actor in front of ``n`` routee children.

``system.actor_of(RoundRobinPool(5).props(Props(Worker)), "workers")`` creates a router
actor whose children are five ``Worker`` routees. Messages told to the router are
forwarded to the routee(s) chosen by the pool's routing logic, keeping the original
sender, so routees reply straight to the asker.

Messages the router handles itself:

* :class:`Broadcast` ``(message)`` — ``message`` goes to every routee, whatever the logic.
* :class:`GetRoutees` — replies :class:`Routees` ``(routees)``.
* :class:`AdjustPoolSize` ``(change)`` — adds or removes (stops) routees.
* ``PoisonPill`` and ``Kill`` act on the router itself (stopping it stops the routees);
  send ``Broadcast(PoisonPill)`` to stop every routee (the router follows).

Supervision: the router supervises its routees with the pool's ``supervisor_strategy``.
By default, as in Akka, it *escalates* every failure, so the router's own supervisor
decides, treating the failure as the router's: a restart of the router restarts every
routee (the pool keeps its size and its routees' refs), a stop stops them all. Pass
``supervisor_strategy=`` to handle routee failures in the router instead; a pool of
size 1 with its own strategy is the documented way to put an extra supervision level
around a single worker.

Routees are watched: one that stops is removed from the pool, and the router stops
itself once its last routee is gone.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gactors._actor import Actor
from gactors._messages import Terminated, register_wire_class, register_wire_singleton
from gactors._props import Props
from gactors._supervision import Directive, OneForOneStrategy, SupervisorStrategy

if TYPE_CHECKING:
    from gactors._ref import ActorRef

__all__ = [
    "AdjustPoolSize",
    "Broadcast",
    "BroadcastPool",
    "ConsistentHashable",
    "ConsistentHashableEnvelope",
    "ConsistentHashingPool",
    "GetRoutees",
    "Pool",
    "RandomPool",
    "RoundRobinPool",
    "Routees",
    "RoutingLogic",
    "SmallestMailboxPool",
    "default_pool_strategy",
]


# -- messages ------------------------------------------------------------------------------------
class Broadcast:
    """Deliver ``message`` to every routee of the router it is sent to."""

    __slots__ = ("message",)

    def __init__(self, message: Any) -> None:
        if message is None:
            from gactors.exceptions import InvalidMessageException

            raise InvalidMessageException("Broadcast needs a message, not None")
        self.message = message

    def __eq__(self, other: object) -> bool:
        return type(other) is Broadcast and other.message == self.message

    def __hash__(self) -> int:
        return hash((Broadcast, self.message))

    def __repr__(self) -> str:
        return f"Broadcast({self.message!r})"


class _GetRoutees:
    __slots__ = ()

    def __repr__(self) -> str:
        return "GetRoutees"


GetRoutees = _GetRoutees()
"""Ask a router for its current routees; it replies :class:`Routees`."""


class Routees:
    """A router's reply to :data:`GetRoutees`: ``routees`` in routing order."""

    __slots__ = ("routees",)

    def __init__(self, routees: Sequence[ActorRef]) -> None:
        self.routees = tuple(routees)

    def __eq__(self, other: object) -> bool:
        return type(other) is Routees and other.routees == self.routees

    def __hash__(self) -> int:
        return hash((Routees, self.routees))

    def __repr__(self) -> str:
        return f"Routees({list(self.routees)!r})"


class AdjustPoolSize:
    """Grow (``change > 0``) or shrink (``change < 0``: stop the newest routees) a pool."""

    __slots__ = ("change",)

    def __init__(self, change: int) -> None:
        if isinstance(change, bool) or not isinstance(change, int):
            raise TypeError(f"change must be an int, not {change!r}")
        self.change = change

    def __eq__(self, other: object) -> bool:
        return type(other) is AdjustPoolSize and other.change == self.change

    def __hash__(self) -> int:
        return hash((AdjustPoolSize, self.change))

    def __repr__(self) -> str:
        return f"AdjustPoolSize({self.change})"


class ConsistentHashable:
    """Mixin for messages that carry their own hash key (``consistent_hash_key``)."""

    __slots__ = ()

    @property
    def consistent_hash_key(self) -> Any:
        raise NotImplementedError


class ConsistentHashableEnvelope:
    """Wraps ``message`` with the ``hash_key`` to route it by; routees get ``message``."""

    __slots__ = ("hash_key", "message")

    def __init__(self, message: Any, hash_key: Any) -> None:
        self.message = message
        self.hash_key = hash_key

    def __repr__(self) -> str:
        return f"ConsistentHashableEnvelope({self.message!r}, {self.hash_key!r})"


# -- routing logics ----------------------------------------------------------------------------
# Wire numbers of routing's messages (the cluster's msgpack serializer carries them as
# their number and fields; gactors._messages, "wire numbers"). Never renumber one.
register_wire_class(8, Broadcast, 1, lambda m: (m.message,))
register_wire_singleton(9, GetRoutees)
register_wire_class(10, Routees, 1, lambda m: (m.routees,))
register_wire_class(11, AdjustPoolSize, 1, lambda m: (m.change,))
register_wire_class(12, ConsistentHashableEnvelope, 2, lambda m: (m.message, m.hash_key))


class RoutingLogic:
    """Chooses the routee(s) of one message. Runs inside the router actor."""

    def select(self, message: Any, routees: Sequence[ActorRef]) -> Sequence[ActorRef]:
        """The routees ``message`` goes to (empty: dead letters). ``routees`` is not empty."""
        raise NotImplementedError

    def unwrap(self, message: Any) -> Any:
        """The message the routees get (logics with envelopes unwrap them here)."""
        return message


class _RoundRobin(RoutingLogic):
    def __init__(self) -> None:
        self._next = 0

    def select(self, message: Any, routees: Sequence[ActorRef]) -> Sequence[ActorRef]:
        i = self._next % len(routees)
        self._next = i + 1
        return (routees[i],)


class _Random(RoutingLogic):
    def select(self, message: Any, routees: Sequence[ActorRef]) -> Sequence[ActorRef]:
        return (random.choice(routees),)


class _Broadcast(RoutingLogic):
    def select(self, message: Any, routees: Sequence[ActorRef]) -> Sequence[ActorRef]:
        return routees


class _SmallestMailbox(RoutingLogic):
    """Like Akka: an idle routee with an empty mailbox first, then the smallest
    mailbox, a busy routee after an idle one, suspended or dead routees last."""

    def select(self, message: Any, routees: Sequence[ActorRef]) -> Sequence[ActorRef]:
        best: ActorRef | None = None
        best_score: tuple[int, int, int] | None = None
        for r in routees:
            cell = getattr(r, "_cell", None)
            if cell is None:
                score = (2, 0, 0)
            elif cell.dead or cell.suspend_count:
                score = (1, len(cell.mailbox), 1)
            else:
                # ``scheduled``: queued or running, i.e. not idle.
                score = (0, len(cell.mailbox), 1 if cell.scheduled else 0)
            if best_score is None or score < best_score:
                best, best_score = r, score
                if score == (0, 0, 0):
                    break  # cannot do better
        return (best,) if best is not None else ()


def _hash64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _key_bytes(key: Any) -> bytes:
    # Stable across processes for the usual key types; other keys use hash().
    if isinstance(key, bytes):
        return b"b" + key
    if isinstance(key, str):
        return b"s" + key.encode("utf-8", "surrogatepass")
    if isinstance(key, int) and not isinstance(key, bool):
        return b"i" + str(key).encode()
    return b"h" + str(hash(key)).encode()


class _ConsistentHashing(RoutingLogic):
    def __init__(
        self, hash_mapping: Callable[[Any], Any] | None, virtual_nodes_factor: int
    ) -> None:
        self._mapping = hash_mapping
        self._factor = virtual_nodes_factor
        self._ring_for: tuple[ActorRef, ...] = ()
        self._positions: list[int] = []
        self._nodes: list[ActorRef] = []

    def key_of(self, message: Any) -> Any:
        """The hash key of ``message``, or None when it has none."""
        if type(message) is ConsistentHashableEnvelope:
            return message.hash_key
        if self._mapping is not None:
            key = self._mapping(message)
            if key is not None:
                return key
        if isinstance(message, ConsistentHashable):
            return message.consistent_hash_key
        return None

    def unwrap(self, message: Any) -> Any:
        if type(message) is ConsistentHashableEnvelope:
            return message.message
        return message

    def _ring(self, routees: Sequence[ActorRef]) -> None:
        key = tuple(routees)
        if key == self._ring_for:
            return
        points: list[tuple[int, int]] = []
        for index, r in enumerate(key):
            ident = f"{r.path}#{r._uid}".encode()
            for v in range(self._factor):
                points.append((_hash64(ident + b":" + str(v).encode()), index))
        points.sort()
        self._positions = [p for p, _ in points]
        self._nodes = [key[i] for _, i in points]
        self._ring_for = key

    def select(self, message: Any, routees: Sequence[ActorRef]) -> Sequence[ActorRef]:
        key = self.key_of(message)
        if key is None:
            return ()
        self._ring(routees)
        i = bisect.bisect_left(self._positions, _hash64(_key_bytes(key)))
        return (self._nodes[i % len(self._nodes)],)


# -- pools ---------------------------------------------------------------------------------------
def _escalate(exc: BaseException) -> Directive:
    return Directive.ESCALATE


default_pool_strategy: SupervisorStrategy = OneForOneStrategy(_escalate)
"""The routee supervision of every pool unless given: escalate any failure (as Akka)."""


class Pool:
    """Base class of the pools: ``nr_of_instances`` routees built from one Props."""

    def __init__(
        self, nr_of_instances: int, *, supervisor_strategy: SupervisorStrategy | None = None
    ) -> None:
        if (
            isinstance(nr_of_instances, bool)
            or not isinstance(nr_of_instances, int)
            or nr_of_instances < 1
        ):
            raise ValueError(f"a pool needs nr_of_instances >= 1, not {nr_of_instances!r}")
        if supervisor_strategy is not None and not hasattr(supervisor_strategy, "handle_failure"):
            raise TypeError(
                f"supervisor_strategy must be a SupervisorStrategy, not {supervisor_strategy!r}"
            )
        self.nr_of_instances = nr_of_instances
        self.supervisor_strategy: SupervisorStrategy = (
            supervisor_strategy if supervisor_strategy is not None else default_pool_strategy
        )

    def create_logic(self) -> RoutingLogic:
        """A fresh routing logic for one router instance."""
        raise NotImplementedError

    def props(self, routee_props: Props) -> Props:
        """Props of a router actor whose routees are built from ``routee_props``."""
        if not isinstance(routee_props, Props):
            raise TypeError(f"props() needs the routees' Props, not {type(routee_props).__name__}")
        return Props(_PoolRouter, self, routee_props)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.nr_of_instances})"


class RoundRobinPool(Pool):
    """Each message to the next routee in turn."""

    def create_logic(self) -> RoutingLogic:
        return _RoundRobin()


class RandomPool(Pool):
    """Each message to a routee chosen at random."""

    def create_logic(self) -> RoutingLogic:
        return _Random()


class BroadcastPool(Pool):
    """Every message to every routee."""

    def create_logic(self) -> RoutingLogic:
        return _Broadcast()


class SmallestMailboxPool(Pool):
    """Each message to the routee with the fewest queued messages (idle ones first)."""

    def create_logic(self) -> RoutingLogic:
        return _SmallestMailbox()


class ConsistentHashingPool(Pool):
    """Messages with equal hash keys always go to the same routee (while the set of
    routees does not change; a change moves only about ``1/n`` of the keys).

    The key of a message is, in order: the ``hash_key`` of a
    :class:`ConsistentHashableEnvelope` (the routee gets the wrapped message), then
    ``hash_mapping(message)`` if that is not None, then the ``consistent_hash_key`` of a
    :class:`ConsistentHashable` message. A message without a key is logged (warning)
    and goes to dead letters.
    """

    def __init__(
        self,
        nr_of_instances: int,
        hash_mapping: Callable[[Any], Any] | None = None,
        *,
        virtual_nodes_factor: int = 10,
        supervisor_strategy: SupervisorStrategy | None = None,
    ) -> None:
        super().__init__(nr_of_instances, supervisor_strategy=supervisor_strategy)
        if hash_mapping is not None and not callable(hash_mapping):
            raise TypeError(f"hash_mapping must be callable, not {type(hash_mapping).__name__}")
        if (
            isinstance(virtual_nodes_factor, bool)
            or not isinstance(virtual_nodes_factor, int)
            or virtual_nodes_factor < 1
        ):
            raise ValueError(
                f"virtual_nodes_factor must be an int >= 1, not {virtual_nodes_factor!r}"
            )
        self.hash_mapping = hash_mapping
        self.virtual_nodes_factor = virtual_nodes_factor

    def create_logic(self) -> RoutingLogic:
        return _ConsistentHashing(self.hash_mapping, self.virtual_nodes_factor)


# -- the router actor ------------------------------------------------------------------------------
class _PoolRouter(Actor):
    def __init__(self, pool: Pool, routee_props: Props) -> None:
        self._pool = pool
        self._routee_props = routee_props
        self._logic = pool.create_logic()
        self._routees: list[ActorRef] = []

    @property
    def supervisor_strategy(self) -> SupervisorStrategy:  # type: ignore[override]
        return self._pool.supervisor_strategy

    def pre_start(self) -> None:
        self._add(self._pool.nr_of_instances)

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        # Unlike other actors, a router keeps its children across a restart: they are
        # restarted with it (by the cell, after post_restart), so the pool keeps its size.
        pass

    def post_restart(self, reason: BaseException) -> None:
        # Adopt the surviving routees (their watches survive the restart too).
        cell = self._gactors_cell
        self._routees = [s.child for s in cell.live_child_stats()]
        if not self._routees:
            self.context.stop(self.ref)

    def _add(self, n: int) -> None:
        context = self.context
        for _ in range(n):
            routee = context.actor_of(self._routee_props)
            context.watch(routee)
            self._routees.append(routee)

    def _remove(self, n: int) -> None:
        context = self.context
        for _ in range(min(n, len(self._routees))):
            routee = self._routees.pop()
            context.unwatch(routee)
            context.stop(routee)
        self._stop_if_empty()

    def _stop_if_empty(self) -> None:
        if not self._routees:
            self.context.stop(self.ref)

    def receive(self, message: Any) -> None:
        cls = type(message)
        routees = self._routees
        if cls is Terminated:
            if message.actor in routees:
                routees.remove(message.actor)
                self._stop_if_empty()
            return
        if cls is Broadcast:
            inner = message.message
            for r in routees:
                r.forward(inner)
            return
        if cls is _GetRoutees:
            self.sender.tell(Routees(routees), self.ref)
            return
        if cls is AdjustPoolSize:
            if message.change > 0:
                self._add(message.change)
            elif message.change < 0:
                self._remove(-message.change)
            return
        logic = self._logic
        targets = logic.select(message, routees) if routees else ()
        if not targets:
            cell = self._gactors_cell
            if routees:
                cell.system.publish_log(
                    logging.WARNING,
                    str(cell.path),
                    f"no routee for message of type {cls.__name__} (no hash key?): "
                    "sent to dead letters",
                    category="routing",
                )
            cell.system.publish_dead_letter(message, cell.sender, self.ref)
            return
        out = logic.unwrap(message)
        for r in targets:
            r.forward(out)

"""``ClusterSharding``: one actor per entity id across the cluster.

Concepts and guarantees for users: docs/cluster/singleton-sharding.md.

Shape (every name below is internal):

* A *region* per entity type and node, ``/system/sharding-<type>``. It maps an entity
  id to a shard (``crc32(entity_id) % number_of_shards``, the same on every node and
  every Python) and a shard to a node by rendezvous (highest-random-weight) hashing over
  the hosting members: the members with ``role`` (all members for ``role=None``) that
  are not leaving; unreachable ones stay owners until they are downed. Every node
  computes the same answer from the same membership view, and a join or leave moves
  only the shards the joining/leaving node wins/loses. Messages for a shard of this
  node go to the local *shard* actor, the others to the owner's region, in *batches*
  per node: what the region's mailbox holds when it gets to its own flush marker (at
  most ``BATCH_LIMIT``) travels as one wire message, each sender once; the receiving
  region routes the batch in order and hands each local shard its part as one message.
  A drain marker or a leave flushes first, so batches never overtake or trail them.
* A *shard* actor ``/system/sharding-<type>/<n>`` runs the shard's entities (its
  children, created on their first message) only while it holds the lease
  ``shard:<type>:<n>`` (fencing token in ``self.context.fencing_token`` of each
  entity). Until then it buffers, in order. Idle entities are passivated with
  ``stop_message``; a message for a passivating entity waits for its termination and
  starts it again.
* Rebalance: when a region's view moves shard ``n`` away from the node it last sent
  ``n``'s messages to, it buffers ``n``'s messages (bounded; overflow is dead letters)
  until that node confirmed (a *drain* marker travels the same path as the messages,
  so everything sent before it was routed there first), or until the local shard
  handed off (its entities got ``stop_message`` and terminated, the lease was
  released). The buffer then goes, in order, to the new owner, whose shard delivers it
  once it holds the lease. One path region -> shard -> entity keeps the order per
  sender and entity.
* Crash: the survivors' views drop the node once it is downed; its shards' leases
  expire at most ``lease_ttl`` after its last renewal, and the new owners start them.
* Rolling restart (gunicorn's HUP: every old node leaves while new ones join): views
  disagree for a heartbeat or two. A leaving region marks what it forwards (the
  ``host`` flag), so the receiver stops counting that node as a host before its view
  shows the leave; a node whose stored status is "leaving" stays excluded while it is
  unreachable; a region asked to confirm a drain while it forwarded (or holds) the
  shard's messages for a third region confirms only after that one did, so the
  asker's next messages cannot overtake them; two regions that each wait for the
  other's drain confirmation give each other's messages back and confirm, and a
  longer circle of waits (a message that bounced) is broken the same way after two
  heartbeats: then a message held in it can be overtaken;
  a message that went from region to region
  ``_BOUNCES`` times waits for the next look at the view, in order, with the
  messages behind it, and is a dead letter only if it still bounces after
  ``_HOLDS`` such waits.

A node that only sends calls ``start_proxy``: its region never hosts; it must not have
the hosting ``role`` (with ``role=None`` every member hosts, so a sending-only node
needs the hosts to have a role it lacks).

Guarantees: at most once (a message in flight to a node that crashes is lost; a
message that cannot be buffered or routed is a ``DeadLetter``); order per sender and
entity, also while shards move; one incarnation of an entity at a time *as far as a
lease can promise* (see :mod:`gactors.cluster._lease`: a paused process or a Redis
failover can break it). That is why every entity sees ``self.context.fencing_token``,
which only grows from one incarnation to the next: pass it to the store the entity
writes to, so a stale incarnation's writes are refused there::

    class Cart(Actor):
        def receive(self, m):
            # Only a writer with a token at least as new as the last one wins.
            db.execute(
                "UPDATE carts SET items = ?, token = ? WHERE user = ? AND token <= ?",
                (dump(self.items), self.context.fencing_token,
                 self.context.entity_id, self.context.fencing_token),
            )
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from time import monotonic
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote
from uuid import uuid4

import gevent
from gevent.event import Event
from greenlet import getcurrent

from gactors._actor import Actor
from gactors._extension import ExtensionId
from gactors._messages import PoisonPill, Terminated, register_carrier
from gactors._props import Props
from gactors._ref import IMPLICIT, ActorRef, _Implicit
from gactors._threads import get_ident
from gactors.cluster._access import cluster_node
from gactors.cluster._cluster import Cluster
from gactors.cluster._events import ClusterEvent, CurrentClusterState
from gactors.cluster._lease import LeasedProps, LeaseKeeper
from gactors.cluster._seam import LeaseStore
from gactors.cluster._serialization import register_message
from gactors.cluster._singleton import poll_interval
from gactors.exceptions import SerializationError

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = ["ClusterSharding", "EntityRef", "ShardingEnvelope", "local_shards"]

_log = logging.getLogger("gactors.cluster.sharding")

#: The most messages buffered per shard by a region (while a shard moves) and by a
#: shard (while it waits for its lease); more are dead letters.
BUFFER_LIMIT = 10_000


@register_message(tag="gactors.cluster.ShardingEnvelope")
@dataclass(frozen=True, slots=True)
class ShardingEnvelope:
    """A message for the entity ``entity_id``, sent to a region."""

    entity_id: str
    message: Any


@register_message(tag="gactors.cluster.sharding.Msg")
class _RegionMsg(NamedTuple):
    # A message forwarded from one region to the owner's region (a NamedTuple: the
    # cheapest registered shape to build and encode, once per message).
    shard: int
    entity_id: str
    message: Any
    hops: int = 0
    # Sent by a leaving region: the receiver stops counting that node as a host before
    # its own view shows the leave (see _Region._sender_leaves).
    host: bool = False
    # The node of the region that forwarded it.
    src: str = ""


@register_message(tag="gactors.cluster.sharding.Batch")
class _RegionBatch(NamedTuple):
    # Messages one region forwards to another, gathered while its mailbox had more
    # (one wire message, one decode and one mailbox hop per batch instead of per
    # message). flat: shard, entity_id, message, sender index (-1: no sender), hops,
    # then the next message..., in the order sent; each sender travels once per batch
    # in senders (a flat list of plain values costs the codec least per message).
    flat: list[Any]
    senders: list[ActorRef]
    host: bool
    src: str


def _unpack_batch(batch: _RegionBatch, _sender: ActorRef | None) -> list[tuple[Any, Any]]:
    f, snd = batch.flat, batch.senders
    return [(f[k + 2], snd[f[k + 3]] if f[k + 3] >= 0 else None) for k in range(0, len(f), 5)]


def _unpack_msg(msg: _RegionMsg, sender: ActorRef | None) -> list[tuple[Any, Any]]:
    return [(msg.message, sender)]


class _Out:
    # A batch being gathered for one node (the wire form of _RegionBatch).
    __slots__ = ("flat", "index", "last", "last_i", "senders")

    def __init__(self) -> None:
        self.flat: list[Any] = []
        self.senders: list[ActorRef] = []
        self.index: dict[ActorRef, int] = {}
        self.last: ActorRef | None = None
        self.last_i = -1

    def add(self, s: int, eid: str, msg: Any, snd: ActorRef | None, hops: int) -> int:
        if snd is None:
            i = -1
        elif snd is self.last:
            i = self.last_i
        else:
            got = self.index.get(snd)
            if got is None:
                got = self.index[snd] = len(self.senders)
                self.senders.append(snd)
            i = self.last_i = got
            self.last = snd
        flat = self.flat
        flat += (s, eid, msg, i, hops)
        return len(flat)

    def messages(self) -> list[tuple[int, str, Any, ActorRef | None, int]]:
        f, snd = self.flat, self.senders
        return [
            (f[k], f[k + 1], f[k + 2], snd[f[k + 3]] if f[k + 3] >= 0 else None, f[k + 4])
            for k in range(0, len(f), 5)
        ]


#: How many times a message may go from region to region (views disagree while nodes
#: join and leave) before the region holds it until its next look at the view; a
#: message still bouncing after ``_HOLDS`` such waits is a dead letter.
_BOUNCES = 3
_PARKED = 100  # hops // _PARKED: the waits a message had; hops % _PARKED: its bounces since
_HOLDS = 3

#: The most messages in one batch between regions (bounds the wire message and the
#: latency of the first one).
BATCH_LIMIT = 200
_FLAT_LIMIT = 5 * BATCH_LIMIT


def _held(hops: int) -> int:
    """The hop count of a message once it waited for a look at the view."""
    return (hops // _PARKED + 1) * _PARKED


class _Flush:
    __slots__ = ()


_FLUSH = _Flush()


@register_message(tag="gactors.cluster.sharding.Drain")
@dataclass(frozen=True, slots=True)
class _Drain:
    # "I send shard's messages elsewhere from now on; confirm you routed my earlier ones."
    shard: int
    reply_to: ActorRef
    node: str


@register_message(tag="gactors.cluster.sharding.Drained")
@dataclass(frozen=True, slots=True)
class _Drained:
    shard: int
    node: str


class _Env:
    __slots__ = ("entity_id", "message")

    def __init__(self, entity_id: str, message: Any) -> None:
        self.entity_id = entity_id
        self.message = message


class _Envs:
    # The messages for one shard out of one batch from another region, in order.
    __slots__ = ("items",)

    def __init__(self, items: list[tuple[_Env, ActorRef | None]]) -> None:
        self.items = items


# A region batch or forward that cannot reach its node (gone, drained, full), or an
# envelope for a shard that stopped, is dead-lettered as the entity messages it
# carries: one DeadLetter per message, as if it had been sent alone.
register_carrier(_RegionBatch, _unpack_batch)
register_carrier(_RegionMsg, _unpack_msg)
register_carrier(_Env, lambda env, sender: [(env.message, sender)])
register_carrier(_Envs, lambda envs, _sender: [(env.message, s) for env, s in envs.items])


class _Acquired:
    __slots__ = ("token",)

    def __init__(self, token: int | None) -> None:
        self.token = token


class _HandOff:
    __slots__ = ()


class _HandedOff:
    __slots__ = ("leftover", "shard")

    def __init__(self, shard: int, leftover: list[tuple[Any, ActorRef | None]]) -> None:
        self.shard = shard
        self.leftover = leftover


class _Lost:
    __slots__ = ()


class _Released:
    __slots__ = ()


class _PassivateTick:
    __slots__ = ()


class _ViewTick:
    __slots__ = ()


_VIEW_TICK = _ViewTick()


class _Leave:
    __slots__ = ("done",)

    def __init__(self, done: Event) -> None:
        self.done = done


_PASSIVATE_TICK = _PassivateTick()


def shard_of(entity_id: str, number_of_shards: int) -> int:
    """The shard of ``entity_id`` (stable across processes and Python versions)."""
    return zlib.crc32(entity_id.encode()) % number_of_shards


def allocate(type_name: str, number_of_shards: int, nodes: list[str]) -> list[str | None]:
    """Rendezvous hashing: for every shard, the node with the highest weight."""
    if not nodes:
        return [None] * number_of_shards
    out: list[str | None] = []
    for s in range(number_of_shards):
        best, best_w = None, -1
        for n in nodes:
            w = int.from_bytes(
                hashlib.blake2b(f"{type_name}:{s}:{n}".encode(), digest_size=8).digest(), "big"
            )
            if w > best_w:
                best, best_w = n, w
        out.append(best)
    return out


# -- the shard -----------------------------------------------------------------------------------
class _Shard(Actor):
    def __init__(
        self,
        shard: int,
        entity_props: Props | Callable[[str], Props],
        passivate: float | None,
        stop_message: Any,
        store: LeaseStore,
        lease: str,
        owner: str,
        lease_ttl: float,
    ) -> None:
        self._shard = shard
        self._entity_props = entity_props
        self._passivate = passivate
        self._stop_message = stop_message
        ref = self.ref
        # on_lost runs in the renewing greenlet: only a message.
        # One owner name per incarnation, not the node's id: the store's acquire is
        # re-entrant per owner, so a closed keeper of an earlier incarnation on this
        # node giving back its late grant would release this one's lease too.
        self._keeper = LeaseKeeper(
            store, lease, f"{owner}#{uuid4().hex[:12]}", lease_ttl, lambda: ref.tell(_Lost(), None)
        )
        self._poll = poll_interval(lease_ttl)
        self._token: int | None = None
        self._buffer: deque[tuple[Any, ActorRef | None]] = deque()  # until the lease
        self._entities: dict[str, ActorRef] = {}
        self._ids: dict[ActorRef, str] = {}
        self._last: dict[str, float] = {}
        self._passivating: dict[str, list[tuple[Any, ActorRef | None]]] = {}
        self._handing_off = False
        self._done = False

    def pre_start(self) -> None:
        ref = self.ref
        self._keeper.acquire_in_background(
            lambda token: ref.tell(_Acquired(token), None), self._poll
        )
        if self._passivate is not None:
            every = min(max(self._passivate / 4, 0.05), 5.0)
            self.timers.start_timer_with_fixed_delay("passivate", _PASSIVATE_TICK, every)

    def post_stop(self) -> None:
        # The entities (children) have terminated before post_stop.
        self._keeper.let_go(blocking=getcurrent() is not self.context.system._hub)
        system = self.context.system
        for env, snd in self._buffer:
            system.publish_dead_letter(env.message, snd, self.ref)
        self._buffer.clear()

    def receive(self, m: Any) -> None:
        t = type(m)
        if t is _Env:
            self._env(m, self.context.sender)
        elif t is _Envs:
            env = self._env
            for e, snd in m.items:
                env(e, snd)
        elif t is _Acquired:
            if self._handing_off:
                self._release()
                return
            self._token = m.token
            _log.debug("shard %s: lease token %d", self.context.self.path, m.token)
            buf = self._buffer
            while buf and self._token is not None:
                env, snd = buf.popleft()
                self._deliver(env.entity_id, env.message, snd)
        elif t is Terminated:
            self._terminated(m.actor)
        elif t is _PassivateTick:
            self._passivate_idle()
        elif t is _HandOff:
            self._hand_off()
        elif t is _Released:
            self._finish()
        elif t is _Lost:
            _log.warning(
                "shard %s lost its lease: stopping its %d entities now",
                self.context.self.path,
                len(self._entities),
            )
            self._token = None
            for ref in list(self._entities.values()):
                self.context.stop(ref)
            self._handing_off = True
            if not self._entities:
                self._finish()
        else:
            self.unhandled(m)

    def _env(self, m: _Env, sender: ActorRef | None) -> None:
        if self._token is None or self._handing_off:
            if len(self._buffer) < BUFFER_LIMIT:
                self._buffer.append((m, sender))
            else:
                self.context.system.publish_dead_letter(m.message, sender, self.ref)
            return
        self._deliver(m.entity_id, m.message, sender)

    def _deliver(self, eid: str, message: Any, sender: ActorRef | None) -> None:
        ref = self._entities.get(eid)
        if ref is None:
            waiting = self._passivating.get(eid)
            if waiting is not None:
                waiting.append((message, sender))
                return
            ref = self._start_entity(eid)
        if self._passivate is not None:
            self._last[eid] = monotonic()
        ref.tell(message, sender)

    def _start_entity(self, eid: str) -> ActorRef:
        ep = self._entity_props
        props = ep if isinstance(ep, Props) else ep(eid)
        if not isinstance(props, Props):
            raise TypeError(f"entity_props({eid!r}) must return Props, not {type(props).__name__}")
        assert self._token is not None
        ref = self.context.actor_of(
            LeasedProps.of(props, eid, self._token), quote(eid, safe="-_.~:@&=+,!*'")
        )
        self.context.watch(ref)
        self._entities[eid] = ref
        self._ids[ref] = eid
        return ref

    def _terminated(self, ref: ActorRef) -> None:
        eid = self._ids.pop(ref, None)
        if eid is None:
            return
        self._entities.pop(eid, None)
        self._last.pop(eid, None)
        waiting = self._passivating.pop(eid, None)
        if self._handing_off:
            if waiting:
                self._buffer.extend((_Env(eid, msg), snd) for msg, snd in waiting)
            if not self._entities:
                self._release()
            return
        if waiting and self._token is not None:
            # Messages that came while it passivated: start it again, in order.
            for msg, snd in waiting:
                self._deliver(eid, msg, snd)

    def _passivate_idle(self) -> None:
        if self._handing_off or self._passivate is None:
            return
        limit = monotonic() - self._passivate
        for eid, at in list(self._last.items()):
            if at <= limit and eid not in self._passivating:
                self._passivating[eid] = []
                del self._last[eid]
                self._entities[eid].tell(self._stop_message, self.ref)

    def _hand_off(self) -> None:
        if self._handing_off:
            return
        self._handing_off = True
        if self._token is None:
            if self._keeper.token is not None:
                # Granted, its _Acquired not here yet: give it back first.
                self._release()
            else:
                # Still acquiring: stop, and a grant in flight is given back when it
                # arrives (killing the request instead would leave the lease held by
                # nobody for a whole ttl, and the next owner waiting for it).
                self._keeper.close()
                self._finish()
            return
        if not self._entities:
            self._release()
            return
        for eid, ref in self._entities.items():
            if eid not in self._passivating:
                ref.tell(self._stop_message, self.ref)

    def _release(self) -> None:
        ref = self.ref
        self._token = None
        self._keeper.release_in_background(lambda: ref.tell(_Released(), None))

    def _finish(self) -> None:
        if self._done:
            return
        self._done = True
        leftover = list(self._buffer)
        self._buffer.clear()
        self.context.parent.tell(_HandedOff(self._shard, leftover), self.ref)
        self.context.stop(self.ref)


# -- the region ----------------------------------------------------------------------------------
class _Marker:
    # A drain marker to confirm once the shard's messages held here are routed.
    __slots__ = ("chained", "node", "reply_to")

    def __init__(self, reply_to: ActorRef, node: str, chained: bool) -> None:
        self.reply_to = reply_to
        self.node = node  # the asker's node
        self.chained = chained  # this region drained the next one for it already


class _Waiting:
    # A shard whose messages this region holds back while it moves.
    __slots__ = ("buffer", "local", "parked", "parked_at", "parked_view", "remote", "returned")

    def __init__(self) -> None:
        self.buffer: deque[tuple[Any, ActorRef | None]] = deque()
        self.returned: deque[tuple[Any, ActorRef | None]] = deque()
        self.local = False  # waiting for the local shard's hand-off
        self.remote: str | None = None  # waiting for this node's _Drained
        self.parked = False  # waiting for a later look at the view (it bounced)
        self.parked_view: tuple[Any, ...] = ()
        self.parked_at = 0.0


class _Region(Actor):
    def __init__(
        self,
        type_name: str,
        entity_props: Props | Callable[[str], Props] | None,
        extract: Callable[[Any], tuple[str, Any]] | None,
        number_of_shards: int,
        role: str | None,
        passivate: float | None,
        stop_message: Any,
        store: LeaseStore,
        lease_ttl: float,
    ) -> None:
        self._type = type_name
        self._entity_props = entity_props
        self._extract = extract
        self._n = number_of_shards
        self._role = role
        self._passivate = passivate
        self._stop_message = stop_message
        self._store = store
        self._ttl = lease_ttl
        system = self.context.system
        node = cluster_node(system)
        self._node_id: str = node.node_id
        self._prefix = f"gactors://{system.name}@"
        self._path = f"/system/sharding-{type_name}"
        self._owners: list[str | None] = [None] * number_of_shards
        self._members: set[str] = set()
        self._regions: dict[str, ActorRef] = {}
        self._shards: dict[int, ActorRef] = {}
        self._last_dest: dict[int, str] = {}
        self._waiting: dict[int, _Waiting] = {}
        # Drain markers to confirm once the shard's buffer here is routed, per shard,
        # and when the first one came (see _break_waits).
        self._markers: dict[int, list[_Marker]] = {}
        self._marker_at: dict[int, float] = {}
        self._leaving: Event | None = None
        self._leave_not_before = 0.0
        self._leave_deadline = 0.0
        # Nodes that told us they are leaving (the host flag of what they forward) before
        # our view shows it: no shard goes to them any more (when -> monotonic time).
        self._gone: dict[str, float] = {}
        self._seen: tuple[Any, ...] = ()
        self._out: dict[str, _Out] = {}
        self._flush_scheduled = False
        # The actor's mailbox (read in receive only, in the hub like every mailbox use).
        self._mailbox = self.context._cell.ensure_mailbox()  # noqa: SLF001  the region's own cell (its mailbox)
        # While a batch is routed: shard -> (its ref, its messages from the batch).
        self._collect: dict[int, tuple[ActorRef, list[tuple[_Env, ActorRef | None]]]] | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def pre_start(self) -> None:
        Cluster(self.context.system).subscribe(self.ref)
        # A member turning "leaving" publishes no event: look at the view every
        # heartbeat (in memory, no I/O) and recompute when it changed.
        hb = cluster_node(self.context.system).settings.heartbeat_interval
        self.timers.start_timer_with_fixed_delay("view", _VIEW_TICK, hb)

    def post_stop(self) -> None:
        Cluster(self.context.system).unsubscribe(self.ref)
        system = self.context.system
        try:
            self._flush()
        except Exception:
            _log.exception("sharding region %r: cannot send its last batch", self._type)
            for out in self._out.values():
                for _s, _eid, msg, snd, _hops in out.messages():
                    system.publish_dead_letter(msg, snd, self.ref)
            self._out.clear()
        for w in self._waiting.values():
            for rm, snd in (*w.returned, *w.buffer):
                system.publish_dead_letter(rm.message, snd, self.ref)
        self._waiting.clear()
        if self._leaving is not None:
            self._leaving.set()

    # -- messages ----------------------------------------------------------------------------
    def receive(self, m: Any) -> None:
        t = type(m)
        if t is ShardingEnvelope:
            eid = m.entity_id
            if type(eid) is not str:
                self._bad(m, f"entity_id must be a str, not {type(eid).__name__}")
                return
            self._route(zlib.crc32(eid.encode()) % self._n, eid, m.message, self.context.sender, 0)
        elif t is _RegionBatch:
            # The batch's messages for local shards go to each shard as one message.
            route, src = self._route, m.src
            if m.host and src not in self._gone:
                self._sender_leaves(src)
            collect: dict[int, tuple[ActorRef, list[tuple[_Env, ActorRef | None]]]] = {}
            self._collect = collect
            try:
                f, senders = m.flat, m.senders
                for k in range(0, len(f), 5):
                    i = f[k + 3]
                    route(
                        f[k],
                        f[k + 1],
                        f[k + 2],
                        senders[i] if i >= 0 else None,
                        f[k + 4],
                        src,
                    )
            finally:
                self._collect = None
                for shard, items in collect.values():
                    if len(items) == 1:
                        shard.tell(items[0][0], items[0][1])
                    else:
                        shard.tell(_Envs(items), self.ref)
        elif t is _Flush:
            self._flush_scheduled = False
            self._flush()
        elif t is _RegionMsg:
            if m.host and m.src not in self._gone:
                self._sender_leaves(m.src)
            self._route(m.shard, m.entity_id, m.message, self.context.sender, m.hops, m.src)
        elif t is _Drain:
            self._drain_request(m)
        elif t is _Drained:
            w = self._waiting.get(m.shard)
            if w is not None and w.remote == m.node:
                w.remote = None
                self._resolve(m.shard, w)
        elif t is _HandedOff:
            self._handed_off(m)
        elif t is Terminated:
            for s, ref in list(self._shards.items()):
                if ref == m.actor:
                    # Stopped without a hand-off report (it failed): nothing to wait for.
                    self._handed_off(_HandedOff(s, []))
        elif t is _Leave:
            self._leave(m.done)
        elif isinstance(m, (CurrentClusterState, ClusterEvent)):
            self._membership()
        elif t is _ViewTick:
            if self._view_key() != self._seen:
                self._membership()
            else:
                self._unpark()
                if self._leaving is not None:
                    self._check_left()
            self._break_waits()
        else:
            extract = self._extract
            if extract is None:
                self._bad(
                    m,
                    "a message to a sharding region must be a ShardingEnvelope (or give "
                    "extract_entity_id)",
                )
                return
            try:
                eid, msg = extract(m)
            except Exception as e:
                self._bad(m, f"extract_entity_id failed: {type(e).__name__}: {e}")
                return
            if type(eid) is not str:
                self._bad(m, f"extract_entity_id must return a str id, not {type(eid).__name__}")
                return
            self._route(zlib.crc32(eid.encode()) % self._n, eid, msg, self.context.sender, 0)

    def _bad(self, m: Any, why: str) -> None:
        _log.warning("sharding region %r: dead letter %r: %s", self._type, m, why)
        self.context.system.publish_dead_letter(m, self.context.sender, self.ref)

    def _route(
        self,
        s: int,
        eid: str,
        msg: Any,
        sender: ActorRef | None,
        hops: int,
        src: str = "",
    ) -> None:
        w = self._waiting.get(s)
        if w is not None:
            if len(w.buffer) + len(w.returned) < BUFFER_LIMIT:
                # What the node being drained sends back was sent before anything
                # buffered here (it left its senders before the drain marker came back).
                target = w.returned if src and src == w.remote else w.buffer
                target.append((_RegionMsg(s, eid, msg, hops, False, src), sender))
            else:
                self.context.system.publish_dead_letter(msg, sender, self.ref)
            return
        owner = self._owners[s]
        if owner is None:
            # No node hosts this type (yet): hold it until one joins.
            w = self._waiting[s] = _Waiting()
            w.buffer.append((_RegionMsg(s, eid, msg, hops), sender))
            return
        if owner == self._node_id:
            shard = self._shards.get(s)
            if shard is None:
                shard = self._start_shard(s)
            self._last_dest[s] = owner
            collect = self._collect
            if collect is None:
                shard.tell(_Env(eid, msg), sender)
            else:
                c = collect.get(s)
                if c is None:
                    c = collect[s] = (shard, [])
                c[1].append((_Env(eid, msg), sender))
            return
        if hops % _PARKED >= _BOUNCES:
            if hops // _PARKED < _HOLDS:
                # Views disagree (nodes joining and leaving at once): hold the shard's
                # messages here, in order, until the next look at the view.
                w = self._waiting[s] = _Waiting()
                w.parked = True
                w.parked_view = self._seen
                w.parked_at = monotonic()
                w.buffer.append((_RegionMsg(s, eid, msg, _held(hops)), sender))
                return
            # Still bouncing after the views had time to agree: do not ping-pong
            # forever.
            _log.warning(
                "sharding region %r: shard %d keeps bouncing (membership views "
                "disagree); dead letter",
                self._type,
                s,
            )
            self.context.system.publish_dead_letter(msg, sender, self.ref)
            return
        self._last_dest[s] = owner
        # Gathered per node and sent as one batch once the mailbox got to the flush
        # marker told to self now (everything already queued is batched with it), or
        # when the batch is full. Anything else sent to that region (a drain marker)
        # flushes first, so the batch keeps its place on the one ordered path.
        out = self._out.get(owner)
        if out is None:
            out = self._out[owner] = _Out()
        if out.add(s, eid, msg, sender, hops + 1) >= _FLAT_LIMIT or not self._mailbox:
            # Full, or nothing else queued to gather: no reason to wait (a lone message,
            # e.g. the first one to an entity, does not pay a trip through the mailbox).
            self._flush_to(owner)
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.ref.tell(_FLUSH, None)

    def _flush(self) -> None:
        for node in list(self._out):
            self._flush_to(node)

    def _flush_to(self, node: str) -> None:
        out = self._out.pop(node, None)
        if out is None or not out.flat:
            return
        ref = self._region_of(node)
        host = self._leaving is not None
        try:
            ref.tell(_RegionBatch(out.flat, out.senders, host, self._node_id), self.ref)
        except SerializationError:
            # One of them cannot travel (or the batch is too big): send one by one so
            # only the unusable ones become dead letters.
            for s, eid, msg, snd, hops in out.messages():
                try:
                    one = _RegionBatch(
                        [s, eid, msg, -1 if snd is None else 0, hops],
                        [] if snd is None else [snd],
                        host,
                        self._node_id,
                    )
                    ref.tell(one, self.ref)
                except SerializationError as e:
                    _log.warning(
                        "sharding region %r: dead letter for entity %r: %s", self._type, eid, e
                    )
                    self.context.system.publish_dead_letter(msg, snd, self.ref)

    def _region_of(self, node: str) -> ActorRef:
        ref = self._regions.get(node)
        if ref is None:
            from gactors._path import ActorPath

            ref = cluster_node(self.context.system).remote_ref(
                ActorPath.parse(self._prefix + node + self._path, self.context.system.name), 0
            )
            self._regions[node] = ref
        return ref

    def _start_shard(self, s: int) -> ActorRef:
        assert self._entity_props is not None
        ref = self.context.actor_of(
            Props(
                _Shard,
                s,
                self._entity_props,
                self._passivate,
                self._stop_message,
                self._store,
                f"shard:{self._type}:{s}",
                self._node_id,
                self._ttl,
            ),
            str(s),
        )
        self.context.watch(ref)
        self._shards[s] = ref
        return ref

    # -- membership and rebalance ------------------------------------------------------------
    def _view_key(self) -> tuple[Any, ...]:
        node = cluster_node(self.context.system)
        return (*((m.address.node, m.status) for m in node.members()), node.leaving_nodes)

    def _sender_leaves(self, node: str) -> None:
        # Only a leaving region sets the host flag. Several nodes leave at once in a
        # rolling restart (gunicorn's HUP): one that forwards its shards to another
        # leaving node its view still shows up would have them bounced back and forth.
        if not node or node == self._node_id:
            return
        _log.debug("sharding region %r: %s told it is leaving", self._type, node)
        self._gone[node] = monotonic()
        self._membership()

    def _membership(self) -> None:
        members = Cluster(self.context.system).members
        self._seen = self._view_key()
        leaving = cluster_node(self.context.system).leaving_nodes
        self._members = {m.address.node for m in members if m.address.node is not None}
        gone = self._gone
        if gone:
            # Kept until the view shows the leave (a minute at most: node ids are never
            # reused, so the table only has to outlive the views' disagreement).
            now = monotonic()
            for node, at in list(gone.items()):
                if now - at > 60.0 or (node not in self._members and now - at > 10.0):
                    del gone[node]
        role = self._role
        hosts = sorted(
            m.address.node
            for m in members
            if m.address.node is not None
            and m.status != "leaving"
            and m.address.node not in leaving
            and m.address.node not in gone
            and (role is None or role in m.roles)
            and not (
                m.address.node == self._node_id
                and (self._entity_props is None or self._leaving is not None)
            )
        )
        # This host counts itself even before its first view lists it.
        if (
            self._entity_props is not None
            and self._leaving is None
            and self._node_id not in hosts
            and (role is None or role in _own_roles(self))
        ):
            hosts.append(self._node_id)
            hosts.sort()
        owners = allocate(self._type, self._n, hosts)
        old = self._owners
        self._owners = owners
        if _log.isEnabledFor(logging.DEBUG):
            moved = sum(1 for s in range(self._n) if old[s] != owners[s])
            _log.debug(
                "sharding region %r on %s: hosts %s, %d shard(s) move",
                self._type,
                self._node_id,
                hosts,
                moved,
            )
        for s in range(self._n):
            if owners[s] == old[s] and s not in self._waiting:
                continue
            self._moved(s, owners[s])
        for node in list(self._regions):
            if node not in self._members:
                del self._regions[node]
        # A node removed while we waited for its confirmation: nothing more will come.
        for s, w in list(self._waiting.items()):
            if w.remote is not None and w.remote not in self._members:
                w.remote = None
                self._resolve(s, w)
        self._unpark()
        self._check_left()

    def _unpark(self) -> None:
        # Not in the pass that parked them: once the view changed, or a heartbeat later.
        hb = cluster_node(self.context.system).settings.heartbeat_interval
        now = monotonic()
        for s, w in list(self._waiting.items()):
            if w.parked and (w.parked_view != self._seen or now - w.parked_at >= hb):
                w.parked = False
                self._resolve(s, w)

    def _moved(self, s: int, owner: str | None) -> None:
        w = self._waiting.get(s)
        last = self._last_dest.get(s)
        if w is None:
            if last is None or last == owner:
                return
            w = self._waiting[s] = _Waiting()
        if last is not None and last != owner:
            del self._last_dest[s]
            if last == self._node_id:
                shard = self._shards.get(s)
                if shard is not None:
                    w.local = True
                    shard.tell(_HandOff(), self.ref)
            elif last in self._members:
                w.remote = last
                self._flush_to(last)  # the marker goes after everything sent before it
                self._region_of(last).tell(_Drain(s, self.ref, self._node_id), self.ref)
        self._resolve(s, w)

    def _resolve(self, s: int, w: _Waiting) -> None:
        if w.local or w.remote is not None or w.parked or self._owners[s] is None:
            return
        del self._waiting[s]
        buf = w.returned
        buf.extend(w.buffer)
        # Held for a look at the view: every message behind the one that bounced too
        # often waited for it too, so it counts as held (held again one by one, they
        # went on one per heartbeat: found by the test of three hosts leaving at once).
        waited = w.parked_at != 0.0
        while buf:
            rm, snd = buf.popleft()
            hops = rm.hops
            if waited and hops % _PARKED >= _BOUNCES and hops // _PARKED < _HOLDS:
                hops = _held(hops)
            self._route(rm.shard, rm.entity_id, rm.message, snd, hops)
            if s in self._waiting:
                # Moved again meanwhile: the rest waits behind what was routed.
                self._waiting[s].buffer.extend(buf)
                buf.clear()
                return
        markers = self._markers.get(s)
        if markers is not None:
            last = self._last_dest.get(s)
            if last is not None and last != self._node_id and last in self._members:
                # The buffer went on to another region: the askers' messages in it are
                # routed once that one confirmed (else their next ones overtake them).
                # A marker whose chain is done is confirmed now: what was routed since
                # came after it. Each marker chains once, so traffic that keeps coming
                # here cannot hold an asker back for ever.
                fresh = [mk for mk in markers if not mk.chained]
                self._confirm([mk for mk in markers if mk.chained], s)
                if fresh:
                    for mk in fresh:
                        mk.chained = True
                    self._markers[s] = fresh
                    self._marker_at[s] = monotonic()
                    self._chain_drain(s, last)
                    return
            else:
                self._confirm(markers, s)
            del self._markers[s]
            del self._marker_at[s]
        self._check_left()

    def _confirm(self, markers: list[_Marker], s: int) -> None:
        for mk in markers:
            mk.reply_to.tell(_Drained(s, self._node_id), self.ref)

    def _add_marker(self, s: int, m: _Drain, chained: bool) -> None:
        markers = self._markers.get(s)
        if markers is None:
            markers = self._markers[s] = []
            self._marker_at[s] = monotonic()
        markers.append(_Marker(m.reply_to, m.node, chained))

    def _break_waits(self) -> None:
        # Regions that wait for each other's confirmation in a circle of three or more
        # (views disagreeing while several nodes leave) would wait until the leave's
        # deadline, and a leaving node's buffer is then dead letters. A marker still
        # waiting on another region after two heartbeats (at most half the shortest
        # leave deadline, see _leave) is confirmed as a direct cycle is: the asker's
        # own messages go back to it, and a later message may overtake one still held
        # elsewhere.
        if not self._marker_at:
            return
        hb = cluster_node(self.context.system).settings.heartbeat_interval
        limit = monotonic() - min(2 * hb, 0.3 * max(3.0, self._ttl))
        for s, at in list(self._marker_at.items()):
            w = self._waiting.get(s)
            if at > limit or w is None or w.remote is None:
                continue  # recent, or waiting for a local hand-off or a view
            del self._marker_at[s]
            _log.debug("sharding region %r: shard %d: drain wait broken", self._type, s)
            markers = self._markers.pop(s)
            for mk in markers:
                self._give_back(mk.node, w)
            self._confirm(markers, s)

    def _chain_drain(self, s: int, node: str) -> None:
        # Wait for `node` to confirm it routed what this region sent it for shard `s`
        # (the markers registered for `s` are confirmed after that).
        del self._last_dest[s]
        w = self._waiting[s] = _Waiting()
        w.remote = node
        self._flush_to(node)  # the marker goes after everything sent before it
        self._region_of(node).tell(_Drain(s, self.ref, self._node_id), self.ref)

    def _drain_request(self, m: _Drain) -> None:
        # Everything the asker sent before this marker has been routed already (one
        # path, in order) unless it sits in a buffer here: then confirm after it.
        w = self._waiting.get(m.shard)
        if w is not None and w.remote == m.node:
            # This region waits for the asker's confirmation while the asker waits for
            # ours (a cycle: nodes leaving at once forward to each other). What
            # entered the cluster at the asker and came straight here goes back to it
            # (it waits for us, so its own buffer keeps them ahead of what it sends
            # later), then the confirmation; the asker does the same for ours. A
            # region that waits for a third one confirms once that one did (below):
            # confirming at once let the asker's next messages overtake the ones
            # still held there (three hosts leaving at once).
            self._give_back(m.node, w)
            m.reply_to.tell(_Drained(m.shard, self._node_id), self.ref)
            return
        s = m.shard
        if s in self._waiting:
            self._add_marker(s, m, chained=False)
            return
        last = self._last_dest.get(s)
        if last is not None and last != self._node_id and last != m.node and last in self._members:
            # This region forwarded the shard's messages to a third one (several
            # nodes leave at once): the asker's earlier messages are only routed once
            # that region confirmed as well. Confirming now would let the asker's next
            # messages reach the new owner by their own path, ahead of them.
            self._add_marker(s, m, chained=True)
            self._chain_drain(s, last)
            return
        m.reply_to.tell(_Drained(s, self._node_id), self.ref)

    def _give_back(self, node: str, w: _Waiting) -> None:
        out = _Out()
        for q in (w.returned, w.buffer):
            # Only what the asker's own senders sent (one hop, from it): a message that
            # bounced through it from elsewhere keeps its place here.
            if any(rm.src == node and rm.hops == 1 for rm, _snd in q):
                keep: deque[tuple[Any, ActorRef | None]] = deque()
                for rm, snd in q:
                    if rm.src == node and rm.hops == 1:
                        out.add(rm.shard, rm.entity_id, rm.message, snd, rm.hops)
                    else:
                        keep.append((rm, snd))
                q.clear()
                q.extend(keep)
        if not out.flat:
            return
        self._flush_to(node)  # the batch keeps its place behind what went before
        batch = _RegionBatch(out.flat, out.senders, self._leaving is not None, self._node_id)
        try:
            self._region_of(node).tell(batch, self.ref)
        except SerializationError as e:  # they came over the wire: should not happen
            _log.warning("sharding region %r: cannot give back %s: %s", self._type, node, e)
            for _s, _eid, msg, snd, _hops in out.messages():
                self.context.system.publish_dead_letter(msg, snd, self.ref)

    def _handed_off(self, m: _HandedOff) -> None:
        s = m.shard
        ref = self._shards.pop(s, None)
        if ref is not None:
            self.context.unwatch(ref)
        w = self._waiting.get(s)
        if w is None:
            w = self._waiting[s] = _Waiting()
        # What the shard could not deliver goes first.
        w.buffer.extendleft(
            (_RegionMsg(s, env.entity_id, env.message, 0), snd) for env, snd in reversed(m.leftover)
        )
        w.local = False
        if self._last_dest.get(s) == self._node_id:
            del self._last_dest[s]
        self._resolve(s, w)
        self._check_left()

    def _leave(self, done: Event) -> None:
        self._flush()  # what was gathered before the leave goes without the host flag
        self._leaving = done
        # The others stop sending here once their view shows this node leaving (a
        # heartbeat or two); until then this region forwards what still arrives.
        hb = cluster_node(self.context.system).settings.heartbeat_interval
        self._leave_not_before = monotonic() + 4 * hb + 0.2
        # Waiting for other nodes' confirmations before leaving is bounded too, well
        # inside the node's hand-over budget (ClusterNode.hand_over: max(3 s, ttl)).
        self._leave_deadline = monotonic() + 0.6 * max(3.0, self._ttl)
        _log.info("sharding region %r on %s: handing off its shards", self._type, self._node_id)
        self._membership()

    def _check_left(self) -> None:
        done = self._leaving
        if (
            done is not None
            and not self._shards
            and not any(w.local for w in self._waiting.values())
            # Buffers that another node's confirmation will release, unless the
            # confirmations are overdue (then post_stop makes them dead letters).
            and (
                not any(w.remote is not None or w.parked for w in self._waiting.values())
                or monotonic() > self._leave_deadline
            )
        ):
            self._flush()
            wait = self._leave_not_before - monotonic()
            if wait > 0:
                gevent.spawn_later(wait, done.set)
            else:
                done.set()


def _own_roles(actor: Actor) -> tuple[str, ...]:
    roles: tuple[str, ...] = cluster_node(actor.context.system).settings.roles
    return roles


# -- the public API ------------------------------------------------------------------------------
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


def local_shards(system: ActorSystem) -> list[dict[str, Any]]:
    """What this node's sharding regions know, for the node's inspector (internal).

    One entry per region started here (``start`` or ``start_proxy``)::

        {"type_name": str, "number_of_shards": int, "role": str | None,
         "hosting": bool,                      # start (True) or start_proxy (False)
         "allocation": {address: shards},      # where this region sends each shard now
         "shards": [{"shard": int, "entities": int, "token": int | None,
                     "state": "running" | "waiting for lease" | "handing off"}]}

    ``allocation`` is the region's own view (rendezvous hashing over the hosting
    members it sees); ``shards`` are the shard actors that exist on this node. Read in
    the hub thread (cells are only touched there), without any I/O.
    """
    if not system.has_extension(_ShardingExtension):
        return []
    inst = system.extension(_ShardingExtension)
    out: list[dict[str, Any]] = []
    children = system.system_cell.child_cells
    prefix = f"gactors://{system.name}@"
    for type_name in list(inst._regions):  # noqa: SLF001  this module's inspection of its own actors
        cell = children.get(f"sharding-{type_name}")
        region = cell.actor if cell is not None else None
        if cell is None or not isinstance(region, _Region):
            continue
        allocation: dict[str, int] = {}
        for owner in region._owners:  # noqa: SLF001  this module's inspection of its own actors
            if owner is not None:
                key = prefix + owner
                allocation[key] = allocation.get(key, 0) + 1
        shards: list[dict[str, Any]] = []
        for s in sorted(region._shards):  # noqa: SLF001  this module's inspection of its own actors
            shard_cell = cell.child_cells.get(str(s))
            shard = shard_cell.actor if shard_cell is not None else None
            if shard_cell is None or not isinstance(shard, _Shard):
                continue
            if shard._handing_off:  # noqa: SLF001  this module's inspection of its own actors
                state = "handing off"
            elif shard._token is None:  # noqa: SLF001  this module's inspection of its own actors
                state = "waiting for lease"
            else:
                state = "running"
            shards.append(
                {
                    "shard": s,
                    "entities": len(shard._entities),  # noqa: SLF001  this module's inspection of its own actors
                    "token": shard._token,  # noqa: SLF001  this module's inspection of its own actors
                    "state": state,
                }
            )
        out.append(
            {
                "type_name": type_name,
                "number_of_shards": region._n,  # noqa: SLF001  this module's inspection of its own actors
                "role": region._role,  # noqa: SLF001  this module's inspection of its own actors
                "hosting": region._entity_props is not None,  # noqa: SLF001  this module's inspection of its own actors
                "allocation": allocation,
                "shards": shards,
            }
        )
    return out


def owned_shards(system: ActorSystem) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Read-only, for the reminders (internal): ``{type_name: (number_of_shards, the
    shards allocated to this node now)}`` for every region started here (a proxy's
    tuple is empty). The allocation is the region's own view, as routing uses it; read
    in the hub thread, without any I/O."""
    if not system.has_extension(_ShardingExtension):
        return {}
    inst = system.extension(_ShardingExtension)
    children = system.system_cell.child_cells
    out: dict[str, tuple[int, tuple[int, ...]]] = {}
    for type_name in list(inst._regions):  # noqa: SLF001  this module's own extension
        cell = children.get(f"sharding-{type_name}")
        if cell is None:
            continue
        region = cell.actor
        if not isinstance(region, _Region):
            # Just started, not built yet: the number of shards is in its props (the
            # fourth argument of _start_in_hub's Props), it owns nothing yet.
            out[type_name] = (int(cell.props.args[3]), ())
            continue
        me = region._node_id  # noqa: SLF001  this module's own actor
        hosting = region._entity_props is not None  # noqa: SLF001  this module's own actor
        mine = tuple(s for s, o in enumerate(region._owners) if hosting and o == me)  # noqa: SLF001
        out[type_name] = (region._n, mine)  # noqa: SLF001  this module's own actor
    return out

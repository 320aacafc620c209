"""The region actor: routes each entity message to its shard's node and batches what
goes to another region. The hand-over protocol it inherits: ``_handover``."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from time import monotonic
from typing import Any

from gevent.event import Event

from gactors._messages import Terminated
from gactors._props import Props
from gactors._ref import ActorRef
from gactors.cluster._access import cluster_node
from gactors.cluster._cluster import Cluster
from gactors.cluster._events import ClusterEvent, CurrentClusterState
from gactors.cluster._seam import LeaseStore
from gactors.cluster._sharding._handover import _Marker, _RegionHandOver, _Waiting
from gactors.cluster._sharding._protocol import (
    _BOUNCES,
    _FLAT_LIMIT,
    _FLUSH,
    _HOLDS,
    _PARKED,
    _VIEW_TICK,
    BUFFER_LIMIT,
    ShardingEnvelope,
    _Drain,
    _Drained,
    _Env,
    _Envs,
    _Flush,
    _HandedOff,
    _held,
    _Leave,
    _Out,
    _RegionBatch,
    _RegionMsg,
    _ViewTick,
)
from gactors.cluster._sharding._shard import _Shard
from gactors.exceptions import SerializationError

_log = logging.getLogger("gactors.cluster.sharding")


class _Region(_RegionHandOver):
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

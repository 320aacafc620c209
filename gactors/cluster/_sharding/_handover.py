"""The region's membership, rebalance and drain/leave protocol (the base class of
:class:`~gactors.cluster._sharding._region._Region`, which routes and batches)."""

from __future__ import annotations

import logging
from collections import deque
from time import monotonic
from typing import Any

import gevent
from gevent.event import Event

from gactors._actor import Actor
from gactors._ref import ActorRef
from gactors.cluster._access import cluster_node
from gactors.cluster._cluster import Cluster
from gactors.cluster._sharding._allocation import allocate
from gactors.cluster._sharding._protocol import (
    _BOUNCES,
    _HOLDS,
    _PARKED,
    _Drain,
    _Drained,
    _HandedOff,
    _HandOff,
    _held,
    _Out,
    _RegionBatch,
    _RegionMsg,
)
from gactors.exceptions import SerializationError

_log = logging.getLogger("gactors.cluster.sharding")


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


class _RegionHandOver(Actor):
    # The state the region keeps (set in _Region.__init__) and the routing it provides.
    _type: str
    _entity_props: Any
    _n: int
    _role: str | None
    _ttl: float
    _node_id: str
    _owners: list[str | None]
    _members: set[str]
    _regions: dict[str, ActorRef]
    _shards: dict[int, ActorRef]
    _last_dest: dict[int, str]
    _waiting: dict[int, _Waiting]
    _markers: dict[int, list[_Marker]]
    _marker_at: dict[int, float]
    _leaving: Event | None
    _leave_not_before: float
    _leave_deadline: float
    _gone: dict[str, float]
    _seen: tuple[Any, ...]

    def _route(
        self, s: int, eid: str, msg: Any, sender: ActorRef | None, hops: int, src: str = ""
    ) -> None:
        raise NotImplementedError

    def _flush(self) -> None:
        raise NotImplementedError

    def _flush_to(self, node: str) -> None:
        raise NotImplementedError

    def _region_of(self, node: str) -> ActorRef:
        raise NotImplementedError

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

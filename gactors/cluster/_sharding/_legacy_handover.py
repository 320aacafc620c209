"""The hand-over protocol of one sharding region, as a pure state machine.

No I/O, no actors, no gevent: :class:`RegionState` holds what a region knows about
where each shard's messages go, and its methods take one event each -- an entity
message to route (:meth:`~RegionState.route`), a new membership view
(:meth:`~RegionState.view`), a drain marker from another region
(:meth:`~RegionState.drain_request`) and its confirmation
(:meth:`~RegionState.drained`), the local shard's hand-off report
(:meth:`~RegionState.handed_off`), the node's graceful leave
(:meth:`~RegionState.leave`), a heartbeat tick (:meth:`~RegionState.tick`) -- and
append the commands to carry out to :attr:`RegionState.out`, in order. The region
actor (``_region._Region``) feeds it the events it receives and carries the commands
out; ``tests/cluster/test_sharding_model.py`` drives the same class with a model of
several regions and the network. The time comes from an injected clock.

Commands (tuples, the first item says which):

* ``(SEND, node, shard, entity_id, message, sender, hops)``: route a held message to
  ``node`` (this node: its local shard; another: that node's region, hop count + 1).
  :meth:`~RegionState.route` returns the destination of the message it is given
  instead of a command (the hot path builds no command).
* ``(DEAD, message, sender)``: a dead letter.
* ``(HAND_OFF, shard)``: tell the local shard to hand off (stop its entities, release
  its lease); it answers with :meth:`~RegionState.handed_off`.
* ``(DRAIN, node, shard)``: send what was gathered for ``node``, then a drain marker.
* ``(DRAINED, reply_to, shard)``: confirm a drain marker to the region that sent it.
* ``(GIVE_BACK, node, held)``: send these held messages back to ``node``'s region
  (after what was gathered for it), with their hop counts unchanged.
* ``(LEFT, wait)``: the leave is complete: send what was gathered, and report the
  leave done after ``wait`` seconds (at once if <= 0).
* ``(SHARD_DRAIN, shard)``: ask the local shard to answer
  (:meth:`~RegionState.shard_drained`) once it delivered every message routed to it
  so far (a shard waiting for its lease still holds them).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection, Iterable
from typing import Any, NamedTuple

from gactors.cluster._sharding._allocation import allocate

_log = logging.getLogger("gactors.cluster.sharding")

#: The most messages buffered per shard by a region (while a shard moves) and by a
#: shard (while it waits for its lease); more are dead letters.
BUFFER_LIMIT = 10_000

#: How many times a message may go from region to region (views disagree while nodes
#: join and leave) before the region holds it until its next look at the view; a
#: message still bouncing after ``_HOLDS`` such waits is a dead letter.
_BOUNCES = 3
_PARKED = 100  # hops // _PARKED: the waits a message had; hops % _PARKED: its bounces since
_HOLDS = 3

SEND, DEAD, HAND_OFF, DRAIN, DRAINED, GIVE_BACK, LEFT, SHARD_DRAIN = range(8)


def _held(hops: int) -> int:
    """The hop count of a message once it waited for a look at the view."""
    return (hops // _PARKED + 1) * _PARKED


class Held(NamedTuple):
    """An entity message a region holds back while its shard moves."""

    shard: int
    entity_id: str
    message: Any
    hops: int
    src: str  # the node of the region that forwarded it ("" when it entered here)
    sender: Any


class Member(NamedTuple):
    """A member of the view as the hand-over protocol needs it."""

    node: str
    status: str
    roles: Collection[str]


class _Marker:
    # A drain marker to confirm once the shard's messages held here are routed.
    __slots__ = ("chained", "node", "reply_to")

    def __init__(self, reply_to: Any, node: str, chained: bool) -> None:
        self.reply_to = reply_to
        self.node = node  # the asker's node
        self.chained = chained  # this region drained the next one for it already


class _Waiting:
    # A shard whose messages this region holds back while it moves.
    __slots__ = (
        "buffer",
        "held",
        "local",
        "parked",
        "parked_at",
        "parked_view",
        "remote",
        "returned",
    )

    def __init__(self) -> None:
        self.buffer: deque[Held] = deque()
        self.returned: deque[Held] = deque()
        self.local = False  # waiting for the local shard's hand-off
        self.remote: str | None = None  # waiting for this node's _Drained
        self.parked = False  # waiting for a later look at the view (it bounced)
        self.held = False  # it was parked at least once
        self.parked_view: tuple[Any, ...] = ()
        self.parked_at = 0.0


class RegionState:
    """What one region knows about where its type's shards' messages go.

    ``hosting``: the region runs shards (``start``; ``start_proxy``: False).
    ``own_roles``: this node's roles. ``heartbeat``, ``lease_ttl``: the cluster's
    settings (seconds). ``clock``: monotonic seconds.
    """

    def __init__(
        self,
        type_name: str,
        number_of_shards: int,
        node_id: str,
        role: str | None,
        hosting: bool,
        own_roles: Collection[str],
        heartbeat: float,
        lease_ttl: float,
        clock: Callable[[], float],
    ) -> None:
        self.type_name = type_name
        self.n = number_of_shards
        self.node_id = node_id
        self.role = role
        self.hosting = hosting
        self.own_roles = own_roles
        self.heartbeat = heartbeat
        self.ttl = lease_ttl
        self.clock = clock
        #: shard -> the node it goes to in this region's view (None: no host).
        self.owners: list[str | None] = [None] * number_of_shards
        self.members: set[str] = set()
        #: The shards whose actor runs on this node (started by a message routed here,
        #: gone once it handed off).
        self.local: set[int] = set()
        #: shard -> the node its last message went to.
        self.last_dest: dict[int, str] = {}
        self.waiting: dict[int, _Waiting] = {}
        # Drain markers to confirm once the shard's buffer here is routed, per shard,
        # and when the first one came (see _break_waits).
        self.markers: dict[int, list[_Marker]] = {}
        self.marker_at: dict[int, float] = {}
        # Drain markers waiting for the local shard's answer to SHARD_DRAIN, in order.
        self.local_markers: dict[int, deque[_Marker]] = {}
        self.leaving = False
        self.leave_not_before = 0.0
        self.leave_deadline = 0.0
        # Nodes that told us they are leaving (the host flag of what they forward) before
        # our view shows it: no shard goes to them any more (when -> clock time).
        self.gone: dict[str, float] = {}
        #: The key of the last view (see the region's _view_key).
        self.seen: tuple[Any, ...] = ()
        #: The commands to carry out, in order (the driver empties it).
        self.out: list[tuple[Any, ...]] = []
        #: How many drain waits _break_waits broke (each may let a later message
        #: overtake one held elsewhere: the documented exception to the order).
        self.broken_waits = 0

    # -- events ------------------------------------------------------------------------------
    def route(
        self, s: int, eid: str, msg: Any, sender: Any, hops: int, src: str = ""
    ) -> str | None:
        """An entity message for shard ``s`` (``hops``: regions it went through,
        ``src``: the node of the region that forwarded it). Returns the node it goes
        to now (this node: the local shard), or None when it is held here or is a
        dead letter (a command)."""
        w = self.waiting.get(s)
        if w is not None:
            if len(w.buffer) + len(w.returned) < BUFFER_LIMIT:
                # What the node being drained sends back was sent before anything
                # buffered here (it left its senders before the drain marker came back).
                target = w.returned if src and src == w.remote else w.buffer
                target.append(Held(s, eid, msg, hops, src, sender))
            else:
                self.out.append((DEAD, msg, sender))
            return None
        owner = self.owners[s]
        if owner is None:
            # No node hosts this type (yet): hold it until one joins.
            w = self.waiting[s] = _Waiting()
            w.buffer.append(Held(s, eid, msg, hops, "", sender))
            return None
        if owner == self.node_id:
            self.last_dest[s] = owner
            if s not in self.local:
                self.local.add(s)
            return owner
        if hops % _PARKED >= _BOUNCES:
            if hops // _PARKED < _HOLDS:
                # Views disagree (nodes joining and leaving at once): hold the shard's
                # messages here, in order, until the next look at the view.
                w = self.waiting[s] = _Waiting()
                w.parked = w.held = True
                w.parked_view = self.seen
                w.parked_at = self.clock()
                w.buffer.append(Held(s, eid, msg, _held(hops), "", sender))
                return None
            # Still bouncing after the views had time to agree: do not ping-pong
            # forever.
            _log.warning(
                "sharding region %r: shard %d keeps bouncing (membership views "
                "disagree); dead letter",
                self.type_name,
                s,
            )
            self.out.append((DEAD, msg, sender))
            return None
        self.last_dest[s] = owner
        return owner

    def sender_leaves(self, node: str) -> bool:
        """A region forwarded with the host flag: its node leaves. True when the
        view is to be looked at again (:meth:`view`)."""
        # Only a leaving region sets the host flag. Several nodes leave at once in a
        # rolling restart (gunicorn's HUP): one that forwards its shards to another
        # leaving node its view still shows up would have them bounced back and forth.
        if not node or node == self.node_id or node in self.gone:
            return False
        _log.debug("sharding region %r: %s told it is leaving", self.type_name, node)
        self.gone[node] = self.clock()
        return True

    def view(
        self, members: Iterable[Member], leaving_nodes: Collection[str], key: tuple[Any, ...]
    ) -> None:
        """A (new) membership view: the members, the nodes known to be leaving, and
        the view's key (compared by :meth:`tick`)."""
        members = list(members)
        self.seen = key
        self.members = {m.node for m in members}
        gone = self.gone
        if gone:
            # Kept until the view shows the leave (a minute at most: node ids are never
            # reused, so the table only has to outlive the views' disagreement).
            now = self.clock()
            for node, at in list(gone.items()):
                if now - at > 60.0 or (node not in self.members and now - at > 10.0):
                    del gone[node]
        role = self.role
        me = self.node_id
        hosts = sorted(
            m.node
            for m in members
            if m.status != "leaving"
            and m.node not in leaving_nodes
            and m.node not in gone
            and (role is None or role in m.roles)
            and not (m.node == me and (not self.hosting or self.leaving))
        )
        # This host counts itself even before its first view lists it.
        if (
            self.hosting
            and not self.leaving
            and me not in hosts
            and (role is None or role in self.own_roles)
        ):
            hosts.append(me)
            hosts.sort()
        owners = allocate(self.type_name, self.n, hosts)
        old = self.owners
        self.owners = owners
        if _log.isEnabledFor(logging.DEBUG):
            moved = sum(1 for s in range(self.n) if old[s] != owners[s])
            _log.debug(
                "sharding region %r on %s: hosts %s, %d shard(s) move",
                self.type_name,
                me,
                hosts,
                moved,
            )
        for s in range(self.n):
            if owners[s] == old[s] and s not in self.waiting:
                continue
            self._moved(s, owners[s])
        # A node removed while we waited for its confirmation: nothing more will come.
        for s, w in list(self.waiting.items()):
            if w.remote is not None and w.remote not in self.members:
                w.remote = None
                self._resolve(s, w)
        self._unpark()
        self._check_left()

    def tick(self) -> None:
        """A heartbeat passed and the view did not change."""
        self._unpark()
        if self.leaving:
            self._check_left()
        self._break_waits()

    def drained(self, s: int, node: str) -> None:
        """``node``'s region confirmed the drain marker this region sent it for ``s``."""
        w = self.waiting.get(s)
        if w is not None and w.remote == node:
            w.remote = None
            self._resolve(s, w)

    def handed_off(self, s: int, leftover: Iterable[tuple[str, Any, Any]]) -> None:
        """The local shard ``s`` stopped (handed off, lost its lease or failed);
        ``leftover``: the ``(entity_id, message, sender)`` it could not deliver."""
        self.local.discard(s)
        w = self.waiting.get(s)
        if w is None:
            w = self.waiting[s] = _Waiting()
        lm = self.local_markers.pop(s, None)
        if lm:
            # Its answer will not come: confirmed once the leftover is routed on.
            for mk in lm:
                self._add_marker(s, mk.reply_to, mk.node, chained=False)
        # What the shard could not deliver goes first.
        w.buffer.extendleft(
            Held(s, eid, msg, 0, "", snd) for eid, msg, snd in reversed(list(leftover))
        )
        w.local = False
        if self.last_dest.get(s) == self.node_id:
            del self.last_dest[s]
        self._resolve(s, w)
        self._check_left()

    def leave(self) -> None:
        """The node leaves gracefully: hand every shard off (then call :meth:`view`)."""
        self.leaving = True
        now = self.clock()
        # The others stop sending here once their view shows this node leaving (a
        # heartbeat or two); until then this region forwards what still arrives.
        self.leave_not_before = now + 4 * self.heartbeat + 0.2
        # Waiting for other nodes' confirmations before leaving is bounded too, well
        # inside the node's hand-over budget (ClusterNode.hand_over: max(3 s, ttl)).
        self.leave_deadline = now + 0.6 * max(3.0, self.ttl)
        _log.info("sharding region %r on %s: handing off its shards", self.type_name, self.node_id)

    def drain_request(self, s: int, reply_to: Any, node: str) -> None:
        """``node``'s region sends ``s``'s messages elsewhere from now on and asks this
        region to confirm (to ``reply_to``) once it routed the ones it sent before."""
        # Everything the asker sent before this marker has been routed already (one
        # path, in order) unless it sits in a buffer here: then confirm after it.
        w = self.waiting.get(s)
        if w is not None and w.remote == node:
            # This region waits for the asker's confirmation while the asker waits for
            # ours (a cycle: nodes leaving at once forward to each other). What
            # entered the cluster at the asker and came straight here goes back to it
            # (it waits for us, so its own buffer keeps them ahead of what it sends
            # later), then the confirmation; the asker does the same for ours. A
            # region that waits for a third one confirms once that one did (below):
            # confirming at once let the asker's next messages overtake the ones
            # still held there (three hosts leaving at once).
            self._give_back(node, w)
            self.out.append((DRAINED, reply_to, s))
            return
        if s in self.waiting:
            self._add_marker(s, reply_to, node, chained=False)
            return
        last = self.last_dest.get(s)
        if last is not None and last != self.node_id and last != node and last in self.members:
            # This region forwarded the shard's messages to a third one (several
            # nodes leave at once): the asker's earlier messages are only routed once
            # that region confirmed as well. Confirming now would let the asker's next
            # messages reach the new owner by their own path, ahead of them.
            self._add_marker(s, reply_to, node, chained=True)
            self._chain_drain(s, last)
            return
        if last == self.node_id and s in self.local:
            # Routed to the local shard, which may still hold them (waiting for its
            # lease) and hand them on later: confirm once it delivered them (found by
            # the model: confirming at once let the asker's later messages reach the
            # next owner first).
            self._local_marker(s, _Marker(reply_to, node, False))
            return
        self.out.append((DRAINED, reply_to, s))

    def shard_drained(self, s: int, count: int) -> None:
        """The local shard ``s`` delivered everything routed to it before ``count``
        SHARD_DRAIN commands: confirm the drain markers waiting for them."""
        lm = self.local_markers.get(s)
        while lm and count > 0:
            count -= 1
            self.out.append((DRAINED, lm.popleft().reply_to, s))
        if lm is not None and not lm:
            del self.local_markers[s]

    def drop_all(self) -> list[Held]:
        """The region stops: every message still held (to be dead letters)."""
        out = [h for w in self.waiting.values() for h in (*w.returned, *w.buffer)]
        self.waiting.clear()
        return out

    # -- decisions ---------------------------------------------------------------------------
    def _unpark(self) -> None:
        # Not in the pass that parked them: once the view changed, or a heartbeat later.
        now = self.clock()
        for s, w in list(self.waiting.items()):
            if w.parked and (w.parked_view != self.seen or now - w.parked_at >= self.heartbeat):
                w.parked = False
                self._resolve(s, w)

    def _moved(self, s: int, owner: str | None) -> None:
        w = self.waiting.get(s)
        last = self.last_dest.get(s)
        if w is None:
            if last is None or last == owner:
                return
            w = self.waiting[s] = _Waiting()
        if last is not None and last != owner:
            del self.last_dest[s]
            if last == self.node_id:
                if s in self.local:
                    w.local = True
                    self.out.append((HAND_OFF, s))
            elif last in self.members:
                w.remote = last
                self.out.append((DRAIN, last, s))
        self._resolve(s, w)

    def _resolve(self, s: int, w: _Waiting) -> None:
        if w.local or w.remote is not None or w.parked or self.owners[s] is None:
            return
        del self.waiting[s]
        buf = w.returned
        buf.extend(w.buffer)
        # Held for a look at the view: every message behind the one that bounced too
        # often waited for it too, so it counts as held (held again one by one, they
        # went on one per heartbeat: found by the test of three hosts leaving at once).
        waited = w.held
        out = self.out
        while buf:
            h = buf.popleft()
            hops = h.hops
            if waited and hops % _PARKED >= _BOUNCES and hops // _PARKED < _HOLDS:
                hops = _held(hops)
            dest = self.route(s, h.entity_id, h.message, h.sender, hops)
            if dest is not None:
                out.append((SEND, dest, s, h.entity_id, h.message, h.sender, hops))
            if s in self.waiting:
                # Moved again meanwhile: the rest waits behind what was routed.
                self.waiting[s].buffer.extend(buf)
                buf.clear()
                return
        markers = self.markers.get(s)
        if markers is not None:
            last = self.last_dest.get(s)
            if last is not None and last != self.node_id and last in self.members:
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
                    self.markers[s] = fresh
                    self.marker_at[s] = self.clock()
                    self._chain_drain(s, last)
                    return
            elif last == self.node_id and s in self.local:
                # Routed to the local shard: confirmed once it delivered them.
                for mk in markers:
                    self._local_marker(s, mk)
            else:
                self._confirm(markers, s)
            del self.markers[s]
            del self.marker_at[s]
        self._check_left()

    def _local_marker(self, s: int, mk: _Marker) -> None:
        lm = self.local_markers.get(s)
        if lm is None:
            lm = self.local_markers[s] = deque()
        lm.append(mk)
        self.out.append((SHARD_DRAIN, s))

    def _confirm(self, markers: list[_Marker], s: int) -> None:
        for mk in markers:
            self.out.append((DRAINED, mk.reply_to, s))

    def _add_marker(self, s: int, reply_to: Any, node: str, chained: bool) -> None:
        markers = self.markers.get(s)
        if markers is None:
            markers = self.markers[s] = []
            self.marker_at[s] = self.clock()
        markers.append(_Marker(reply_to, node, chained))

    def _break_waits(self) -> None:
        # Regions that wait for each other's confirmation in a circle of three or more
        # (views disagreeing while several nodes leave) would wait until the leave's
        # deadline, and a leaving node's buffer is then dead letters. A marker still
        # waiting on another region after two heartbeats (at most half the shortest
        # leave deadline, see leave) is confirmed as a direct cycle is: the asker's
        # own messages go back to it, and a later message may overtake one still held
        # elsewhere.
        if not self.marker_at:
            return
        limit = self.clock() - min(2 * self.heartbeat, 0.3 * max(3.0, self.ttl))
        for s, at in list(self.marker_at.items()):
            w = self.waiting.get(s)
            if at > limit or w is None or w.remote is None:
                continue  # recent, or waiting for a local hand-off or a view
            del self.marker_at[s]
            self.broken_waits += 1
            _log.debug("sharding region %r: shard %d: drain wait broken", self.type_name, s)
            markers = self.markers.pop(s)
            for mk in markers:
                self._give_back(mk.node, w)
            self._confirm(markers, s)

    def _chain_drain(self, s: int, node: str) -> None:
        # Wait for `node` to confirm it routed what this region sent it for shard `s`
        # (the markers registered for `s` are confirmed after that).
        del self.last_dest[s]
        w = self.waiting[s] = _Waiting()
        w.remote = node
        self.out.append((DRAIN, node, s))

    def _give_back(self, node: str, w: _Waiting) -> None:
        back: list[Held] = []
        for q in (w.returned, w.buffer):
            # Only what the asker's own senders sent (one hop, from it): a message that
            # bounced through it from elsewhere keeps its place here.
            if any(h.src == node and h.hops == 1 for h in q):
                keep: deque[Held] = deque()
                for h in q:
                    (back if h.src == node and h.hops == 1 else keep).append(h)
                q.clear()
                q.extend(keep)
        if back:
            self.out.append((GIVE_BACK, node, back))

    def _check_left(self) -> None:
        if (
            self.leaving
            and not self.local
            and not any(w.local for w in self.waiting.values())
            # Buffers that another node's confirmation will release, unless the
            # confirmations are overdue (then the region's stop makes them dead letters).
            and (
                not any(w.remote is not None or w.parked for w in self.waiting.values())
                or self.clock() > self.leave_deadline
            )
        ):
            self.out.append((LEFT, self.leave_not_before - self.clock()))

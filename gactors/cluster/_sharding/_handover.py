"""The hand-over protocol of one sharding region, as a pure state machine.

No I/O, no actors, no gevent. Where each shard of an entity type lives is decided in
ONE place, the type's *allocation table* (in Redis, changed only by Lua scripts:
``_redis_alloc.py``; :class:`Table` is one snapshot of it): ``owner[s]``,
``moving[s] = (from, to)`` while shard ``s`` moves, an ``epoch`` that grows with
every change, and the *registered* regions of the type. A move is two-phase: a
``plan`` marks the shard moving, every registered region that is a member *acks* it
(nothing it sent for ``s`` is in flight any more, and what it holds of other regions'
messages for ``s`` is in the shard's *hand-over stream*), and the last ack *flips*
it (owner = to). No region ever forwards another region's messages on its own
judgement, so no wait can form a circle and the order per sender and entity has no
exception.

:class:`RegionState` holds what one region knows; its methods take one event each --
an entity message to route (:meth:`~RegionState.route`), a table snapshot
(:meth:`~RegionState.table`), a drain marker from another region
(:meth:`~RegionState.drain_request`) and its confirmation
(:meth:`~RegionState.drained`), the local shard's hand-off report
(:meth:`~RegionState.handed_off`), a restart of the region's actor
(:meth:`~RegionState.restarted`), the node's graceful leave
(:meth:`~RegionState.leave`) -- and append the commands to carry out to
:attr:`RegionState.out`, in order. The region actor (``_region._Region``) feeds it
the events it receives and carries the commands out; the I/O commands (``STREAM``,
``ACK``, ``PLAN``, ``UNREGISTER``) and every ``DRAINED`` behind them go through one
ordered queue, so a confirmation never overtakes the stream write it depends on.
``tests/cluster/test_sharding_model.py`` drives the same class with a model of several
regions, the table and the network.

The rules (one region):

1. A message for ``s`` goes only to ``owner[s]`` as this region sees it. While ``s``
   is unowned, moving, or owned by a node that is no member, it is held here, in
   order (at most :data:`BUFFER_LIMIT`; more are dead letters).
2. Seeing ``moving[s] = (from, to)``: hold; if the last node this region sent ``s``'s
   messages to is another live member, send it a drain marker (behind those messages)
   and wait for its confirmation; if the local shard runs ``s``, hand it off (what it
   could not deliver comes back). Then write the held messages that came from other
   regions to the hand-over stream and ack. This region's own held messages stay
   here, in order, and go to the new owner after the flip.
3. A drain marker is confirmed at once (everything before it was delivered to the
   local shard, part of its hand-off, or is held), after writing the held messages of
   other regions for a moving shard to the stream.
4. Seeing the flip to itself: the shard starts (it takes its lease, then the hand-over
   stream, before anything else), then gets the held messages. To another node: the
   held messages go there, in order.
5. A node removed from the cluster needs no drain and no ack.
6. A leaving node is not a planned owner; its leave is done once it owns nothing (or
   at once when no other node can host: its shards stop with it).
7. A message that came from another region for a shard this region does not own
   "cannot happen" (only from a region that is no member any more); it is forwarded
   to the owner and counted (:attr:`RegionState.misrouted`).

Commands (tuples, the first item says which):

* ``(SEND, node, shard, entity_id, message, sender, origin)``: route a held message
  (this node: its local shard, started if needed; another: that node's region).
  :meth:`~RegionState.route` returns the destination of the message it is given
  instead of a command (the hot path builds no command).
* ``(DEAD, message, sender)``: a dead letter.
* ``(HAND_OFF, shard)``: tell the local shard to hand off (stop its entities, release
  its lease); it answers with :meth:`~RegionState.handed_off`.
* ``(START, shard)``: start the local shard now (it takes over a hand-over stream).
* ``(DRAIN, node, shard)``: send what was gathered for ``node``, then a drain marker.
* ``(DRAINED, reply_to, shard)``: confirm a drain marker (after the I/O before it).
* ``(STREAM, shard, items, from_node)``: append ``items`` (``(entity_id, message,
  sender)``, in order) to the shard's hand-over stream, for its move away from
  ``from_node`` (refused once that move is over: the items are dead letters then).
* ``(ACK, shard, from_node)``: ack the move of ``shard`` away from ``from_node``.
* ``(PLAN, version, epoch, desired)``: ask the table to move shards to ``desired``
  (compare-and-set on the membership ``version`` and the table ``epoch``).
* ``(LEFT,)``: the leave is complete (this node owns nothing any more).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from gactors.cluster._sharding._allocation import allocate

_log = logging.getLogger("gactors.cluster.sharding")

#: The most messages buffered per shard by a region (while a shard moves) and by a
#: shard (while it waits for its lease); more are dead letters.
BUFFER_LIMIT = 10_000

SEND, DEAD, HAND_OFF, START, DRAIN, DRAINED, STREAM, ACK, PLAN, LEFT = range(10)


class Held(NamedTuple):
    """An entity message a region holds back while its shard has no owner to go to."""

    entity_id: str
    message: Any
    sender: Any
    origin: str  # the node of the region it came from ("" when it entered here)


class Table(NamedTuple):
    """One snapshot of a type's allocation table and of the membership it was read
    with (returned by every allocation script)."""

    epoch: int
    #: shard -> owner node ("" for none)
    owners: tuple[str, ...]
    #: shard -> (from, to) for the shards that move
    moving: Mapping[int, tuple[str, str]]
    #: the membership version the table was read with (plans compare-and-set on it)
    version: int
    #: the cluster's members at that version
    members: frozenset[str]
    #: the members that host the type (up, with its role), sorted: the nodes a plan
    #: allocates to (the table takes one only once its region registered)
    hosts: tuple[str, ...]


class _Move:
    # A move of one shard as this region takes part in it.
    __slots__ = ("acked", "drain", "from_", "local", "markers", "to")

    def __init__(self, from_: str, to: str) -> None:
        self.from_ = from_
        self.to = to
        self.local = False  # waiting for the local shard's hand-off
        self.drain: str | None = None  # waiting for this node's confirmation
        self.acked = False
        # Drain markers that came while the local shard hands off: confirmed once its
        # leftover (sent before the held messages) is in the stream ahead of them.
        self.markers: list[Any] = []


class RegionState:
    """What one region knows about where its type's shards' messages go.

    ``hosting``: the region runs shards (``start``; ``start_proxy``: False).
    """

    def __init__(self, type_name: str, number_of_shards: int, node_id: str, hosting: bool) -> None:
        self.type_name = type_name
        self.n = number_of_shards
        self.node_id = node_id
        self.hosting = hosting
        #: shard -> where a message goes now (None: held here). The hot path.
        self.dest: list[str | None] = [None] * number_of_shards
        #: shard -> its owner in the last table seen (None: none).
        self.owners: list[str | None] = [None] * number_of_shards
        #: shard -> the node its last message went to since the last drain.
        self.last: list[str | None] = [None] * number_of_shards
        #: shards whose actor was started here by START (route starts the others).
        self.started: set[int] = set()
        self.moves: dict[int, _Move] = {}
        self.held: dict[int, deque[Held]] = {}
        self.members: frozenset[str] = frozenset()
        #: The nodes a plan may name (the last table's ``hosts``).
        self.hosts: tuple[str, ...] = ()
        self.epoch = -1
        self.leaving = False
        self.left = False
        #: (version, epoch) of the last plan sent (one plan per table state).
        self._planned: tuple[int, int] | None = None
        self._alloc_cache: tuple[tuple[str, ...], list[str | None]] = ((), [])
        #: Messages from another region for a shard this region does not own (rule 7;
        #: only a region that is no member any more can cause one).
        self.misrouted = 0
        self._misrouted_from: set[str] = set()
        #: The commands to carry out, in order (the driver empties it).
        self.out: list[tuple[Any, ...]] = []

    # -- events ------------------------------------------------------------------------------
    def route(self, s: int, eid: str, msg: Any, sender: Any, origin: str = "") -> str | None:
        """An entity message for shard ``s`` (``origin``: the node of the region it
        came from, "" when it entered here). Returns the node it goes to now (this
        node: the local shard), or None when it is held here or is a dead letter (a
        command)."""
        dest = self.dest[s]
        if dest is not None:
            if origin and dest != self.node_id:
                self._misrouted(s, origin, dest)
            self.last[s] = dest
            return dest
        q = self.held.get(s)
        if q is None:
            q = self.held[s] = deque()
        if len(q) < BUFFER_LIMIT:
            q.append(Held(eid, msg, sender, origin))
        else:
            self.out.append((DEAD, msg, sender))
        return None

    def table(self, t: Table) -> None:
        """A snapshot of the allocation table (older ones than the last are ignored)."""
        if t.epoch < self.epoch:
            return
        self.epoch = t.epoch
        self.members = t.members
        self.hosts = t.hosts
        me = self.node_id
        for s in range(self.n):
            mv = t.moving.get(s)
            if mv is not None:
                self._moving(s, mv[0], mv[1])
                continue
            owner = t.owners[s] or None
            self.owners[s] = owner
            move = self.moves.pop(s, None)
            dest = owner if owner is not None and owner in t.members else None
            if move is not None:
                if not move.acked:
                    # Flipped without this region's ack: it was no member for a while.
                    _log.warning(
                        "sharding region %r: shard %d moved without this region's ack",
                        self.type_name,
                        s,
                    )
                if dest == me:
                    self.started.add(s)
                    self.out.append((START, s))
            self.dest[s] = dest
            if dest is not None and s in self.held:
                self._release(s, dest)
        # Drains waiting on a node that is no member any more: nothing more will come.
        for s, move in list(self.moves.items()):
            if move.drain is not None and move.drain not in t.members:
                move.drain = None
                self._try_ack(s, move)
        self._plan(t)
        self._check_left()

    def drain_request(self, s: int, reply_to: Any, node: str) -> None:
        """``node``'s region saw ``s`` move and asks this region to confirm (to
        ``reply_to``) once what it sent before the marker was routed."""
        move = self.moves.get(s)
        if move is not None and move.local:
            move.markers.append(reply_to)
            return
        if move is not None and move.to != self.node_id:
            self._stream_others(s)
        self.out.append((DRAINED, reply_to, s))

    def drained(self, s: int, node: str) -> None:
        """``node``'s region confirmed the drain marker this region sent it for ``s``."""
        move = self.moves.get(s)
        if move is not None and move.drain == node:
            move.drain = None
            self._try_ack(s, move)

    def handed_off(self, s: int, leftover: Iterable[tuple[str, Any, Any, str]]) -> None:
        """The local shard ``s`` stopped (handed off, lost its lease or failed);
        ``leftover``: the ``(entity_id, message, sender, origin)`` it did not deliver."""
        self.started.discard(s)
        if self.last[s] == self.node_id:
            self.last[s] = None
        back = [Held(*x) for x in leftover]
        if back:
            # Sent before anything held here: they go first.
            q = self.held.get(s)
            if q is None:
                q = self.held[s] = deque()
            q.extendleft(reversed(back))
        move = self.moves.get(s)
        dest = self.dest[s]
        if move is not None:
            move.local = False
            if move.markers:
                self._stream_others(s)
                for reply_to in move.markers:
                    self.out.append((DRAINED, reply_to, s))
                move.markers.clear()
            self._try_ack(s, move)
        elif dest is not None and s in self.held:
            # It stopped on its own (lost its lease, failed) while it still owns the
            # shard: what it did not deliver goes to a new incarnation.
            self._release(s, dest)
        self._check_left()

    def restarted(self) -> None:
        """The region's actor failed and was restarted (this state goes on, see
        ``_region._Kept``): its local shards stopped (what they did not deliver was
        dead letters). One this node still owns starts again at once: it may not have
        taken its hand-over stream yet (found by the model: a stream never taken when no
        message came for the shard after the restart)."""
        me = self.node_id
        for s in range(self.n):
            move = self.moves.get(s)
            # A shard handing off is no longer `last` (found by the model: its move
            # waited for the hand-off of a shard that had stopped).
            if s in self.started or self.last[s] == me or (move is not None and move.local):
                self.handed_off(s, [])
                if self.dest[s] == me and s not in self.moves and s not in self.started:
                    self.started.add(s)
                    self.out.append((START, s))

    def leave(self) -> None:
        """The node leaves gracefully (its membership status says so): its leave is
        done (``LEFT``) once the table shows it owns nothing."""
        self.leaving = True
        _log.info("sharding region %r on %s: handing off its shards", self.type_name, self.node_id)
        self._check_left()

    def drop_all(self) -> list[Held]:
        """The region stops: every message still held (to be dead letters)."""
        out = [h for q in self.held.values() for h in q]
        self.held.clear()
        return out

    # -- decisions ---------------------------------------------------------------------------
    def _misrouted(self, s: int, origin: str, dest: str) -> None:
        self.misrouted += 1
        if origin in self._misrouted_from:
            return  # one warning per sending node is enough to tell (a node gone rogue)
        self._misrouted_from.add(origin)
        _log.warning(
            "sharding region %r on %s: a message for shard %d came from %s, which should "
            "have sent it to %s; forwarded",
            self.type_name,
            self.node_id,
            s,
            origin,
            dest,
        )

    def _moving(self, s: int, from_: str, to: str) -> None:
        me = self.node_id
        self.dest[s] = None
        self.owners[s] = from_ or None
        move = self.moves.get(s)
        if move is not None and move.from_ == from_:
            move.to = to  # the plan changed its target: the acks stay valid
            return
        move = self.moves[s] = _Move(from_, to)
        if from_ == me and (self.last[s] == me or s in self.started):
            move.local = True
            self.out.append((HAND_OFF, s))
        last = self.last[s]
        if last is not None and last != me and last in self.members:
            move.drain = last
            self.out.append((DRAIN, last, s))
        self.last[s] = None
        self._try_ack(s, move)

    def _try_ack(self, s: int, move: _Move) -> None:
        if move.acked or move.local or move.drain is not None:
            return
        move.acked = True
        if move.to != self.node_id:
            self._stream_others(s)
        self.out.append((ACK, s, move.from_))

    def _stream_others(self, s: int) -> None:
        # The held messages of other regions for `s` go to its hand-over stream (the
        # next owner takes them before anything else); this region's own stay, in
        # order, for the next owner after the flip (they are later than any of theirs
        # in the stream).
        q = self.held.get(s)
        if not q or not any(h.origin for h in q):
            return
        others = [(h.entity_id, h.message, h.sender) for h in q if h.origin]
        mine = [h for h in q if not h.origin]
        q.clear()
        q.extend(mine)
        self.out.append((STREAM, s, others, self.moves[s].from_))

    def _release(self, s: int, dest: str) -> None:
        q = self.held.pop(s)
        out = self.out
        self.last[s] = dest
        for h in q:
            out.append((SEND, dest, s, h.entity_id, h.message, h.sender, h.origin))

    def _plan(self, t: Table) -> None:
        if self._planned == (t.version, t.epoch) or not t.hosts:
            return
        cached_hosts, desired = self._alloc_cache
        if cached_hosts != t.hosts:
            desired = allocate(self.type_name, self.n, list(t.hosts))
            self._alloc_cache = (t.hosts, desired)
        for s in range(self.n):
            mv = t.moving.get(s)
            target = mv[1] if mv is not None else (t.owners[s] or None)
            d = desired[s]
            if d != target and not (mv is not None and d == mv[0]):
                self._planned = (t.version, t.epoch)
                self.out.append((PLAN, t.version, t.epoch, [x or "" for x in desired]))
                return

    def _check_left(self) -> None:
        if not self.leaving or self.left:
            return
        me = self.node_id
        if self.epoch < 0 or me in self.hosts:
            # Not read since this node's status is "leaving": a plan made before may
            # still name it (found by the model: a leave reported done, then a plan in
            # flight gave it shards).
            return
        if not self.hosts:
            # No other node can take the shards over: they stop with this node (what
            # they hold is dead letters then), instead of waiting for the budget.
            _log.info(
                "sharding region %r on %s: no other host to hand its shards to",
                self.type_name,
                me,
            )
        elif (
            me in self.owners
            or self.started
            or me in self.last
            # A move to this node it acked may flip to it any time (found by the model:
            # a leave reported done while a flip to the leaving node was under way).
            or any(me in (m.from_, m.to) or m.local for m in self.moves.values())
            # Moves under way, and its own senders' messages held while their shards
            # move: its senders may send until the node stops, and what they send to a
            # moving shard is held; done once the moves flipped and the held messages
            # went on (found by review: a rolling restart's leaving hosts stopped with
            # their senders' messages held, as dead letters). The node's leave budget
            # bounds the wait.
            or self.moves
            or self.held
        ):
            return
        self.left = True
        self.out.append((LEFT,))

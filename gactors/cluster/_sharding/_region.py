"""The region actor: routes each entity message to its shard's node and batches what
goes to another region. Where a shard's messages go, and what happens while a shard
moves, is decided by the pure state machine :class:`._handover.RegionState` from the
type's allocation table (read and changed through :class:`._alloc_io.AllocIO`); this
actor feeds it the events it receives and carries its commands out."""

from __future__ import annotations

import logging
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import gevent
from gevent.event import Event

from gactors._actor import Actor
from gactors._messages import Terminated
from gactors._props import Props
from gactors._ref import ActorRef
from gactors.cluster._access import cluster_node
from gactors.cluster._cluster import Cluster
from gactors.cluster._events import ClusterEvent, CurrentClusterState
from gactors.cluster._seam import (
    AllocationStore,
    AllocationTable,
    BackendUnavailable,
    LeaseStore,
)
from gactors.cluster._sharding._alloc_io import AllocIO
from gactors.cluster._sharding._handover import (
    ACK,
    DEAD,
    DRAIN,
    DRAINED,
    HAND_OFF,
    LEFT,
    PLAN,
    SEND,
    START,
    STREAM,
    RegionState,
    Table,
)
from gactors.cluster._sharding._protocol import (
    _FLAT_LIMIT,
    _FLUSH,
    _VIEW_TICK,
    BATCH_LIMIT,
    ShardingEnvelope,
    _AllocFailed,
    _Drain,
    _Drained,
    _Env,
    _Envs,
    _Flush,
    _HandedOff,
    _HandOff,
    _Leave,
    _Out,
    _RegionBatch,
    _RegionMsg,
    _TableRead,
    _ViewTick,
)
from gactors.cluster._sharding._shard import _Shard
from gactors.exceptions import SerializationError

_log = logging.getLogger("gactors.cluster.sharding")

#: The most entity ids whose shard a region remembers.
_SHARD_IDS_LIMIT = 16384


class _Kept:
    """What a region keeps across a restart of its actor: one per region, made by
    ``ClusterSharding.start`` and given to every incarnation in its Props.

    Unlike Akka's ShardRegion, the region's protocol state is not rebuilt from the table
    after a failure: its registration and acks in the table, the drains it waits for or
    owes, what it holds and gathered, and their order are promises to the other regions
    that a fresh state could not keep (found by review: a restarted region counted as
    having acked the moves under way while its predecessor's messages were still in
    flight, and its predecessor's unregister could remove its new registration). Only
    the local shards stop with the failed instance (Actor's default ``pre_restart``:
    what they did not deliver is dead letters), as in Akka.
    """

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: tuple[Any, ...] | None = None


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
        allocations: AllocationStore,
        kept: _Kept | None = None,
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
        self._regions: dict[str, ActorRef] = {}
        self._shards: dict[int, ActorRef] = {}
        self._codec = node.codec
        self._hb = node.settings.heartbeat_interval
        self._allocations = allocations
        self._kept = kept
        self._restarted = False
        ref = self.ref
        # While a batch is routed: shard -> (its ref, its messages from the batch, flat:
        # entity id, message, sender, ...).
        self._collect: dict[int, tuple[ActorRef, list[Any]]] | None = None
        # entity id -> shard (the crc32 of the id costs about three dict look-ups; cleared
        # when full).
        self._shard_ids: dict[str, int] = {}
        # The actor's mailbox and its senders (in step with it; both allocated once
        # and never replaced), read in receive only, in the hub like every mailbox use.
        cell = self.context._cell  # noqa: SLF001  the region's own cell (its mailbox)
        self._mailbox = cell.ensure_mailbox()
        self._senders: deque[ActorRef | None] = cell.senders
        # The envelopes taken from the mailbox in one receive are counted as run by
        # the dispatcher (the dashboard's and the metrics' figure), and at most its
        # throughput of them are (other actors and system messages run in between).
        self._dispatcher = cell.dispatcher
        self._drain_limit = max(1, cell.dispatcher.throughput)
        self._flush_scheduled = False
        self._leaving: Event | None = None
        self._out: dict[str, _Out] = {}
        if kept is not None and kept.state is not None:
            # A restart: the protocol state of the failed instance goes on (_Kept).
            self._sm, self._io, self._out, self._leaving = kept.state
            kept.state = None
            self._restarted = True
            self._decide = self._sm.route
            return
        self._sm = RegionState(type_name, number_of_shards, self._node_id, entity_props is not None)
        self._decide = self._sm.route

        def dropped(messages: Sequence[tuple[Any, Any]]) -> None:
            # A hand-over append that never ran (the region stopped first): its
            # messages are dead letters (told from the I/O greenlet or post_stop).
            for msg, snd in messages:
                system.publish_dead_letter(msg, snd, ref)

        self._io = AllocIO(
            allocations,
            type_name,
            self._node_id,
            entity_props is not None,
            number_of_shards,
            lambda table: ref.tell(_TableRead(table), None),
            node.settings.heartbeat_interval,
            dropped=dropped,
            failed=lambda error: ref.tell(_AllocFailed(error), None),
        )

    # -- lifecycle ---------------------------------------------------------------------------
    def pre_start(self) -> None:
        Cluster(self.context.system).subscribe(self.ref)
        # Read the allocation table every heartbeat (one script call, not per message):
        # flips of moves, plans after membership changes (a member turning "leaving"
        # publishes no event).
        self.timers.start_timer_with_fixed_delay("view", _VIEW_TICK, self._hb)

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        """Keep the protocol state for the next instance (:class:`_Kept`); the local
        shards stop (the default), the region does not (no ``post_stop``)."""
        if self._kept is None:
            super().pre_restart(reason, message)
            return
        Cluster(self.context.system).unsubscribe(self.ref)
        context = self.context
        for child in context.children:
            context.unwatch(child)
            context.stop(child)
        self._kept.state = (self._sm, self._io, self._out, self._leaving)
        _log.warning(
            "sharding region %r on %s restarts after a failure (%s: %s); its local shards "
            "stop, its hand-over state goes on",
            self._type,
            self._node_id,
            type(reason).__name__,
            reason,
        )

    def post_restart(self, reason: BaseException) -> None:
        """Take up the failed instance's protocol state: its local shards stopped (the
        new instance starts on demand after they terminated, so two never run at once),
        the commands it did not carry out are carried out, what it gathered is sent."""
        self.pre_start()
        if self._restarted:
            try:
                self._sm.restarted()
                self._run()
                self._flush()
            except Exception as e:
                # The command that failed before the restart failed again. Raised, it
                # would make the supervisor stop this region without its post_stop (a
                # failed post_restart discards the instance): registered still, it would
                # hold up every move of the type for good, and what it held would be lost
                # without a dead letter (found by review). It stops now, with post_stop.
                _log.error(
                    "sharding region %r on %s: a hand-over command failed again after its "
                    "restart (%s: %s); the region stops",
                    self._type,
                    self._node_id,
                    type(e).__name__,
                    e,
                )
                self.context.stop(self.ref)
                return
            self._io.sync()

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
        for h in self._sm.drop_all():
            system.publish_dead_letter(h.message, h.sender, self.ref)
        # Commands a failure left and nobody will carry out: the messages they carry are
        # dead letters too.
        for c in self._sm.out:
            self._dead_letter_command(c)
        self._sm.out.clear()
        self._io.close(unregister=True)
        if self._leaving is not None:
            self._leaving.set()

    # -- messages ----------------------------------------------------------------------------
    def receive(self, m: Any) -> None:
        t = type(m)
        if t is ShardingEnvelope:
            self._envelopes(m, self.context.sender)
        elif t is _RegionBatch:
            self._batch(m)
        elif t is _Flush:
            self._flush_scheduled = False
            self._flush()
        elif t is _RegionMsg:
            self._route(m.shard, m.entity_id, m.message, self.context.sender, m.src)
        elif t is _Drain:
            self._sm.drain_request(m.shard, m.reply_to, m.node)
            self._run()
            # Another region saw the shard move: this one may not have yet.
            self._io.sync()
        elif t is _Drained:
            self._sm.drained(m.shard, m.node)
            self._run()
        elif t is _HandedOff:
            if self._shards.get(m.shard) != self.context.sender:
                # A shard stopped by a restart of this region reported after it: the
                # new instance took it as stopped (post_restart), possibly acked its
                # move already, so what it did not deliver can only be dead letters.
                for env, snd in m.leftover:
                    self.context.system.publish_dead_letter(env.message, snd, self.ref)
                return
            self._handed_off(m.shard, m.leftover)
        elif t is _TableRead:
            self._table(m.table)
        elif t is Terminated:
            for s, ref in list(self._shards.items()):
                if ref == m.actor:
                    # Stopped without a hand-off report (it failed): nothing to wait for.
                    self._handed_off(s, [])
        elif t is _Leave:
            self._flush()  # what was gathered before the leave goes without the host flag
            self._leaving = m.done
            self._sm.leave()
            self._run()
            self._io.sync()
        elif isinstance(m, (CurrentClusterState, ClusterEvent)) or t is _ViewTick:
            self._io.sync()
            self._moves_timer()
        elif t is _AllocFailed:
            # Another number of shards than the cluster's (logged by the I/O): this
            # region cannot route anything right; what it held is dead letters.
            self.context.stop(self.ref)
        else:
            extract = self._extract
            if extract is None:
                self._bad(
                    m,
                    "a message to a sharding region must be a ShardingEnvelope (or give "
                    "extract_entity_id)",
                    self.context.sender,
                )
                return
            try:
                eid, msg = extract(m)
            except Exception as e:
                why = f"extract_entity_id failed: {type(e).__name__}: {e}"
                self._bad(m, why, self.context.sender)
                return
            if type(eid) is not str:
                why = f"extract_entity_id must return a str id, not {type(eid).__name__}"
                self._bad(m, why, self.context.sender)
                return
            self._route(zlib.crc32(eid.encode()) % self._n, eid, msg, self.context.sender, "")

    def _bad(self, m: Any, why: str, sender: ActorRef | None) -> None:
        _log.warning("sharding region %r: dead letter %r: %s", self._type, m, why)
        self.context.system.publish_dead_letter(m, sender, self.ref)

    def _envelopes(self, m: ShardingEnvelope, sender: ActorRef | None) -> None:
        # The hot path of a sending node: this envelope, then every envelope queued
        # right behind it in the mailbox (up to _drain_limit), in one loop: no trip
        # through the dispatcher, no sender lookup and no call into _route per message.
        # The state machine still decides each one (_decide); what it decides is carried
        # out as _route does (repeated here on purpose: a call less per message).
        mailbox, senders = self._mailbox, self._senders
        decide, node_id, n = self._decide, self._node_id, self._n
        sm, outs, ids = self._sm, self._out, self._shard_ids
        full, envelope = _FLAT_LIMIT, ShardingEnvelope
        left = limit = self._drain_limit
        while True:
            eid = m.entity_id
            if type(eid) is not str:
                self._bad(m, f"entity_id must be a str, not {type(eid).__name__}", sender)
            else:
                s = ids.get(eid)
                if s is None:
                    if len(ids) >= _SHARD_IDS_LIMIT:
                        ids.clear()
                    s = ids[eid] = zlib.crc32(eid.encode()) % n
                msg = m.message
                dest = decide(s, eid, msg, sender, "")
                if dest is None:
                    if sm.out:
                        self._run()
                elif dest == node_id:
                    shard = self._shards.get(s)
                    if shard is None:
                        shard = self._start_shard(s)
                    shard.tell(_Env(eid, msg, ""), sender)
                else:
                    out = outs.get(dest)
                    if out is None:
                        out = outs[dest] = _Out()
                    # _Out.add, written out (a call less per message).
                    if sender is None:
                        i = -1
                    elif sender is out.last:
                        i = out.last_i
                    else:
                        i = out.index_of(sender)
                    flat = out.flat
                    flat += (s, eid, msg, i, 0)
                    if len(flat) >= full or not mailbox:
                        self._flush_to(dest)
                    elif not self._flush_scheduled:
                        self._flush_scheduled = True
                        self.ref.tell(_FLUSH, None)
            left -= 1
            if not left or not mailbox or type(mailbox[0]) is not envelope:
                if left < limit - 1:
                    self._dispatcher.processed += limit - left - 1
                return
            m = mailbox.popleft()
            sender = senders.popleft()

    def _batch(self, m: _RegionBatch) -> None:
        # Messages another region sent. Those for local shards go to each shard as one
        # message with its slice of the batch (_Envs, with the batch's origin), told
        # once the whole batch was routed; the others are routed as _route does.
        src = m.src
        decide, node_id, sm, shards = self._decide, self._node_id, self._sm, self._shards
        collect: dict[int, tuple[ActorRef, list[Any]]] = {}
        self._collect = collect
        f, senders = m.flat, m.senders
        k = 0
        kept = False  # the message at k is held or gathered (not lost by a failure)
        try:
            for k in range(0, len(f), 5):
                s, eid, msg, i = f[k], f[k + 1], f[k + 2], f[k + 3]
                snd = senders[i] if i >= 0 else None
                kept = False
                dest = decide(s, eid, msg, snd, src)
                if dest == node_id:
                    c = collect.get(s)
                    if c is None:
                        shard = shards.get(s)
                        if shard is None:
                            shard = self._start_shard(s)
                        c = collect[s] = (shard, [])
                    c[1].extend((eid, msg, snd))
                elif dest is None:
                    kept = True
                    if sm.out:
                        self._run()
                else:
                    kept = True  # gathered first: a failure after leaves it there
                    self._send(dest, s, eid, msg, snd, src)
        except BaseException:
            # The batch is one message to this actor but many entity messages: the
            # failing receive drops it, so those not routed yet are dead letters, not
            # lost (found by review).
            system = self.context.system
            for j in range(k + 5 if kept else k, len(f), 5):
                i = f[j + 3]
                system.publish_dead_letter(f[j + 2], senders[i] if i >= 0 else None, self.ref)
            raise
        finally:
            self._collect = None
            for shard, items in collect.values():
                if len(items) == 3:
                    shard.tell(_Env(items[0], items[1], src), items[2])
                else:
                    shard.tell(_Envs(items, src), self.ref)

    def _route(
        self,
        s: int,
        eid: str,
        msg: Any,
        sender: ActorRef | None,
        src: str,
    ) -> None:
        # The hot path: the state machine decides, and the common outcomes (the local
        # shard, another node's region) are carried out here without a command. This
        # repeats _send (used for the state machine's commands) on purpose: one Python
        # call less per entity message (entity throughput through a region).
        dest = self._decide(s, eid, msg, sender, src)
        if dest is None:
            if self._sm.out:
                self._run()
        elif dest == self._node_id:
            shard = self._shards.get(s)
            if shard is None:
                shard = self._start_shard(s)
            collect = self._collect
            if collect is None:
                shard.tell(_Env(eid, msg, src), sender)
            else:
                c = collect.get(s)
                if c is None:
                    c = collect[s] = (shard, [])
                c[1].extend((eid, msg, sender))
        else:
            out = self._out.get(dest)
            if out is None:
                out = self._out[dest] = _Out()
            if out.add(s, eid, msg, sender, 0) >= _FLAT_LIMIT or not self._mailbox:
                self._flush_to(dest)
            elif not self._flush_scheduled:
                self._flush_scheduled = True
                self.ref.tell(_FLUSH, None)

    def _send(
        self, dest: str, s: int, eid: str, msg: Any, sender: ActorRef | None, origin: str
    ) -> None:
        if dest == self._node_id:
            shard = self._shards.get(s)
            if shard is None:
                shard = self._start_shard(s)
            # Told at once, with its own origin (a held message the state machine
            # releases; never while a batch is routed: route only holds or drops then).
            shard.tell(_Env(eid, msg, origin), sender)
            return
        # Gathered per node and sent as one batch once the mailbox got to the flush
        # marker told to self now (everything already queued is batched with it), or
        # when the batch is full. Anything else sent to that region (a drain marker)
        # flushes first, so the batch keeps its place on the one ordered path.
        out = self._out.get(dest)
        if out is None:
            out = self._out[dest] = _Out()
        if out.add(s, eid, msg, sender, 0) >= _FLAT_LIMIT or not self._mailbox:
            # Full, or nothing else queued to gather: no reason to wait (a lone message,
            # e.g. the first one to an entity, does not pay a trip through the mailbox).
            self._flush_to(dest)
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.ref.tell(_FLUSH, None)

    def _run(self) -> None:
        # Carry out the state machine's commands, in order.
        sm = self._sm
        while sm.out:
            cmds, sm.out = sm.out, []
            acks: list[tuple[int, str]] = []
            done = 0
            try:
                for c in cmds:
                    kind = c[0]
                    if kind == SEND:
                        self._send(*c[1:])
                    elif kind == ACK:
                        acks.append((c[1], c[2]))
                    elif kind in (DRAINED, STREAM) and acks:
                        self._io.ack(acks)
                        acks = []
                        self._command(c)
                    else:
                        self._command(c)
                    done += 1
            except BaseException:
                # The commands after the one that failed are not lost: the restarted
                # region carries them out (_Kept), in order. The failed one is tried
                # again, unless it carried messages (they are dead letters: a message
                # that breaks routing must not break it forever).
                failed = cmds[done]
                rest: list[tuple[Any, ...]] = [(ACK, s, f) for s, f in acks]
                if failed[0] in (SEND, STREAM):
                    self._dead_letter_command(failed)
                elif failed[0] != DEAD:
                    rest.append(failed)
                sm.out[:0] = rest + cmds[done + 1 :]
                raise
            if acks:
                self._io.ack(acks)

    def _dead_letter_command(self, c: tuple[Any, ...]) -> None:
        # The messages a command carries, as dead letters (it will never run).
        system = self.context.system
        if c[0] == SEND:
            system.publish_dead_letter(c[4], c[5], self.ref)
        elif c[0] == DEAD:
            system.publish_dead_letter(c[1], c[2], self.ref)
        elif c[0] == STREAM:
            for _eid, msg, snd in c[2]:
                system.publish_dead_letter(msg, snd, self.ref)

    def _command(self, c: tuple[Any, ...]) -> None:
        kind = c[0]
        sm = self._sm
        if kind == DEAD:
            self.context.system.publish_dead_letter(c[1], c[2], self.ref)
        elif kind == HAND_OFF:
            shard = self._shards.get(c[1])
            if shard is not None:
                shard.tell(_HandOff(), self.ref)
            else:
                sm.handed_off(c[1], [])  # it stopped meanwhile: nothing to wait for
        elif kind == START:
            if c[1] not in self._shards:
                self._start_shard(c[1])
        elif kind == DRAIN:
            self._flush_to(c[1])  # the marker goes after everything sent before it
            self._region_of(c[1]).tell(_Drain(c[2], self.ref, self._node_id), self.ref)
        elif kind == DRAINED:
            reply = _Drained(c[2], self._node_id)
            if self._io.pending:
                # After the stream write it depends on (rule 3).
                self._io.after(self._teller(c[1], reply))
            else:
                c[1].tell(reply, self.ref)
        elif kind == STREAM:
            self._stream(c[1], c[2], c[3])
        elif kind == PLAN:
            self._io.plan(c[1], c[2], c[3])
        elif kind == LEFT:
            self._flush()
            done = self._leaving
            if done is not None:
                done.set()

    def _teller(self, ref: ActorRef, message: Any) -> Callable[[], None]:
        me = self.ref

        def tell() -> None:
            ref.tell(message, me)

        return tell

    def _stream(self, s: int, items: list[tuple[str, Any, ActorRef | None]], from_: str) -> None:
        # Messages that came over the wire go to the shard's hand-over stream, in
        # batches of the wire's shape (they are serializable: they travelled already).
        encoded: list[tuple[int, bytes]] = []
        carried: list[tuple[Any, ActorRef | None]] = []
        for k in range(0, len(items), BATCH_LIMIT):
            out = _Out()
            for eid, msg, snd in items[k : k + BATCH_LIMIT]:
                out.add(s, eid, msg, snd, 0)
            try:
                encoded.append(
                    self._codec.encode_message(
                        _RegionBatch(out.flat, out.senders, False, self._node_id)
                    )
                )
                carried += ((msg, snd) for _eid, msg, snd in items[k : k + BATCH_LIMIT])
            except SerializationError as e:
                _log.warning("sharding region %r: cannot hand over: %s", self._type, e)
                for _s, _eid, msg, snd, _h in out.messages():
                    self.context.system.publish_dead_letter(msg, snd, self.ref)
        self._io.stream(s, encoded, carried, from_)

    def _take(self, s: int) -> Callable[[], list[tuple[str, Any, Any]]]:
        # For shard `s`: take its hand-over stream (blocking I/O, in the shard's
        # greenlet) and decode it. Read first (a failed read is retried by the shard:
        # nothing was deleted), then delete what was read, retried here until done:
        # the entries are in hand then, so a lost reply to the delete loses nothing
        # and a repeated read cannot deliver them twice.
        store, codec, type_name = self._allocations, self._codec, self._type

        def take() -> list[tuple[str, Any, Any]]:
            entries = store.stream_read(type_name, s)
            if entries:
                ids = [entry_id for entry_id, _sid, _payload in entries]
                delay = 0.05
                while True:
                    try:
                        store.stream_delete(type_name, s, ids)
                        break
                    except BackendUnavailable as e:
                        _log.warning(
                            "sharding %r shard %d: cannot delete its taken hand-over (retried): %s",
                            type_name,
                            s,
                            e,
                        )
                        gevent.sleep(delay)
                        delay = min(delay * 2, 2.0)
            items: list[tuple[str, Any, Any]] = []
            for _entry_id, sid, payload in entries:
                try:
                    batch = codec.decode_message(sid, payload)
                except Exception as e:
                    _log.error("sharding %r shard %d: undecodable hand-over: %s", type_name, s, e)
                    continue
                f, senders = batch.flat, batch.senders
                for k in range(0, len(f), 5):
                    i = f[k + 3]
                    items.append((f[k + 1], f[k + 2], senders[i] if i >= 0 else None))
            return items

        return take

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
            self._split(ref, out.messages(), host)

    def _split(
        self,
        ref: ActorRef,
        items: list[tuple[int, str, Any, ActorRef | None, int]],
        host: bool,
    ) -> None:
        # A batch that cannot travel: one of its messages cannot, or together they are
        # larger than max_message_size. Each half goes as a batch of its own, in order,
        # and is halved again if it cannot either, down to single messages: only the
        # unusable ones become dead letters, and big messages still travel many a batch
        # (not one by one).
        if len(items) == 1:
            s, eid, msg, snd, hops = items[0]
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
            return
        mid = len(items) // 2
        for half in (items[:mid], items[mid:]):
            out = _Out()
            for s, eid, msg, snd, hops in half:
                out.add(s, eid, msg, snd, hops)
            try:
                ref.tell(_RegionBatch(out.flat, out.senders, host, self._node_id), self.ref)
            except SerializationError:
                self._split(ref, half, host)

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
                self._take(s),
            ),
            str(s),
        )
        self.context.watch(ref)
        self._shards[s] = ref
        return ref

    # -- the allocation table and hand-over (decided by the state machine) ---------------------
    def _table(self, a: AllocationTable) -> None:
        n = self._n
        # A node whose region stopped is no member for the hand-over (rule 5): it hosts
        # nothing and confirms no drain any more (its shards stopped with its region).
        stopped = a.stopped
        members = frozenset(a.members).difference(stopped) if stopped else frozenset(a.members)
        # Every up member with the role hosts (SPEC: role=None: every member); the plan
        # script names one only once its region registered (until then the shard waits).
        role = self._role
        hosts = tuple(
            sorted(
                node
                for node, status in a.members.items()
                if status == "up"
                and node not in stopped
                and (role is None or role in a.roles.get(node, ()))
            )
        )
        owners = tuple(a.owners.get(s, "") for s in range(n))
        moving = {s: mv for s, mv in a.moving.items() if s < n}
        self._sm.table(Table(a.epoch, owners, moving, a.version, members, hosts))
        self._run()
        for node in list(self._regions):
            if node not in members:
                del self._regions[node]
        self._moves_timer()

    def _moves_timer(self) -> None:
        if self._sm.moves and not self.timers.is_timer_active("moves"):
            # While shards move, read the table four times a heartbeat: a flip is seen
            # sooner (a graceful leave has a budget of a few heartbeats). A read that
            # finds nothing changed costs one short reply.
            self.timers.start_single_timer("moves", _VIEW_TICK, self._hb / 4)

    def _handed_off(self, s: int, leftover: list[tuple[Any, ActorRef | None]]) -> None:
        ref = self._shards.pop(s, None)
        if ref is not None:
            self.context.unwatch(ref)
        self._sm.handed_off(
            s, [(env.entity_id, env.message, snd, env.origin) for env, snd in leftover]
        )
        self._run()

"""A hypothesis stateful model of sharding's hand-over protocol
(``gactors.cluster._sharding._handover.RegionState``, the code the region actor runs).

The world: several nodes, each with the protocol's state machine for one entity
type, its local shards (a mailbox, a buffer until the shard holds its lease and took
its hand-over stream, a hand-off) and an ordered queue of I/O calls; the type's
allocation table as ONE atomic object with the semantics of the Lua scripts
(``gactors/cluster/lua/alloc_*.lua``: register, sync, plan, ack, unregister, the
flip once every registered member acked) and the per-shard hand-over streams; the
membership (members and their status, a version). The network keeps the order per
sender and receiver and nothing else: every step picks any non-empty channel (or a
shard's mailbox, an I/O call, the reply of one...). Nodes join, leave gracefully
(several at once) and crash (with their messages still in flight), and region actors
fail and are restarted by their supervisor (their protocol state goes on, their local
shards stop), while clients on every live node send numbered messages to a few
entities.

Checked after every step, with no allowance:

* each message is delivered at most once, and never both delivered and dead-lettered;
* per sender and entity, deliveries keep the send order;
* a shard delivers only on the node the table names its owner, holding its lease
  (so no shard is active on two nodes);
* a message from another region reaches a region that does not own its shard
  (``misrouted``) only if that region is no member any more;

and once everything settled (tables read, channels empty, hand-offs done): every
message was delivered, dead-lettered, or held by a node when it crashed (what a
crashed process had read dies with it) -- none silently lost, none still held.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gactors.cluster._sharding._allocation import shard_of
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

N_SHARDS = 3
ENTITIES = ("a", "b", "c", "d")
NODES = ("n1", "n2", "n3", "n4", "n5")

# A message: (sender node, entity, seq) -- its identity.
Msg = tuple[str, str, int]


class AllocTable:
    """The allocation table with the semantics of the Lua scripts (each method is
    one atomic script run)."""

    def __init__(self, model: ShardingModel) -> None:
        self.model = model
        self.epoch = 0
        self.owner: dict[int, str] = {}
        self.moving: dict[int, tuple[str, str]] = {}
        self.acks: dict[int, set[str]] = {}
        self.registered: dict[str, bool] = {}  # node -> hosting
        self.streams: dict[int, list[tuple[str, Any, Any]]] = {}
        self.flips = 0

    def snapshot(self) -> Table:
        self._flips()
        truth = self.model.truth
        return Table(
            self.epoch,
            tuple(self.owner.get(s, "") for s in range(N_SHARDS)),
            dict(self.moving),
            self.model.version,
            frozenset(truth),
            tuple(sorted(n for n, st_ in truth.items() if st_ == "up")),
        )

    def _flips(self) -> None:
        members = self.model.truth
        need = {n for n in self.registered if n in members}
        for s, (_f, to) in list(self.moving.items()):
            if need <= self.acks[s]:
                self.owner[s] = to
                self.flips += 1
                del self.moving[s]
                del self.acks[s]
                self.epoch += 1

    def register(self, node: str, hosting: bool) -> Table:
        self.registered[node] = hosting
        self.epoch += 1  # who can host changed
        for acks in self.acks.values():
            acks.add(node)  # it sent nothing anywhere yet
        return self.snapshot()

    def unregister(self, node: str) -> Table:
        if self.registered.pop(node, None) is not None:
            self.epoch += 1
        return self.snapshot()

    def plan(self, version: int, epoch: int, desired: list[str]) -> Table:
        truth = self.model.truth
        if version != self.model.version or epoch != self.epoch:
            return self.snapshot()
        changed = False
        for s, d in enumerate(desired):
            if not d or not self.registered.get(d) or truth.get(d) != "up":
                continue
            if s not in self.owner:
                self.owner[s] = d
                changed = True
            elif s in self.moving:
                f, to = self.moving[s]
                if d not in (f, to):
                    self.moving[s] = (f, d)
                    changed = True
            elif self.owner[s] != d:
                self.moving[s] = (self.owner[s], d)
                self.acks[s] = set()
                changed = True
        if changed:
            self.epoch += 1
        return self.snapshot()

    def ack(self, node: str, s: int, from_: str) -> Table:
        mv = self.moving.get(s)
        if mv is not None and mv[0] == from_:
            self.acks[s].add(node)
        return self.snapshot()


class Shard:
    """A shard actor as the model sees it: a mailbox, a buffer until it holds its lease
    and took its hand-over stream, a hand-off that releases the lease and reports what
    it did not deliver."""

    def __init__(self, node: str, s: int) -> None:
        self.node = node
        self.s = s
        # ("env", (eid, msg, snd, origin)) | ("off", None)
        self.mailbox: deque[tuple[str, Any]] = deque()
        self.buffer: list[tuple[str, Any, Any, str]] = []
        self.leased = False
        self.handing_off = False


class Node:
    def __init__(self, name: str) -> None:
        self.name = name
        self.sm = RegionState("cart", N_SHARDS, name, True)
        self.shards: dict[int, Shard] = {}
        #: what the local shards told the region, in order: ("off", shard, leftover)
        self.from_shards: deque[tuple[str, int, Any]] = deque()
        #: the region's ordered I/O calls, and the tables they returned (not read yet)
        self.io: deque[tuple[Any, ...]] = deque()
        self.replies: deque[Table] = deque()
        self.alive = True  # False once crashed or stopped after leaving
        self.leaving = False
        self.left = False  # the region reported its leave done
        self.seq = 0  # its client's next message number


class ShardingModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[str, Node] = {}
        self.truth: dict[str, str] = {}  # member -> status ("up" | "leaving")
        self.version = 0
        self.table = AllocTable(self)
        self.channels: dict[tuple[str, str], deque[tuple[Any, ...]]] = {}
        self.lease: dict[int, str] = {}
        self.sent: list[Msg] = []
        self.delivered: dict[Msg, str] = {}  # -> the node that delivered it
        self.last_seq: dict[tuple[str, str], int] = {}
        self.dead: set[Msg] = set()
        self.lost: set[Msg] = set()  # held by a node when it crashed
        self.from_stream = 0
        self.misrouted = 0
        self.restarts = 0
        self.refused = 0
        for name in NODES[:2]:
            self._join(name)
        # Start from a settled cluster (every shard owned), so that what follows moves
        # shards: the registrations, reads and plans run.
        for _ in range(3):
            for node in self.nodes.values():
                node.io.append(("read",))
                while node.io:
                    self._io(node)
                    while node.replies:
                        node.sm.table(node.replies.popleft())
                        self._run(node)
        assert len(self.table.owner) == N_SHARDS

    # -- the world -------------------------------------------------------------------------
    def _join(self, name: str) -> None:
        node = self.nodes[name] = Node(name)
        self.truth[name] = "up"
        self.version += 1
        node.io.append(("register",))

    def _live(self) -> list[str]:
        return [n for n, node in self.nodes.items() if node.alive]

    def _dead_letter(self, msg: Msg) -> None:
        assert msg not in self.delivered, f"{msg} delivered and dead-lettered"
        assert msg not in self.dead, f"{msg} dead-lettered twice"
        self.dead.add(msg)

    def _send(
        self, node: Node, dest: str, s: int, eid: str, msg: Msg, snd: Any, origin: str
    ) -> None:
        # The region's _send: the local shard (started on demand), or the owner's region.
        if dest == node.name:
            shard = node.shards.get(s)
            if shard is None:
                shard = node.shards[s] = Shard(node.name, s)
            shard.mailbox.append(("env", (eid, msg, snd, origin)))
        else:
            self._wire(node.name, dest, ("batch", [(s, eid, msg, snd)]))

    def _wire(self, src: str, dst: str, m: tuple[Any, ...]) -> None:
        self.channels.setdefault((src, dst), deque()).append(m)

    def _run(self, node: Node) -> None:
        # The region's _run: carry out the state machine's commands in order.
        sm = node.sm
        while sm.out:
            cmds, sm.out = sm.out, []
            for c in cmds:
                kind = c[0]
                if kind == SEND:
                    self._send(node, *c[1:])
                elif kind == DEAD:
                    self._dead_letter(c[1])
                elif kind == HAND_OFF:
                    shard = node.shards.get(c[1])
                    if shard is None:
                        node.from_shards.append(("off", c[1], []))
                    else:
                        shard.mailbox.append(("off", None))
                elif kind == START:
                    if c[1] not in node.shards:
                        node.shards[c[1]] = Shard(node.name, c[1])
                elif kind == DRAIN:
                    self._wire(node.name, c[1], ("drain", c[2]))
                elif kind == DRAINED:
                    if node.io:
                        node.io.append(("drained", c[1], c[2]))
                    else:
                        self._wire(node.name, c[1], ("drained", c[2]))
                elif kind in (STREAM, ACK, PLAN):
                    node.io.append(c)
                elif kind == LEFT:
                    node.left = True
                else:
                    raise AssertionError(f"unknown command {c!r}")

    def _deliver(self, shard: Shard, eid: str, msg: Msg) -> None:
        s = shard.s
        assert self.lease.get(s) == shard.node, "a shard delivers without its lease"
        assert self.table.owner.get(s) == shard.node, (
            f"shard {s} delivers on {shard.node}, the table's owner is {self.table.owner.get(s)}"
        )
        assert msg not in self.delivered, f"{msg} delivered twice"
        assert msg not in self.dead, f"{msg} dead-lettered and delivered"
        key = (msg[0], eid)
        last = self.last_seq.get(key, 0)
        assert msg[2] > last, f"order: {msg} delivered after seq {last} from the same sender"
        self.last_seq[key] = msg[2]
        self.delivered[msg] = shard.node

    def _region_hears(self, node: Node) -> None:
        _kind, s, leftover = node.from_shards.popleft()
        node.sm.handed_off(s, leftover)
        self._run(node)

    def _finish_hand_off(self, node: Node, shard: Shard) -> None:
        if shard.leased:
            del self.lease[shard.s]
            shard.leased = False
        del node.shards[shard.s]
        # The region routes nothing to a shard after its hand-off command.
        assert not shard.mailbox, f"{node.name}: shard {shard.s} got messages after its hand-off"
        node.from_shards.append(("off", shard.s, shard.buffer))

    def _io(self, node: Node) -> None:
        # One I/O call of the region's queue (an atomic script run), in order.
        job = node.io.popleft()
        kind = job[0]
        t = self.table
        reply: Table | None = None
        if kind == "register":
            reply = t.register(node.name, True)
        elif kind == "read":
            reply = t.snapshot()
        elif kind == STREAM:
            mv = t.moving.get(job[1])
            if mv is not None and mv[0] == job[3]:
                t.streams.setdefault(job[1], []).extend(job[2])
            else:
                # alloc_stream_add.lua refuses an append for a move that is over.
                self.refused += 1
                for item in job[2]:
                    self._dead_letter(item[1])
        elif kind == ACK:
            reply = t.ack(node.name, job[1], job[2])
        elif kind == PLAN:
            reply = t.plan(job[1], job[2], job[3])
        elif kind == "drained":
            self._wire(node.name, job[1], ("drained", job[2]))
        else:
            raise AssertionError(job)
        if reply is not None:
            node.replies.append(reply)

    def _net(self, key: tuple[str, str]) -> None:
        src, dst = key
        m = self.channels[key].popleft()
        node = self.nodes[dst]
        if not node.alive:
            # A crashed node's inbox is drained by a survivor, a stopped region's
            # messages are dead letters: either way, the entity messages are.
            if m[0] == "batch":
                for item in m[1]:
                    self._dead_letter(item[2])
            return
        sm = node.sm
        if m[0] == "batch":
            for s, eid, msg, snd in m[1]:
                before = sm.misrouted
                dest = sm.route(s, eid, msg, snd, src)
                if sm.misrouted != before:
                    assert src not in self.truth, f"misrouted from the member {src}: {msg}"
                    self.misrouted += 1
                    assert self.misrouted < 100, "messages go round in circles"
                if dest is not None:
                    self._send(node, dest, s, eid, msg, snd, src)
                self._run(node)
        elif m[0] == "drain":
            sm.drain_request(m[1], src, src)
            self._run(node)
        else:
            sm.drained(m[1], src)
            self._run(node)

    def _shard_step(self, node: Node, shard: Shard) -> bool:
        # One step of a shard actor; False if it had nothing to do.
        s = shard.s
        if not shard.leased and not shard.handing_off:
            if s in self.lease:
                if not shard.mailbox:
                    return False
            else:
                # It acquires its lease, takes the hand-over stream, then delivers
                # what it buffered.
                self.lease[s] = node.name
                shard.leased = True
                for eid, msg, _snd in self.table.streams.pop(s, []):
                    self.from_stream += 1
                    self._deliver(shard, eid, msg)
                for eid, msg, _snd, _o in shard.buffer:
                    self._deliver(shard, eid, msg)
                shard.buffer.clear()
                return True
        if shard.handing_off:
            # Its entities stopped: it releases the lease and reports.
            self._finish_hand_off(node, shard)
            return True
        if not shard.mailbox:
            return False
        kind, item = shard.mailbox.popleft()
        if kind == "off":
            shard.handing_off = True
        elif shard.leased:
            self._deliver(shard, item[0], item[1])
        else:
            shard.buffer.append(item)
        return True

    def _stop_local_shards(self, node: Node) -> None:
        # The node's shards stop: what they did not deliver (their mailbox, their
        # buffer, a hand-off report the region did not read) is dead letters, their
        # leases are released.
        for shard in node.shards.values():
            for kind, item in shard.mailbox:
                if kind == "env":
                    self._dead_letter(item[1])
            for item in shard.buffer:
                self._dead_letter(item[1])
            if shard.leased:
                del self.lease[shard.s]
        node.shards.clear()
        for _kind, _s, leftover in node.from_shards:
            for item in leftover:
                self._dead_letter(item[1])
        node.from_shards.clear()

    def _finish_leaving(self, node: Node) -> None:
        # Shards still running only when no other node could host: they stop with the
        # system.
        assert not node.shards or not node.sm.hosts, (
            "a region reported its leave done with shards running"
        )
        self._stop_local_shards(node)
        node.alive = False
        for h in node.sm.drop_all():  # the region's post_stop
            self._dead_letter(h.message)
        self.table.unregister(node.name)
        del self.truth[node.name]
        self.version += 1

    def _can_finish(self, node: Node) -> bool:
        return node.alive and node.left and not node.io

    # -- rules -----------------------------------------------------------------------------
    @rule(
        data=st.data(),
        entities=st.lists(st.sampled_from(ENTITIES), min_size=1, max_size=3),
    )
    def client_sends(self, data: st.DataObject, entities: list[str]) -> None:
        name = data.draw(st.sampled_from(sorted(self._live())))
        node = self.nodes[name]
        for entity in entities:
            node.seq += 1
            msg = (name, entity, node.seq)
            self.sent.append(msg)
            s = shard_of(entity, N_SHARDS)
            dest = node.sm.route(s, entity, msg, name)
            if dest is not None:
                self._send(node, dest, s, entity, msg, name, "")
            self._run(node)

    @precondition(lambda self: any(self.channels.values()))
    @rule(data=st.data())
    def network_delivers(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(k for k, q in self.channels.items() if q)))
        self._net(key)

    @precondition(lambda self: any(n.alive and n.shards for n in self.nodes.values()))
    @rule(data=st.data())
    def shard_works(self, data: st.DataObject) -> None:
        choices = sorted((n.name, s) for n in self.nodes.values() if n.alive for s in n.shards)
        name, s = data.draw(st.sampled_from(choices))
        node = self.nodes[name]
        self._shard_step(node, node.shards[s])

    @precondition(lambda self: any(n.alive and n.from_shards for n in self.nodes.values()))
    @rule(data=st.data())
    def region_hears_its_shard(self, data: st.DataObject) -> None:
        name = data.draw(
            st.sampled_from(
                sorted(n.name for n in self.nodes.values() if n.alive and n.from_shards)
            )
        )
        self._region_hears(self.nodes[name])

    @precondition(lambda self: any(n.alive and n.io for n in self.nodes.values()))
    @rule(data=st.data(), read=st.booleans())
    def io_call_runs(self, data: st.DataObject, read: bool) -> None:
        name = data.draw(
            st.sampled_from(sorted(n.name for n in self.nodes.values() if n.alive and n.io))
        )
        node = self.nodes[name]
        self._io(node)
        if read:
            # The region reads its replies at once (or later: region_reads_a_reply).
            while node.replies:
                node.sm.table(node.replies.popleft())
                self._run(node)

    @precondition(lambda self: any(n.alive and n.replies for n in self.nodes.values()))
    @rule(data=st.data())
    def region_reads_a_reply(self, data: st.DataObject) -> None:
        name = data.draw(
            st.sampled_from(sorted(n.name for n in self.nodes.values() if n.alive and n.replies))
        )
        node = self.nodes[name]
        node.sm.table(node.replies.popleft())
        self._run(node)

    @rule(data=st.data())
    def view_tick(self, data: st.DataObject) -> None:
        # The region's heartbeat tick: one read of the table.
        name = data.draw(st.sampled_from(sorted(self._live())))
        if not any(job[0] == "read" for job in self.nodes[name].io):
            self.nodes[name].io.append(("read",))

    @precondition(lambda self: len(self.nodes) < len(NODES))
    @rule()
    def node_joins(self) -> None:
        self._join(NODES[len(self.nodes)])

    @precondition(lambda self: sum(1 for st_ in self.truth.values() if st_ == "up") >= 2)
    @rule(data=st.data())
    def node_leaves(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, s in self.truth.items() if s == "up")))
        node = self.nodes[name]
        self.truth[name] = "leaving"
        self.version += 1
        node.leaving = True
        node.sm.leave()
        self._run(node)

    @precondition(lambda self: any(self._can_finish(n) for n in self.nodes.values()))
    @rule(data=st.data())
    def node_finishes_leaving(self, data: st.DataObject) -> None:
        name = data.draw(
            st.sampled_from(sorted(n.name for n in self.nodes.values() if self._can_finish(n)))
        )
        self._finish_leaving(self.nodes[name])

    @precondition(lambda self: sum(1 for st_ in self.truth.values() if st_ == "up") >= 2)
    @rule(data=st.data())
    def node_crashes(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, s in self.truth.items() if s == "up")))
        node = self.nodes[name]
        node.alive = False
        del self.truth[name]  # downed: the next script run sees it gone
        self.version += 1
        held = [h.message for h in node.sm.drop_all()]
        for shard in node.shards.values():
            held += [item[1] for kind, item in shard.mailbox if kind == "env"]
            held += [item[1] for item in shard.buffer]
        for _kind, _s, leftover in node.from_shards:
            held += [item[1] for item in leftover]
        for job in node.io:
            if job[0] == STREAM:
                held += [item[1] for item in job[2]]
        self.lost.update(held)
        # Its leases expire (the survivors acquire them after lease_ttl). What it sent
        # stays in flight (the receivers' inboxes keep it).
        for s, holder in list(self.lease.items()):
            if holder == name:
                del self.lease[s]
        node.shards.clear()

    @precondition(lambda self: any(n.alive and not n.left for n in self.nodes.values()))
    @rule(data=st.data())
    def region_restarts(self, data: st.DataObject) -> None:
        # The region actor failed and its supervisor restarted it (_region._Kept): its
        # state machine, I/O queue and channels go on; its local shards stop (what
        # they did not deliver is dead letters, their leases are released) and a
        # hand-off report they sent before is stale (its leftover: dead letters);
        # the new instance takes them as stopped.
        name = data.draw(
            st.sampled_from(sorted(n.name for n in self.nodes.values() if n.alive and not n.left))
        )
        node = self.nodes[name]
        self._stop_local_shards(node)
        node.sm.restarted()
        self.restarts += 1
        self._run(node)

    # -- checks ----------------------------------------------------------------------------
    @invariant()
    def one_place_per_shard(self) -> None:
        for s in range(N_SHARDS):
            running = [
                n.name
                for n in self.nodes.values()
                if n.alive and s in n.shards and n.shards[s].leased
            ]
            assert len(running) <= 1, f"shard {s} runs on {running}"

    def teardown(self) -> None:
        # Let everything settle: tables read, channels empty, shards acquire and hand
        # off, leaving nodes finish; then nothing may be held anywhere.
        for _ in range(300):
            progressed = False
            for node in list(self.nodes.values()):
                if node.alive:
                    node.io.append(("read",))
            for node in list(self.nodes.values()):
                while node.alive and (node.io or node.replies):
                    progressed = True
                    if node.io:
                        self._io(node)
                    while node.replies:
                        node.sm.table(node.replies.popleft())
                        self._run(node)
            for key, q in list(self.channels.items()):
                while q:
                    progressed = True
                    self._net(key)
            for node in list(self.nodes.values()):
                if not node.alive:
                    continue
                while node.from_shards:
                    progressed = True
                    self._region_hears(node)
                for shard in list(node.shards.values()):
                    while node.shards.get(shard.s) is shard and self._shard_step(node, shard):
                        progressed = True
                if self._can_finish(node):
                    progressed = True
                    self._finish_leaving(node)
            settled = not self.table.moving and not any(
                n.alive and (n.leaving or n.sm.held) for n in self.nodes.values()
            )
            if not progressed and settled:
                break
        # The reads of the settle loop count as progress: stop on a settled world.
        assert not self.table.moving, f"moves never completed: {self.table.moving}"
        for node in self.nodes.values():
            if node.alive:
                assert not node.sm.held, f"{node.name} still holds {node.sm.held}"
                assert not node.leaving, f"{node.name} never finished its leave"
                for shard in node.shards.values():
                    assert not shard.buffer and not shard.mailbox, f"{node.name} shard {shard.s}"
        assert not self.table.streams or not any(self.table.streams.values()), (
            f"hand-over streams never taken: {self.table.streams}"
        )
        missing = [m for m in self.sent if m not in self.delivered and m not in self.dead]
        missing = [m for m in missing if m not in self.lost]
        assert not missing, f"silently lost: {missing}"
        # What the run explored (pytest --hypothesis-show-statistics).
        event(f"flips: {_bucket(self.table.flips)}")
        event(f"delivered from a hand-over stream: {_bucket(self.from_stream)}")
        event(f"dead letters: {_bucket(len(self.dead))}")
        event(f"crashes: {sum(1 for n in self.nodes.values() if not n.alive and not n.left)}")
        event(f"leaves: {sum(1 for n in self.nodes.values() if n.left)}")
        event(f"region restarts: {_bucket(self.restarts)}")
        event(f"hand-over appends refused: {_bucket(self.refused)}")
        event(f"nodes: {len(self.nodes)}")
        event(f"sent: {_bucket(len(self.sent))}")


def _bucket(n: int) -> str:
    return "0" if n == 0 else "1-2" if n < 3 else "3+"


# CI runs a derandomized, bounded number of examples; GACTORS_MODEL_EXAMPLES=N runs N
# random ones (e.g. 20000 locally).
_EXAMPLES = int(os.environ.get("GACTORS_MODEL_EXAMPLES", "0"))
ShardingModel.TestCase.settings = settings(
    max_examples=_EXAMPLES or 300,
    stateful_step_count=120,
    derandomize=not _EXAMPLES,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestShardingModel = pytest.mark.timeout(600 + _EXAMPLES // 5)(ShardingModel.TestCase)

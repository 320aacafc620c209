"""The order of a node's reads and sends around a reply (the remote ask's latency):
the answer an actor tells while processing a question goes out before the node's
reader sends its next read, so that the read's packing and system calls are not on
the reply's path. Two nodes in this process, on a real Redis-protocol server; the
reader's and the outbox's methods are wrapped to record the order of their calls
(they still do their work)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

from gactors import Actor, ActorSystem, Props
from gactors.testkit import dilated

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from gactors.cluster import Cluster, _transport
from gactors.cluster._access import cluster_node
from gactors.cluster._redis_inbox import _RedisInboxReader, _RedisOutbox

pytestmark = [pytest.mark.timeout(60)]

FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0}


class Echo(Actor):
    def receive(self, message: Any) -> None:
        self.sender.tell(message)


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(what, node) in call order: "read" when a read starts, "got" when it returns
    batches, "send" when the outbox sends to ``node``."""
    log: list[tuple[str, str]] = []
    read, send = _RedisInboxReader.read, _RedisOutbox.send

    def spy_read(self: _RedisInboxReader, block_ms: int, count: int) -> list[bytes]:
        log.append(("read", self._key))
        batches = read(self, block_ms, count)
        if batches:
            log.append(("got", self._key))
        return batches

    def spy_send(self: _RedisOutbox, batches: Any, max_unread: int = 10_000) -> list[int]:
        for node, _ in batches:
            log.append(("send", node))
        return send(self, batches, max_unread)

    monkeypatch.setattr(_RedisInboxReader, "read", spy_read)
    monkeypatch.setattr(_RedisOutbox, "send", spy_send)
    return log


@pytest.fixture
def two_systems(
    redis_url: str, events: list[tuple[str, str]]
) -> Iterator[tuple[ActorSystem, ActorSystem]]:
    name = f"o{uuid.uuid4().hex[:10]}"
    a = ActorSystem(name, config={"cluster": dict(FAST, url=redis_url)})
    b = ActorSystem(name, config={"cluster": dict(FAST, url=redis_url)})
    try:
        deadline = time.monotonic() + dilated(10)
        while len(Cluster(a).members) < 2 or len(Cluster(b).members) < 2:
            assert time.monotonic() < deadline, "the nodes never saw each other"
            time.sleep(0.05)
        yield a, b
    finally:
        for s in (a, b):
            s.terminate()
            s.await_termination(10)


def test_the_answer_is_sent_before_the_answering_node_reads_again(
    two_systems: tuple[ActorSystem, ActorSystem], events: list[tuple[str, str]]
) -> None:
    a, b = two_systems
    b.actor_of(Props(Echo), "echo")
    node_a, node_b = cluster_node(a), cluster_node(b)
    echo = a.actor_selection(f"{Cluster(b).self_address}/user/echo").resolve_one(5.0)
    assert echo.ask("warm-up", timeout=5) == "warm-up"
    inbox_b = node_b.backend.inbox_key(node_b.node_id)
    for i in range(5):
        del events[:]
        assert echo.ask(i, timeout=5) == i
        # B's reader got the question; B's next step is sending the answer to A,
        # not sending its next read.
        mine = [e for e in events if e[1] == inbox_b or e == ("send", node_a.node_id)]
        got = mine.index(("got", inbox_b))
        assert mine[got + 1] == ("send", node_a.node_id), mine


# A large inbox entry is delivered in slices (gactors.cluster._transport._DELIVER_SLICE)
# with a yield between them, so that what its recipients tell meanwhile goes out
# before the whole entry is delivered: the remote tell's pipeline (docs/performance.md,
# "Where the remote tell waited").
# The tests use slices of SLICE records (smaller than the default, so that the
# dispatcher's own yields, every few thousand messages, cannot pass for them).
SLICE = 1024
BIG = 4 * SLICE


@pytest.fixture
def slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_transport, "_DELIVER_SLICE", SLICE)


class Sink(Actor):
    """Records what it gets (in order); acknowledges every SLICE."""

    def __init__(self, got: list[Any]) -> None:
        self.got = got

    def receive(self, message: Any) -> None:
        self.got.append(message)
        if len(self.got) % SLICE == 0:
            self.sender.tell(("ack", len(self.got)))


class Acks(Actor):
    def __init__(self, acks: list[Any]) -> None:
        self.acks = acks

    def receive(self, message: Any) -> None:
        self.acks.append(message)


def _wait_for(what: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + dilated(timeout)
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_large_entry_is_acknowledged_while_it_is_delivered(
    two_systems: tuple[ActorSystem, ActorSystem],
    events: list[tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    slices: None,
) -> None:
    a, b = two_systems
    got: list[Any] = []
    acks: list[Any] = []
    b.actor_of(Props(Sink, got), "sink")
    node_a = cluster_node(a)
    sink = a.actor_selection(f"{Cluster(b).self_address}/user/sink").resolve_one(5.0)
    me = a.actor_of(Props(Acks, acks))
    # How many messages the sink had when each flush of B to A went out.
    at_send: list[int] = []
    send = _RedisOutbox.send

    def spy_send(self: _RedisOutbox, batches: Any, max_unread: int = 10_000) -> list[int]:
        if any(node == node_a.node_id for node, _ in batches):
            at_send.append(len(got))
        return send(self, batches, max_unread)

    monkeypatch.setattr(_RedisOutbox, "send", spy_send)
    del events[:]
    for i in range(BIG):  # no yield: one flush, one entry
        sink.tell(i, sender=me)
    _wait_for(lambda: len(acks) == BIG // SLICE)
    inbox_b = cluster_node(b).backend.inbox_key(cluster_node(b).node_id)
    assert events.count(("got", inbox_b)) == 1, "the messages did not travel as one entry"
    # In order, each once, across the slices.
    assert got == list(range(BIG))
    assert acks == [("ack", n) for n in range(SLICE, BIG + 1, SLICE)]
    # The first acknowledgement left B after the first slice or the second, while the
    # entry was still being delivered. Delivered whole, the entry sat in the sink's
    # mailbox and B's worker ran it until its next yield to the hub (it looks at its
    # clock every 32 batches of up to 100 messages): 2,900 of the 4,096 in the run
    # without slices, before the flusher could send the first acknowledgement.
    assert at_send[0] <= 2 * SLICE, at_send


def test_a_reader_killed_between_slices_delivers_the_rest_of_its_entry(
    two_systems: tuple[ActorSystem, ActorSystem], slices: None
) -> None:
    a, b = two_systems
    got: list[Any] = []
    b.actor_of(Props(Sink, got), "sink")
    node_a, node_b = cluster_node(a), cluster_node(b)
    sink = a.actor_selection(f"{Cluster(b).self_address}/user/sink").resolve_one(5.0)
    n = 3 * SLICE + 5
    records = [node_a.codec.user_record_to(sink.wire, i, None) for i in range(n)]
    [(entry, count)] = node_a.codec.split_batches(records)
    assert count == n
    g = gevent.spawn(node_b._deliver_batch, entry)
    # Runs the first slice and stops at the yield after it.
    gevent.sleep(0)
    assert not g.dead
    g.kill(block=True, timeout=5)
    assert g.dead
    # Nothing of the entry is lost: the rest was delivered before the kill took effect.
    _wait_for(lambda: len(got) == n)
    assert got == list(range(n))

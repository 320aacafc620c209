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

import pytest

from gactors import Actor, ActorSystem, Props
from gactors.testkit import dilated

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from gactors.cluster import Cluster
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

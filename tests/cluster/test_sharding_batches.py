"""Entity messages between regions in batches (issue 27), with the nodes in this
process: a batch carrying messages for several entities of one shard, from several
senders, arrives in order with each message's sender; a batch for a shard that is
moving is held and forwarded, every message accounted for (delivered or a dead letter).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from gactors import Actor, ActorSystem, DeadLetter, Props
from gactors.cluster import ClusterSharding, ShardingEnvelope
from gactors.cluster._sharding import shard_of

pytestmark = [pytest.mark.timeout(90)]

FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0, "lease_ttl": 1.5}

# What the entities of each test got, by entity id: (message, sender's name).
# Every node runs in this process, so an entity that moved keeps one log.
GOT: dict[str, list[tuple[Any, str]]] = {}
# The nodes each entity ran on.
RAN_ON: dict[str, set[str]] = {}


class Logged(Actor):
    """An entity: logs each message with its sender's name in GOT."""

    def receive(self, m: Any) -> None:
        if m == "ping":
            self.sender.tell("pong")
            return
        snd = self.context.sender
        RAN_ON.setdefault(self.context.entity_id or "", set()).add(str(self.context.system.address))
        GOT.setdefault(self.context.entity_id or "", []).append((m, snd.path.name))


class Streamer(Actor):
    """On ``(first, last, entity ids)``: tells the entities ``(own name, k)`` for k in
    first..last-1, round robin (this actor is the sender)."""

    def receive(self, m: Any) -> None:
        first, last, ids = m
        sharding = ClusterSharding(self.context.system)
        refs = [sharding.entity_ref("log", e) for e in ids]
        name = self.ref.path.name
        for k in range(first, last):
            for r in refs:
                r.tell((name, k))


class DeadCount(Actor):
    """Counts the dead letters of the messages ("main", k) on one node."""

    def __init__(self) -> None:
        self.n = 0

    def receive(self, m: Any) -> None:
        if m == "n":
            self.sender.tell(self.n)
        elif isinstance(m, DeadLetter) and type(m.message) is tuple and m.message[:1] == ("main",):
            self.n += 1


class Nodes:
    def __init__(self, url: str) -> None:
        self.url = url
        self.name = f"b{uuid.uuid4().hex[:10]}"
        self.systems: list[ActorSystem] = []
        self.dead: list[Any] = []

    def start(self, host: bool, shards: int) -> ActorSystem:
        roles = ["host"] if host else []
        system = ActorSystem(self.name, config={"cluster": dict(FAST, url=self.url, roles=roles)})
        self.systems.append(system)
        counter = system.actor_of(Props(DeadCount), "dead")
        system.event_stream.subscribe(counter, DeadLetter)
        self.dead.append(counter)
        sharding = ClusterSharding(system)
        if host:
            sharding.start(
                "log",
                Props(Logged),
                number_of_shards=shards,
                role="host",
                passivate_idle_after=None,
            )
        else:
            sharding.start_proxy("log", number_of_shards=shards, role="host")
        return system

    def dead_letters(self) -> int:
        return sum(c.ask("n", timeout=10) for c in self.dead)

    def close(self) -> None:
        for s in reversed(self.systems):
            s.terminate()
            s.await_termination(15)


@pytest.fixture
def nodes(redis_url: str) -> Iterator[Nodes]:
    GOT.clear()
    RAN_ON.clear()
    n = Nodes(redis_url)
    try:
        yield n
    finally:
        n.close()
        GOT.clear()
        RAN_ON.clear()


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


def test_a_batch_for_several_entities_of_a_shard_keeps_order_and_senders(nodes: Nodes) -> None:
    nodes.start(host=True, shards=4)
    client = nodes.start(host=False, shards=4)
    sharding = ClusterSharding(client)
    # Six entities of one shard (its slice of every batch holds several entities)
    # and two of other shards.
    names = [f"e{i}" for i in range(200)]
    same = [e for e in names if shard_of(e, 4) == 0][:6]
    others = [e for e in names if shard_of(e, 4) != 0][:2]
    ids = same + others
    for e in ids:
        assert sharding.entity_ref("log", e).ask("ping", timeout=20) == "pong"
    a = client.actor_of(Props(Streamer), "a")
    b = client.actor_of(Props(Streamer), "b")
    n = 300
    # Chunks from a, b and this greenlet (no sender: the entity sees deadLetters)
    # interleave in the client's region.
    for first in range(0, n, 50):
        a.tell((first, first + 50, ids), None)
        b.tell((first, first + 50, ids), None)
        for k in range(first, first + 50):
            for e in ids:
                sharding.entity_ref("log", e).tell(("main", k))
        gevent.sleep(0)
    wait_for(lambda: all(len(GOT.get(e, [])) >= 3 * n for e in ids), 30, "every message")
    for e in ids:
        got = GOT[e]
        assert len(got) == 3 * n, f"{e}: {len(got)} messages, {3 * n} sent"
        for who, sender in (("a", "a"), ("b", "b"), ("main", "deadLetters")):
            mine = [(m, s) for m, s in got if m[0] == who]
            assert [m[1] for m, _ in mine] == list(range(n)), f"{e}: {who}'s out of order"
            assert {s for _, s in mine} == {sender}, f"{e}: {who}'s with the wrong sender"


def test_batches_for_a_moving_shard_are_held_and_forwarded_without_loss(nodes: Nodes) -> None:
    shards = 10
    nodes.start(host=True, shards=shards)
    client = nodes.start(host=False, shards=shards)
    sharding = ClusterSharding(client)
    ids = [f"m{i}" for i in range(30)]
    for e in ids:
        assert sharding.entity_ref("log", e).ask("ping", timeout=20) == "pong"
    refs = [sharding.entity_ref("log", e) for e in ids]
    sent = 0
    joined_at = None
    t0 = time.monotonic()
    # Batches stream to the one host while a second host joins and takes shards.
    while time.monotonic() - t0 < 4.0:
        for r in refs:
            r.tell(("main", sent))
        sent += 1
        if joined_at is None and time.monotonic() - t0 > 0.5:
            nodes.start(host=True, shards=shards)
            joined_at = time.monotonic()
        gevent.sleep(0.002)
    sent *= len(ids)

    def delivered() -> int:
        return sum(len(GOT.get(e, [])) for e in ids)

    wait_for(lambda: delivered() + nodes.dead_letters() >= sent, 30, "every message accounted")
    time.sleep(0.5)  # nothing more arrives (no duplicate)
    dead = nodes.dead_letters()
    assert delivered() + dead == sent, f"{delivered()} delivered + {dead} dead letters != {sent}"
    for e in ids:
        ks = [m[1] for m, _ in GOT.get(e, [])]
        assert ks == sorted(ks), f"{e}: out of order"
        assert len(set(ks)) == len(ks), f"{e}: a message twice"
    moved = [e for e in ids if len(RAN_ON.get(e, ())) == 2]
    assert moved, "no entity moved to the new host while messages streamed"


def test_envelopes_taken_in_bulk_count_as_processed(nodes: Nodes) -> None:
    # The region takes the envelopes queued behind the one it runs from its mailbox
    # itself; the dashboard's and the metrics' count of messages run includes them.
    from gactors._observer import observer_for

    client = nodes.start(host=False, shards=4)  # no host: the region holds them
    observer = observer_for(client)
    region = ClusterSharding(client).shard_region("log")
    before = observer.processed()
    for k in range(1000):
        region.tell(ShardingEnvelope(f"e{k % 7}", ("main", k)), None)
    wait_for(lambda: observer.processed() - before >= 1000, 10, "1000 counted")

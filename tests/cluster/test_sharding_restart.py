"""A sharding region whose actor fails is restarted by its supervisor with its protocol
state intact (issue 24, review item 8): the allocation table still counts its
registration and acks, what it held and gathered goes on, its shards keep running, so
a restart while shards move loses nothing and reorders nothing. The nodes run in this
process (``test_sharding_batches``' helpers); the failure is injected into the region
actor's ``receive``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from cluster.test_sharding_batches import GOT, RAN_ON, Nodes, wait_for
from gactors import Actor, ActorRef, ActorSystem, DeadLetter, Props, Terminated
from gactors.cluster import ClusterSharding, ShardingEnvelope
from gactors.cluster._access import cluster_node
from gactors.cluster._sharding._handover import DRAIN, DRAINED, HAND_OFF, PLAN, START
from gactors.cluster._sharding._region import _Region

pytestmark = [pytest.mark.timeout(120)]


class Watcher(Actor):
    """Watches a ref; answers "stopped" with whether it terminated."""

    def __init__(self, ref: ActorRef) -> None:
        self.gone = False
        self.dead: list[Any] = []
        self.context.watch(ref)

    def receive(self, m: Any) -> None:
        if isinstance(m, Terminated):
            self.gone = True
        elif isinstance(m, DeadLetter):
            inner = m.message
            self.dead.append(inner.message if isinstance(inner, ShardingEnvelope) else inner)
        elif m == "stopped":
            self.sender.tell(self.gone)
        elif m == "dead":
            self.sender.tell(list(self.dead))


class Boom:
    """Makes a region fail (injected by the ``failing_regions`` fixture): in its
    ``receive`` at once, or (``in_command``) in the next hand-over command it carries
    out (a drain, a hand-off, a confirmation, a plan, a shard start), so that the
    commands after it wait for the restarted instance."""

    def __init__(self, in_command: bool) -> None:
        self.in_command = in_command


@pytest.fixture
def failing_regions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    failed: list[str] = []
    armed: set[str] = set()
    receive = _Region.receive
    command = _Region._command

    def fail_on_boom(self: _Region, m: Any) -> None:
        if type(m) is Boom:
            if m.in_command:
                armed.add(self._node_id)
                return
            failed.append(self._node_id)
            raise RuntimeError("injected region failure (test)")
        receive(self, m)

    def fail_in_command(self: _Region, c: tuple[Any, ...]) -> None:
        if self._node_id in armed and c[0] in (DRAIN, HAND_OFF, DRAINED, PLAN, START):
            armed.discard(self._node_id)
            failed.append(self._node_id)
            raise RuntimeError(f"injected region failure in command {c[0]} (test)")
        command(self, c)

    monkeypatch.setattr(_Region, "receive", fail_on_boom)
    monkeypatch.setattr(_Region, "_command", fail_in_command)
    yield failed


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


def _registered(system: ActorSystem) -> dict[str, bool]:
    store = cluster_node(system).backend.allocations()
    try:
        table = store.sync("log")
        assert table is not None  # a read without a snapshot gets the table
        return dict(table.registered)
    finally:
        store.close()


@pytest.mark.parametrize("in_command", [False, True], ids=["in-receive", "in-a-command"])
def test_a_region_restarted_while_shards_move_loses_and_reorders_nothing(
    nodes: Nodes, failing_regions: list[str], in_command: bool
) -> None:
    shards = 10
    host_a = nodes.start(host=True, shards=shards)
    client = nodes.start(host=False, shards=shards)
    sharding = ClusterSharding(client)
    ids = [f"r{i}" for i in range(30)]
    for e in ids:
        assert sharding.entity_ref("log", e).ask("ping", timeout=20) == "pong"
    refs = [sharding.entity_ref("log", e) for e in ids]
    client_region = sharding.shard_region("log")
    a_region = ClusterSharding(host_a).shard_region("log")
    sent = 0
    host_b: ActorSystem | None = None
    t0 = time.monotonic()
    booms = 0
    # Messages stream from the client while a second host joins and takes shards over;
    # meanwhile the client's region (which holds and hands over) and the first host's
    # (which hands its shards off) fail and are restarted, several times.
    while time.monotonic() - t0 < 5.0:
        for r in refs:
            r.tell(("main", sent))
        sent += 1
        elapsed = time.monotonic() - t0
        if host_b is None and elapsed > 0.5:
            host_b = nodes.start(host=True, shards=shards)
        if booms < int(elapsed / 0.4):
            booms += 1
            (client_region if booms % 2 else a_region).tell(Boom(in_command), None)
        gevent.sleep(0.002)
    sent *= len(ids)
    assert host_b is not None
    # A failure in a command needs a move under way on that node: at least the join's.
    assert len(failing_regions) >= (1 if in_command else 8), f"failures: {failing_regions}"

    def delivered() -> int:
        return sum(len(GOT.get(e, [])) for e in ids)

    wait_for(lambda: delivered() + nodes.dead_letters() >= sent, 40, "every message accounted")
    time.sleep(0.5)  # nothing more arrives (no duplicate)
    dead = nodes.dead_letters()
    # What a local shard had not delivered when a restart stopped it is a dead letter;
    # nothing else is lost (what the region held and gathered goes on).
    assert delivered() + dead == sent, f"{delivered()} delivered + {dead} dead letters != {sent}"
    for e in ids:
        ks = [m[1] for m, _ in GOT.get(e, [])]
        assert ks == sorted(ks), f"{e}: out of order"
        assert len(set(ks)) == len(ks), f"{e}: a message twice"
    assert any(len(RAN_ON.get(e, ())) == 2 for e in ids), "no entity moved to the new host"
    # The restarted regions are still registered (a restart is not a stop) ...
    registered = _registered(client)
    for system in (host_a, client, host_b):
        assert cluster_node(system).node_id in registered, f"{registered}"
    # ... and still route: a message after the restarts arrives.
    for e in ids[:5]:
        assert sharding.entity_ref("log", e).ask("ping", timeout=20) == "pong"


def test_a_region_with_another_number_of_shards_stops_with_a_clear_error(
    nodes: Nodes, caplog: pytest.LogCaptureFixture
) -> None:
    first = nodes.start(host=True, shards=10)
    sharding = ClusterSharding(first)
    assert sharding.entity_ref("log", "x").ask("ping", timeout=20) == "pong"
    second = nodes.start(host=True, shards=12)
    region = ClusterSharding(second).shard_region("log")
    probe = second.actor_of(Props(Watcher, region), "watcher")
    wait_for(lambda: probe.ask("stopped", timeout=5), 20, "the mismatched region stops")
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any(
        "number_of_shards=12 here, but the cluster's allocation table of the type has 10" in e
        for e in errors
    ), errors
    # What is sent to it is a dead letter, never delivered by a wrongly mapped shard.
    second.event_stream.subscribe(probe, DeadLetter)
    ClusterSharding(second).entity_ref("log", "x").tell(("main", 0))
    wait_for(lambda: probe.ask("dead", timeout=5) == [("main", 0)], 10, "a dead letter")
    assert GOT.get("x") is None, "delivered by a region with the wrong number of shards"
    # The first node's region is untouched, and only it is registered.
    assert sharding.entity_ref("log", "x").ask("ping", timeout=20) == "pong"
    assert set(_registered(first)) == {cluster_node(first).node_id}

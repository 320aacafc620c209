"""The cluster on a real Redis Cluster (3 masters, 3 replicas; issue 27).

The core cases of the cluster suite run here unchanged, on ``redis+cluster://``: this
module collects them from their own modules (membership, remote tell/ask, remote
DeathWatch after a SIGKILL, singleton failover, sharding rebalance, a persistent
entity) and overrides ``redis_url`` with the Redis Cluster's URL, so that they prove
the same promises on it. A reminder test of its own, and the key layout (every key
the cluster writes, by slot) complete it. The failover of a master is in
``test_redis_cluster_failover.py``.
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

# The cases, collected here with this module's `redis_url` (tests/ is on sys.path:
# pytest's rootdir-based import of the test packages).
from cluster.test_cluster import (
    test_membership_events_and_subscribe,
    test_remote_ask_tell_forward_and_sender,
    test_sigkill_terminates_watched_actors_within_the_bound,
    two,
    world,
)
from cluster.test_sharding import (
    shards,
    test_rebalance_on_join_moves_only_the_shards_the_new_node_wins,
)
from cluster.test_sharding_alloc_store import (
    alloc,
    test_a_move_flips_once_every_registered_member_acked_it,
    test_a_removed_member_needs_no_ack_and_a_new_region_counts_as_acked,
    test_a_table_started_anew_drops_the_old_numbering_s_hand_over_streams,
    test_the_hand_over_stream_keeps_order_and_is_taken_once,
)
from cluster.test_singleton import (
    nodes,
    test_failover_after_sigkill_once_the_lease_expired,
)
from persistence.test_redis_cluster import (
    node,
    test_an_entity_persists_under_its_default_id_with_its_shard_token,
)

from gactors import Actor, ActorSystem, Props
from gactors.cluster import ClusterSharding
from gactors.cluster._redis import RedisBackend
from gactors.persistence import AtomicWrite, PersistenceConflict
from gactors.persistence._redis_store import RedisStore
from gactors.reminders import Reminders
from gactors.testkit._redis_cluster import RedisClusterServer, command, key_slot

__all__ = [
    "alloc",
    "node",
    "nodes",
    "shards",
    "test_a_move_flips_once_every_registered_member_acked_it",
    "test_a_removed_member_needs_no_ack_and_a_new_region_counts_as_acked",
    "test_a_table_started_anew_drops_the_old_numbering_s_hand_over_streams",
    "test_an_entity_persists_under_its_default_id_with_its_shard_token",
    "test_failover_after_sigkill_once_the_lease_expired",
    "test_membership_events_and_subscribe",
    "test_rebalance_on_join_moves_only_the_shards_the_new_node_wins",
    "test_remote_ask_tell_forward_and_sender",
    "test_sigkill_terminates_watched_actors_within_the_bound",
    "test_the_hand_over_stream_keeps_order_and_is_taken_once",
    "two",
    "world",
]

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisClusterServer]:
    with RedisClusterServer(node_timeout_ms=2000) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def redis_url(redis_cluster: RedisClusterServer) -> str:
    """The Redis Cluster's URL, for every case collected above."""
    return redis_cluster.url


# -- a reminder ----------------------------------------------------------------------------

FIRED: list[tuple[float, Any]] = []


class Ticket(Actor):
    def receive(self, message: Any) -> None:
        FIRED.append((time.time(), message))


def test_a_reminder_fires_on_the_redis_cluster(redis_url: str) -> None:
    FIRED.clear()
    system = ActorSystem(
        f"rc{uuid.uuid4().hex[:10]}",
        config={
            "cluster": {"url": redis_url, "heartbeat_interval": 0.2, "lease_ttl": 1.5},
            "reminders": {"tick": 0.2},
        },
    )
    try:
        ClusterSharding(system).start("ticket", Props(Ticket), number_of_shards=8)
        start = time.time()
        Reminders(system).register("ring", "ring", entity=("ticket", "t1"), due=0.5, period=0.4)
        deadline = time.monotonic() + 15
        while len(FIRED) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(FIRED) >= 3, FIRED
        assert all(m == "ring" for _, m in FIRED)
        assert FIRED[0][0] >= start + 0.5 - 0.01
        assert Reminders(system).unregister("ring", entity=("ticket", "t1"))
    finally:
        system.terminate()
        system.await_termination(15)


# -- the key layout ------------------------------------------------------------------------


def test_every_key_of_a_node_is_where_the_layout_says(
    redis_cluster: RedisClusterServer, redis_url: str
) -> None:
    # A node with sharding, a lease and an inbox: the control keys share one slot,
    # each inbox and each lease has its own (so they spread over the masters).
    name = f"rk{uuid.uuid4().hex[:8]}"
    cluster = {"url": redis_url, "heartbeat_interval": 0.2, "lease_ttl": 1.5}
    system = ActorSystem(name, config={"cluster": cluster})
    try:
        ClusterSharding(system).start("cart", Props(Ticket), number_of_shards=16)
        for i in range(16):
            ClusterSharding(system).entity_ref("cart", f"c{i}").tell("hi")
        deadline = time.monotonic() + 15
        keys: list[bytes] = []
        while time.monotonic() < deadline:
            keys = []
            for port in {p for _, _, p in redis_cluster.slot_map()}:
                keys.extend(command(port, "KEYS", f"*{name}*"))
            if len([k for k in keys if k.endswith(b":lease")]) >= 8:
                break
            time.sleep(0.1)
        control = {key_slot(k) for k in keys if k.startswith(b"{gactors:%s}" % name.encode())}
        assert len(control) == 1, keys
        leases = [k for k in keys if k.endswith((b":lease", b":fence"))]
        assert len(leases) >= 16, keys
        # A lease and its fence share their slot (the scripts touch both).
        for k in leases:
            if k.endswith(b":lease"):
                assert key_slot(k) == key_slot(k[: -len(b"lease")] + b"fence")
        lease_slots = {key_slot(k) for k in leases}
        assert len(lease_slots) >= 8, "leases spread over slots"
        masters = {
            p for f, last, p in redis_cluster.slot_map() for s in lease_slots if f <= s <= last
        }
        assert len(masters) >= 2, "and over masters"
        assert any(b":inbox:" in k for k in keys)
    finally:
        system.terminate()
        system.await_termination(15)


# -- persistence's batched writes over the masters -------------------------------------------


def test_a_batch_of_writes_over_every_master_with_wait_replicas_and_a_forgotten_script(
    redis_cluster: RedisClusterServer, redis_url: str
) -> None:
    # One batch writes 30 ids (their slots on every master) in one exchange, WAIT
    # last: the WAIT goes to each master written to and counts its replica. After
    # SCRIPT FLUSH on every master the scripts are loaded where the writes go.
    backend = RedisBackend(redis_url, f"rp{uuid.uuid4().hex[:8]}")
    store = RedisStore(backend, wait_replicas=1, timeout=5.0)
    try:
        ids = [f"acct-{i}" for i in range(30)]
        masters = {redis_cluster.master_of("{" + pid + "}") for pid in ids}
        assert len(masters) == 3
        first = store.write_batch([AtomicWrite(pid, 0, None, (b"a",), 1.0) for pid in ids])
        assert first == [None] * 30
        for port in masters:
            assert command(port, "SCRIPT", "FLUSH") == b"OK"
        second = store.write_batch([AtomicWrite(pid, 1, None, (b"b",), 2.0) for pid in ids])
        assert second == [None] * 30
        for pid in ids:
            assert [e.payload for e in store.replay(pid, 1, None, None)] == [b"a", b"b"]
        assert sorted(store.persistence_ids()) == sorted(ids)
        # A write after the wrong sequence number is refused as on one server.
        (conflict,) = store.write_batch([AtomicWrite(ids[0], 1, None, (b"c",), 3.0)])
        assert isinstance(conflict, PersistenceConflict)
    finally:
        store.close()
        backend.close()


def test_greenlets_beyond_the_pool_wait_for_a_connection(redis_url: str) -> None:
    # As on one server, a pool is shared by the greenlets of a thread: those beyond
    # its size wait for a connection instead of failing (a renewal that failed for
    # want of a connection would cost its lease).
    backend = RedisBackend(redis_url, f"rw{uuid.uuid4().hex[:8]}")
    store = backend.leases(max_connections=1)
    try:
        assert store.holder("warm-up") is None
        jobs = [gevent.spawn(store.acquire, f"l{i % 3}", f"o{i}", 5000) for i in range(30)]
        gevent.joinall(jobs, timeout=20)
        assert [j.exception for j in jobs if j.exception] == []
        assert sum(1 for j in jobs if j.value) == 3  # one grant per lease
    finally:
        backend.close()

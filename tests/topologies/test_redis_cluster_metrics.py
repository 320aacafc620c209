"""The inbox backlog and the timed inbox read of issue 28 on a real Redis Cluster (3
masters): ``XINFO GROUPS`` in the heartbeat's pipeline is routed to the inbox's slot."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("redis")

from gactors.cluster._redis import RedisBackend
from gactors.testkit._redis_cluster import RedisClusterServer

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisClusterServer]:
    with RedisClusterServer(node_timeout_ms=2000) as cluster:
        yield cluster


def test_the_inbox_backlog_on_a_redis_cluster(redis_cluster: RedisClusterServer) -> None:
    backend = RedisBackend(redis_cluster.url, cluster_name=f"m{uuid.uuid4().hex[:8]}")
    store = backend.membership()
    outbox = backend.outbox()
    reader = backend.inbox_reader("n1", max_block_ms=100)
    try:
        store.join("n1", [])
        assert outbox.send([("n1", b"a"), ("n1", b"b"), ("n1", b"c")]) == [1, 1, 1]
        assert store.heartbeat("n1", 1000, 5000, backlog=True).inbox_backlog == 3
        assert reader.read(100, 2) == [b"a", b"b"]
        assert reader.read(100, 2) == [b"c"] and reader.last_round_trip is not None
        assert store.heartbeat("n1", 1000, 5000, backlog=True).inbox_backlog == 0
    finally:
        for part in (reader, outbox, store):
            part.close()
        backend.close()

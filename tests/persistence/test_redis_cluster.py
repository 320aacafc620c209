"""Persistent singletons and sharded entities on a cluster node: the redis store is the
default (on the cluster's server), the default persistence ids are
``"singleton|<name>"`` and ``"<type_name>|<entity_id>"``, and every write carries the
lease's fencing token, so a write with an older token is refused by the store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gactors import ActorSystem, Props
from gactors.cluster import ClusterSharding, ClusterSingleton
from gactors.persistence import AtomicWrite, FencedError, Persistence, PersistentActor
from gactors.persistence._redis_store import RedisStore
from gactors.testkit import TestProbe

pytestmark = [pytest.mark.timeout(60)]

T = 15.0


class Counter(PersistentActor):
    """``("add", n)`` persists n; ``"get"`` answers (total, seq, token)."""

    def __init__(self) -> None:
        self.total = 0

    def receive_recover(self, event: Any) -> None:
        if isinstance(event, int):
            self.total += event

    def receive_command(self, message: Any) -> None:
        if message == "get":
            self.sender.tell((self.total, self.last_sequence_nr, self.context.fencing_token))
        elif isinstance(message, tuple) and message[0] == "add":
            self.persist(message[1], self._added)

    def _added(self, n: int) -> None:
        self.total += n
        self.sender.tell(("added", self.last_sequence_nr))


@pytest.fixture
def node(redis_url: str) -> Iterator[ActorSystem]:
    system = ActorSystem(f"pc{uuid.uuid4().hex[:10]}", config={"cluster": {"url": redis_url}})
    try:
        yield system
    finally:
        system.terminate()
        assert system.await_termination(30)


def _use(probe: TestProbe, ref: Any) -> tuple[int, int, int]:
    for n in (1, 2, 3):
        probe.send(ref, ("add", n))
        assert probe.receive_one(T)[0] == "added"
    probe.send(ref, "get")
    return probe.receive_one(T)  # type: ignore[no-any-return]


def _check_fenced(store: RedisStore, pid: str, seq: int, token: int) -> None:
    # The store keeps the lease's token: a write with an older one is refused.
    (stale,) = store.write_batch([AtomicWrite(pid, seq, token - 1, (b"x",), 0.0)])
    assert isinstance(stale, FencedError), stale
    assert store.highest_sequence_nr(pid) == seq


def test_a_singleton_persists_under_its_default_id_with_its_lease_token(node: ActorSystem) -> None:
    proxy = ClusterSingleton(node).init("allocator", Props(Counter))
    total, seq, token = _use(TestProbe(node), proxy)
    assert (total, seq) == (6, 3)
    assert isinstance(token, int) and token > 0
    store = Persistence.get(node).journal
    assert isinstance(store, RedisStore)  # the default on a cluster node
    pid = "singleton|allocator"
    assert [e.sequence_nr for e in store.replay(pid, 1, None, None)] == [1, 2, 3]
    _check_fenced(store, pid, seq, token)


def test_an_entity_persists_under_its_default_id_with_its_shard_token(node: ActorSystem) -> None:
    ClusterSharding(node).start("Cart", Props(Counter))
    ref = ClusterSharding(node).entity_ref("Cart", "c-7")
    total, seq, token = _use(TestProbe(node), ref)
    assert (total, seq) == (6, 3)
    assert isinstance(token, int) and token > 0
    store = Persistence.get(node).journal
    pid = "Cart|c-7"
    assert [e.sequence_nr for e in store.replay(pid, 1, None, None)] == [1, 2, 3]
    _check_fenced(store, pid, seq, token)

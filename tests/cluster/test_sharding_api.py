"""The singleton and sharding API in one node (this process): arguments, errors,
``entity_props`` as a callable, context fields of ordinary actors."""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import gevent
import gevent.event
import pytest

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from gactors import Actor, ActorSystem, DeadLetter, PoisonPill, Props
from gactors.cluster import (
    ClusterError,
    ClusterSharding,
    ClusterSingleton,
    EntityRef,
    ShardingEnvelope,
)
from gactors.cluster._sharding import allocate, shard_of
from gactors.testkit import TestProbe

pytestmark = [pytest.mark.timeout(60)]

FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0, "lease_ttl": 1.5}


class Who(Actor):
    def __init__(self, tag: str = "") -> None:
        self.tag = tag

    def receive(self, m: Any) -> None:
        c = self.context
        self.sender.tell((self.tag, c.entity_id, c.fencing_token, str(self.ref.path)))


@pytest.fixture
def node(redis_url: str) -> Iterator[ActorSystem]:
    system = ActorSystem(
        f"a{uuid.uuid4().hex[:10]}",
        config={"cluster": dict(FAST, url=redis_url, roles=["host"])},
    )
    try:
        yield system
    finally:
        system.terminate()
        system.await_termination(15)


def test_same_objects_and_errors_without_cluster() -> None:
    plain = ActorSystem("plain")
    try:
        with pytest.raises(ClusterError):
            ClusterSharding(plain)
        with pytest.raises(ClusterError):
            ClusterSingleton(plain)
        ref = plain.actor_of(Props(Who), "w")
        # Ordinary actors: no entity id, no token.
        assert ref.ask("x", timeout=5)[1:3] == (None, None)
    finally:
        plain.terminate()
        plain.await_termination(5)


def test_entity_props_callable_and_entity_ref(node: ActorSystem) -> None:
    sharding = ClusterSharding(node)
    assert ClusterSharding(node) is sharding
    region = sharding.start(
        "acct",
        lambda eid: Props(Who, f"made-for-{eid}"),
        number_of_shards=7,
        role="host",
        passivate_idle_after=None,
    )
    assert sharding.start("acct", Props(Who)) is region, "started once per type"
    ref = sharding.entity_ref("acct", "alice/1")
    assert isinstance(ref, EntityRef) and ref == sharding.entity_ref("acct", "alice/1")
    tag, eid, token, path = ref.ask("hi", timeout=5)
    assert (tag, eid) == ("made-for-alice/1", "alice/1")
    assert isinstance(token, int)
    assert path.endswith(f"/system/sharding-acct/{shard_of('alice/1', 7)}/alice%2F1")
    # A ShardingEnvelope to the region is the same.
    assert region.ask(ShardingEnvelope("alice/1", "hi"), timeout=5)[3] == path
    assert repr(ref) == "EntityRef('acct', 'alice/1')"


class Caller(Actor):
    """Tells an entity through its EntityRef; the entity's reply comes back here."""

    def __init__(self, probe: Any) -> None:
        self.probe = probe

    def receive(self, m: Any) -> None:
        if isinstance(m, tuple) and m[0] == "call":
            ClusterSharding(self.context.system).entity_ref("acct2", m[1]).tell("hi")
        else:
            self.probe.tell(m)


def test_entity_ref_tell_from_an_actor_has_that_actor_as_sender(node: ActorSystem) -> None:
    ClusterSharding(node).start("acct2", Props(Who, "x"), passivate_idle_after=None)
    probe = TestProbe(node)
    caller = node.actor_of(Props(Caller, probe.ref), "caller")
    caller.tell(("call", "bob"), None)
    reply = probe.expect_msg_type(tuple, 10)
    assert reply[:2] == ("x", "bob")


def test_bad_arguments_raise_clear_errors(node: ActorSystem) -> None:
    sharding = ClusterSharding(node)
    with pytest.raises(ValueError, match="type_name"):
        sharding.start("", Props(Who))
    with pytest.raises(ValueError, match="number_of_shards"):
        sharding.start("t", Props(Who), number_of_shards=0)
    with pytest.raises(ValueError, match="passivate_idle_after"):
        sharding.start("t", Props(Who), passivate_idle_after=-1)
    with pytest.raises(TypeError, match="entity_props"):
        sharding.start("t", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role 'other'"):
        sharding.start("t", Props(Who), role="other")
    with pytest.raises(ValueError, match="start_proxy"):
        sharding.start_proxy("t", role="host")  # this node hosts "host"
    with pytest.raises(ValueError, match="no sharding region"):
        sharding.entity_ref("never", "x")
    sharding.start("t", Props(Who), passivate_idle_after=None)
    with pytest.raises(TypeError, match="entity_id must be a str"):
        sharding.entity_ref("t", 5)  # type: ignore[arg-type]
    singleton = ClusterSingleton(node)
    with pytest.raises(ValueError, match="singleton name"):
        singleton.init("a/b", Props(Who))
    with pytest.raises(ValueError, match="buffer_size"):
        singleton.init("s", Props(Who), buffer_size=-1)
    with pytest.raises(TypeError, match="Props"):
        singleton.init("s", Who)  # type: ignore[arg-type]


def test_a_message_without_entity_id_is_a_dead_letter(node: ActorSystem) -> None:
    region = ClusterSharding(node).start("d", Props(Who), passivate_idle_after=None)
    probe = TestProbe(node)
    node.event_stream.subscribe(probe.ref, DeadLetter)
    region.tell("no envelope", None)
    dl = probe.expect_msg_type(DeadLetter, 5)
    assert dl.message == "no envelope"


def test_singleton_in_one_node_with_its_token(node: ActorSystem) -> None:
    proxy = ClusterSingleton(node).init("one", Props(Who, "single"))
    assert ClusterSingleton(node).init("one", Props(Who, "single")) is proxy
    tag, eid, token, path = proxy.ask("hi", timeout=10)
    assert (tag, eid) == ("single", None) and isinstance(token, int)
    assert path.endswith("/system/singletonManager-one/singleton")


def test_rendezvous_allocation_is_stable_and_minimal() -> None:
    nodes = ["n1", "n2", "n3"]
    a = allocate("t", 100, nodes)
    assert a == allocate("t", 100, list(reversed(nodes))), "order of the view does not matter"
    assert set(a) == set(nodes)
    b = allocate("t", 100, [*nodes, "n4"])
    assert all(y == "n4" for x, y in zip(a, b, strict=True) if x != y)
    c = allocate("t", 100, ["n1", "n3"])
    assert all(x == "n2" for x, y in zip(a, c, strict=True) if x != y)
    # crc32, not Python's per-process hash: the same shard on every node.
    assert shard_of("user-1", 100) == zlib.crc32(b"user-1") % 100


class Recorder(Actor):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, m: Any) -> None:
        if m == "get":
            self.sender.tell(list(self.seen))
        else:
            self.seen.append(m)


def test_batches_to_another_node_keep_order_and_dead_letter_what_cannot_travel(
    redis_url: str,
) -> None:
    # A sending-only node (start_proxy) forwards in batches to the host's region: the
    # order per entity holds across batches, and a message that cannot be serialized
    # is a dead letter on the sending node while the rest of its batch arrives.
    name = f"b{uuid.uuid4().hex[:10]}"
    host = ActorSystem(name, config={"cluster": dict(FAST, url=redis_url, roles=["host"])})
    client = ActorSystem(name, config={"cluster": dict(FAST, url=redis_url)})
    try:
        ClusterSharding(host).start("rec", Props(Recorder), role="host", passivate_idle_after=None)
        region = ClusterSharding(client).start_proxy("rec", role="host")
        probe = TestProbe(client)
        client.event_stream.subscribe(probe.ref, DeadLetter)
        refs = [ClusterSharding(client).entity_ref("rec", f"e{i}") for i in range(5)]
        assert refs[0].ask("get", timeout=20) == []  # the host is known and runs
        bad = object()
        for n in range(2000):
            refs[n % 5].tell(n)
            if n == 777:
                region.tell(ShardingEnvelope("e2", bad), None)
        dl = probe.expect_msg_type(DeadLetter, 10)
        assert dl.message is bad
        for i, r in enumerate(refs):
            assert r.ask("get", timeout=20) == list(range(i, 2000, 5))
    finally:
        for s in (client, host):
            s.terminate()
            s.await_termination(15)


class Lingers(Actor):
    """Answers ("got", m); ignores its stop message, so it never passivates."""

    def receive(self, m: Any) -> None:
        if m != "bye":
            self.sender.tell(("got", m))


def test_messages_waiting_for_a_passivating_entity_are_dead_letters_if_its_shard_stops(
    node: ActorSystem,
) -> None:
    region = ClusterSharding(node).start(
        "linger", Props(Lingers), passivate_idle_after=0.3, stop_message="bye"
    )
    assert region.ask(ShardingEnvelope("e1", "hello"), timeout=10) == ("got", "hello")
    # Idle past passivate_idle_after: the shard told it "bye", and waits for its
    # termination, which never comes; what arrives for it meanwhile waits too.
    gevent.sleep(1.5)
    probe = TestProbe(node)
    node.event_stream.subscribe(probe.ref, DeadLetter)
    for i in range(3):
        region.tell(ShardingEnvelope("e1", i), probe.ref)
    probe.expect_no_message(0.5)  # neither answered nor dead letters yet: they wait
    region.tell(PoisonPill, None)  # the region, its shard and the entity stop
    got: list[Any] = []
    deadline = time.monotonic() + 10
    while len(got) < 3 and time.monotonic() < deadline:
        dl = probe.expect_msg_type(DeadLetter, max(0.1, deadline - time.monotonic()))
        if dl.message in (0, 1, 2):
            got.append(dl.message)
    assert got == [0, 1, 2]  # not lost silently, and in order


_BYE = gevent.event.Event()


class SlowStop(Actor):
    """Counts what it gets; on its stop message it stops itself 0.5 s later."""

    def __init__(self) -> None:
        self.n = 0

    def receive(self, m: Any) -> None:
        if m == "bye":
            _BYE.set()
            self.timers.start_single_timer("stop", "now", 0.5)
        elif m == "now":
            self.context.stop(self.ref)
        else:
            self.n += 1
            self.sender.tell((m, self.n))


def test_a_message_for_a_passivating_entity_starts_it_again(node: ActorSystem) -> None:
    region = ClusterSharding(node).start(
        "slowstop", Props(SlowStop), passivate_idle_after=0.3, stop_message="bye"
    )
    probe = TestProbe(node)
    node.event_stream.subscribe(probe.ref, DeadLetter)
    region.tell(ShardingEnvelope("e1", "a"), probe.ref)
    assert probe.expect_msg(("a", 1), 10) == ("a", 1)
    # Idle: told "bye" after 0.3 s, terminated 0.5 s after that. A message in that
    # window waits for the termination and goes to a new incarnation (count 1), not
    # into the old one's mailbox behind its stop message.
    assert _BYE.wait(10)
    region.tell(ShardingEnvelope("e1", "b"), probe.ref)
    assert probe.expect_msg(("b", 1), 10) == ("b", 1)

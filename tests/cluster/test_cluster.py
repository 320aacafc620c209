"""The cluster (SPEC section 17) end to end: a node in the test process and nodes in
processes of their own (``_nodeproc.py``), on a real Redis-protocol server.

The failure detector runs with short settings (``FAST``); time bounds are generous
(the machine is shared) and only what the design promises is asserted.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gactors import Actor, ActorSystem, DeadLetter, Identify, Props, Terminated
from gactors._messages import ActorIdentity
from gactors.cluster._extension import cluster_node
from gactors.exceptions import ConfigError
from gactors.testkit import TestProbe, dilated

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from gactors.cluster import (
    ActorNotFound,
    Address,
    Cluster,
    ClusterError,
    CurrentClusterState,
    MemberRemoved,
    MemberUp,
    ReachableMember,
    RemoteActorRef,
    RemoteError,
    SerializationError,
    UnreachableMember,
)

from ._nodeproc import NodeProc, Order

pytestmark = [pytest.mark.timeout(120)]

FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0}
DETECTION_BOUND = FAST["down_after"] + 2 * FAST["heartbeat_interval"]
# What the shared machine may add to a bound (scheduling, process start-up).
SLACK = 3.0


def _name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class NotRegistered:
    x: int


class Forwarder(Actor):
    def receive(self, m: Any) -> None:
        if isinstance(m, tuple) and m[0] == "fwd":
            m[1].forward(m[2])


class World:
    """A node in this process plus one node process, in one cluster."""

    def __init__(self, url: str, **cluster: Any) -> None:
        self.name = _name()
        settings = dict(FAST, **cluster)
        self.system = ActorSystem(self.name, config={"cluster": dict(settings, url=url)})
        self.procs: list[NodeProc] = []
        self.url = url
        self.settings = settings

    def spawn_node(self, **cluster: Any) -> NodeProc:
        proc = NodeProc(self.url, self.name, **dict(self.settings, **cluster))
        self.procs.append(proc)
        return proc

    def probe(self) -> TestProbe:
        return TestProbe(self.system)

    def close(self) -> None:
        self.system.terminate()
        self.system.await_termination(10)
        for p in self.procs:
            p.close()


@pytest.fixture
def world(redis_url: str) -> Iterator[World]:
    w = World(redis_url)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def two(world: World) -> tuple[World, NodeProc]:
    return world, world.spawn_node()


def wait_member(
    system: ActorSystem, address: str, present: bool = True, timeout: float = 10.0
) -> None:
    deadline = time.monotonic() + dilated(timeout)
    while time.monotonic() < deadline:
        addrs = {str(m.address) for m in Cluster(system).members}
        if (address in addrs) == present:
            return
        time.sleep(0.05)
    raise AssertionError(f"{address} {'never joined' if present else 'still a member'}")


# -- no cluster, no cost ------------------------------------------------------------------------
def test_a_system_without_cluster_imports_nothing_of_it() -> None:
    code = (
        "import sys\n"
        "import gactors\n"
        "s = gactors.ActorSystem('plain')\n"
        "s.terminate(); s.await_termination(5)\n"
        "bad = [m for m in ('gactors.cluster', 'redis', 'msgspec') if m in sys.modules]\n"
        "print('loaded:', bad, str(s.address), str(gactors.ActorPath('plain', ('user', 'a'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "loaded: [] gactors://plain gactors://plain/user/a" in out


def test_paths_without_cluster_are_unchanged(actor_system: ActorSystem) -> None:
    ref = actor_system.actor_of(Props(Forwarder), "f")
    assert str(ref.path) == f"gactors://{actor_system.name}/user/f"
    assert ref.path.address == Address(actor_system.name)
    assert ref.path.address.node is None
    with pytest.raises(ClusterError, match="not a cluster node"):
        Cluster(actor_system)


def test_address_and_path_parsing() -> None:
    from gactors import ActorPath

    a = Address("shop", "n1")
    assert str(a) == "gactors://shop@n1" and str(Address("shop")) == "gactors://shop"
    assert Address.parse("gactors://shop@n1") == a and hash(a) == hash(Address("shop", "n1"))
    assert a != Address("shop", "n2")
    p = ActorPath.parse("gactors://shop@n1/user/a", "shop")
    assert p.address == a and str(p) == "gactors://shop@n1/user/a"
    assert p.path_str == "/user/a" and str(p.child("b")) == "gactors://shop@n1/user/a/b"
    assert p != ActorPath.parse("gactors://shop/user/a", "shop")
    assert p != ActorPath.parse("gactors://shop@n2/user/a", "shop")
    with pytest.raises(ValueError, match="empty node"):
        ActorPath.parse("gactors://shop@/user/a", "shop")


def test_actor_selection_of_local_paths(actor_system: ActorSystem) -> None:
    ref = actor_system.actor_of(Props(Forwarder), "f")
    sel = actor_system.actor_selection(f"gactors://{actor_system.name}/user/f")
    assert sel.resolve_one(1.0) == ref
    with pytest.raises(ActorNotFound, match="no actor at"):
        actor_system.actor_selection("/user/missing").resolve_one(1.0)
    probe = TestProbe(actor_system)
    actor_system.actor_selection("/user/f").tell(("fwd", probe.ref, "via selection"))
    assert probe.expect_msg("via selection") == "via selection"


# -- settings and start-up errors -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({"url": "redis://x", "colour": 1}, "cluster.colour"),
        ({"url": 5}, "cluster.url"),
        ({"url": "http://x"}, "cluster.url"),
        ({}, "cluster.url"),
        ({"url": "redis://x", "roles": "a"}, "cluster.roles"),
        ({"url": "redis://x", "heartbeat_interval": "1"}, "cluster.heartbeat_interval"),
        ({"url": "redis://x", "down_after": -1}, "cluster.down_after"),
        ({"url": "redis://x", "max_message_size": 1.5}, "cluster.max_message_size"),
        ({"url": "redis://x", "key_prefix": "a{b}"}, "cluster.key_prefix"),
        ({"url": "redis://x", "unreachable_after": 20.0}, "cluster.unreachable_after"),
        ("redis://x", "'cluster' must be a table"),
    ],
)
def test_config_errors_name_the_key(table: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ActorSystem("bad", config={"cluster": table})


def test_unreachable_redis_raises_cluster_error_without_the_password() -> None:
    with pytest.raises(ClusterError) as info:
        ActorSystem("x", config={"cluster": {"url": "redis://ada:s3cr3t@127.0.0.1:1/0"}})
    text = str(info.value)
    assert "127.0.0.1:1" in text and "unreachable" in text
    assert "s3cr3t" not in text


# -- two nodes ------------------------------------------------------------------------------------
def test_cluster_object_members_and_roles(redis_url: str) -> None:
    w = World(redis_url, roles=["web"])
    try:
        c = Cluster(w.system)
        assert Cluster(w.system) is c
        assert c.self_address == w.system.address and c.self_address.node
        assert c.self_member.roles == ("web",) and c.self_member.status == "up"
        node = w.spawn_node(roles=["worker"])
        wait_member(w.system, node.address)
        roles = {str(m.address): m.roles for m in c.members}
        assert roles[node.address] == ("worker",)
        assert str(w.system.actor_of(Props(Forwarder), "f").path).startswith(
            f"gactors://{w.name}@{c.self_address.node}/user/f"
        )
    finally:
        w.close()


def test_remote_ask_tell_forward_and_sender(two: tuple[World, NodeProc]) -> None:
    world, node = two
    system = world.system
    echo = system.actor_selection(node.path("echo")).resolve_one(10.0)
    assert type(echo) is RemoteActorRef
    assert str(echo.path) == node.path("echo")
    assert echo == system.actor_selection(node.path("echo")).resolve_one(5.0)
    assert echo.ask("hi", timeout=5) == ("echo", "hi")
    assert echo.ask(("seq", 1), timeout=5) == ("echo", ("seq", 1))  # a tuple stays a tuple
    assert echo.ask(Order("tea", 2), timeout=5) == ("echo", Order("tea", 2))
    probe = world.probe()
    echo.tell("one-way", probe.ref)
    assert probe.expect_msg(("echo", "one-way")) == ("echo", "one-way")
    assert probe.last_sender == echo
    # forward across nodes keeps the original sender (the probe)
    other = world.probe()
    echo.tell(("fwd", other.ref, "forwarded"), probe.ref)
    other.expect_msg("forwarded")
    assert other.last_sender == probe.ref
    # refs at any depth come back as the same local ref
    deep = {"k": [(probe.ref, frozenset({1}))]}
    reply = echo.ask(deep, timeout=5)
    assert reply == ("echo", deep) and reply[1]["k"][0][0] is probe.ref
    echo.tell(("tell", probe.ref, "deep"), None)
    probe.expect_msg("deep")
    assert probe.last_sender == echo
    # the sender kept by the remote actor works after the exchange
    echo.tell(("reply-later", 7), probe.ref)
    echo.tell("flush", None)
    probe.expect_msg(("later", 7))
    # order per sender/receiver pair
    for i in range(500):
        echo.tell(i, probe.ref)
    got = [probe.receive_one(10)[1] for _ in range(500)]
    assert got == list(range(500))


def test_selection_identify_and_not_found(two: tuple[World, NodeProc]) -> None:
    world, node = two
    system = world.system
    probe = world.probe()
    system.actor_selection(node.path("echo")).tell(Identify("id-1"), probe.ref)
    ident = probe.expect_msg_type(ActorIdentity, timeout=10)
    assert ident.correlation_id == "id-1" and ident.ref is not None
    assert str(ident.ref.path) == node.path("echo")
    system.actor_selection(node.path("nobody")).tell(Identify("id-2"), probe.ref)
    ident = probe.expect_msg_type(ActorIdentity, timeout=10)
    assert ident.correlation_id == "id-2" and ident.ref is None
    with pytest.raises(ActorNotFound, match="nobody"):
        system.actor_selection(node.path("nobody")).resolve_one(5.0)
    assert system.actor_selection(node.path("echo")).ask("sel", timeout=5) == ("echo", "sel")
    assert system.lookup(node.path("echo")) is None  # lookup stays local


def test_serialization_errors_at_tell_time(two: tuple[World, NodeProc]) -> None:
    world, node = two
    echo = world.system.actor_selection(node.path("echo")).resolve_one(10.0)
    with pytest.raises(SerializationError, match=r"function|lambda"):
        echo.tell(lambda: 1)
    with pytest.raises(SerializationError, match="NotRegistered"):
        echo.tell(NotRegistered(1))
    with pytest.raises(SerializationError, match="NotRegistered"):
        echo.ask(NotRegistered(1), timeout=2)
    with pytest.raises(TypeError):  # SerializationError is a TypeError too
        echo.tell({"nested": [object()]})
    assert echo.ask("still fine", timeout=5) == ("echo", "still fine")


def test_remote_ask_failure_raises_remote_error(two: tuple[World, NodeProc]) -> None:
    world, node = two
    echo = world.system.actor_selection(node.path("echo")).resolve_one(10.0)
    t0 = time.monotonic()
    with pytest.raises(RemoteError) as info:
        echo.ask("boom", timeout=8)
    assert time.monotonic() - t0 < 5  # the failure, not the timeout
    assert info.value.type_name.endswith("ValueError")
    assert "boom on purpose" in str(info.value)


def test_ask_from_a_foreign_thread(two: tuple[World, NodeProc]) -> None:
    from gactors._threads import allocate_lock, start_new_thread

    world, node = two
    echo = world.system.actor_selection(node.path("echo")).resolve_one(10.0)
    box: list[Any] = []
    done = allocate_lock()
    done.acquire()

    def run() -> None:
        try:
            box.append(echo.ask("from a thread", timeout=10))
        except BaseException as e:
            box.append(e)
        finally:
            done.release()

    start_new_thread(run, ())
    deadline = time.monotonic() + dilated(15)
    while not done.acquire(False):
        assert time.monotonic() < deadline, "the thread's ask never finished"
        time.sleep(0.02)
    assert box == [("echo", "from a thread")]


def test_dead_letters_for_unknown_recipient_and_non_member(two: tuple[World, NodeProc]) -> None:
    world, node = two
    system = world.system
    probe = world.probe()
    system.event_stream.subscribe(probe.ref, DeadLetter)
    # the other node tells a path of this node where nothing lives
    local = f"{Cluster(system).self_address}/user/nobody-here"
    assert node.command(cmd="tell", path=local, message="lost")["ok"]
    dl = probe.fish_for_message(lambda m: isinstance(m, DeadLetter) and m.message == "lost", 10)
    assert str(dl.recipient.path) == local
    # a node that is not a member: a dead letter on the sender at once
    gone = f"gactors://{world.name}@no-such-node-1/user/x"
    system.actor_selection(gone).tell("nowhere", None)
    dl = probe.fish_for_message(lambda m: isinstance(m, DeadLetter) and m.message == "nowhere", 10)
    assert str(dl.recipient.path) == gone


# -- remote DeathWatch -----------------------------------------------------------------------------
def test_watch_remote_actor_stopping_and_nonexistent(two: tuple[World, NodeProc]) -> None:
    world, node = two
    system = world.system
    node.command(cmd="spawn", name="victim")
    victim = system.actor_selection(node.path("victim")).resolve_one(10.0)
    probe = world.probe()
    probe.watch(victim)
    time.sleep(0.3)  # the watch travels before the stop
    node.command(cmd="stop", name="victim")
    t = probe.expect_terminated(victim, timeout=10)
    assert (t.existence_confirmed, t.address_terminated) == (True, False)
    # watching an actor that is not there: Terminated(ref, False, False)
    probe.watch(victim)
    t = probe.expect_terminated(victim, timeout=10)
    assert (t.existence_confirmed, t.address_terminated) == (False, False)


def test_remote_node_watches_a_local_actor(two: tuple[World, NodeProc]) -> None:
    world, node = two
    local = world.system.actor_of(Props(Forwarder), "watched")
    assert node.command(cmd="watch", path=str(local.path))["ok"]
    time.sleep(0.5)  # the watch (a system record) travels before the stop
    world.system.stop(local)
    line = node.wait_for("event", 10)
    assert line is not None and line["path"] == str(local.path)
    assert (line["existence_confirmed"], line["address_terminated"]) == (True, False)


def test_sigkill_terminates_watched_actors_within_the_bound(world: World) -> None:
    node = world.spawn_node()
    system = world.system
    probe = world.probe()
    Cluster(system).subscribe(probe.ref, MemberRemoved)
    probe.expect_msg_type(CurrentClusterState, timeout=5)
    echo = system.actor_selection(node.path("echo")).resolve_one(10.0)
    watcher = system.actor_selection(node.path("watcher")).resolve_one(10.0)
    probe.watch(echo)
    probe.watch(watcher)
    assert echo.ask("alive", timeout=5) == ("echo", "alive")
    time.sleep(0.3)
    killed = time.monotonic()
    node.signal(signal.SIGKILL)
    got: dict[Any, Terminated] = {}
    removed = None
    while len(got) < 2 or removed is None:
        m = probe.receive_one(DETECTION_BOUND + SLACK + 5)
        if type(m) is Terminated:
            got[m.actor] = m
            elapsed = time.monotonic() - killed
        elif isinstance(m, MemberRemoved):
            removed = m
    assert set(got) == {echo, watcher}
    assert all(t.existence_confirmed and t.address_terminated for t in got.values())
    assert str(removed.member.address) == node.address
    # SIGKILL comes at most one beat after the last heartbeat
    logging.getLogger(__name__).warning(
        "SIGKILL -> Terminated(address_terminated) in %.2f s (bound %.1f s + one beat)",
        elapsed,
        DETECTION_BOUND,
    )
    assert elapsed <= DETECTION_BOUND + FAST["heartbeat_interval"] + SLACK
    # sending to the removed node is a dead letter on this node
    dl = world.probe()
    system.event_stream.subscribe(dl.ref, DeadLetter)
    echo.tell("after death", None)
    dl.fish_for_message(lambda m: isinstance(m, DeadLetter) and m.message == "after death", 5)
    # watching an actor of a removed node: terminated at once
    probe.watch(echo)
    t = probe.expect_terminated(echo, timeout=5)
    assert t.address_terminated


def test_node_paused_past_down_after_terminates_itself(world: World) -> None:
    node = world.spawn_node()
    system = world.system
    wait_member(system, node.address)
    node.signal(signal.SIGSTOP)
    try:
        wait_member(system, node.address, present=False, timeout=FAST["down_after"] + 10)
    finally:
        node.signal(signal.SIGCONT)
    line = node.wait_for("terminated", 20)
    assert line is not None, node.log()
    assert "removed from the cluster" in (line["reason"] or "")
    assert node.proc.wait(10) == 0
    assert "terminating actor system" in node.log()


# -- membership events, leave, down ---------------------------------------------------------------
def test_membership_events_and_subscribe(world: World) -> None:
    system = world.system
    probe = world.probe()
    c = Cluster(system)
    c.subscribe(probe.ref)
    state = probe.expect_msg_type(CurrentClusterState, timeout=5)
    assert [str(m.address) for m in state.members] == [str(c.self_address)]
    assert state.unreachable == ()
    stream = world.probe()
    system.event_stream.subscribe(stream.ref, MemberUp)
    node = world.spawn_node(unreachable_after=1.0, down_after=4.0)
    up = probe.fish_for_message(lambda m: isinstance(m, MemberUp), 10)
    assert str(up.member.address) == node.address and up.member.status == "up"
    stream.fish_for_message(
        lambda m: isinstance(m, MemberUp) and str(m.member.address) == node.address, 10
    )
    # paused longer than unreachable_after, shorter than down_after
    node.signal(signal.SIGSTOP)
    try:
        un = probe.fish_for_message(lambda m: isinstance(m, UnreachableMember), 10)
        assert str(un.member.address) == node.address and un.member.status == "unreachable"
        assert any(m.status == "unreachable" for m in c.members)
    finally:
        node.signal(signal.SIGCONT)
    re = probe.fish_for_message(lambda m: isinstance(m, ReachableMember), 10)
    assert str(re.member.address) == node.address
    # graceful leave
    assert node.command(cmd="leave")["ok"]
    rm = probe.fish_for_message(lambda m: isinstance(m, MemberRemoved), 10)
    assert str(rm.member.address) == node.address and rm.member.status == "removed"
    line = node.wait_for("terminated", 10)
    assert line is not None and line["reason"] is None
    c.unsubscribe(probe.ref)


def test_down_removes_a_node_which_then_terminates(world: World) -> None:
    system = world.system
    node = world.spawn_node()
    wait_member(system, node.address)
    echo = system.actor_selection(node.path("echo")).resolve_one(10.0)
    probe = world.probe()
    probe.watch(echo)
    time.sleep(0.2)
    assert Cluster(system).down(node.address) is True
    t = probe.expect_terminated(echo, timeout=5)
    assert t.address_terminated
    assert node.wait_for("terminated", 15) is not None, node.log()
    assert str(node.address) not in {str(m.address) for m in Cluster(system).members}


def test_terminate_leaves_gracefully(redis_url: str) -> None:
    a = World(redis_url)
    b_sys = ActorSystem(a.name, config={"cluster": dict(FAST, url=redis_url)})
    try:
        probe = a.probe()
        Cluster(a.system).subscribe(probe.ref, MemberRemoved)
        wait_member(a.system, str(b_sys.address))
        b_sys.terminate()
        assert b_sys.await_termination(10)
        t0 = time.monotonic()
        rm = probe.fish_for_message(lambda m: isinstance(m, MemberRemoved), 10)
        assert rm.member.address == b_sys.address
        # a graceful leave is seen at the next beat, long before down_after
        assert time.monotonic() - t0 < FAST["down_after"] + SLACK
    finally:
        b_sys.terminate()
        a.close()


def test_messages_from_a_removed_node_are_quarantined(redis_url: str) -> None:
    name = _name()
    cfg_a = {
        "url": redis_url,
        "heartbeat_interval": 1.0,
        "unreachable_after": 5.0,
        "down_after": 10.0,
    }
    # b beats rarely: after it was downed it keeps sending for a while, unaware
    cfg_b = {
        "url": redis_url,
        "heartbeat_interval": 4.0,
        "unreachable_after": 8.0,
        "down_after": 16.0,
    }
    a = ActorSystem(name, config={"cluster": cfg_a})
    b = ActorSystem(name, config={"cluster": cfg_b})
    try:
        target = TestProbe(a)
        b_probe = TestProbe(b)
        path = str(target.ref.path)
        b.actor_selection(path).tell("before", b_probe.ref)
        target.expect_msg("before", timeout=5)
        dead = TestProbe(a)
        a.event_stream.subscribe(dead.ref, DeadLetter)
        assert Cluster(a).down(b.address) is True
        b.actor_selection(path).tell("after", b_probe.ref)
        dl = dead.fish_for_message(lambda m: isinstance(m, DeadLetter) and m.message == "after", 5)
        assert str(dl.recipient.path) == path
        target.expect_no_message(0.3)
        # b finds out at its next heartbeat and terminates itself
        assert b.await_termination(15)
        assert "removed from the cluster" in (cluster_node(b).termination_reason or "")
    finally:
        b.terminate()
        a.terminate()
        a.await_termination(10)


def _in_thread(fn: Any) -> Any:
    """Run ``fn`` in a real OS thread; its result (or exception) once it finished."""
    from gactors._threads import allocate_lock, start_new_thread

    box: list[Any] = []
    done = allocate_lock()
    done.acquire()

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as e:
            box.append(e)
        finally:
            done.release()

    start_new_thread(run, ())
    deadline = time.monotonic() + dilated(15)
    while not done.acquire(False):
        assert time.monotonic() < deadline, "the thread never finished"
        time.sleep(0.02)
    return box[0]


def test_tell_and_down_from_a_foreign_thread(two: tuple[World, NodeProc]) -> None:
    world, node = two
    system = world.system
    echo = system.actor_selection(node.path("echo")).resolve_one(10.0)
    probe = world.probe()

    def tells() -> Any:
        for i in range(20):
            echo.tell(("thread", i), probe.ref)
        try:
            echo.tell(lambda: 0, None)
        except SerializationError as e:
            return e
        return None

    assert isinstance(_in_thread(tells), SerializationError)
    assert [probe.receive_one(10) for _ in range(20)] == [
        ("echo", ("thread", i)) for i in range(20)
    ]
    assert _in_thread(lambda: Cluster(system).down(node.address)) is True
    assert node.wait_for("terminated", 15) is not None


def test_a_sentinel_url_is_accepted_by_the_settings() -> None:
    from gactors.cluster._settings import load_cluster_settings

    url = "redis+sentinel://127.0.0.1:26379/mymaster/0"
    assert load_cluster_settings({"url": url}).url == url

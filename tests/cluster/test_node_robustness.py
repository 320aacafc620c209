"""The node under faults it must survive or handle by itself (SPEC 17, issue 15):
a blocked hub (the heartbeat thread beats only while the hub makes progress), a
Redis restart (reconnect with backoff, visible dead letters, no leaks)."""

from __future__ import annotations

import gc
import time
import uuid
from collections.abc import Iterator
from typing import Any

import gevent
import greenlet
import pytest

from gactors import ActorSystem, DeadLetter
from gactors.testkit import TestProbe, dilated

redis = pytest.importorskip("redis")
from gactors.cluster import Cluster, MemberRemoved, UnreachableMember  # noqa: E402
from gactors.cluster._extension import cluster_node  # noqa: E402
from gactors.testkit._redis_server import RedisServer  # noqa: E402

from ._nodeproc import NodeProc  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]

FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0}


def _name() -> str:
    return f"r{uuid.uuid4().hex[:10]}"


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + dilated(timeout)
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timeout waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def system_and_node(redis_url: str) -> Iterator[tuple[ActorSystem, NodeProc]]:
    name = _name()
    system = ActorSystem(name, config={"cluster": dict(FAST, url=redis_url)})
    node = NodeProc(redis_url, name, **FAST)
    try:
        _wait(lambda: len(Cluster(system).members) == 2, 10, "the node to join")
        yield system, node
    finally:
        node.close()
        system.terminate()
        system.await_termination(10)


def test_hub_blocked_briefly_keeps_the_node(system_and_node: tuple[ActorSystem, NodeProc]) -> None:
    system, node = system_and_node
    probe = TestProbe(system)
    Cluster(system).subscribe(probe.ref, MemberRemoved, UnreachableMember)
    probe.receive_one(5)  # CurrentClusterState
    # Shorter than unreachable_after: the heartbeat thread keeps beating meanwhile.
    assert node.command(cmd="block", seconds=0.7)["ok"]
    probe.expect_no_message(FAST["down_after"] + 1.0)
    echo = system.actor_selection(node.path("echo")).resolve_one(5.0)
    assert echo.ask("still here", timeout=5) == ("echo", "still here")


def test_hub_blocked_past_down_after_stops_beating_and_terminates(
    system_and_node: tuple[ActorSystem, NodeProc],
) -> None:
    system, node = system_and_node
    probe = TestProbe(system)
    Cluster(system).subscribe(probe.ref, MemberRemoved)
    probe.receive_one(5)  # CurrentClusterState
    # A hub blocked longer than unreachable_after: the thread stops its beats (a
    # thread beating for a dead hub would be a zombie member), so the others down it.
    node.proc.stdin.write('{"cmd": "block", "seconds": 5}\n')  # type: ignore[union-attr]
    node.proc.stdin.flush()  # type: ignore[union-attr]
    removed = probe.fish_for_message(lambda m: isinstance(m, MemberRemoved), 15)
    assert str(removed.member.address) == node.address
    line = node.wait_for("terminated", 20)
    assert line is not None and "removed from the cluster" in line["reason"], node.log()


def _clients(url: str, name: str | None = None) -> int:
    """Connections on the server (other than this one); with ``name``, those of the
    node whose client name it is (the server is shared by the whole session)."""
    c = redis.Redis.from_url(url)
    try:
        if name is None:
            return len(c.client_list()) - 1  # not this one
        return sum(1 for info in c.client_list() if info.get("name") == name)
    finally:
        c.close()


def test_terminate_leaks_no_greenlet_thread_or_connection(redis_url: str) -> None:
    system = ActorSystem(_name(), config={"cluster": dict(FAST, url=redis_url)})
    node = cluster_node(system)
    me = f"gactors:{system.name}@{node.node_id}"
    assert _clients(redis_url, me) >= 2  # at least the reader's and the heartbeat's
    system.terminate()
    assert system.await_termination(10)
    _wait(lambda: node._reader.dead and node._flusher.dead, 5, "the node's greenlets to end")
    assert not node._hb_running
    _wait(lambda: _clients(redis_url, me) == 0, 10, "the node's connections to close")


def test_redis_restart_reconnects_and_dead_letters_what_was_lost(
    redis_server: RedisServer,
) -> None:
    redis_server.stop()
    redis_server.persistent = True  # membership survives the restart
    redis_server.start()
    url = redis_server.url
    name = _name()
    cfg = {"heartbeat_interval": 0.2, "unreachable_after": 3.0, "down_after": 6.0}
    system = ActorSystem(name, config={"cluster": dict(cfg, url=url)})
    node = NodeProc(url, name, **cfg)
    try:
        echo = system.actor_selection(node.path("echo")).resolve_one(10.0)
        assert echo.ask("before", timeout=5) == ("echo", "before")
        probe = TestProbe(system)
        system.event_stream.subscribe(probe.ref, DeadLetter)
        greenlets_before = sum(1 for o in gc.get_objects() if isinstance(o, greenlet.greenlet))
        redis_server.stop()
        for i in range(50):
            echo.tell(("lost", i), None)
        gevent.sleep(0.5)
        dl = probe.fish_for_message(lambda m: isinstance(m, DeadLetter), 10)
        assert dl.message[0] == "lost"
        redis_server.start()
        # the node reconnects by itself (backoff <= 2 s) and traffic flows again
        deadline = time.monotonic() + dilated(20)
        while True:
            try:
                if echo.ask("after", timeout=2) == ("echo", "after"):
                    break
            except Exception:
                pass
            assert time.monotonic() < deadline, "no traffic after the restart"
        assert not system.is_terminated
        gc.collect()
        greenlets_after = sum(1 for o in gc.get_objects() if isinstance(o, greenlet.greenlet))
        assert greenlets_after <= greenlets_before + 5
    finally:
        node.close()
        system.terminate()
        system.await_termination(10)

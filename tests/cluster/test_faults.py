"""Fault tests of the cluster (SPEC section 17, issue 15): real processes, a real server.

Every fault here is one that production meets: a worker SIGKILLed mid-traffic, Redis
stopped and restarted under load (with and without persistence), a node paused past
``down_after``, garbage and oversized entries in an inbox, two clusters on one server,
``max_message_size`` on both sides, and credentials that must never show. The other
nodes are processes of their own (``_fault_node.py``) where the fault needs a process
(SIGKILL, SIGSTOP); the node under observation is an actor system in the test process.

The failure detector runs with short settings (``FAST``) so that a test takes seconds;
bounds are generous (the machine is shared), and what is asserted is what the design
promises, never a speed.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import greenlet
import pytest

from gactors import ActorSystem, DeadLetter, Terminated
from gactors.testkit import TestProbe, await_condition, dilated

redis = pytest.importorskip("redis")
msgspec = pytest.importorskip("msgspec")
cluster_mod = pytest.importorskip("gactors.cluster")
Cluster = cluster_mod.Cluster
MemberRemoved = cluster_mod.MemberRemoved
MemberUp = cluster_mod.MemberUp
ClusterError = cluster_mod.ClusterError
SerializationError = cluster_mod.SerializationError

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.timeout(120)]

NODE_SCRIPT = str(Path(__file__).resolve().parent / "_fault_node.py")
# A fast failure detector: unreachable after 1.5 s, down after 3 s.
FAST = {"heartbeat_interval": 0.25, "unreachable_after": 1.5, "down_after": 3.0}
DETECTION_BOUND = FAST["down_after"] + 2 * FAST["heartbeat_interval"]
# What the shared machine may add to a bound (scheduling, process start-up).
SLACK = 4.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class NodeProcess:
    """A node in its own process (``_fault_node.py``); its log is kept in a file."""

    def __init__(self, url: str, name: str, **cluster: Any) -> None:
        """Start the process and wait (bounded) until its node joined."""
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in close())
            prefix="gactors-node-", suffix=".log", delete=False
        )
        self.proc = subprocess.Popen(
            [sys.executable, NODE_SCRIPT, url, name, json.dumps(cluster)],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        line = self._readline(30.0)
        if not line:
            raise AssertionError(f"node process exited before joining:\n{self.log()}")
        info = json.loads(line)
        self.address: str = info["address"]
        self.pid: int = info["pid"]

    def _readline(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        with gevent.Timeout(dilated(timeout), False):
            return self.proc.stdout.readline()
        return ""

    def path(self, name: str) -> str:
        """The full path of ``/user/<name>`` on this node."""
        return f"{self.address}/user/{name}"

    def wait_terminated(self, timeout: float) -> bool:
        """True once the node said its system terminated and the process exited."""
        line = self._readline(timeout)
        if not line or not json.loads(line).get("terminated"):
            return False
        with gevent.Timeout(dilated(10.0), False):
            self.proc.wait()
            return True
        return False

    def log(self) -> str:
        """What the node logged so far."""
        return Path(self._log.name).read_text(errors="replace")

    def close(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and remove its log."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        with contextlib.suppress(OSError):
            os.unlink(self._log.name)


@contextlib.contextmanager
def node(name: str, url: str, **cluster: Any) -> Iterator[ActorSystem]:
    """A node in this process, terminated (and waited for) afterwards."""
    system = ActorSystem(name, config={"cluster": {"url": url, **cluster}})
    try:
        yield system
    finally:
        system.terminate()
        system.await_termination(dilated(30.0))


@contextlib.contextmanager
def node_process(url: str, name: str, **cluster: Any) -> Iterator[NodeProcess]:
    """A node in a process of its own, closed afterwards."""
    proc = NodeProcess(url, name, **cluster)
    try:
        yield proc
    finally:
        proc.close()


def dead_letters(system: ActorSystem) -> list[DeadLetter]:
    """A list that collects every DeadLetter published on ``system`` from now on."""
    seen: list[DeadLetter] = []
    system.event_stream.subscribe(seen.append, DeadLetter)
    return seen


def events(system: ActorSystem, cls: type) -> list[Any]:
    """A list that collects every ``cls`` event published on ``system`` from now on."""
    seen: list[Any] = []
    system.event_stream.subscribe(seen.append, cls)
    return seen


def member_addresses(system: ActorSystem) -> set[str]:
    """The addresses of the members ``system`` currently sees."""
    return {str(m.address) for m in Cluster(system).members}


def live_greenlets() -> int:
    """How many greenlets of this process are alive (started and not finished)."""
    return sum(1 for obj in gc.get_objects() if isinstance(obj, greenlet.greenlet) and not obj.dead)


def open_fds() -> int:
    """How many file descriptors this process has open (sockets included)."""
    return len(os.listdir("/proc/self/fd"))


def client_count(admin: Any) -> int:
    """Connections the server has, apart from ``admin``'s own."""
    return len(admin.client_list()) - 1


def inbox_key(system: ActorSystem) -> str:
    """The node's inbox stream (key layout: docs/cluster/operations.md)."""
    address = Cluster(system).self_address
    return f"gactors:{system.name}:inbox:{address.node}"


# ------------------------------------------------------------------------------- crash


def test_sigkilled_node_is_detected_in_time_and_its_messages_become_dead_letters(
    redis_url: str,
) -> None:
    name = _name("kill")
    with node(name, redis_url, **FAST) as system, node_process(redis_url, name, **FAST) as peer:
        probe = TestProbe(system)
        sink = system.actor_selection(peer.path("sink")).resolve_one(timeout=dilated(10.0))
        echo = system.actor_selection(peer.path("echo")).resolve_one(timeout=dilated(10.0))
        probe.watch(echo)
        assert echo.ask("up?", timeout=dilated(10.0)) == "up?"
        dead = dead_letters(system)

        # Traffic to the node while it dies: a greenlet keeps telling its sink.
        sent = [0]

        def traffic() -> None:
            while True:
                sink.tell(("t", sent[0]))
                sent[0] += 1
                gevent.sleep(0.002)

        pump = gevent.spawn(traffic)
        try:
            await_condition(
                lambda: sent[0] > 200, timeout=10.0, interval=0.05, message="traffic to the peer"
            )
            os.kill(peer.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            peer.proc.wait()
            msg = probe.expect_msg_type(Terminated, timeout=DETECTION_BOUND + SLACK)
            detected = time.monotonic() - killed_at
            assert msg.actor == echo
            assert msg.existence_confirmed is True
            assert msg.address_terminated is True
            assert detected <= DETECTION_BOUND + SLACK, detected
            assert peer.address not in member_addresses(system)
            # From now on every message to the dead node is a dead letter, here.
            before = sent[0]
            await_condition(
                lambda: sent[0] > before + 50, timeout=10.0, interval=0.05, message="more traffic"
            )
        finally:
            pump.kill()
        n = len(dead)
        for i in range(10):
            sink.tell(("after", i))
        await_condition(
            lambda: len(dead) >= n + 10,
            timeout=5.0,
            interval=0.05,
            message="dead letters for a removed node",
        )
        late = [d for d in dead[n:] if isinstance(d.message, tuple) and d.message[0] == "after"]
        assert len(late) == 10
        assert all(d.recipient == sink for d in late)


# --------------------------------------------------------------------- Redis restarts


def _traffic_during_outage(sink: Any, tag: str, stop: Callable[[], None], count: int = 200) -> None:
    """Tell ``count`` tagged messages spread over an outage that ``stop`` starts."""
    for i in range(count):
        if i == count // 10:
            stop()
        sink.tell((tag, i))
        gevent.sleep(0.005)


def test_redis_restart_with_persistence_keeps_the_members_and_leaks_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from gactors.testkit._redis_server import RedisServer, find_server_binary

    caplog.set_level(logging.WARNING)

    binary = find_server_binary()
    if binary is None:
        pytest.skip("this test runs its own server: no redis-server/valkey-server found")
    # Long enough a down_after that a restart of a second or two is survived.
    settings = {"heartbeat_interval": 0.25, "unreachable_after": 4.0, "down_after": 8.0}
    with RedisServer(binary, persistent=True) as server:
        url = server.url
        admin = redis.Redis.from_url(url)
        name = _name("persist")
        with node(name, url, **settings) as system, node_process(url, name, **settings) as peer:
            sink = system.actor_selection(peer.path("sink")).resolve_one(timeout=dilated(10.0))
            echo = system.actor_selection(peer.path("echo")).resolve_one(timeout=dilated(10.0))
            assert echo.ask("warm", timeout=dilated(10.0)) == "warm"
            await_condition(
                lambda: len(member_addresses(system)) == 2,
                timeout=10.0,
                interval=0.05,
                message="two members",
            )
            members = member_addresses(system)
            gevent.sleep(0.5)
            greenlets, fds, clients = live_greenlets(), open_fds(), client_count(admin)
            dead = dead_letters(system)

            _traffic_during_outage(sink, "outage", server.stop)
            gevent.sleep(1.0)
            server.start()
            admin = redis.Redis.from_url(url)

            # The cluster re-forms: the peer answers again, with the same members.
            def answers() -> bool:
                try:
                    return bool(echo.ask("back?", timeout=dilated(1.0)) == "back?")
                except Exception:
                    return False

            await_condition(
                answers, timeout=20.0, interval=0.05, message="the peer to answer after the restart"
            )
            assert member_addresses(system) == members
            assert peer.proc.poll() is None
            assert not system.is_terminated

            # What was sent during the outage: delivered or visibly dead-lettered.
            lost = [d for d in dead if isinstance(d.message, tuple) and d.message[0] == "outage"]
            delivered = sink.ask(("count", "outage"), timeout=dilated(10.0))
            assert lost, "messages sent while Redis was down must be dead letters"
            assert delivered <= 200
            assert delivered + len(lost) >= 200, (delivered, len(lost))

            # The flusher backed off (doubling delays, capped), it did not spin.
            delays = [
                float(m.group(1))
                for r in caplog.records
                if (m := re.search(r"retrying in ([0-9.]+) s", r.getMessage()))
            ]
            assert delays, "no failed flush was reported"
            assert delays == sorted(delays), delays
            assert max(delays) <= 2.0, delays
            assert len(delays) <= 12, f"{len(delays)} flush attempts in a short outage"

            # No leaks: greenlets, sockets of this process, connections on the server.
            gevent.sleep(1.0)
            gc.collect()
            assert live_greenlets() <= greenlets + 3, (greenlets, live_greenlets())
            assert open_fds() <= fds + 2, (fds, open_fds())
            await_condition(
                lambda: client_count(admin) <= clients,
                timeout=10.0,
                interval=0.05,
                message="no more connections than before",
            )


def test_redis_outage_longer_than_down_after_one_node_stays_the_others_terminate() -> None:
    from gactors.testkit._redis_server import RedisServer, find_server_binary

    binary = find_server_binary()
    if binary is None:
        pytest.skip("this test runs its own server: no redis-server/valkey-server found")
    with RedisServer(binary, persistent=True) as server:
        url = server.url
        name = _name("long")
        with node(name, url, **FAST) as system, node_process(url, name, **FAST) as peer:
            await_condition(
                lambda: len(member_addresses(system)) == 2,
                timeout=10.0,
                interval=0.05,
                message="two members",
            )
            server.stop()
            # By the server's clock every member missed its beats for > down_after.
            gevent.sleep(FAST["down_after"] + 1.0)
            server.start()
            # The first heartbeat to reach the server removes the others, which then find
            # themselves removed and terminate: exactly one of the two nodes stays.
            deadline = time.monotonic() + dilated(FAST["down_after"] + 15.0)
            while time.monotonic() < deadline:
                if system.is_terminated or peer.proc.poll() is not None:
                    break
                gevent.sleep(0.1)
            if system.is_terminated:
                assert peer.proc.poll() is None, "both nodes terminated"
                await_condition(
                    lambda: peer.proc.poll() is None,
                    timeout=1.0,
                    interval=0.05,
                    message="the peer to stay",
                )
            else:
                assert peer.wait_terminated(15.0), peer.log()
                assert "removed from the cluster" in peer.log(), peer.log()
                me = str(Cluster(system).self_address)
                await_condition(
                    lambda: member_addresses(system) == {me},
                    timeout=10.0,
                    interval=0.05,
                    message="a cluster of the survivor",
                )


def test_redis_restart_without_persistence_is_a_new_epoch_nodes_terminate(
    redis_server: Any,
) -> None:
    url = redis_server.url
    name = _name("epoch")
    system = ActorSystem(name, config={"cluster": {"url": url, **FAST}})
    try:
        with node_process(url, name, **FAST) as peer:
            sink = system.actor_selection(peer.path("sink")).resolve_one(timeout=dilated(10.0))
            await_condition(
                lambda: len(member_addresses(system)) == 2,
                timeout=10.0,
                interval=0.05,
                message="two members",
            )
            dead = dead_letters(system)
            _traffic_during_outage(sink, "outage", redis_server.stop, count=100)
            redis_server.start()  # empty: the membership and its epoch are gone
            # Both nodes find they are unknown and terminate (a new incarnation would join).
            system.await_termination(dilated(FAST["down_after"] + 20.0))
            assert system.is_terminated
            assert peer.wait_terminated(20.0), peer.log()
            assert any(isinstance(d.message, tuple) and d.message[0] == "outage" for d in dead), (
                "messages sent while Redis was down must be dead letters"
            )
    finally:
        system.terminate()
        system.await_termination(dilated(30.0))
    # A new node forms a new cluster of its own; the old addresses are gone.
    with node(name, url, **FAST) as fresh:
        assert member_addresses(fresh) == {str(Cluster(fresh).self_address)}


# ------------------------------------------------------------------------------ pause


def test_node_paused_past_down_after_terminates_itself(redis_url: str) -> None:
    name = _name("pause")
    with node(name, redis_url, **FAST) as system, node_process(redis_url, name, **FAST) as peer:
        removed = events(system, MemberRemoved)
        await_condition(
            lambda: len(member_addresses(system)) == 2,
            timeout=10.0,
            interval=0.05,
            message="two members",
        )
        os.kill(peer.pid, signal.SIGSTOP)
        try:
            await_condition(
                lambda: any(str(e.member.address) == peer.address for e in removed),
                timeout=DETECTION_BOUND + SLACK,
                interval=0.05,
                message="MemberRemoved for the paused node",
            )
        finally:
            os.kill(peer.pid, signal.SIGCONT)
        # Resumed, it learns it was downed, says so, and terminates its system.
        assert peer.wait_terminated(FAST["down_after"] + 15.0), peer.log()
        assert "downed" in peer.log().lower(), peer.log()
        assert peer.address not in member_addresses(system)


# --------------------------------------------------------------------- bad entries


def test_garbage_and_oversized_inbox_entries_are_dead_letters_and_the_reader_goes_on(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    name = _name("garbage")
    limit = 64 * 1024
    with (
        node(name, redis_url, max_message_size=limit, **FAST) as system,
        node(name, redis_url, **FAST) as other,
    ):
        probe = TestProbe(system)
        target = other.actor_selection(str(probe.ref.path)).resolve_one(timeout=dilated(10.0))
        target.tell("before")
        probe.expect_msg("before", timeout=10.0)
        dead = dead_letters(system)
        raw = redis.Redis.from_url(redis_url)
        key = inbox_key(system)
        assert raw.exists(key), f"no inbox stream at {key}"

        def entry(payload: bytes, serializer: int = 1) -> bytes:
            # One batch of one user-message record to the probe (uid 0: whatever lives
            # at the path), as docs/cluster/concepts.md describes the wire.
            record = [0, [probe.ref.path.path_str, 0], None, serializer, payload]
            return msgspec.msgpack.encode([record])

        # The hand-made entry is right: a small one arrives.
        raw.xadd(key, {b"d": entry(msgspec.msgpack.encode("hand-made"))})
        assert probe.receive_one(timeout=10.0) == "hand-made"
        bad = [
            b"\xc1 not msgpack at all",  # 0xc1 is never valid msgpack
            b"\x93\x01\x02",  # valid msgpack, not a batch of records
            entry(msgspec.msgpack.encode("x"), serializer=127),  # an unknown serializer
            entry(msgspec.msgpack.encode("\u2603" * limit)),  # larger than max_message_size
        ]
        for data in bad:
            raw.xadd(key, {b"d": data})
        raw.xadd(key, {b"x": b"a field the reader does not know"})
        await_condition(
            lambda: len(dead) >= len(bad),
            timeout=10.0,
            interval=0.05,
            message="a dead letter per bad entry",
        )
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) >= len(bad), warnings
        assert any("max_message_size" in w for w in warnings), warnings
        # The reader kept going: later messages arrive, in order.
        for i in range(5):
            target.tell(("after", i))
        assert [probe.receive_one(timeout=10.0) for _ in range(5)] == [
            ("after", i) for i in range(5)
        ]
        assert not system.is_terminated


# ------------------------------------------------------------------- two clusters


def test_two_clusters_with_different_names_on_one_server_never_see_each_other(
    redis_url: str,
) -> None:
    alpha_name, beta_name = _name("alpha"), _name("beta")
    with (
        node(alpha_name, redis_url, **FAST) as a1,
        node(alpha_name, redis_url, **FAST) as a2,
        node(beta_name, redis_url, **FAST) as b1,
    ):
        ups = events(a1, MemberUp)
        with node(beta_name, redis_url, **FAST) as b2:
            await_condition(
                lambda: len(member_addresses(b1)) == 2,
                timeout=10.0,
                interval=0.05,
                message="beta's two members",
            )
            await_condition(
                lambda: len(member_addresses(a1)) == 2,
                timeout=10.0,
                interval=0.05,
                message="alpha's two members",
            )
            gevent.sleep(4 * FAST["heartbeat_interval"])
            alpha = {str(Cluster(a1).self_address), str(Cluster(a2).self_address)}
            beta = {str(Cluster(b1).self_address), str(Cluster(b2).self_address)}
            assert member_addresses(a1) == member_addresses(a2) == alpha
            assert member_addresses(b1) == member_addresses(b2) == beta
            assert not any(str(e.member.address) in beta for e in ups)
        # Their keys never overlap.
        raw = redis.Redis.from_url(redis_url)
        keys = [k.decode() for k in raw.scan_iter(match="*", count=1000)]
        mine_a = {k for k in keys if alpha_name in k}
        mine_b = {k for k in keys if beta_name in k}
        assert mine_a and mine_b
        assert not mine_a & mine_b


# --------------------------------------------------------------- max_message_size


def test_max_message_size_is_enforced_by_the_sender_and_the_receiver(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    name = _name("size")
    with (
        node(name, redis_url, max_message_size=1024 * 1024, **FAST) as big,
        node(name, redis_url, max_message_size=8 * 1024, **FAST) as small,
    ):
        probe = TestProbe(small)
        target = big.actor_selection(str(probe.ref.path)).resolve_one(timeout=dilated(10.0))
        dead = dead_letters(small)

        # The sender refuses what is larger than its own limit, naming the type.
        with pytest.raises(SerializationError, match="bytes"):
            target.tell(b"x" * (2 * 1024 * 1024))
        # The receiver drops what is larger than its limit: a warning and a dead letter.
        target.tell(b"y" * (32 * 1024))
        await_condition(
            lambda: dead,
            timeout=10.0,
            interval=0.05,
            message="a dead letter for an oversized message",
        )
        assert any(r.levelno >= logging.WARNING for r in caplog.records)
        # Nothing of either arrived; a small message still does.
        target.tell("small")
        assert probe.receive_one(timeout=10.0) == "small"
        probe.expect_no_message(0.3)


# ---------------------------------------------------------------------- credentials

ACL_PASSWORD = "Pw-" + uuid.uuid4().hex  # a throwaway password, new for every run


def test_credentials_never_appear_in_logs_errors_repr_or_tree(
    redis_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    name = _name("acl")
    admin = redis.Redis.from_url(redis_server.url)
    # The ACL of docs/cluster/operations.md, for this cluster's keys.
    admin.execute_command(
        "ACL",
        "SETUSER",
        "ops",
        "on",
        f">{ACL_PASSWORD}",
        "resetkeys",
        f"~gactors:{name}:*",
        f"~{{gactors:{name}}}:*",
        "resetchannels",
        "-@all",
        "+@connection",
        "+@read",
        "+@write",
        "+@scripting",
        "+time",
        "-@dangerous",
    )
    port = redis_server.port
    url = f"redis://ops:{ACL_PASSWORD}@127.0.0.1:{port}/0"
    texts: list[str] = []

    with node(name, url, **FAST) as a, node(name, url, **FAST) as b:
        probe = TestProbe(b)
        ref = a.actor_selection(str(probe.ref.path)).resolve_one(timeout=dilated(10.0))
        ref.tell("through the ACL")
        probe.expect_msg("through the ACL", timeout=10.0)
        cluster = Cluster(a)
        texts += [repr(a), str(a.settings), repr(a.settings), a.tree(), repr(cluster)]
        texts += [repr(cluster.self_member), repr(ref), str(ref.path)]
        # Redis goes away under traffic: warnings about failed flushes, reconnects.
        redis_server.stop()
        for i in range(20):
            ref.tell(("lost", i))
            gevent.sleep(0.05)
        gevent.sleep(1.0)
        redis_server.start()
        gevent.sleep(1.0)

    # Connection errors name the URL, never its password.
    for bad in (
        f"redis://ops:{ACL_PASSWORD}@127.0.0.1:{port}/0".replace("ops:", "nobody:"),
        f"redis://ops:{ACL_PASSWORD}@127.0.0.1:1/0",  # nothing listens on port 1
    ):
        with pytest.raises(ClusterError) as info:
            ActorSystem(_name("bad"), config={"cluster": {"url": bad, "heartbeat_interval": 0.25}})
        texts.append(str(info.value))
        texts.append(repr(info.value))

    texts += [r.getMessage() for r in caplog.records]
    texts += [str(r.exc_info[1]) for r in caplog.records if r.exc_info and r.exc_info[1]]
    texts.append(caplog.text)
    leaked = [t for t in texts if ACL_PASSWORD in t]
    assert not leaked, leaked[:3]
    # The URL was shown (in the errors at least), with its password masked.
    assert any("***" in t for t in texts), texts[-5:]

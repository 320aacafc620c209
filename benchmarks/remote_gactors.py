"""gactors cluster workloads: this process is one node, ``remote_node.py`` the other.

Imported by ``worker_gactors.py`` (which has already monkey-patched) for the
``remote_*`` workloads; written against the public API of SPEC §17 only:
``ActorSystem(name, config={"cluster": {...}})``, ``Cluster(system)``,
``system.actor_selection(path).resolve_one()``, refs, ``ask``, ``context.watch``.
The server's URL comes from ``GACTORS_BENCH_REDIS_URL`` (the harness starts the
server); every run uses a cluster name of its own, so runs never see each other.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from _worker_common import Result, latency_result, rate_result, report
from remote_node import CHUNK, CLUSTER_ENV

from gactors import Actor, ActorSystem, Props, Terminated

URL_ENV = "GACTORS_BENCH_REDIS_URL"
NODE_SCRIPT = str(Path(__file__).resolve().parent / "remote_node.py")
ASK_TIMEOUT = 30.0
# The sender keeps at most this many chunks of CHUNK messages unacknowledged, so a
# sender faster than its receiver cannot overrun the receiver's (trimmed) inbox.
WINDOW = 20
# The failure detector's settings: the defaults of SPEC §17.
DETECTOR = {"heartbeat_interval": 1.0, "unreachable_after": 5.0, "down_after": 10.0}


def _url() -> str:
    url = os.environ.get(URL_ENV, "")
    if not url:
        raise SystemExit(f"{URL_ENV} is not set (the harness starts the server)")
    return url


class Peer:
    """The other node: a child process running ``remote_node.py``."""

    def __init__(self, url: str, name: str, cluster: dict[str, Any]) -> None:
        """Start the node and wait for its address line."""
        env = dict(os.environ)
        env[CLUSTER_ENV] = json.dumps(cluster)
        self.proc = subprocess.Popen(
            [sys.executable, NODE_SCRIPT, url, name],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        # A patched pipe read: the hub (and this node's heartbeat) keep running.
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the peer node exited with {self.proc.wait()} before joining")
        info = json.loads(line)
        self.address: str = info["address"]
        self.pid: int = info["pid"]

    def stop(self) -> None:
        """Graceful stop (SIGTERM: the node leaves the cluster), or kill after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextmanager
def two_nodes(**cluster: Any) -> Iterator[tuple[ActorSystem, Peer]]:
    """This process's node and a peer node, on a cluster of their own."""
    url = _url()
    name = f"bench-{uuid.uuid4().hex[:8]}"
    peer = Peer(url, name, cluster)
    try:
        system = ActorSystem(name, config={"cluster": {"url": url, **cluster}})
        try:
            yield system, peer
        finally:
            system.terminate().get(timeout=60)
    finally:
        peer.stop()


def _remote(system: ActorSystem, peer: Peer, name: str) -> Any:
    return system.actor_selection(f"{peer.address}/user/{name}").resolve_one(timeout=10)


class Sender(Actor):
    """Tells N ints to a remote sink in chunks of CHUNK, at most WINDOW unacknowledged;
    answers ``"done"`` to the requester once the sink acknowledged the last chunk."""

    def __init__(self) -> None:
        self.sink: Any = None
        self.requester: Any = None
        self.n = self.sent = 0

    def _chunk(self) -> None:
        tell, me = self.sink.tell, self.context.self
        k = min(CHUNK, self.n - self.sent)
        for i in range(self.sent, self.sent + k):
            tell(i, sender=me)
        self.sent += k

    def receive(self, message: Any) -> None:
        if message[0] == "go":
            _, self.sink, self.n = message
            self.requester = self.sender
            for _ in range(WINDOW):
                if self.sent < self.n:
                    self._chunk()
        elif message[0] == "ack":
            if message[1] >= self.n:
                self.requester.tell("done")
            elif self.sent < self.n:
                self._chunk()


def remote_tell(args: argparse.Namespace) -> Result:
    """Actor-to-actor one-way tells to the other node, credit-windowed."""
    n = (args.n // CHUNK) * CHUNK or CHUNK
    with two_nodes() as (system, peer):
        sink = _remote(system, peer, "sink")
        sender = system.actor_of(Props(Sender))
        t0 = time.perf_counter()
        answer = sender.ask(("go", sink, n), timeout=ASK_TIMEOUT * 10)
        seconds = time.perf_counter() - t0
        if answer != "done":
            raise RuntimeError(f"no completion: {answer!r}")
        result = report(rate_result(n, seconds))
    return result


def remote_ask(args: argparse.Namespace) -> Result:
    """N sequential asks from a plain greenlet to an echo actor on the other node."""
    n = args.n
    with two_nodes() as (system, peer):
        echo = _remote(system, peer, "echo")
        echo.ask(-1, timeout=ASK_TIMEOUT)
        samples = []
        perf = time.perf_counter
        t_all = perf()
        for i in range(n):
            t0 = perf()
            if echo.ask(i, timeout=ASK_TIMEOUT) != i:
                raise RuntimeError(f"ask {i}: wrong answer")
            samples.append(perf() - t0)
        total = perf() - t_all
        result = latency_result(samples)
        result["metrics"]["rate"] = n / total
        result = report(result)
    return result


def remote_ask_100(args: argparse.Namespace) -> Result:
    """PER greenlets each ask sequentially: N answers in all."""
    per = args.per or 100
    each = max(1, args.n // per)
    with two_nodes() as (system, peer):
        echo = _remote(system, peer, "echo")
        echo.ask(-1, timeout=ASK_TIMEOUT)

        def asker(k: int) -> None:
            for i in range(each):
                if echo.ask((k, i), timeout=ASK_TIMEOUT) != (k, i):
                    raise RuntimeError(f"asker {k}, ask {i}: wrong answer")

        t0 = time.perf_counter()
        greenlets = [gevent.spawn(asker, k) for k in range(per)]
        gevent.joinall(greenlets, raise_error=True)
        result = report(rate_result(each * per, time.perf_counter() - t0))
    return result


class Watcher(Actor):
    """Watches one ref; on Terminated records when and how, and sets ``done``."""

    def __init__(self, target: Any, done: gevent.event.AsyncResult) -> None:
        self.target = target
        self.done = done

    def pre_start(self) -> None:
        self.context.watch(self.target)

    def receive(self, message: Any) -> None:
        if isinstance(message, Terminated):
            self.done.set((time.monotonic(), message))


def remote_detect(args: argparse.Namespace) -> Result:
    """SIGKILL the other node; time until Terminated(address_terminated=True) here."""
    bound = DETECTOR["down_after"] + 2 * DETECTOR["heartbeat_interval"]
    with two_nodes(**DETECTOR) as (system, peer):
        echo = _remote(system, peer, "echo")
        done: gevent.event.AsyncResult = gevent.event.AsyncResult()
        system.actor_of(Props(Watcher, echo, done))
        echo.ask("watched?", timeout=ASK_TIMEOUT)  # the watch went out before this
        # Let the peer beat a few times, as a node that has been up for a while has.
        gevent.sleep(3 * DETECTOR["heartbeat_interval"])
        t0 = time.monotonic()
        os.kill(peer.pid, signal.SIGKILL)
        peer.proc.wait()
        at, msg = done.get(timeout=bound * 3)
        if not (msg.existence_confirmed and msg.address_terminated):
            raise RuntimeError(f"expected Terminated(ref, True, True), got {msg!r}")
        seconds = at - t0
        result = report(
            {
                "seconds": seconds,
                "count": 1,
                "metrics": {"detect_s": seconds, "bound_s": bound},
            }
        )
    return result


def remote_idle(args: argparse.Namespace) -> Result:
    """Two idle nodes for N seconds: Redis commands per heartbeat per node.

    ``per_beat`` counts what the nodes *send* (seen with ``MONITOR``; the commands a Lua
    script runs inside the server are left out, they cost no round trip);
    ``server_per_beat`` counts everything the server executed for them
    (``INFO commandstats``, script internals included). The measuring connections'
    own commands are left out of both.
    """
    import redis  # the cluster extra's client, for the server's counters only

    seconds = float(max(1, args.n))
    beat = DETECTOR["heartbeat_interval"]
    client = redis.Redis.from_url(_url())
    sent: dict[str, int] = {}

    def monitor() -> None:
        with client.monitor() as m:
            for cmd in m.listen():
                if cmd.get("client_type") == "lua":
                    continue
                name = str(cmd.get("command", "")).split(" ", 1)[0].strip('"').lower()
                sent[name] = sent.get(name, 0) + 1

    with two_nodes(**DETECTOR):
        gevent.sleep(2 * beat)  # past joining
        before = client.info("commandstats")
        watcher = gevent.spawn(monitor)
        gevent.sleep(seconds)
        watcher.kill()
        after = client.info("commandstats")
    mine = {"cmdstat_info", "cmdstat_monitor"}
    calls = {
        k: after[k]["calls"] - before.get(k, {"calls": 0})["calls"] for k in after if k not in mine
    }
    beats = 2 * seconds / beat  # two nodes
    total_sent = sum(sent.values())
    return {
        "seconds": seconds,
        "count": total_sent,
        "metrics": {
            "per_beat": total_sent / beats,
            "server_per_beat": sum(calls.values()) / beats,
        },
        "sent": dict(sorted(sent.items(), key=lambda kv: -kv[1])),
        "server": {k.removeprefix("cmdstat_"): v for k, v in calls.items() if v},
    }


WORKLOADS = {
    "remote_tell": remote_tell,
    "remote_ask": remote_ask,
    "remote_ask_100": remote_ask_100,
    "remote_detect": remote_detect,
    "remote_idle": remote_idle,
}

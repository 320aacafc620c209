"""Figures of cluster singleton and sharding (issue 16), for the benchmark table.

Run from the repository root: ``python -m benchmarks.cluster_sharding [--url URL]``
(without ``--url`` a throwaway server is started with the testkit launcher). Prints one
JSON object per figure:

* ``entity_throughput``: entity messages/s through the region of a client node (this
  process, ``start_proxy``) to entities spread over two host processes, counted as
  delivered by the entities;
* ``first_message``: round trip (ask) of the first message to a new entity, p50/p99 —
  allocation, shard start (its lease acquired on the shard's first message), entity
  creation and the reply; also split into "new shard" and "shard already running";
* ``singleton_failover``: SIGKILL of the node running a singleton to the start of the
  next instance (bound: down_after + lease_ttl + 1 s);
* ``rebalance``: shards moved when a third/fourth host joins vs the ideal (the new
  node's fair share), over many random node ids (rendezvous allocation).

Figures, not assertions: nothing here fails on a slow machine.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import gevent

from gactors import Actor, ActorSystem, Props
from gactors.cluster import ClusterSharding, ClusterSingleton
from gactors.cluster._sharding import allocate
from gactors.testkit._redis_server import RedisServer

_log = logging.getLogger("benchmarks.cluster_sharding")

# The defaults: a flood of messages can starve a host's hub timers for seconds on a
# loaded machine, and a lease that cannot be renewed in time is lost by design.
SETTINGS: dict[str, Any] = {
    "heartbeat_interval": 1.0,
    "unreachable_after": 5.0,
    "down_after": 10.0,
    "lease_ttl": 10.0,
}


class Counter(Actor):
    """An entity: counts messages; ``("count",)`` answers the count."""

    def __init__(self) -> None:
        self.n = 0

    def receive(self, m: Any) -> None:
        if type(m) is tuple:
            self.sender.tell(("count", self.n))
        elif m == "hi":
            self.sender.tell("hi")
        else:
            self.n += 1


class Marker(Actor):
    """A singleton that writes its start time to a file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pre_start(self) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "t": time.time()}) + "\n")

    def receive(self, m: Any) -> None:
        pass


def _host(url: str, name: str, marker: str) -> None:
    """A host process: entities of "bench" and the singleton "marker"."""
    system = ActorSystem(name, config={"cluster": dict(SETTINGS, url=url, roles=["host"])})
    ClusterSharding(system).start(
        "bench", Props(Counter), number_of_shards=100, role="host", passivate_idle_after=None
    )
    ClusterSingleton(system).init("marker", Props(Marker, marker), role="host")
    system.actor_of(Props(Counter), "counter")  # the baseline: plain remote tells
    sys.stdout.write(str(system.address) + "\n")
    sys.stdout.flush()
    system.await_termination()


def _spawn_host(url: str, name: str, marker: str) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.cluster_sharding", "--host", url, name, marker],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line.startswith("gactors://"):
        raise RuntimeError(f"host process did not start: {line!r}")
    p.address = line.strip()  # type: ignore[attr-defined]
    return p


def _wait_members(system: ActorSystem, n: int, timeout: float = 20.0) -> None:
    from gactors.cluster import Cluster

    deadline = time.monotonic() + timeout
    while len([m for m in Cluster(system).members if m.status == "up"]) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {n} members after {timeout} s")
        time.sleep(0.05)


def bench_throughput(system: ActorSystem, messages: int, entities: int) -> dict[str, Any]:
    sharding = ClusterSharding(system)
    refs = [sharding.entity_ref("bench", f"t{i}") for i in range(entities)]
    for r in refs:  # create them first: throughput, not creation
        r.ask("hi", timeout=10)
    t0 = time.perf_counter()
    for i in range(messages):
        refs[i % entities].tell(i)
        if i % 2000 == 1999:
            gevent.sleep(0)  # let the flusher run
    sent = time.perf_counter() - t0
    total = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        total = sum(r.ask(("count",), timeout=30)[1] for r in refs)
        if total >= messages:
            break
        time.sleep(0.05)
    took = time.perf_counter() - t0
    return {
        "figure": "entity_throughput",
        "messages": messages,
        "entities": entities,
        "delivered": total,
        "seconds": round(took, 3),
        "msg_per_s": round(total / took),
        "send_only_msg_per_s": round(messages / sent),
    }


def bench_baseline(system: ActorSystem, hosts: list[Any], messages: int) -> dict[str, Any]:
    """The same number of plain remote tells (no region) to one actor per host."""
    refs = [system.actor_selection(f"{h.address}/user/counter").resolve_one(10.0) for h in hosts]
    before = sum(r.ask(("count",), timeout=30)[1] for r in refs)
    t0 = time.perf_counter()
    for i in range(messages):
        refs[i & 1].tell(i)
        if i % 2000 == 1999:
            gevent.sleep(0)
    sent = time.perf_counter() - t0
    total = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        total = sum(r.ask(("count",), timeout=30)[1] for r in refs) - before
        if total >= messages:
            break
        time.sleep(0.05)
    took = time.perf_counter() - t0
    return {
        "figure": "remote_tell_baseline",
        "messages": messages,
        "delivered": total,
        "msg_per_s": round(total / took),
        "send_only_msg_per_s": round(messages / sent),
    }


def bench_first_message(system: ActorSystem, n: int) -> dict[str, Any]:
    sharding = ClusterSharding(system)
    seen_shards: set[int] = set()
    new_shard: list[float] = []
    old_shard: list[float] = []
    from gactors.cluster._sharding import shard_of

    for i in range(n):
        eid = f"f{uuid.uuid4().hex[:8]}-{i}"
        ref = sharding.entity_ref("bench", eid)
        t = time.perf_counter()
        ref.ask("hi", timeout=10)
        dt = (time.perf_counter() - t) * 1000
        s = shard_of(eid, 100)
        (old_shard if s in seen_shards else new_shard).append(dt)
        seen_shards.add(s)
    both = sorted(new_shard + old_shard)

    def pct(xs: list[float], q: float) -> float:
        xs = sorted(xs)
        return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else float("nan")

    return {
        "figure": "first_message",
        "n": n,
        "p50_ms": round(statistics.median(both), 3),
        "p99_ms": pct(both, 0.99),
        "p50_ms_shard_running": pct(old_shard, 0.5),
        "p50_ms_new_shard": pct(new_shard, 0.5),
        "new_shards": len(new_shard),
    }


def bench_failover(marker: Path, hosts: list[subprocess.Popen[str]]) -> dict[str, Any]:
    def starts() -> list[dict[str, Any]]:
        if not marker.exists():
            return []
        return [json.loads(x) for x in marker.read_text().splitlines() if x.strip()]

    deadline = time.monotonic() + 30
    while not starts() and time.monotonic() < deadline:
        time.sleep(0.05)
    first = starts()[-1]
    victim = next(p for p in hosts if p.pid == first["pid"])
    killed = time.time()
    victim.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 60

    def next_start() -> list[dict[str, Any]]:
        return [x for x in starts() if x["pid"] != victim.pid and x["t"] > killed]

    while not next_start() and time.monotonic() < deadline:
        time.sleep(0.02)
    took = next_start()[0]["t"] - killed
    bound = SETTINGS["down_after"] + SETTINGS["lease_ttl"] + 1.0
    return {
        "figure": "singleton_failover",
        "seconds": round(took, 3),
        "bound_s": bound,
        "settings": SETTINGS,
    }


def bench_rebalance(trials: int) -> list[dict[str, Any]]:
    out = []
    for before in (2, 3):
        ratios = []
        for _ in range(trials):
            nodes = [f"n-{uuid.uuid4().hex[:12]}" for _ in range(before)]
            new = f"n-{uuid.uuid4().hex[:12]}"
            a = allocate("bench", 100, sorted(nodes))
            b = allocate("bench", 100, sorted([*nodes, new]))
            moved = sum(1 for x, y in zip(a, b, strict=True) if x != y)
            ideal = 100 / (before + 1)
            assert all(y == new for x, y in zip(a, b, strict=True) if x != y)
            ratios.append(moved / ideal)
        ratios.sort()
        out.append(
            {
                "figure": "rebalance",
                "join": f"{before}->{before + 1} nodes, 100 shards",
                "moved_vs_ideal_mean": round(statistics.mean(ratios), 3),
                "moved_vs_ideal_p90": round(ratios[int(0.9 * len(ratios))], 3),
                "only_to_the_new_node": True,
                "trials": trials,
            }
        )
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        _host(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--entities", type=int, default=200)
    ap.add_argument(
        "--only", action="store_true", help="only first_message, entity throughput and baseline"
    )
    args = ap.parse_args()
    server = None
    url = args.url
    if url is None:
        server = RedisServer().start()
        url = server.url
    name = f"bench{uuid.uuid4().hex[:6]}"
    marker = Path(tempfile.mkdtemp()) / "singleton.jsonl"
    hosts = [_spawn_host(url, name, str(marker)) for _ in range(2)]
    system = ActorSystem(name, config={"cluster": dict(SETTINGS, url=url)})
    try:
        _wait_members(system, 3)
        ClusterSharding(system).start_proxy("bench", number_of_shards=100, role="host")
        print(json.dumps(bench_first_message(system, 400)), flush=True)
        print(json.dumps(bench_throughput(system, args.messages, args.entities)), flush=True)
        print(json.dumps(bench_baseline(system, hosts, args.messages)), flush=True)
        if not args.only:
            print(json.dumps(bench_failover(marker, hosts)), flush=True)
            for fig in bench_rebalance(500):
                print(json.dumps(fig), flush=True)
    finally:
        system.terminate()
        system.await_termination(15)
        for p in hosts:
            if p.poll() is None:
                p.terminate()
            p.wait(15)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()

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

``--cpu`` adds to ``entity_throughput`` the CPU time (``process_time``) each process
spent in that phase, in µs per message (the hosts are told when the phase starts and
ends by SIGUSR1): robust to a loaded machine where msgs/s is not. ``--profile DIR``
also writes a cProfile of each process for that phase (``DIR/client.prof``,
``DIR/host1.prof``, ``DIR/host2.prof``; the CPU figures then include its overhead).

Figures, not assertions: nothing here fails on a slow machine.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import argparse
import cProfile
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


class _Phase:
    """CPU time (and with ``profile`` a cProfile) of this process between two calls
    of :meth:`toggle` (``--cpu``, ``--profile``): the first starts, the second writes
    ``out/<name>.cpu`` (and ``out/<name>.prof``)."""

    def __init__(self, out: Path, name: str, profile: bool) -> None:
        self.out = out
        self.name = name
        self.profile = profile
        self.prof: cProfile.Profile | None = None
        self.cpu0: float | None = None

    def toggle(self) -> None:
        if self.cpu0 is None:
            self.cpu0 = time.process_time()
            if self.profile:
                self.prof = cProfile.Profile()
                self.prof.enable()
            return
        if self.prof is not None:
            self.prof.disable()
            self.prof.dump_stats(str(self.out / f"{self.name}.prof"))
            self.prof = None
        cpu = time.process_time() - self.cpu0
        (self.out / f"{self.name}.cpu").write_text(json.dumps({"cpu_s": cpu}))
        self.cpu0 = None


def _host(url: str, name: str, marker: str, label: str = "host") -> None:
    """A host process: entities of "bench" and the singleton "marker"."""
    out = os.environ.get("GACTORS_BENCH_PHASE")
    if out:
        phase = _Phase(Path(out), label, bool(os.environ.get("GACTORS_BENCH_CPROFILE")))
        gevent.signal_handler(signal.SIGUSR1, phase.toggle)
    system = ActorSystem(name, config={"cluster": dict(SETTINGS, url=url, roles=["host"])})
    ClusterSharding(system).start(
        "bench", Props(Counter), number_of_shards=100, role="host", passivate_idle_after=None
    )
    ClusterSingleton(system).init("marker", Props(Marker, marker), role="host")
    system.actor_of(Props(Counter), "counter")  # the baseline: plain remote tells
    sys.stdout.write(str(system.address) + "\n")
    sys.stdout.flush()
    system.await_termination()


def _spawn_host(
    url: str, name: str, marker: str, label: str, phase: str | None, profile: bool
) -> subprocess.Popen[str]:
    env = dict(os.environ)
    if phase:
        env["GACTORS_BENCH_PHASE"] = phase
        if profile:
            env["GACTORS_BENCH_CPROFILE"] = "1"
    cmd = [sys.executable, "-m", "benchmarks.cluster_sharding", "--host", url, name, marker]
    p = subprocess.Popen(
        [*cmd, label],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
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


def _phase_throughput(
    system: ActorSystem, hosts: list[Any], args: argparse.Namespace, out: Path, profile: bool
) -> dict[str, Any]:
    """bench_throughput with the CPU time of every process (``--cpu``), and a cProfile
    of each (``--profile``): adds the CPU µs per message of each to the figure."""
    mine = _Phase(out, "client", profile)

    def toggle() -> None:
        for h in hosts:
            h.send_signal(signal.SIGUSR1)
        mine.toggle()

    toggle()
    gevent.sleep(0.2)  # the hosts' handlers run
    fig = bench_throughput(system, args.messages, args.entities)
    toggle()
    names = ["client", "host1", "host2"]
    deadline = time.monotonic() + 30
    while not all((out / f"{n}.cpu").exists() for n in names):
        if time.monotonic() > deadline:
            raise RuntimeError("a host did not write its CPU time")
        time.sleep(0.05)
    for n in names:
        cpu = json.loads((out / f"{n}.cpu").read_text())["cpu_s"]
        (out / f"{n}.cpu").unlink()
        fig[f"cpu_us_per_msg_{n}"] = round(cpu / args.messages * 1e6, 3)
    return fig


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
        _host(*sys.argv[2:6])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--entities", type=int, default=200)
    ap.add_argument(
        "--only", action="store_true", help="only first_message, entity throughput and baseline"
    )
    ap.add_argument(
        "--cpu", action="store_true", help="CPU µs per message of each process (throughput)"
    )
    ap.add_argument(
        "--profile", metavar="DIR", help="also a cProfile of each process (throughput), to DIR"
    )
    args = ap.parse_args()
    server = None
    url = args.url
    if url is None:
        server = RedisServer().start()
        url = server.url
    name = f"bench{uuid.uuid4().hex[:6]}"
    marker = Path(tempfile.mkdtemp()) / "singleton.jsonl"
    phase = None
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        phase = str(Path(args.profile).resolve())
    elif args.cpu:
        phase = tempfile.mkdtemp()
    hosts = [
        _spawn_host(url, name, str(marker), f"host{i}", phase, bool(args.profile)) for i in (1, 2)
    ]
    system = ActorSystem(name, config={"cluster": dict(SETTINGS, url=url)})
    try:
        _wait_members(system, 3)
        ClusterSharding(system).start_proxy("bench", number_of_shards=100, role="host")
        print(json.dumps(bench_first_message(system, 400)), flush=True)
        if phase is None:
            print(json.dumps(bench_throughput(system, args.messages, args.entities)), flush=True)
        else:
            fig = _phase_throughput(system, hosts, args, Path(phase), bool(args.profile))
            print(json.dumps(fig), flush=True)
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

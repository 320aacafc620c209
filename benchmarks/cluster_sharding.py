"""Figures of cluster singleton and sharding (issue 16), for the benchmark table.

Run from the repository root: ``python -m benchmarks.cluster_sharding [--url URL]``
(without ``--url`` a throwaway server is started with the testkit launcher). Prints one
JSON object per figure:

* ``entity_throughput``: entity messages/s through the region of a client node (this
  process, ``start_proxy``) to entities spread over two host processes, counted as
  delivered by the entities (every 10 ms, all entities asked at once; ``--count
  sequential``: one after the other every 50 ms, as before issue 27 -- those 200
  round trips, 0.1-0.2 s per look, were in the figure);
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
``DIR/host1.prof``, ``DIR/host2.prof``; the CPU figures then include its overhead, and
with greenlets its times are muddled), ``--sample DIR`` the functions found running
at each SIGPROF (``DIR/client.txt``...: a statistical profile, little overhead).

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


class _Sampler:
    """A statistical profiler: at each SIGPROF (asked for every 0.5 ms of CPU; the
    kernel's timer may tick less often) it notes the function running and every
    function on its stack. Unlike cProfile it is not misled by
    greenlet switches (a function that switched away is not charged for the time
    others ran) and it barely slows the process."""

    def __init__(self) -> None:
        self.self_counts: dict[str, int] = {}
        self.cum_counts: dict[str, int] = {}
        self.samples = 0

    def _tick(self, _sig: int, frame: Any) -> None:
        self.samples += 1
        seen = set()
        top = True
        while frame is not None:
            code = frame.f_code
            key = f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_firstlineno}({code.co_name})"
            if top:
                self.self_counts[key] = self.self_counts.get(key, 0) + 1
                top = False
            if key not in seen:
                seen.add(key)
                self.cum_counts[key] = self.cum_counts.get(key, 0) + 1
            frame = frame.f_back

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._tick)
        signal.setitimer(signal.ITIMER_PROF, 0.0005, 0.0005)

    def stop(self, path: Path, cpu: float) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        n = max(self.samples, 1)
        lines = [f"{self.samples} samples, {cpu:.3f} s CPU; % of samples: self, then cumulative"]
        for title, counts in (("self", self.self_counts), ("cumulative", self.cum_counts)):
            lines.append(f"-- {title}")
            for key, c in sorted(counts.items(), key=lambda kv: -kv[1])[:200]:
                lines.append(f"{100 * c / n:6.1f}  {key}")
        path.write_text("\n".join(lines) + "\n")


class _Phase:
    """CPU time (and with ``profile`` a cProfile or samples) of this process between
    two calls of :meth:`toggle` (``--cpu``, ``--profile``, ``--sample``): the first
    starts, the second writes ``out/<name>.cpu`` (and ``out/<name>.prof`` or
    ``out/<name>.txt``)."""

    def __init__(self, out: Path, name: str, profile: str) -> None:
        self.out = out
        self.name = name
        self.profile = profile  # "", "cprofile" or "sample"
        self.prof: cProfile.Profile | None = None
        self.sampler: _Sampler | None = None
        self.cpu0: float | None = None

    def toggle(self) -> None:
        if self.cpu0 is None:
            self.cpu0 = time.process_time()
            if self.profile == "cprofile":
                self.prof = cProfile.Profile()
                self.prof.enable()
            elif self.profile == "sample":
                self.sampler = _Sampler()
                self.sampler.start()
            return
        if self.prof is not None:
            self.prof.disable()
            self.prof.dump_stats(str(self.out / f"{self.name}.prof"))
            self.prof = None
        cpu = time.process_time() - self.cpu0
        if self.sampler is not None:
            self.sampler.stop(self.out / f"{self.name}.txt", cpu)
            self.sampler = None
        (self.out / f"{self.name}.cpu").write_text(json.dumps({"cpu_s": cpu}))
        self.cpu0 = None


def _host(url: str, name: str, marker: str, label: str = "host") -> None:
    """A host process: entities of "bench" and the singleton "marker"."""
    out = os.environ.get("GACTORS_BENCH_PHASE")
    if out:
        phase = _Phase(Path(out), label, os.environ.get("GACTORS_BENCH_PROFILER", ""))
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
    url: str, name: str, marker: str, label: str, phase: str | None, profile: str
) -> subprocess.Popen[str]:
    env = dict(os.environ)
    if phase:
        env["GACTORS_BENCH_PHASE"] = phase
        env["GACTORS_BENCH_PROFILER"] = profile
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


def _count(refs: list[Any], sequential: bool) -> int:
    """The messages the entities got: one ask each, all sent at once (a round trip in
    all), or one after the other (``--count sequential``, as before issue 27: 200
    round trips, 0.1-0.2 s per look, which the figure included)."""
    if sequential:
        return sum(r.ask(("count",), timeout=30)[1] for r in refs)
    futures = [r.ask(("count",), timeout=30, block=False) for r in refs]
    return sum(f.get()[1] for f in futures)


def bench_throughput(
    system: ActorSystem, messages: int, entities: int, sequential: bool = False
) -> dict[str, Any]:
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
        total = _count(refs, sequential)
        if total >= messages:
            break
        time.sleep(0.01 if not sequential else 0.05)
    took = time.perf_counter() - t0
    return {
        "figure": "entity_throughput",
        "count": "sequential" if sequential else "parallel",
        "messages": messages,
        "entities": entities,
        "delivered": total,
        "seconds": round(took, 3),
        "msg_per_s": round(total / took),
        "send_only_msg_per_s": round(messages / sent),
    }


def _proc_cpu(pid: int | None) -> float | None:
    """CPU seconds of another process so far (Linux /proc; None if unknown)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _phase_throughput(
    system: ActorSystem,
    hosts: list[Any],
    args: argparse.Namespace,
    out: Path,
    profile: str,
    redis_pid: int | None,
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
    redis0 = _proc_cpu(redis_pid)
    fig = bench_throughput(system, args.messages, args.entities, args.count == "sequential")
    redis1 = _proc_cpu(redis_pid)
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
    if redis0 is not None and redis1 is not None:  # the throwaway server (10 ms ticks)
        fig["cpu_us_per_msg_redis"] = round((redis1 - redis0) / args.messages * 1e6, 3)
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
        "--count",
        choices=["parallel", "sequential"],
        default="parallel",
        help="how entity_throughput asks the entities for their counts (see _count)",
    )
    ap.add_argument(
        "--cpu", action="store_true", help="CPU µs per message of each process (throughput)"
    )
    ap.add_argument(
        "--profile", metavar="DIR", help="also a cProfile of each process (throughput), to DIR"
    )
    ap.add_argument(
        "--sample", metavar="DIR", help="also sampled stacks of each process (throughput), to DIR"
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
    profiler = "cprofile" if args.profile else "sample" if args.sample else ""
    if args.profile or args.sample:
        Path(args.profile or args.sample).mkdir(parents=True, exist_ok=True)
        phase = str(Path(args.profile or args.sample).resolve())
    elif args.cpu:
        phase = tempfile.mkdtemp()
    hosts = [_spawn_host(url, name, str(marker), f"host{i}", phase, profiler) for i in (1, 2)]
    system = ActorSystem(name, config={"cluster": dict(SETTINGS, url=url)})
    try:
        _wait_members(system, 3)
        ClusterSharding(system).start_proxy("bench", number_of_shards=100, role="host")
        print(json.dumps(bench_first_message(system, 400)), flush=True)
        if phase is None:
            fig = bench_throughput(system, args.messages, args.entities, args.count == "sequential")
            print(json.dumps(fig), flush=True)
        else:
            pid = server.pid if server is not None else None
            fig = _phase_throughput(system, hosts, args, Path(phase), profiler, pid)
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

"""What one remote ask costs, on both sides: ``python -m benchmarks.remote_ask_cost URL N``.

This process is a node that asks an ``Echo`` on a second node (``remote_node.py``,
started here) N times in a row, after 200 asks of warm-up, and prints one JSON line:
the latency (p50, p90, mean, in µs), the CPU per ask of each process (``getrusage``
here, ``/proc/PID/stat`` of the other), voluntary context switches per ask here, and
the Redis commands per ask (the ``INFO commandstats`` delta of the server, so use a
server of its own). ``PYTHONPATH=<checkout>`` measures another checkout's gactors
with the same interpreter (both processes import it).

Under ``valgrind --tool=callgrind`` with ``GACTORS_BENCH_PEER_PREFIX`` set to the same
command for the second node, the difference of the instruction totals of two runs
(N and 3N asks) divided by 2N is the instructions per ask of each side;
``GACTORS_BENCH_CLUSTER='{"heartbeat_interval": 5.0, "unreachable_after": 100.0,
"down_after": 200.0}'`` keeps the heartbeats (which grow with the slower run's wall
time) out of it. Figures, not assertions (docs/performance.md, "The remote ask since
0e34c36").
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import json
import os
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import redis

import gactors
from gactors import ActorSystem

NODE_SCRIPT = str(Path(__file__).resolve().parent / "remote_node.py")
WARM_UP = 200


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _calls(r: Any) -> dict[str, int]:
    return {k: v["calls"] for k, v in r.info("commandstats").items()}


def main(url: str, n: int) -> dict[str, Any]:
    """Run the asks; the figures as a dict."""
    name = f"cost-{uuid.uuid4().hex[:8]}"
    extra = json.loads(os.environ.get("GACTORS_BENCH_CLUSTER", "{}"))
    prefix = os.environ.get("GACTORS_BENCH_PEER_PREFIX", "").split()
    peer = subprocess.Popen(
        [*prefix, sys.executable, NODE_SCRIPT, url, name], stdout=subprocess.PIPE, text=True
    )
    assert peer.stdout is not None
    info = json.loads(peer.stdout.readline())
    system = ActorSystem(name, config={"cluster": {"url": url, **extra}})
    try:
        echo = system.actor_selection(f"{info['address']}/user/echo").resolve_one(timeout=10)
        for i in range(WARM_UP):
            echo.ask(i, timeout=30)
        server = redis.Redis.from_url(url)
        calls0 = _calls(server)
        perf = time.perf_counter
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        peer0 = _proc_cpu(info["pid"])
        samples = []
        t_all = perf()
        for i in range(n):
            t0 = perf()
            if echo.ask(i, timeout=30) != i:
                raise RuntimeError(f"ask {i}: wrong answer")
            samples.append(perf() - t0)
        total = perf() - t_all
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        peer1 = _proc_cpu(info["pid"])
        calls1 = _calls(server)
    finally:
        system.terminate().get(timeout=30)
        peer.terminate()
        peer.wait()
    samples.sort()
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    commands = {k: round((v - calls0.get(k, 0)) / n, 3) for k, v in calls1.items()}
    return {
        "gactors": os.path.dirname(gactors.__file__),
        "p50_us": round(samples[n // 2] * 1e6, 1),
        "p90_us": round(samples[int(n * 0.9)] * 1e6, 1),
        "mean_us": round(total / n * 1e6, 1),
        "asker_cpu_us": round(cpu / n * 1e6, 1),
        "answerer_cpu_us": round((peer1 - peer0) / n * 1e6, 1),
        "voluntary_switches": round((ru1.ru_nvcsw - ru0.ru_nvcsw) / n, 2),
        "commands": {k: v for k, v in commands.items() if v},
    }


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m benchmarks.remote_ask_cost URL N")
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))

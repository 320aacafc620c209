"""Figures of gactors.reminders (SPEC §20, issue 26) on a real Redis server.

Run from the repository root: ``python -m benchmarks.reminders [--url URL] [--quick]``
(without ``--url`` a throwaway server is started with the testkit launcher). One node,
100 shards it owns, tick 1 s. Prints one JSON object per figure, then a table:

* ``burst``: N one-shot reminders (10,000; 1,000 with ``--quick``) due within the same
  second: seconds from the last due time until every entity got its message (target
  of the issue: within 2 s);
* ``idle``: 100,000 reminders (10,000 with ``--quick``), none due: Redis commands per
  second over 10 s (``INFO commandstats``) and the node's CPU.

Figures, not assertions: the machine may be shared and noisy.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import argparse
import json
import resource
import time
import uuid
from typing import Any

import redis

from gactors import Actor, ActorSystem, Props
from gactors.cluster import ClusterSharding
from gactors.cluster._redis import RedisBackend
from gactors.cluster._sharding import shard_of
from gactors.persistence._codec import codec
from gactors.reminders import Reminders
from gactors.reminders._model import Target
from gactors.reminders._redis import RedisReminderStore
from gactors.testkit._redis_server import RedisServer

SHARDS = 100
GOT: list[float] = []


class Counting(Actor):
    def receive(self, message: Any) -> None:
        GOT.append(time.time())


def _load(url: str, name: str, n: int, due_ms: int, spread_ms: int, period: Any) -> None:
    """Store n reminders as ``register`` would, in pipelines (faster than n calls)."""
    store = RedisReminderStore(RedisBackend(url, name))
    record = codec().encode_for_store(["wake", period, "once"], "record")
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        eid = f"c{i}"
        t = Target("entity", type_name="cart", entity_id=eid)
        zkey, hkey = store.keys(t, shard_of(eid, SHARDS))
        member = store.member(t, "r")
        pipe.hset(hkey, member, record)
        pipe.zadd(zkey, {member: due_ms + i % spread_ms})
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    store.close()


def _node(url: str, name: str) -> tuple[ActorSystem, Reminders]:
    system = ActorSystem(
        name, config={"cluster": {"url": url, "heartbeat_interval": 1.0}, "reminders": {}}
    )
    ClusterSharding(system).start(
        "cart", Props(Counting), number_of_shards=SHARDS, passivate_idle_after=None
    )
    r = Reminders(system)
    deadline = time.monotonic() + 30
    while len(r._shards()["cart"][1]) < SHARDS and time.monotonic() < deadline:
        time.sleep(0.2)
    return system, r


def bench_burst(url: str, n: int, lead: float = 8.0) -> dict[str, Any]:
    """N one-shot reminders due within the same second, ``lead`` seconds from now
    (time to store them and start the node)."""
    name = f"b{uuid.uuid4().hex[:8]}"
    GOT.clear()
    due = int((time.time() + lead) * 1000)
    _load(url, name, n, due, 1000, None)
    system, _r = _node(url, name)
    try:
        last_due = (due + 999) / 1000
        limit = time.monotonic() + 60
        while len(GOT) < n and time.monotonic() < limit:
            time.sleep(0.05)
        took = (max(GOT) - last_due) if len(GOT) == n else float("nan")
    finally:
        system.terminate()
        system.await_termination(15)
    return {"figure": "burst", "reminders": n, "delivered": len(GOT), "seconds": took}


def bench_idle(url: str, n: int, window: float = 10.0) -> dict[str, Any]:
    name = f"i{uuid.uuid4().hex[:8]}"
    _load(url, name, n, int((time.time() + 3600) * 1000), 1, 3_600_000)
    system, _r = _node(url, name)
    client = redis.Redis.from_url(url)
    try:
        time.sleep(2.0)
        client.config_resetstat()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(window)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        info = client.info("commandstats")
    finally:
        system.terminate()
        system.await_termination(15)
    calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "figure": "idle",
        "reminders": n,
        "zrangebyscore_per_s": calls.get("zrangebyscore", 0) / window,
        "all_per_s": sum(calls.values()) / window,
        "cpu": cpu / window,
    }


# -- the harness's workload (python -m benchmarks): the server is the harness's ----------
URL_ENV = "GACTORS_BENCH_REDIS_URL"


def reminders_burst(args: Any) -> Any:
    """N one-shot reminders due within one second (on SHARDS shards): seconds from the
    last due time until every one fired."""
    import os

    url = os.environ.get(URL_ENV, "")
    if not url:
        raise SystemExit(f"{URL_ENV} is not set (the harness starts the server)")
    if args.per and args.per != SHARDS:
        raise SystemExit(f"reminders_burst runs on {SHARDS} shards, not --per {args.per}")
    # Lead time: storing N records (pipelined) and a node owning every shard.
    f = bench_burst(url, args.n, lead=3.0 + args.n / 2000)
    if f["delivered"] != args.n:
        raise RuntimeError(f"{f['delivered']} of {args.n} reminders fired within 60 s")
    return {
        "seconds": f["seconds"],
        "count": args.n,
        "figure": f,
        "metrics": {"fired_s": f["seconds"]},
    }


WORKLOADS = {"reminders_burst": reminders_burst}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", help="an existing server (default: a throwaway one)")
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    args = parser.parse_args(argv)
    server = None
    url = args.url
    if url is None:
        server = RedisServer()
        server.start()
        url = server.url
    q = 10 if args.quick else 1
    try:
        figures = [bench_burst(url, 10_000 // q), bench_idle(url, 100_000 // q)]
    finally:
        if server is not None:
            server.close()
    for f in figures:
        print(json.dumps(f))
    burst, idle = figures
    print("\n| figure | value | target |\n|---|---|---|")
    print(
        f"| {burst['reminders']:,} due in the same second | all delivered "
        f"{burst['seconds']:.2f} s after the last due time | within 2 s: "
        + ("met" if burst["seconds"] <= 2.0 else "NOT met")
        + " |"
    )
    print(
        f"| {idle['reminders']:,} reminders, none due, {SHARDS} shards | "
        f"{idle['zrangebyscore_per_s']:.0f} ZRANGEBYSCORE/s of {idle['all_per_s']:.0f} "
        f"commands/s; CPU {idle['cpu']:.1%} | one query per owned shard per tick |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The idle cost of reminders (SPEC section 20): 100,000 registered, none due, one
node owning every shard. Measured with ``INFO commandstats`` on a private server: the
reminders' commands per second over 10 s are one ``ZRANGEBYSCORE`` per owned shard per
tick and nothing else; the line is printed with ``-s``."""

from __future__ import annotations

import os
import resource
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("redis")
pytest.importorskip("msgspec")

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

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.timeout(240)]

SHARDS = 100
COUNT = 100_000
WINDOW = 10.0


class Idle(Actor):
    def receive(self, m: Any) -> None:
        raise AssertionError(f"nothing is due, yet {m!r} arrived")


def commandstats(client: Any) -> dict[str, int]:
    info = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}


def test_idle_cost_of_100k_reminders(redis_server: RedisServer) -> None:
    url = redis_server.url
    name = f"idle{uuid.uuid4().hex[:8]}"
    # Loaded in bulk before the node starts (so that no long load holds its hub), as
    # register stores them: same keys, same records; 100,000 single round trips
    # would only be slower.
    store = RedisReminderStore(RedisBackend(url, name))
    record = codec().encode_for_store(["wake", 3_600_000, "once"], "record")
    due = int((time.time() + 3600) * 1000)
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for i in range(COUNT - 1):
        eid = f"c{i}"
        t = Target("entity", type_name="cart", entity_id=eid)
        zkey, hkey = store.keys(t, shard_of(eid, SHARDS))
        member = store.member(t, "abandoned")
        pipe.hset(hkey, member, record)
        pipe.zadd(zkey, {member: due + i})
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    store.close()
    system = ActorSystem(
        name,
        config={
            "cluster": {"url": url, "heartbeat_interval": 1.0},
            "reminders": {"tick": 1.0},
        },
    )
    try:
        ClusterSharding(system).start("cart", Props(Idle), number_of_shards=SHARDS)
        r = Reminders(system)
        # One more through the API: it lands in the same keyspace as the bulk.
        r.register("sample", "x", entity=("cart", "sample"), due=3600, period=3600)
        assert r.names(entity=("cart", "c7")) == ["abandoned"]
        total = sum(client.zcard(k) for k in client.scan_iter(match="*:rem:*:z", count=1000))
        assert total == COUNT
        # Wait until the node owns every shard (it is alone) and a tick has run.
        deadline = time.monotonic() + 30
        while len(r._shards()["cart"][1]) < SHARDS and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(r._shards()["cart"][1]) == SHARDS
        time.sleep(2.0)
        client.config_resetstat()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(WINDOW)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        stats = commandstats(client)
    finally:
        system.terminate()
        system.await_termination(15)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    zr = stats.get("zrangebyscore", 0)
    per_s = {k: round(v / WINDOW, 1) for k, v in sorted(stats.items())}
    line = (
        f"idle, {COUNT} reminders, {SHARDS} shards owned, tick 1 s: zrangebyscore "
        f"{zr / WINDOW:.1f}/s; all commands per second {per_s}; process CPU {cpu / WINDOW:.1%}"
    )
    print("\n[reminders] " + line)  # noqa: T201 - seen with -s
    path = os.environ.get("GACTORS_FAULT_REPORT")
    if path:
        with open(path, "a") as f:
            f.write("[reminders] " + line + "\n")
    # One query per owned shard per tick (100 a second), give or take a tick.
    assert SHARDS * (WINDOW - 1.5) <= zr <= SHARDS * (WINDOW + 1.5), stats
    # Nothing read or advanced: none was due.
    assert stats.get("hmget", 0) == 0 and stats.get("hkeys", 0) == 0, stats


GOT: list[float] = []


class Counting(Actor):
    def receive(self, m: Any) -> None:
        GOT.append(time.time())


def test_10000_due_in_the_same_second_fire_within_2_s(redis_server: RedisServer) -> None:
    url = redis_server.url
    name = f"burst{uuid.uuid4().hex[:8]}"
    n = 10_000
    GOT.clear()
    store = RedisReminderStore(RedisBackend(url, name))
    record = codec().encode_for_store(["wake", None, "once"], "record")
    client = redis.Redis.from_url(url)
    system = ActorSystem(
        name,
        config={
            "cluster": {"url": url, "heartbeat_interval": 1.0},
            "reminders": {"tick": 1.0},
        },
    )
    try:
        ClusterSharding(system).start(
            "cart", Props(Counting), number_of_shards=SHARDS, passivate_idle_after=None
        )
        r = Reminders(system)
        deadline = time.monotonic() + 30
        while len(r._shards()["cart"][1]) < SHARDS and time.monotonic() < deadline:
            time.sleep(0.2)
        # All due within one second, 4 s from now (loaded in one pipeline).
        due = int((time.time() + 4.0) * 1000)
        pipe = client.pipeline(transaction=False)
        for i in range(n):
            eid = f"c{i}"
            t = Target("entity", type_name="cart", entity_id=eid)
            zkey, hkey = store.keys(t, shard_of(eid, SHARDS))
            member = store.member(t, "burst")
            pipe.hset(hkey, member, record)
            pipe.zadd(zkey, {member: due + i % 1000})
        pipe.execute()
        last_due = (due + 999) / 1000
        limit = time.monotonic() + 30
        while len(GOT) < n and time.monotonic() < limit:
            time.sleep(0.1)
        assert len(GOT) == n
        took = max(GOT) - last_due
        assert min(GOT) >= due / 1000
        left = sum(client.zcard(k) for k in client.scan_iter(match="*:rem:*:z", count=1000))
    finally:
        system.terminate()
        system.await_termination(15)
        store.close()
    line = (
        f"burst: {n} reminders due within one second, all delivered {took:.2f} s after "
        "the last due time"
    )
    print("\n[reminders] " + line)  # noqa: T201 - seen with -s
    assert left == 0  # every one-shot advanced (removed)
    # The target is 2 s (issue 26); a shared, loaded test machine gets 1 s of slack.
    assert took <= 3.0, line

"""Raw figures of the cluster's Redis engine (gactors.cluster._redis), for the
benchmark table: what the transport and membership cost before any actor is involved.

Run from the repository root: ``python -m benchmarks.cluster_redis_raw [--url URL]``
(without ``--url`` a throwaway server is started with the testkit launcher). Prints
one JSON object per figure:

* ``heartbeat``: client round trips and server commands per membership heartbeat
  (the idle cost of a node), and its latency;
* ``outbox_send``: entries/s of ``Outbox.send`` with pipelines of 100 entries;
* ``redis_py_pipeline``: the same through redis-py's own pipeline (the baseline);
* ``echo``: round trip of an entry to a second process and back
  (``XADD`` -> ``XREAD`` -> ``XADD`` -> ``XREAD``), p50/p99 over many trips.

Figures, not assertions: nothing here fails on a slow machine.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import redis

from gactors.cluster._redis import RedisBackend
from gactors.cluster._redis_conn import _GET_CONNECTION_ARGS
from gactors.testkit._redis_server import RedisServer


def _commands(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def bench_heartbeat(url: str, beats: int) -> dict[str, Any]:
    backend = RedisBackend(url, f"bench{uuid.uuid4().hex[:6]}")
    store = backend.membership()
    for i in range(5):  # a small cluster: the view carries 5 members
        store.join(f"n{i}", ["web"])
    store.heartbeat("n0", 5000, 10000)  # connect first
    writes = [0]
    pool = store._conn.client().connection_pool
    conn = pool.get_connection(*_GET_CONNECTION_ARGS)
    pool.release(conn)
    original = conn.send_packed_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        writes[0] += 1
        return original(*args, **kwargs)

    conn.send_packed_command = counting  # type: ignore[method-assign]
    observer = redis.Redis.from_url(url)
    before = _commands(observer)
    times = []
    for _ in range(beats):
        start = time.perf_counter()
        store.heartbeat("n0", 5000, 10000)
        times.append(time.perf_counter() - start)
    after = _commands(observer)
    scripts = observer.info("commandstats")
    observer.close()
    backend.close()
    return {
        "figure": "heartbeat",
        "members": 5,
        "round_trips_per_beat": writes[0] / beats,
        # total_commands_processed also counts the commands a script runs
        "server_commands_per_beat": (after - before - 1) / beats,
        "evalsha_calls_total": scripts.get("cmdstat_evalsha", {}).get("calls"),
        "p50_ms": statistics.median(times) * 1000,
    }


def bench_send(url: str, entries: int, batch_bytes: int) -> dict[str, Any]:
    backend = RedisBackend(url, f"bench{uuid.uuid4().hex[:6]}", inbox_maxlen=100_000)
    outbox = backend.outbox()
    payload = b"x" * batch_bytes
    pipeline = [(f"n{i % 4}", payload) for i in range(100)]
    outbox.send(pipeline)
    start = time.perf_counter()
    for _ in range(entries // 100):
        outbox.send(pipeline)
    elapsed = time.perf_counter() - start
    backend.close()
    return {
        "figure": "outbox_send",
        "pipeline": 100,
        "entry_bytes": batch_bytes,
        "entries_per_s": round(entries / elapsed),
    }


def bench_redis_py_pipeline(url: str, entries: int, batch_bytes: int) -> dict[str, Any]:
    """The same XADDs through redis-py's own pipeline, for comparison."""
    client = redis.Redis.from_url(url)
    prefix = f"bench{uuid.uuid4().hex[:6]}:inbox:"
    payload = b"x" * batch_bytes

    def one() -> None:
        pipe = client.pipeline(transaction=False)
        for i in range(100):
            pipe.xadd(f"{prefix}n{i % 4}", {"d": payload}, maxlen=100_000, approximate=True)
        pipe.execute()

    one()
    start = time.perf_counter()
    for _ in range(entries // 100):
        one()
    elapsed = time.perf_counter() - start
    client.close()
    return {
        "figure": "redis_py_pipeline",
        "pipeline": 100,
        "entry_bytes": batch_bytes,
        "entries_per_s": round(entries / elapsed),
    }


def echo_peer(url: str, cluster: str, trips: int) -> None:
    """The second process: return every entry of inbox ``b`` to inbox ``a``."""
    backend = RedisBackend(url, cluster)
    reader, outbox = backend.inbox_reader("b", max_block_ms=2000), backend.outbox()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    seen = 0
    while seen < trips:
        for batch in reader.read(2000, 100):
            outbox.send([("a", batch)])
            seen += 1
    backend.close()


def bench_echo(url: str, trips: int) -> dict[str, Any]:
    cluster = f"bench{uuid.uuid4().hex[:6]}"
    peer = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.cluster_redis_raw", "--peer", cluster,
         "--url", url, "--trips", str(trips)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert peer.stdout is not None
    assert peer.stdout.readline().strip() == b"ready"
    backend = RedisBackend(url, cluster)
    reader, outbox = backend.inbox_reader("a", max_block_ms=2000), backend.outbox()
    times = []
    for i in range(trips):
        start = time.perf_counter()
        outbox.send([("b", str(i).encode())])
        got: list[bytes] = []
        while not got:
            got = reader.read(2000, 10)
        times.append(time.perf_counter() - start)
    peer.wait(30)
    backend.close()
    times.sort()
    return {
        "figure": "echo",
        "trips": trips,
        "p50_ms": round(statistics.median(times) * 1000, 3),
        "p99_ms": round(times[int(len(times) * 0.99)] * 1000, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an existing server (default: start one)")
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--entry-bytes", type=int, default=100)
    parser.add_argument("--trips", type=int, default=2000)
    parser.add_argument("--beats", type=int, default=1000)
    parser.add_argument("--peer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        echo_peer(args.url, args.peer, args.trips)
        return 0
    server = None
    url = args.url
    if url is None:
        server = RedisServer().start()
        url = server.url
    try:
        for result in (
            bench_heartbeat(url, args.beats),
            bench_send(url, args.entries, args.entry_bytes),
            bench_redis_py_pipeline(url, args.entries, args.entry_bytes),
            bench_echo(url, args.trips),
        ):
            sys.stdout.write(json.dumps(result) + "\n")
            sys.stdout.flush()
    finally:
        if server is not None:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

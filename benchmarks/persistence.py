"""Figures of gactors.persistence (SPEC §19, issue 25) on a real Redis and on SQLite.

Run from the repository root: ``python -m benchmarks.persistence [--url URL] [--quick]``
(without ``--url`` a throwaway server is started with the testkit launcher, the append
only file off as in the cluster benchmarks). Prints one JSON object per figure, then a
table with the targets of the issue:

* ``raw_evalsha``: the raw floor: redis-py ``EVALSHA`` of a minimal append script
  (``RPUSH`` + ``HSET``), one call after another from one greenlet;
* ``sequential``: one ``PersistentActor``, each command's persist awaited (ask) before
  the next is sent, on the redis store: events/s and its ratio to the floor, the floor
  also measured in the same process in alternating chunks of 500 (``floor_rate``,
  ``floor_ratio``): the ratio that does not depend on how the load of a shared machine
  changed between two subprocesses;
* ``concurrent``: 1,000 actors persisting at once, each one write outstanding at a
  time (it writes its next event once the last is confirmed): events/s from one
  process;
* ``recovery``: the recovery of one actor with 10,000 stored events (no snapshot), and
  with a snapshot every 1,000 (recovery then replays < 1,000 events);
* ``sqlite_concurrent``: 1,000 actors on the SQLite store, events/s, and the longest
  stall of the hub meanwhile (a greenlet ticking every 5 ms measures it).

The same figures are workloads of the harness (``python -m benchmarks``: ``persist_*``
and the floor ``redis_evalsha``), run interleaved with the others and in ``--quick``.

Figures, not assertions: the machine may be shared and noisy; the table says which
target each run met.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import argparse
import json
import os
import tempfile
import time
import uuid
from typing import Any

import gevent
import gevent.event
import redis

from gactors import ActorSystem, Props
from gactors.persistence import PersistentActor, RecoveryCompleted
from gactors.testkit._redis_server import RedisServer

_RAW_APPEND = """
local n = redis.call('HGET', KEYS[1], 'seq') or 0
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'seq', n + 1)
return 0
"""


class Writer(PersistentActor):
    """``("w", i)`` persists i and answers ``i``; ``"n"`` answers its sequence number."""

    def __init__(self, pid: str) -> None:
        self.persistence_id = pid
        self.count = 0

    def receive_recover(self, event: Any) -> None:
        if event is RecoveryCompleted:
            return
        if isinstance(event, int):
            self.count += 1
        elif hasattr(event, "snapshot"):
            self.count = event.snapshot

    def snapshot_state(self) -> Any:
        return self.count

    def receive_command(self, message: Any) -> None:
        if message == "n":
            self.sender.tell(self.last_sequence_nr)
        else:
            self.persist(message[1], self._done)

    def _done(self, event: int) -> None:
        self.count += 1
        if event < 0:  # told, not asked: count it, and write the next one
            _CONFIRMED[0] += 1
            if event > -_PER[0]:
                self.ref.tell(("w", event - 1))
            if _CONFIRMED[0] == _CONFIRMED[1]:
                _ALL_CONFIRMED.set()
        else:
            self.sender.tell(event)


def _writer(snapshot_every: int | None) -> type[Writer]:
    """:class:`Writer`, or a subclass saving a snapshot every ``snapshot_every`` events
    (``snapshot_every`` is read from the class, not from the instance)."""
    if not snapshot_every:
        return Writer
    return type("SnapshotWriter", (Writer,), {"snapshot_every": snapshot_every})


# Confirmations of told commands (negative values): [seen, wanted], and the event set
# when all are in: the concurrent figures measure persistence, not asks.
_CONFIRMED = [0, 0]
_PER = [0]  # events per actor: ("w", -1) ... ("w", -PER), each after the last is confirmed
_ALL_CONFIRMED = gevent.event.Event()


def _config(url: str | None, path: str | None) -> dict[str, Any]:
    if url is not None:
        table = {k: "redis" for k in ("journal", "snapshot_store", "state_store")}
        return {"persistence": {**table, "url": url}}
    table = {k: "sqlite" for k in ("journal", "snapshot_store", "state_store")}
    return {"persistence": {**table, "path": path}}


def bench_raw(url: str, n: int) -> dict[str, Any]:
    client = redis.Redis.from_url(url, protocol=2)
    sha = client.script_load(_RAW_APPEND)
    tag = "{raw" + uuid.uuid4().hex[:8] + "}"
    keys = (f"{tag}:h", f"{tag}:e")
    payload = b"\x00" * 8 + b"\x92\xa1e\x01"  # the size of a small stored event
    for _ in range(100):
        client.evalsha(sha, 2, *keys, payload)
    t0 = time.perf_counter()
    for _ in range(n):
        client.evalsha(sha, 2, *keys, payload)
    dt = time.perf_counter() - t0
    client.close()
    return {"figure": "raw_evalsha", "n": n, "rate": n / dt, "us_per_call": dt / n * 1e6}


CHUNK = 500
"""Events per chunk of the sequential figure, which alternates chunks of persists and
of raw EVALSHA calls (the same count of each)."""


def bench_sequential(url: str, n: int) -> dict[str, Any]:
    """``n`` persists of one actor, each awaited, and the raw floor in the same process:
    they alternate in chunks of :data:`CHUNK`, so both see the same load of a shared
    machine (measured one after the other, minutes apart, their ratio varied from 0.5x
    to 1.3x between rounds of one run)."""
    system = ActorSystem(f"bs{uuid.uuid4().hex[:6]}", config=_config(url, None))
    client = redis.Redis.from_url(url, protocol=2)
    try:
        sha = client.script_load(_RAW_APPEND)
        tag = "{raw" + uuid.uuid4().hex[:8] + "}"
        keys = (f"{tag}:h", f"{tag}:e")
        payload = b"\x00" * 8 + b"\x92\xa1e\x01"  # the size of a small stored event
        ref = system.actor_of(Props(Writer, f"seq-{uuid.uuid4().hex[:8]}"))
        for i in range(100):
            ref.ask(("w", i), timeout=10)
            client.evalsha(sha, 2, *keys, payload)
        persist_s = raw_s = 0.0
        done = 0
        while done < n:
            k = min(CHUNK, n - done)
            t0 = time.perf_counter()
            for i in range(done, done + k):
                ref.ask(("w", i), timeout=10)
            t1 = time.perf_counter()
            for _ in range(k):
                client.evalsha(sha, 2, *keys, payload)
            t2 = time.perf_counter()
            persist_s += t1 - t0
            raw_s += t2 - t1
            done += k
    finally:
        client.close()
        system.terminate()
        system.await_termination(30)
    return {
        "figure": "sequential",
        "n": n,
        "rate": n / persist_s,
        "us_per_event": persist_s / n * 1e6,
        "floor_rate": n / raw_s,
        "floor_ratio": raw_s / persist_s,
    }


def _concurrent(system: ActorSystem, actors: int, per: int, tag: str) -> tuple[float, float]:
    """``actors`` actors, each sent ``per`` commands at once; seconds until all are
    confirmed, and the longest hub stall seen meanwhile."""
    refs = [system.actor_of(Props(Writer, f"{tag}-{i}")) for i in range(actors)]
    for r in refs:  # recovered and warm
        r.ask("n", timeout=60)
    stall = [0.0]
    running = [True]

    def ticker() -> None:
        last = time.perf_counter()
        while running[0]:
            gevent.sleep(0.005)
            now = time.perf_counter()
            stall[0] = max(stall[0], now - last - 0.005)
            last = now

    tick = gevent.spawn(ticker)
    _CONFIRMED[:] = [0, actors * per]
    _PER[0] = per
    _ALL_CONFIRMED.clear()
    t0 = time.perf_counter()
    # Closed loops: each actor has one write outstanding at a time, as a writer whose
    # client waits for its confirmation (1,000 concurrent writers).
    for r in refs:
        r.tell(("w", -1))
    if not _ALL_CONFIRMED.wait(120):
        raise RuntimeError(f"only {_CONFIRMED[0]} of {actors * per} events confirmed")
    dt = time.perf_counter() - t0
    running[0] = False
    tick.join()
    return dt, stall[0]


def bench_concurrent(url: str, actors: int, per: int) -> dict[str, Any]:
    system = ActorSystem(f"bc{uuid.uuid4().hex[:6]}", config=_config(url, None))
    try:
        dt, stall = _concurrent(system, actors, per, f"cc{uuid.uuid4().hex[:6]}")
    finally:
        system.terminate()
        system.await_termination(30)
    n = actors * per
    return {
        "figure": "concurrent",
        "actors": actors,
        "n": n,
        "rate": n / dt,
        "stall_ms": stall * 1e3,
    }


def bench_sqlite(actors: int, per: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gactors-bench-sqlite-") as d:
        system = ActorSystem("bsq", config=_config(None, os.path.join(d, "p.sqlite3")))
        try:
            dt, stall = _concurrent(system, actors, per, "sq")
        finally:
            system.terminate()
            system.await_termination(30)
    n = actors * per
    return {
        "figure": "sqlite_concurrent",
        "actors": actors,
        "n": n,
        "rate": n / dt,
        "stall_ms": stall * 1e3,
    }


def bench_recovery(url: str, events: int, snapshot_every: int | None) -> dict[str, Any]:
    pid = f"rec-{uuid.uuid4().hex[:8]}"
    system = ActorSystem(f"br{uuid.uuid4().hex[:6]}", config=_config(url, None))
    try:
        ref = system.actor_of(Props(_writer(snapshot_every), pid))
        futures = []
        for i in range(events):
            futures.append(ref.ask(("w", i), timeout=120, block=False))
            if len(futures) >= 500:
                for f in futures:
                    f.get()
                futures = []
        for f in futures:
            f.get()
        gevent.sleep(0.5)  # the last snapshot is saved
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            again = system.actor_of(Props(_writer(snapshot_every), pid))
            assert again.ask("n", timeout=60) == events
            times.append(time.perf_counter() - t0)
            system.stop(again)
            gevent.sleep(0.05)
    finally:
        system.terminate()
        system.await_termination(30)
    times.sort()
    return {
        "figure": "recovery" if snapshot_every is None else "recovery_snapshots",
        "events": events,
        "snapshot_every": snapshot_every,
        "median_s": times[len(times) // 2],
        "best_s": times[0],
    }


# -- as workloads of the harness (python -m benchmarks: worker_gactors.py, worker_redis.py)
# N is the main count of the workload, PER its second one (benchmarks/spec.py); the
# server is the harness's, named by GACTORS_BENCH_REDIS_URL.
URL_ENV = "GACTORS_BENCH_REDIS_URL"


def _url() -> str:
    url = os.environ.get(URL_ENV, "")
    if not url:
        raise SystemExit(f"{URL_ENV} is not set (the harness starts the server)")
    return url


def _result(figure: dict[str, Any], count: int, seconds: float, **metrics: float) -> Any:
    return {"seconds": seconds, "count": count, "metrics": metrics, "figure": figure}


def persist_seq(args: Any) -> Any:
    """N sequential persists of one actor, each awaited (redis store)."""
    f = bench_sequential(_url(), args.n)
    return _result(
        f,
        f["n"],
        f["n"] / f["rate"],
        rate=f["rate"],
        floor_rate=f["floor_rate"],
        floor_ratio=f["floor_ratio"],
    )


def persist_concurrent(args: Any) -> Any:
    """PER actors persisting N events in all, one write outstanding each (redis)."""
    actors = args.per or 1000
    f = bench_concurrent(_url(), actors, max(1, args.n // actors))
    return _result(f, f["n"], f["n"] / f["rate"], rate=f["rate"], stall_ms=f["stall_ms"])


def persist_recovery(args: Any) -> Any:
    """Recovery of one actor with N stored events; with PER: a snapshot every PER."""
    f = bench_recovery(_url(), args.n, args.per or None)
    return _result(f, args.n, f["median_s"], median_s=f["median_s"], best_s=f["best_s"])


def persist_sqlite(args: Any) -> Any:
    """PER actors persisting N events in all on the SQLite store; the hub's worst stall."""
    actors = args.per or 1000
    f = bench_sqlite(actors, max(1, args.n // actors))
    return _result(f, f["n"], f["n"] / f["rate"], rate=f["rate"], stall_ms=f["stall_ms"])


def redis_evalsha(args: Any) -> Any:
    """The raw floor: N sequential redis-py EVALSHA calls of a minimal append script."""
    f = bench_raw(_url(), args.n)
    return _result(f, args.n, args.n / f["rate"], rate=f["rate"])


WORKLOADS = {
    "persist_seq": persist_seq,
    "persist_concurrent": persist_concurrent,
    "persist_recovery": persist_recovery,
    "persist_recovery_snap": persist_recovery,
    "persist_sqlite": persist_sqlite,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        figures = [
            bench_raw(url, 20_000 // q),
            bench_sequential(url, 20_000 // q),
            bench_concurrent(url, 1000, 50 // q if q > 1 else 50),
            bench_recovery(url, 10_000, None),
            bench_recovery(url, 10_000, 1000),
            bench_sqlite(1000, 20 // q if q > 1 else 20),
        ]
    finally:
        if server is not None:
            server.close()
    for f in figures:
        print(json.dumps(f))
    by = {f["figure"]: f for f in figures}
    ratio = by["sequential"]["floor_ratio"]
    rows = [
        (
            "raw floor: redis-py EVALSHA, sequential",
            f"{by['raw_evalsha']['rate']:,.0f} calls/s",
            "",
        ),
        (
            "sequential persist (1 actor, awaited)",
            f"{by['sequential']['rate']:,.0f} events/s ({ratio:.2f}x the floor "
            f"interleaved: {by['sequential']['floor_rate']:,.0f}/s)",
            "≥ 0.7x floor: " + ("met" if ratio >= 0.7 else "NOT met"),
        ),
        (
            "1,000 actors concurrently (redis)",
            f"{by['concurrent']['rate']:,.0f} events/s",
            "≥ 50,000/s: " + ("met" if by["concurrent"]["rate"] >= 50_000 else "NOT met"),
        ),
        (
            "recovery of 10,000 events",
            f"{by['recovery']['median_s'] * 1e3:,.0f} ms",
            "≤ 500 ms: " + ("met" if by["recovery"]["median_s"] <= 0.5 else "NOT met"),
        ),
        (
            "recovery, snapshot every 1,000",
            f"{by['recovery_snapshots']['median_s'] * 1e3:,.1f} ms",
            "≤ 50 ms: " + ("met" if by["recovery_snapshots"]["median_s"] <= 0.05 else "NOT met"),
        ),
        (
            "1,000 actors concurrently (sqlite)",
            f"{by['sqlite_concurrent']['rate']:,.0f} events/s, "
            f"hub stall ≤ {by['sqlite_concurrent']['stall_ms']:.0f} ms",
            "≥ 20,000/s, stall ≤ 50 ms: "
            + (
                "met"
                if by["sqlite_concurrent"]["rate"] >= 20_000
                and by["sqlite_concurrent"]["stall_ms"] <= 50
                else "NOT met"
            ),
        ),
    ]
    print("\n| figure | value | target |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Raw limits of redis-py on the benchmark's server: what the cluster transport rests on.

Run as ``python worker_redis.py WORKLOAD N [--per K]`` with redis-py importable and the
server's URL in ``GACTORS_BENCH_REDIS_URL``; prints one JSON line. Like every worker it
calls ``gevent.monkey.patch_all()`` first, so redis-py talks through gevent's sockets as
it does inside a gactors node. These are not actor systems: they bound what a transport
built on Redis Streams can reach on this machine.

``python worker_redis.py --echo URL IN OUT`` is the other process of ``redis_echo``.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import argparse
import os
import subprocess
import sys
import time
import uuid

import gevent
import redis
from _worker_common import Result, latency_result, rate_result, run_worker

URL_ENV = "GACTORS_BENCH_REDIS_URL"
# One message: about the size of a small encoded tell (recipient, sender, payload).
MESSAGE = b"\x95\x00\x92\xa7/user/a\x01\xc0\x01\xc4\x10" + b"x" * 16
# Approximate trimming keeps the stream bounded, as a node's inbox is.
MAXLEN = 100_000


def _client() -> redis.Redis:
    url = os.environ.get(URL_ENV, "")
    if not url:
        raise SystemExit(f"{URL_ENV} is not set (the harness starts the server)")
    return redis.Redis.from_url(url, socket_keepalive=True)


def _stream() -> str:
    return f"gactors-bench:{uuid.uuid4().hex}"


def redis_xadd(args: argparse.Namespace) -> Result:
    """N XADDs of one message each, sent in pipelines of PER commands."""
    n, per = args.n, args.per or 100
    r = _client()
    key = _stream()
    try:
        t0 = time.perf_counter()
        sent = 0
        while sent < n:
            k = min(per, n - sent)
            pipe = r.pipeline(transaction=False)
            for _ in range(k):
                pipe.xadd(key, {b"m": MESSAGE}, maxlen=MAXLEN, approximate=True)
            pipe.execute()
            sent += k
        return rate_result(n, time.perf_counter() - t0)
    finally:
        r.delete(key)


def redis_xadd_batch(args: argparse.Namespace) -> Result:
    """N messages packed PER to an entry (one blob), entries sent in pipelines of 100."""
    n, per = args.n, args.per or 100
    r = _client()
    key = _stream()
    blob = MESSAGE * per
    entries = max(1, n // per)
    try:
        t0 = time.perf_counter()
        sent = 0
        while sent < entries:
            k = min(100, entries - sent)
            pipe = r.pipeline(transaction=False)
            for _ in range(k):
                pipe.xadd(key, {b"b": blob}, maxlen=MAXLEN, approximate=True)
            pipe.execute()
            sent += k
        return rate_result(entries * per, time.perf_counter() - t0)
    finally:
        r.delete(key)


def redis_echo(args: argparse.Namespace) -> Result:
    """XADD to a stream another process reads with XREAD BLOCK and echoes back: N trips."""
    n = args.n
    r = _client()
    inbox, outbox = _stream(), _stream()
    child = subprocess.Popen(
        [sys.executable, __file__, "--echo", os.environ[URL_ENV], inbox, outbox, str(n)]
    )
    try:
        last = b"$"
        samples = []
        # The first trip also waits for the child to start reading (not counted).
        for i in range(n + 1):
            t0 = time.perf_counter()
            r.xadd(inbox, {b"m": MESSAGE}, maxlen=MAXLEN, approximate=True)
            got = r.xread({outbox: last}, count=1, block=30_000)
            if not got:
                raise RuntimeError("no echo within 30 s")
            last = got[0][1][-1][0]
            if i:
                samples.append(time.perf_counter() - t0)
        return latency_result(samples)
    finally:
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        r.delete(inbox, outbox)


def _echo_main(url: str, inbox: str, outbox: str, n: int) -> None:
    r = redis.Redis.from_url(url, socket_keepalive=True)
    last = b"0-0"
    for _ in range(n + 1):
        got = r.xread({inbox: last}, count=1, block=30_000)
        if not got:
            return
        last = got[0][1][-1][0]
        r.xadd(outbox, {b"m": MESSAGE}, maxlen=MAXLEN, approximate=True)


# The raw floor of gactors.persistence's redis store: a minimal append (the same script
# as benchmarks/persistence.py's): read the head, push the event, move the head.
_APPEND = """
local n = redis.call('HGET', KEYS[1], 'seq') or 0
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'seq', n + 1)
return 0
"""


def redis_evalsha(args: argparse.Namespace) -> Result:
    """N sequential EVALSHA calls of a minimal append script, one after the other."""
    n = args.n
    r = _client()
    sha = r.script_load(_APPEND)
    tag = "{gactors-bench-" + uuid.uuid4().hex[:8] + "}"
    keys = (f"{tag}:h", f"{tag}:e")
    payload = b"\x00" * 8 + b"\x92\xa1e\x01"  # the size of a small stored event
    try:
        for _ in range(min(100, n)):
            r.evalsha(sha, 2, *keys, payload)
        t0 = time.perf_counter()
        for _ in range(n):
            r.evalsha(sha, 2, *keys, payload)
        return rate_result(n, time.perf_counter() - t0)
    finally:
        r.delete(*keys)


WORKLOADS = {
    "redis_evalsha": redis_evalsha,
    "redis_xadd": redis_xadd,
    "redis_xadd_batch": redis_xadd_batch,
    "redis_echo": redis_echo,
}


def _versions() -> dict[str, str]:
    server = _client().info("server")
    return {
        "redis-py": redis.__version__,
        "server": f"{server.get('redis_version', '?')}",
        "gevent": gevent.__version__,
    }


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--echo":
        _echo_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        run_worker("redis", WORKLOADS, _versions)

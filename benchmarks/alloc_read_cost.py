"""What a region's read of its allocation table costs: ``python -m benchmarks.alloc_read_cost``.

Every region reads its type's table once a heartbeat (four times while its shards
move), on the one Redis slot of the membership. This starts a throwaway server, makes
a table of 3 hosting regions with 100 and with 1,000 shards, and times the two reads
the region makes: without a snapshot (the whole table, parsed) and with the
``(epoch, version)`` of the last one while nothing changed (``alloc_sync.lua``'s short
reply, the usual case). Prints one JSON line per case: the median and p90 of 300 reads
in ms, client round trip included. Figures, not assertions.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid

from gactors.cluster._redis import RedisBackend
from gactors.testkit._redis_server import RedisServer


def main() -> None:
    with RedisServer() as server:
        for n in (100, 1000):
            backend = RedisBackend(server.url, f"bench{uuid.uuid4().hex[:6]}")
            try:
                nodes = [f"node{i}" for i in range(3)]
                for node in nodes:
                    backend.membership().join(node, ())
                store = backend.allocations()
                for node in nodes:
                    t = store.register("bench", node, True, n)
                t = store.plan("bench", t.version, t.epoch, [nodes[s % 3] for s in range(n)])
                for case, seen in (("whole table", None), ("unchanged", (t.epoch, t.version))):
                    times = []
                    for _ in range(300):
                        t0 = time.perf_counter()
                        reply = store.sync("bench", seen)
                        times.append((time.perf_counter() - t0) * 1e3)
                    if (reply is None) != (seen is not None):
                        raise AssertionError(f"{case}: unexpected reply {reply!r}")
                    times.sort()
                    print(
                        json.dumps(
                            {
                                "shards": n,
                                "read": case,
                                "median_ms": round(statistics.median(times), 3),
                                "p90_ms": round(times[int(len(times) * 0.9)], 3),
                            }
                        )
                    )
            finally:
                backend.close()


if __name__ == "__main__":
    main()

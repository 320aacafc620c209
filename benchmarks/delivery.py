"""Figures of gactors.delivery (SPEC §20, issue 26): reliable delivery vs plain sharded tell.

Run from the repository root: ``python -m benchmarks.delivery [--url URL] [--quick]``
(without ``--url`` a throwaway server is started with the testkit launcher). One
cluster node in this process hosts 100 entities of a sharded type; in the same run:

* ``plain_tell``: N messages (median of 3 rounds) told round robin through
  ``EntityRef.tell`` to entities that count them; messages/s until the last one is counted;
* ``reliable``: the same N messages through a ``ReliableSender`` (no store, window
  100) to ``ReliableEntity`` actors (dedup, cumulative confirms), one sending greenlet
  per entity, median of 3 rounds; messages/s until every one is processed and confirmed;
* ``reliable_durable``: as ``reliable`` with a durable sender (every message
  journaled on the redis store before ``send`` returns) and persistent entities (every
  message an event), for scale: this one pays two store writes per message.

Prints one JSON object per figure, then a table with the issue's target (reliable
≥ 30 % of plain tell). Figures, not assertions: the machine may be shared and noisy.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import argparse
import json
import time
import uuid
from statistics import median
from typing import Any

import gevent
import gevent.event

from gactors import Actor, ActorSystem, Props
from gactors.cluster import ClusterSharding
from gactors.delivery import ReliableEntity, ReliableSender
from gactors.persistence import PersistentActor
from gactors.testkit._redis_server import RedisServer

ENTITIES = 100
#: Rounds of the plain and the reliable figure (the median is reported).
ROUNDS = 3
_COUNT = [0]
_TARGET = [0]
_DONE = gevent.event.Event()


def _bump() -> None:
    _COUNT[0] += 1
    if _COUNT[0] >= _TARGET[0]:
        _DONE.set()


class Plain(Actor):
    def receive(self, m: Any) -> None:
        _bump()


class Reliable(ReliableEntity, Actor):
    def receive(self, m: Any) -> None:
        _bump()


class DurableReliable(ReliableEntity, PersistentActor):
    def receive_command(self, m: Any) -> None:
        self.persist(m, lambda _: _bump())


def _reset(n: int) -> None:
    _COUNT[0] = 0
    _TARGET[0] = n
    _DONE.clear()


def _node(url: str) -> ActorSystem:
    return ActorSystem(
        f"bd{uuid.uuid4().hex[:8]}",
        config={"cluster": {"url": url, "heartbeat_interval": 0.5}, "persistence": {}},
    )


def _plain(system: ActorSystem, entities: int) -> list[Any]:
    """Start the plain type and its entities; returns their refs."""
    sharding = ClusterSharding(system)
    sharding.start("Plain", Props(Plain), passivate_idle_after=None)
    refs = [sharding.entity_ref("Plain", f"e{k}") for k in range(entities)]
    _reset(entities)
    for r in refs:
        r.tell("warm", None)
    _DONE.wait(60)
    return refs


def _plain_round(refs: list[Any], n: int) -> float:
    """N tells round robin; messages/s until the last one is counted."""
    _reset(n)
    t0 = time.perf_counter()
    for i in range(n):
        refs[i % len(refs)].tell(i, None)
        if i % 1000 == 999:
            gevent.sleep(0)  # let the region flush, as a real caller would
    if not _DONE.wait(120):
        raise RuntimeError(f"plain: {_COUNT[0]} of {n}")
    return n / (time.perf_counter() - t0)


def bench_plain(system: ActorSystem, n: int) -> dict[str, Any]:
    refs = _plain(system, ENTITIES)
    rates = [_plain_round(refs, n) for _ in range(ROUNDS)]
    return {"figure": "plain_tell", "messages": n, "rates": rates, "rate": median(rates)}


def _reliable(
    system: ActorSystem, type_name: str, props: Props, durable: bool, entities: int
) -> ReliableSender:
    """Start the type and a sender; one message to each entity (starts them)."""
    sharding = ClusterSharding(system)
    sharding.start(type_name, props, passivate_idle_after=None)
    sender = ReliableSender(system, type_name, f"bench-{type_name}", window=100, durable=durable)
    sender.ready(30)
    _reset(entities)
    for k in range(entities):
        sender.send(f"e{k}", -1)
    _DONE.wait(60)
    return sender


def _reliable_round(sender: ReliableSender, n: int, entities: int, name: str) -> float:
    """N messages, one sending greenlet per entity; messages/s until every one is
    processed and confirmed."""
    per = n // entities

    def stream(k: int) -> None:
        eid = f"e{k}"
        for i in range(per):
            sender.send(eid, i)

    total = per * entities
    _reset(total)
    t0 = time.perf_counter()
    workers = [gevent.spawn(stream, k) for k in range(entities)]
    gevent.joinall(workers, raise_error=True)
    if not _DONE.wait(180):
        raise RuntimeError(f"{name}: {_COUNT[0]} of {total}")
    while any(sender.pending(f"e{k}") for k in range(entities)):
        gevent.sleep(0.01)
    return total / (time.perf_counter() - t0)


def _bench_reliable(
    system: ActorSystem, n: int, type_name: str, props: Props, durable: bool
) -> dict[str, Any]:
    sender = _reliable(system, type_name, props, durable, ENTITIES)
    rates = [
        _reliable_round(sender, n, ENTITIES, type_name) for _ in range(1 if durable else ROUNDS)
    ]
    return {
        "figure": "reliable_durable" if durable else "reliable",
        "messages": (n // ENTITIES) * ENTITIES,
        "rates": rates,
        "rate": median(rates),
        "resent": sender.stats.resent,
    }


def bench_pairs(system: ActorSystem, n: int, entities: int, pairs: int = ROUNDS) -> dict[str, Any]:
    """Plain tell and reliable delivery interleaved (plain, reliable, plain, ...) in one
    process, so that each ratio is taken under the same load of the machine."""
    refs = _plain(system, entities)
    sender = _reliable(system, "Rel", Props(Reliable), False, entities)
    plain, reliable = [], []
    for _ in range(pairs):
        plain.append(_plain_round(refs, n))
        reliable.append(_reliable_round(sender, n, entities, "Rel"))
    ratios = [r / p for p, r in zip(plain, reliable, strict=True)]
    return {
        "figure": "pairs",
        "messages": n,
        "entities": entities,
        "plain_rates": plain,
        "reliable_rates": reliable,
        "ratios": ratios,
        "resent": sender.stats.resent,
    }


# -- the harness's workload (python -m benchmarks): the server is the harness's ----------
URL_ENV = "GACTORS_BENCH_REDIS_URL"


def delivery(args: Any) -> Any:
    """N messages to PER entities, plain tell and reliable delivery interleaved."""
    import os

    url = os.environ.get(URL_ENV, "")
    if not url:
        raise SystemExit(f"{URL_ENV} is not set (the harness starts the server)")
    entities = args.per or ENTITIES
    system = _node(url)
    try:
        f = bench_pairs(system, max(args.n, entities), entities)
    finally:
        system.terminate()
        system.await_termination(15)
    n = f["messages"] * ROUNDS * 2
    seconds = sum(f["messages"] / r for r in f["plain_rates"] + f["reliable_rates"])
    return {
        "seconds": seconds,
        "count": n,
        "figure": f,
        "metrics": {
            "plain_rate": median(f["plain_rates"]),
            "reliable_rate": median(f["reliable_rates"]),
            "ratio": median(f["ratios"]),
            "ratio_min": min(f["ratios"]),
        },
    }


WORKLOADS = {"delivery": delivery}


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
    n = 10_000 if args.quick else 50_000
    system = _node(url)
    try:
        figures = [
            bench_plain(system, n),
            _bench_reliable(system, n, "Rel", Props(Reliable), durable=False),
            _bench_reliable(system, n // 5, "Dur", Props(DurableReliable), durable=True),
        ]
    finally:
        system.terminate()
        system.await_termination(15)
        if server is not None:
            server.close()
    for f in figures:
        print(json.dumps(f))
    by = {f["figure"]: f for f in figures}
    ratio = by["reliable"]["rate"] / by["plain_tell"]["rate"]
    rows = [
        ("plain sharded tell, 100 entities", f"{by['plain_tell']['rate']:,.0f} msg/s", ""),
        (
            "reliable delivery, 100 entities",
            f"{by['reliable']['rate']:,.0f} msg/s ({ratio:.0%} of plain)",
            "≥ 30 % of plain: " + ("met" if ratio >= 0.3 else "NOT met"),
        ),
        (
            "reliable, durable sender + persistent entities",
            f"{by['reliable_durable']['rate']:,.0f} msg/s",
            "",
        ),
    ]
    print("\n| figure | value | target |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

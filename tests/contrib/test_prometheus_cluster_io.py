"""Remote flush and read latencies and the inbox backlog of a cluster node (issue 28),
on a real Redis: two nodes in this process, scraped through their own registries."""

from __future__ import annotations

from typing import Any

import gevent
import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("redis")
pytest.importorskip("msgspec")

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gactors import Actor, Props
from gactors.cluster import _transport
from gactors.contrib.prometheus import metrics_app
from gactors.testkit import await_condition

from .test_prometheus import metered_nodes, scrape_wsgi

pytestmark = [pytest.mark.timeout(120)]


class _Counter(Actor):
    def __init__(self) -> None:
        self.seen = 0

    def receive(self, message: Any) -> None:
        if message == "count?":
            self.sender.tell(self.seen)
        else:
            self.seen += 1


def _samples(registry: CollectorRegistry) -> dict[str, float]:
    """``name`` (histogram buckets and other labelled samples left out) -> value."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(scrape_wsgi(metrics_app(registry))):
        for s in family.samples:
            if "le" not in s.labels:
                out[s.name] = s.value
    return out


def test_flush_and_read_latencies_and_the_inbox_backlog(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reads of 4 entries: a backlog of a few dozen entries makes full reads, so the
    # reads after them are sent without blocking and timed.
    monkeypatch.setattr(_transport, "_READ_COUNT", 4)
    with metered_nodes(redis_url, "prom-io") as (a, b, ra, rb):
        b.actor_of(Props(_Counter), "counter")
        counter = a.actor_selection(f"{b.address}/user/counter").resolve_one(timeout=10.0)
        assert counter.ask("count?", timeout=10.0) == 0
        before = _samples(ra)
        assert before["gactors_cluster_flush_seconds_count"] >= 1  # the asks went out
        assert _samples(rb)["gactors_cluster_read_seconds_count"] == 0  # never a backlog
        # The backlog is sampled by the heartbeat: 0 while the reader keeps up.
        await_condition(
            lambda: _samples(rb).get("gactors_cluster_inbox_backlog") == 0, timeout=10.0
        )

        # Hold b's reader back: what a sends piles up in b's inbox.
        node: Any = b.provider
        # (This thread runs both systems' hub: their greenlets are handled directly.)
        node._reader.kill(timeout=10.0)
        assert node._reader.dead
        sent = 40
        for i in range(sent):
            counter.tell(i)
            gevent.sleep(0.005)  # one flush (one inbox entry) each, mostly
        after = _samples(ra)
        # One flush at least for the tells (per flush, never per message: fewer than 40
        # may be counted when tells share a flush).
        flushes = (
            after["gactors_cluster_flush_seconds_count"]
            - before["gactors_cluster_flush_seconds_count"]
        )
        assert 1 <= flushes <= sent, flushes
        assert (
            after["gactors_cluster_flush_seconds_sum"] > before["gactors_cluster_flush_seconds_sum"]
        )
        await_condition(
            lambda: _samples(rb).get("gactors_cluster_inbox_backlog", 0) >= 8, timeout=10.0
        )

        # The reader back: the backlog is read (full reads, then timed non-blocking
        # ones) and the gauge goes back to 0.
        node._reader = gevent.spawn(node._read_loop)
        await_condition(lambda: counter.ask("count?", timeout=10.0) == sent, timeout=20.0)
        await_condition(
            lambda: _samples(rb).get("gactors_cluster_inbox_backlog") == 0, timeout=10.0
        )
        final_b = _samples(rb)
        assert final_b["gactors_cluster_read_seconds_count"] >= 1
        assert final_b["gactors_cluster_read_seconds_sum"] > 0

"""docs/grafana/gactors.json: a Grafana dashboard that only queries metrics gactors exports.

The names are checked against a real scrape of :mod:`gactors.contrib.prometheus` (with a
cluster member list stood in, so the cluster gauge is exported too), not against a list
kept by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gactors import Actor, ActorSystem, Props
from gactors.contrib.prometheus import ActorSystemMetrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "gactors.json"
_METRIC = re.compile(r"\bgactors_[a-z_]+\b")


class _Echo(Actor):
    def receive(self, message: Any) -> None:
        self.sender.tell(message)


def exported_names(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    import gactors.contrib.prometheus as prometheus

    monkeypatch.setattr(
        prometheus,
        "cluster_members",
        lambda s: [{"address": "gactors://grafana@a", "status": "up", "roles": []}],
    )
    # And the node's counters, latencies and backlog (as a ClusterNode has them).
    from gactors._timing import Histo

    node = SimpleNamespace(
        stats=dict.fromkeys(("sent", "dead_letters", "unknown", "full", "received", "drained"), 0),
        flush_seconds=Histo(),
        read_seconds=Histo(),
        inbox_backlog=0,
    )
    monkeypatch.setattr(prometheus, "_cluster_node", lambda s: node)
    registry = CollectorRegistry()
    # Every actor class timed, and one ask answered: the per-class histograms too.
    with ActorSystem("grafana", config={"metrics": {"timed_actors": ["*"]}}) as system:
        ActorSystemMetrics(system, registry=registry, interval=None)
        assert system.actor_of(Props(_Echo)).ask("hi") == "hi"
        text = generate_latest(registry).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    found = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            found.append((f"panel {panel['title']!r} target {target['refId']}", target["expr"]))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            found.append((f"variable {var['name']!r}", var["query"]["query"]))
    return found


def test_the_dashboard_queries_only_exported_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = exported_names(monkeypatch)
    assert {
        "gactors_messages_processed_total",
        "gactors_cluster_members",
        "gactors_message_processing_seconds_bucket",
        "gactors_ask_seconds_bucket",
        "gactors_mailbox_wait_seconds_bucket",
        "gactors_cluster_messages_total",
        "gactors_cluster_flush_seconds_bucket",
        "gactors_cluster_read_seconds_bucket",
        "gactors_cluster_inbox_backlog",
    } <= exported
    found = queries(dashboard)
    assert len(found) >= len(dashboard["panels"])
    used: set[str] = set()
    for where, expr in found:
        names = set(_METRIC.findall(expr))
        assert names, f"{where}: {expr!r} names no gactors metric"
        unknown = names - exported
        assert not unknown, f"{where}: {sorted(unknown)} not exported ({sorted(exported)})"
        for open_, close in ("()", "{}", "[]"):
            assert expr.count(open_) == expr.count(close), f"{where}: unbalanced {open_}{close}"
        used |= names
    # Every family the exporter has is on the dashboard somewhere.
    families = {n for n in exported if not n.endswith("_created")}
    assert families - used == set(), "metrics the dashboard does not show"


def test_the_dashboard_is_a_well_formed_grafana_document() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: set[tuple[int, int]] = set()
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        assert panel["type"] in {"stat", "timeseries", "gauge", "table"}, panel["type"]
        assert panel["datasource"]["uid"].strip("${}") in variables
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, f"{panel['title']}: off the grid"
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
        for target in panel["targets"]:
            for var in re.findall(r"\$(\w+)", target["expr"]):
                assert var in variables or var.startswith("__"), f"unknown variable ${var}"

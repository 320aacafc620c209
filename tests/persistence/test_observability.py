"""Persistence seen from outside: the dashboard's per-actor data and the Prometheus
metrics (events persisted, persist latency, failures, rejections, recovery time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gactors import Actor, ActorSystem, Props
from gactors.cluster._lease import LeasedProps
from gactors.contrib.dashboard import DashboardApp
from gactors.persistence._extension import persistence_of
from gactors.testkit import TestProbe, await_condition
from gactors.testkit.persistence import MemoryPersistence

from ._recorder import Recorder
from .test_durable import Account

T = 10.0


class _Plain(Actor):
    def receive(self, message: Any) -> None:
        self.sender.tell(message)


def _rows(app: DashboardApp) -> dict[str, dict[str, Any]]:
    import json

    body: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        body["status"] = status

    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/api/state",
        "QUERY_STRING": "open=/user",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
    }
    data = b"".join(app(environ, start_response))
    assert body["status"] == "200 OK", data
    return {n["path"]: n for n in json.loads(data)["tree"]}


def test_the_dashboard_shows_persistence_id_sequence_nr_and_fencing_token(
    psys: ActorSystem,
) -> None:
    probe = TestProbe(psys)
    rec = psys.actor_of(Props(Recorder, "cart|1", [], probe.ref), "rec")
    leased = psys.actor_of(
        LeasedProps.of(Props(Recorder, "cart|2", [], probe.ref), None, 7), "leased"
    )
    acct = psys.actor_of(Props(Account, "acct|1"), "acct")
    plain = psys.actor_of(Props(_Plain), "plain")
    for e in ("a", "b", "c"):
        probe.send(rec, ("persist", e))
        assert probe.receive_one(T)[0] == "done"
    probe.send(leased, ("persist", "x"))
    assert probe.receive_one(T) == ("done", "x", 1)
    probe.send(acct, ("add", 5))
    assert probe.receive_one(T)[0] == "ok"
    probe.send(plain, "ping")
    assert probe.receive_one(T) == "ping"

    rows = _rows(DashboardApp(psys))
    assert rows["/user/rec"]["persistence"] == {"id": "cart|1", "sequence_nr": 3}
    assert rows["/user/leased"]["persistence"] == {
        "id": "cart|2",
        "sequence_nr": 1,
        "fencing_token": 7,
    }
    assert rows["/user/acct"]["persistence"] == {"id": "acct|1", "revision": 1}
    assert "persistence" not in rows["/user/plain"]
    # The node view (one actor and its children) carries it too.
    from gactors._observer import observer_for

    node = observer_for(psys).node("/user/rec", 10)
    assert node is not None and node["node"]["persistence"]["sequence_nr"] == 3


prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from gactors.contrib.prometheus import ActorSystemMetrics  # noqa: E402


def _samples(registry: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def metrics(psys: ActorSystem) -> Iterator[Any]:
    registry = CollectorRegistry()
    ActorSystemMetrics(psys, registry=registry, interval=None)
    yield registry


def _v(registry: Any, name: str, **labels: str) -> float:
    return _samples(registry)[(name, tuple(sorted({"system": "persist", **labels}.items())))]


def test_prometheus_counts_persisted_events_latency_and_recoveries(
    psys: ActorSystem, metrics: Any
) -> None:
    # Exported at 0 from the start (rate() needs the first sample).
    assert _v(metrics, "gactors_persistence_events_persisted_total") == 0
    assert _v(metrics, "gactors_persistence_failures_total") == 0
    assert _v(metrics, "gactors_persistence_rejections_total") == 0
    assert _v(metrics, "gactors_persistence_recovery_seconds_count") == 0
    probe = TestProbe(psys)
    a = psys.actor_of(Props(Recorder, "m1", [], probe.ref))
    b = psys.actor_of(Props(Recorder, "m2", [], probe.ref))
    probe.send(a, ("persist_all", ["x", "y", "z"]))
    for _ in range(3):
        assert probe.receive_one(T)[0] == "done"
    probe.send(b, ("persist", "w"))
    assert probe.receive_one(T)[0] == "done"
    acct = psys.actor_of(Props(Account, "acct|m"))
    probe.send(acct, ("add", 1))
    assert probe.receive_one(T)[0] == "ok"
    assert _v(metrics, "gactors_persistence_events_persisted_total") == 5
    batches = _v(metrics, "gactors_persistence_persist_seconds_count")
    assert 1 <= batches <= 3
    assert 0 < _v(metrics, "gactors_persistence_persist_seconds_sum") < 5
    # Three recoveries (two event-sourced, one durable state).
    assert _v(metrics, "gactors_persistence_recovery_seconds_count") == 3
    assert _v(metrics, "gactors_persistence_recovery_seconds_bucket", le="+Inf") == 3


def test_prometheus_counts_failures_and_rejections(
    psys: ActorSystem, mem: MemoryPersistence, metrics: Any
) -> None:
    probe = TestProbe(psys)
    a = psys.actor_of(Props(Recorder, "r1", [], probe.ref))
    mem.reject_next_write()
    probe.send(a, ("persist_all", ["x", "y"]))
    assert probe.receive_one(T)[0] == "rejected"
    assert probe.receive_one(T)[0] == "rejected"
    probe.send(a, ("persist", object()))  # the encoder refuses it
    assert probe.receive_one(T)[0] == "rejected"
    assert _v(metrics, "gactors_persistence_rejections_total") == 3
    mem.fail_next_write()
    probe.send(a, ("persist", "boom"))
    assert probe.receive_one(T)[0] == "failure"
    await_condition(lambda: _v(metrics, "gactors_persistence_failures_total") == 1, T)
    assert _v(metrics, "gactors_persistence_events_persisted_total") == 0
    # A durable state actor's refused and failed writes count too.
    acct = psys.actor_of(Props(Account, "acct|f", probe.ref))
    probe.send(acct, ("set", object()))
    assert probe.receive_one(T)[0] == "rejected"
    assert _v(metrics, "gactors_persistence_rejections_total") == 4
    mem.fail_next_write()
    probe.send(acct, ("add", 1))
    assert probe.receive_one(T)[0] == "failure"
    assert _v(metrics, "gactors_persistence_failures_total") == 2


def test_no_metrics_no_listener_and_a_terminated_system_unhooks(mem: MemoryPersistence) -> None:
    from gactors.testkit.persistence import MEMORY_CONFIG

    with ActorSystem("plain", config={"persistence": dict(MEMORY_CONFIG)}) as system:
        pers = persistence_of(system)
        assert pers.listeners == []  # nothing measured unless metrics ask
        ActorSystemMetrics(system, registry=CollectorRegistry(), interval=None)
        assert len(pers.listeners) == 1
    assert pers.listeners == []

"""gactors.contrib.prometheus: scrape, parse with prometheus_client's parser, see values move.

The multiprocess test runs two worker processes writing to one
``PROMETHEUS_MULTIPROC_DIR`` (as gunicorn workers do) and one scrape adding them up.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pytest

prometheus_client = pytest.importorskip(
    "prometheus_client", reason="needs prometheus_client: pip install 'gactors[prometheus]'"
)
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from gactors import Actor, ActorSystem, HubBlocked, Props  # noqa: E402
from gactors.contrib.prometheus import ActorSystemMetrics, metrics_app  # noqa: E402
from gactors.testkit import await_condition  # noqa: E402


class Worker(Actor):
    def receive(self, message: Any) -> None:
        if isinstance(message, BaseException):
            raise message


class Holder(Actor):
    """Waits on every message until ``release`` is set, so its mailbox fills."""

    release = gevent.event.Event()

    def receive(self, message: Any) -> None:
        Holder.release.wait(30)


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def scrape_wsgi(app: Any) -> str:
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"] = status

    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/metrics",
        "QUERY_STRING": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
    }
    body = b"".join(app(environ, start_response))
    assert seen["status"].startswith("200"), seen
    return body.decode()


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("metrics")
    try:
        yield s
    finally:
        Holder.release.set()
        s.terminate()
        assert s.await_termination(10)


def test_scrape_and_values_move(system: ActorSystem) -> None:
    registry = CollectorRegistry()
    ActorSystemMetrics(system, registry=registry, interval=None)
    app = metrics_app(registry)
    first_text = scrape_wsgi(app)
    first = parse(first_text)
    sys_ = {"system": "metrics"}
    assert value(first, "gactors_actors", **sys_) == 3
    # Every counter is there at 0 before its first event (rate() needs the first sample).
    assert value(first, "gactors_messages_processed_total", **sys_) == 0
    assert value(first, "gactors_dead_letters_total", **sys_) == 0
    assert value(first, "gactors_failures_total", directive="restart", **sys_) == 0
    assert value(first, "gactors_hub_blocked_seconds_total", **sys_) == 0
    # No cluster, no member gauge: not even its HELP and TYPE lines without a sample.
    assert "gactors_cluster_members" not in first_text

    worker = system.actor_of(Props(Worker), "worker")
    for i in range(40):
        worker.tell(i)
    worker.tell(ValueError("boom"))
    worker.tell(ValueError("boom again"))
    holder = system.actor_of(Props(Holder), "holder")
    for i in range(11):
        holder.tell(i)
    for i in range(7):
        system.dead_letters.tell(i)
    system.event_stream.publish(HubBlocked("gactors://metrics/user/worker", 0.25, ""))

    def moved() -> Samples:
        now = parse(scrape_wsgi(app))
        assert value(now, "gactors_actors", **sys_) == 5
        assert value(now, "gactors_mailbox_messages", **sys_) == 10
        assert value(now, "gactors_mailbox_max_depth", **sys_) == 10
        assert value(now, "gactors_failures_total", directive="restart", **sys_) == 2
        assert value(now, "gactors_dead_letters_total", **sys_) == 7
        assert value(now, "gactors_hub_blocked_total", **sys_) == 1
        assert value(now, "gactors_hub_blocked_seconds_total", **sys_) == pytest.approx(0.25)
        # 40 + 2 at least (the holder's first message counts once its batch is over).
        assert value(now, "gactors_messages_processed_total", **sys_) >= 42
        return now

    deadline = time.monotonic() + 10
    while True:
        try:
            moved()
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            gevent.sleep(0.05)


def test_periodic_refresh_without_scrapes(system: ActorSystem) -> None:
    registry = CollectorRegistry()
    ActorSystemMetrics(system, registry=registry, interval=0.05)
    for _ in range(5):
        system.actor_of(Props(Worker))
    # get_sample_value reads the gauge as it is: no scrape-time refresh involved.
    await_condition(
        lambda: registry.get_sample_value("gactors_actors", {"system": "metrics"}) == 8,
        timeout=10,
        interval=0.02,
        message="the periodic refresh set gactors_actors to 8",
    )


def test_terminated_system_drops_its_gauges() -> None:
    registry = CollectorRegistry()
    with ActorSystem("gone") as s:
        ActorSystemMetrics(s, registry=registry, interval=None)
        s.dead_letters.tell("x")
        gevent.sleep(0.05)
        assert registry.get_sample_value("gactors_actors", {"system": "gone"}) == 3
    samples = parse(generate_latest(registry).decode())
    assert ("gactors_actors", (("system", "gone"),)) not in samples
    assert value(samples, "gactors_dead_letters_total", system="gone") == 1


def test_bad_interval_is_refused(system: ActorSystem) -> None:
    with pytest.raises(ValueError, match="interval"):
        ActorSystemMetrics(system, registry=CollectorRegistry(), interval=0)


# -- gunicorn-style: several processes, one directory -----------------------------------------

WORKER = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import sys, gevent
    from gactors import Actor, ActorSystem, Props
    from gactors.contrib.prometheus import ActorSystemMetrics, metrics_app

    actors, dead, scrape = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "scrape"
    system = ActorSystem("shop")
    ActorSystemMetrics(system, interval=0.05)
    for _ in range(actors):
        system.actor_of(Props(Actor))
    for i in range(dead):
        system.dead_letters.tell(i)
    gevent.sleep(0.3)  # a few periodic refreshes
    print("ready", flush=True)
    if scrape:
        # This worker answers the scrape for both: what metrics_app serves in a worker.
        out = {}
        body = b"".join(metrics_app()(
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "",
             "SERVER_NAME": "x", "SERVER_PORT": "80", "wsgi.url_scheme": "http"},
            lambda status, headers: out.setdefault("status", status)))
        print(body.decode(), flush=True)
        print("end", flush=True)
    sys.stdin.readline()  # stay alive (live gauges) until told to go
    system.terminate(); system.await_termination(10)
    """
)


def _start(tmp: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp,
    )


def _read_until(proc: subprocess.Popen[str], marker: str) -> str:
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"worker ended before {marker!r}: {''.join(lines)}")
        if line.strip() == marker:
            return "".join(lines)
        lines.append(line)
    raise AssertionError(f"no {marker!r} within 60 s")


def test_multiprocess_mode_adds_up_the_workers(tmp_path: Path) -> None:
    from prometheus_client import multiprocess

    mp_dir = tmp_path / "prom"
    mp_dir.mkdir()
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(mp_dir))
    first = _start(tmp_path, env, "4", "3", "quiet")
    second = None
    try:
        _read_until(first, "ready")
        second = _start(tmp_path, env, "10", "5", "scrape")
        _read_until(second, "ready")
        text = _read_until(second, "end")
        both = parse(text)
        shop = {"system": "shop"}
        # Gauges (livesum): 3 guardians + own actors per live worker.
        assert value(both, "gactors_actors", **shop) == (3 + 4) + (3 + 10)
        # Counters: summed over the workers.
        assert value(both, "gactors_dead_letters_total", **shop) == 3 + 5

        # The first worker exits; gunicorn's child_exit hook marks it dead.
        assert first.stdin is not None
        first.stdin.write("\n")
        first.stdin.close()
        assert first.wait(30) == 0
        multiprocess.mark_process_dead(first.pid, str(mp_dir))
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(mp_dir))
        after = parse(generate_latest(registry).decode())
        assert value(after, "gactors_actors", **shop) == 3 + 10, "a dead worker's gauge stays"
        assert value(after, "gactors_dead_letters_total", **shop) == 3 + 5, "counters stay"
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)


def test_cluster_members_by_status(system: ActorSystem, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through contrib's members hook (stood in for here; the real one is tested
    with node processes in tests/cluster/test_dashboard_cluster.py)."""
    import gactors.contrib.prometheus as prometheus

    members = [
        {"address": "gactors://metrics@a", "status": "up", "roles": []},
        {"address": "gactors://metrics@b", "status": "up", "roles": []},
        {"address": "gactors://metrics@c", "status": "unreachable", "roles": []},
    ]
    monkeypatch.setattr(prometheus, "cluster_members", lambda s: members)
    registry = CollectorRegistry()
    ActorSystemMetrics(system, registry=registry, interval=None)
    got = parse(generate_latest(registry).decode())
    assert value(got, "gactors_cluster_members", status="up", system="metrics") == 2
    assert value(got, "gactors_cluster_members", status="unreachable", system="metrics") == 1
    # c comes back: the unreachable count goes to 0 rather than disappearing.
    members[2]["status"] = "up"
    got = parse(generate_latest(registry).decode())
    assert value(got, "gactors_cluster_members", status="up", system="metrics") == 3
    assert value(got, "gactors_cluster_members", status="unreachable", system="metrics") == 0


def test_failures_are_counted_when_the_strategy_does_not_log(system: ActorSystem) -> None:
    """The counter comes from supervision (FailureHandled), not from the log."""
    from gactors import Directive, OneForOneStrategy

    class Quiet(Actor):
        supervisor_strategy = OneForOneStrategy(lambda e: Directive.RESTART, logging_enabled=False)

        def receive(self, message: Any) -> None:
            self.sender.tell(self.context.actor_of(Props(Worker), "w"))

    registry = CollectorRegistry()
    ActorSystemMetrics(system, registry=registry, interval=None)
    child = system.actor_of(Props(Quiet), "quiet").ask("make", timeout=5)
    child.tell(ValueError("silent"))
    child.tell(ValueError("silent"))
    await_condition(
        lambda: (
            value(
                parse(generate_latest(registry).decode()),
                "gactors_failures_total",
                directive="restart",
                system="metrics",
            )
            == 2
        ),
        timeout=10,
    )


def test_one_metrics_object_per_system_name(system: ActorSystem) -> None:
    registry = CollectorRegistry()
    ActorSystemMetrics(system, registry=registry, interval=None)
    with pytest.raises(ValueError, match="'metrics' already has its metrics"):
        ActorSystemMetrics(system, registry=registry, interval=None)
    with ActorSystem("metrics") as namesake, pytest.raises(ValueError, match="another system"):
        ActorSystemMetrics(namesake, registry=registry, interval=None)
    # Another registry is another set of metrics.
    ActorSystemMetrics(system, registry=CollectorRegistry(), interval=None)


@contextlib.contextmanager
def metered_nodes(
    redis_url: str, prefix: str
) -> Iterator[tuple[ActorSystem, ActorSystem, CollectorRegistry, CollectorRegistry]]:
    """Two cluster nodes of one new cluster on ``redis_url`` (fast failure detection),
    each with its own metrics registry; both terminated afterwards."""
    name = f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 100000}"
    cluster = {
        "url": redis_url,
        "heartbeat_interval": 0.2,
        "unreachable_after": 2.0,
        "down_after": 4.0,
    }
    a = ActorSystem(name, config={"cluster": cluster})
    b = ActorSystem(name, config={"cluster": cluster})
    try:
        ra, rb = CollectorRegistry(), CollectorRegistry()
        ActorSystemMetrics(a, registry=ra, interval=None)
        ActorSystemMetrics(b, registry=rb, interval=None)
        yield a, b, ra, rb
    finally:
        for s in (a, b):
            s.terminate()
        for s in (a, b):
            assert s.await_termination(20)


class _Sink(Actor):
    def receive(self, message: Any) -> None:
        if message == "count?":
            self.sender.tell("counted")


def test_cluster_nodes_export_their_remote_messages_by_outcome(redis_url: str) -> None:
    # Issue 28: the cluster's per-node counters (ClusterNode.stats, SPEC 17).
    pytest.importorskip("msgspec")
    with metered_nodes(redis_url, "prom") as (a, b, ra, rb):
        name = a.name
        b.actor_of(Props(_Sink), "sink")
        assert "gactors_cluster_messages_total" in scrape_wsgi(metrics_app(ra))
        sink = a.actor_selection(f"{b.address}/user/sink").resolve_one(timeout=10.0)
        for i in range(20):
            sink.tell(i)
        assert sink.ask("count?", timeout=10.0) == "counted"
        sent = value(
            parse(scrape_wsgi(metrics_app(ra))),
            "gactors_cluster_messages_total",
            system=name,
            outcome="sent",
        )
        received = value(
            parse(scrape_wsgi(metrics_app(rb))),
            "gactors_cluster_messages_total",
            system=name,
            outcome="received",
        )
        # 20 tells and the ask (plus resolve_one's Identify); b received them all.
        assert sent >= 21 and received >= 21, (sent, received)

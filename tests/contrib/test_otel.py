"""Tracing with OpenTelemetry (``gactors.contrib.otel``, SPEC section 18 "Tracing"),
checked with the SDK's in-memory exporter: spans of local tells and asks, a failure on
its span, nothing installed while disabled, sharding and reliable delivery, and a web
request asking an actor of another node process forming one trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from gactors import (
    Actor,
    ActorSystem,
    DeadLetter,
    NotInfluenceReceiveTimeout,
    Props,
    ReceiveTimeout,
)
from gactors._ref import ActorRef, LocalActorRef
from gactors.contrib import otel
from gactors.exceptions import ConfigError
from gactors.testkit import TestProbe, dilated

pytestmark = [pytest.mark.timeout(120)]

HERE = Path(__file__).resolve().parent


class Tracer:
    """A tracer provider exporting to memory, and what it exported."""

    def __init__(self, service: str = "node-1") -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests")

    def spans(self, n: int, timeout: float = 5.0) -> list[Any]:
        """The finished spans once there are at least ``n`` (bounded wait)."""
        deadline = time.monotonic() + dilated(timeout)
        while True:
            got = list(self.exporter.get_finished_spans())
            if len(got) >= n or time.monotonic() > deadline:
                return got
            time.sleep(0.01)

    def named(self, n: int, prefix: str) -> list[Any]:
        return [s for s in self.spans(n) if s.name.startswith(prefix)]


@pytest.fixture
def tracer() -> Tracer:
    return Tracer()


@pytest.fixture
def traced(tracer: Tracer) -> Iterator[ActorSystem]:
    s = ActorSystem(
        f"traced{uuid.uuid4().hex[:6]}", config={"tracing": {"tracer_provider": tracer.provider}}
    )
    try:
        yield s
    finally:
        s.terminate()
        s.await_termination(10)


class Echo(Actor):
    def receive(self, m: Any) -> None:
        if m == "boom":
            raise ValueError("boom on purpose")
        self.sender.tell(("echo", m))


class Relay(Actor):
    """Tells what it gets to ``target``, keeping the sender."""

    def __init__(self, target: ActorRef) -> None:
        self.target = target

    def receive(self, m: Any) -> None:
        self.target.tell(m, self.sender)


class Restarts(Actor):
    """Reports to ``probe`` the message pre_restart is given."""

    def __init__(self, probe: ActorRef) -> None:
        self.probe = probe

    def receive(self, m: Any) -> None:
        raise RuntimeError(f"failed on {m!r}")

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        self.probe.tell(("pre_restart", message))
        super().pre_restart(reason, message)


def _by_name(spans: list[Any]) -> dict[str, Any]:
    return {s.name: s for s in spans}


# -- local ---------------------------------------------------------------------------------------
def test_ask_and_tell_run_receive_in_child_spans(traced: ActorSystem, tracer: Tracer) -> None:
    echo = traced.actor_of(Props(Echo), "echo")
    relay = traced.actor_of(Props(Relay, echo), "relay")
    with tracer.tracer.start_as_current_span("request") as root:
        assert relay.ask("hi", timeout=5.0) == ("echo", "hi")
    spans = _by_name(tracer.spans(3))
    assert set(spans) == {"request", "Relay receive str", "Echo receive str"}
    r, e = spans["Relay receive str"], spans["Echo receive str"]
    trace_id = root.get_span_context().trace_id
    assert {s.context.trace_id for s in spans.values()} == {trace_id}
    # The ask's receive is a child of the request; the relayed tell's of the relay's.
    assert r.parent.span_id == root.get_span_context().span_id
    assert e.parent.span_id == r.context.span_id
    assert r.kind is SpanKind.CONSUMER and e.kind is SpanKind.CONSUMER
    assert dict(e.attributes) == {
        "gactors.actor.path": f"gactors://{traced.name}/user/echo",
        "gactors.message.type": "str",
        "gactors.node": f"gactors://{traced.name}",
        "messaging.system": "gactors",
        "messaging.operation.type": "process",
    }
    assert e.status.status_code is StatusCode.UNSET


def test_a_failure_is_recorded_on_its_span(traced: ActorSystem, tracer: Tracer) -> None:
    probe = TestProbe(traced)
    victim = traced.actor_of(Props(Restarts, probe.ref), "victim")
    with tracer.tracer.start_as_current_span("request"):
        victim.tell("bad")
    # Supervision restarts it; pre_restart sees the message itself, not an envelope.
    assert probe.receive_one(timeout=5.0) == ("pre_restart", "bad")
    (span,) = tracer.named(2, "Restarts")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "RuntimeError: failed on 'bad'"
    (event,) = span.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "RuntimeError"
    assert event.attributes["exception.message"] == "failed on 'bad'"


def test_a_message_sent_outside_any_span_gets_none(traced: ActorSystem, tracer: Tracer) -> None:
    echo = traced.actor_of(Props(Echo), "echo")
    assert echo.ask("plain", timeout=5.0) == ("echo", "plain")
    with tracer.tracer.start_as_current_span("marker"):
        pass
    assert [s.name for s in tracer.spans(1)] == ["marker"]


def test_new_traces_gives_every_receive_a_span(tracer: Tracer) -> None:
    config = {"tracing": {"tracer_provider": tracer.provider, "new_traces": True}}
    s = ActorSystem("fresh", config=config)
    try:
        echo = s.actor_of(Props(Echo), "echo")
        assert echo.ask("plain", timeout=5.0) == ("echo", "plain")
        (span,) = tracer.spans(1)
        assert span.name == "Echo receive str" and span.parent is None
    finally:
        s.terminate()
        s.await_termination(10)


def test_dead_letters_carry_the_message_not_the_envelope(
    traced: ActorSystem, tracer: Tracer
) -> None:
    echo = traced.actor_of(Props(Echo), "echo")
    probe = TestProbe(traced)
    traced.event_stream.subscribe(probe.ref, DeadLetter)
    traced.stop(echo)
    probe.watch(echo)
    probe.expect_terminated(echo, timeout=5.0)
    with tracer.tracer.start_as_current_span("request"):
        echo.tell("late")
    dl = probe.expect_msg_type(DeadLetter, timeout=5.0)
    assert dl.message == "late"


def test_ask_timeout_names_the_asked_type(traced: ActorSystem, tracer: Tracer) -> None:
    class Silent(Actor):
        def receive(self, m: Any) -> None:
            pass

    silent = traced.actor_of(Props(Silent), "silent")
    with tracer.tracer.start_as_current_span("request"), pytest.raises(Exception) as info:
        silent.ask(3, timeout=0.2)
    assert "message of type int" in str(info.value)


# -- disabled: nothing installed -----------------------------------------------------------------
def test_disabled_or_absent_installs_nothing(tracer: Tracer) -> None:
    original = LocalActorRef.__dict__["tell"]
    for config in ({}, {"tracing": False}, {"tracing": {"enabled": False}}):
        s = ActorSystem("plain", config=config)
        try:
            assert LocalActorRef.__dict__["tell"] is original and not otel.installed()
        finally:
            s.terminate()
            s.await_termination(10)
    s = ActorSystem("on", config={"tracing": True})
    try:
        assert LocalActorRef.__dict__["tell"] is not original and otel.installed()
    finally:
        s.terminate()
        s.await_termination(10)
    # The last traced system gone, the originals are back.
    assert LocalActorRef.__dict__["tell"] is original and not otel.installed()


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (5, "'tracing' must be a table"),
        ({"colour": 1}, "tracing.colour"),
        ({"new_traces": "yes"}, "tracing.new_traces"),
        ({"tracer_provider": object()}, "tracing.tracer_provider"),
    ],
)
def test_bad_settings_name_the_key(value: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ActorSystem("bad", config={"tracing": value})


# -- across nodes: a web request, an ask to another process, one trace --------------------------
class NodeProcess:
    """``_otel_node.py`` in a process of its own; its spans arrive in a file."""

    def __init__(self, url: str, name: str, spans: str) -> None:
        self.spans_file = spans
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[1]), env.get("PYTHONPATH", "")])
        self.log = open(spans + ".log", "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_otel_node.py"), url, name, spans],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            raise AssertionError(f"node process did not start:\n{Path(spans + '.log').read_text()}")
        self.address: str = json.loads(line)["address"]

    def records(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The spans the process finished, once there are at least ``n``."""
        deadline = time.monotonic() + dilated(timeout)
        while True:
            try:
                text = Path(self.spans_file).read_text()
            except FileNotFoundError:
                text = ""
            recs = [json.loads(x) for x in text.splitlines() if x.strip()]
            if len(recs) >= n or time.monotonic() > deadline:
                return recs
            time.sleep(0.05)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(dilated(15))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


class Audit(Actor):
    """Gets the remote stock's ``Audited`` (a hop back to this node); tells ``probe``."""

    def __init__(self, probe: ActorRef) -> None:
        self.probe = probe

    def receive(self, m: Any) -> None:
        self.probe.tell(m)


def test_web_request_ask_remote_actor_reply_is_one_trace(
    redis_url: str, tmp_path: Path, tracer: Tracer
) -> None:
    pytest.importorskip("redis")
    pytest.importorskip("msgspec")
    from gevent.pywsgi import WSGIServer

    from ._otel_spans import AddItem, Audited, render_tree, span_record

    name = f"shop{uuid.uuid4().hex[:6]}"
    system = ActorSystem(
        name,
        config={
            "cluster": {"url": redis_url, "heartbeat_interval": 0.2},
            "tracing": {"tracer_provider": tracer.provider},
        },
    )
    node = server = None
    try:
        node = NodeProcess(redis_url, name, str(tmp_path / "node-2.spans"))
        cart = system.actor_selection(f"{node.address}/user/cart").resolve_one(dilated(10.0))
        probe = TestProbe(system)
        audit = system.actor_of(Props(Audit, probe.ref), "audit")

        def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            # What a WSGI instrumentation does: the request runs in a SERVER span.
            path = environ["PATH_INFO"]
            with tracer.tracer.start_as_current_span(f"GET {path}", kind=SpanKind.SERVER):
                reply = cart.ask(AddItem(path.rsplit("/", 1)[-1], audit), timeout=dilated(10.0))
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps(list(reply)).encode()]

        server = WSGIServer(("127.0.0.1", 0), app, log=None)
        server.start()
        url = f"http://127.0.0.1:{server.server_port}/cart/apple"
        with urllib.request.urlopen(url, timeout=dilated(15.0)) as r:
            assert json.loads(r.read()) == ["added", "apple", "reserved"]
        assert probe.receive_one(timeout=10.0) == Audited("apple")

        remote = node.records(2)
        local = [span_record(s) for s in tracer.spans(2)]
        everything = local + remote
        tree = render_tree(everything)
        print("\n" + tree)  # noqa: T201  the trace tree, shown with -s (docs/observability.md)
        by_name = {r["name"]: r for r in everything}
        assert set(by_name) == {
            "GET /cart/apple",
            "Cart receive AddItem",
            "Stock receive Reserve",
            "Audit receive Audited",
        }, tree
        assert len({r["trace_id"] for r in everything}) == 1, tree
        request = by_name["GET /cart/apple"]
        cart_span = by_name["Cart receive AddItem"]
        stock = by_name["Stock receive Reserve"]
        audit_span = by_name["Audit receive Audited"]
        # web request (node 1) -> ask -> Cart (node 2) -> ask -> Stock (node 2) -> tell
        # -> Audit (node 1): each receive a child of the span that sent to it.
        assert request["parent_id"] is None
        assert cart_span["parent_id"] == request["span_id"]
        assert stock["parent_id"] == cart_span["span_id"]
        assert audit_span["parent_id"] == stock["span_id"]
        assert (cart_span["service"], stock["service"], audit_span["service"]) == (
            "node-2",
            "node-2",
            "node-1",
        )
        assert cart_span["attributes"]["gactors.node"] == node.address
        assert cart_span["attributes"]["gactors.actor.path"] == f"{node.address}/user/cart"
        assert cart_span["attributes"]["gactors.message.type"] == "_otel_spans.AddItem"
        assert audit_span["attributes"]["gactors.node"] == str(system.address)
        assert {r["kind"] for r in (cart_span, stock, audit_span)} == {"CONSUMER"}
    finally:
        if server is not None:
            server.stop()
        if node is not None:
            node.close()
        system.terminate()
        system.await_termination(10)


# -- sharding and reliable delivery ----------------------------------------------------------------
FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0, "lease_ttl": 1.5}


class Entity(Actor):
    def receive(self, m: Any) -> None:
        if self.sender is not None:
            self.sender.tell(("got", self.context.entity_id, m))


def _cluster(name: str, url: str, tracer: Tracer) -> ActorSystem:
    return ActorSystem(
        name,
        config={
            "cluster": dict(FAST, url=url),
            "tracing": {"tracer_provider": tracer.provider},
        },
    )


def _wait_members(systems: list[ActorSystem], n: int) -> None:
    from gactors.cluster import Cluster

    deadline = time.monotonic() + dilated(15.0)
    while time.monotonic() < deadline:
        if all(sum(m.status == "up" for m in Cluster(s).members) == n for s in systems):
            return
        time.sleep(0.05)
    raise AssertionError("the nodes never saw each other up")


def test_sharding_carries_the_context_to_entities_on_both_nodes(
    redis_url: str, tracer: Tracer
) -> None:
    pytest.importorskip("redis")
    pytest.importorskip("msgspec")
    from gactors.cluster import ClusterSharding

    name = f"shard{uuid.uuid4().hex[:6]}"
    a = _cluster(name, redis_url, tracer)
    b = _cluster(name, redis_url, tracer)
    try:
        _wait_members([a, b], 2)
        for s in (a, b):
            ClusterSharding(s).start("acct", Props(Entity), number_of_shards=32)
        sharding = ClusterSharding(a)
        entities = [f"e{i}" for i in range(64)]
        # Warm up: every shard placed, both views settled (outside any trace).
        for e in entities:
            assert sharding.entity_ref("acct", e).ask("warm", timeout=dilated(10.0))[0] == "got"
        assert tracer.spans(0) == []
        # One span per message: each entity's receive must be the child of the span
        # its message was sent in, though the region batches them per node.
        sent: dict[str, Any] = {}
        for e in entities[:-1]:
            with tracer.tracer.start_as_current_span(f"send {e}") as sp:
                sharding.entity_ref("acct", e).tell(("hello", e))
            sent[e] = sp.get_span_context()
        with tracer.tracer.start_as_current_span("ask") as sp:
            # An ask through the region too (its reply comes back untraced).
            assert sharding.entity_ref("acct", entities[-1]).ask("last", timeout=10.0)[0] == "got"
        sent[entities[-1]] = sp.get_span_context()
        everything = tracer.spans(128, timeout=15.0)
        spans = [s for s in everything if s.name.startswith("Entity")]
        assert len(spans) == 64
        for s in spans:
            eid = s.attributes["gactors.actor.path"].rsplit("/", 1)[-1]
            assert s.parent.span_id == sent[eid].span_id, eid
            assert s.context.trace_id == sent[eid].trace_id, eid
        # Entities of both nodes: the context crossed the regions' batches on the wire.
        assert {s.attributes["gactors.node"] for s in spans} == {str(a.address), str(b.address)}
        # No span for the regions and shards (gactors' own actors) by default.
        assert {s.name.split()[0] for s in everything} == {"send", "ask", "Entity"}
    finally:
        for s in (b, a):
            s.terminate()
            s.await_termination(15)


class Counter(Actor):
    pass


def test_reliable_delivery_carries_the_context_from_send(redis_url: str, tracer: Tracer) -> None:
    pytest.importorskip("redis")
    pytest.importorskip("msgspec")
    from gactors.cluster import ClusterSharding
    from gactors.delivery import ReliableEntity, ReliableSender

    got: list[Any] = []

    class Account(ReliableEntity, Actor):
        def receive(self, m: Any) -> None:
            got.append(m)

    node = _cluster(f"rel{uuid.uuid4().hex[:6]}", redis_url, tracer)
    try:
        ClusterSharding(node).start("acct", Props(Account), passivate_idle_after=None)
        sender = ReliableSender(node, "acct", "p1", durable=False)
        with tracer.tracer.start_as_current_span("request") as root:
            for i in range(3):
                sender.send("a1", ("deposit", i))
        deadline = time.monotonic() + dilated(10.0)
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        # The entity's code sees the messages themselves.
        assert got == [("deposit", 0), ("deposit", 1), ("deposit", 2)]
        spans = [s for s in tracer.spans(4) if s.name.startswith("Account")]
        assert [s.name for s in spans] == ["Account receive tuple"] * 3
        assert {s.parent.span_id for s in spans} == {root.get_span_context().span_id}
        assert {s.attributes["gactors.message.type"] for s in spans} == {"tuple"}
    finally:
        node.terminate()
        node.await_termination(15)


def test_log_records_of_a_receive_carry_its_trace_id(traced: ActorSystem, tracer: Tracer) -> None:
    import logging

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    class Logs(Actor):
        def receive(self, m: Any) -> None:
            self.log.info("handling %s", m)
            self.sender.tell("done")

    handler = Keep()
    handler.addFilter(otel.TraceIdFilter())
    logger = logging.getLogger("gactors.actor")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        ref = traced.actor_of(Props(Logs), "logs")
        with tracer.tracer.start_as_current_span("request"):
            assert ref.ask("x", timeout=5.0) == "done"
        assert ref.ask("y", timeout=5.0) == "done"
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    (span,) = tracer.named(2, "Logs")
    first, second = records
    assert first.trace_id == f"{span.context.trace_id:032x}"  # type: ignore[attr-defined]
    assert first.span_id == f"{span.context.span_id:016x}"  # type: ignore[attr-defined]
    assert second.trace_id == "0"  # type: ignore[attr-defined]


@pytest.mark.parametrize("system_actors", [False, True])
def test_gactors_own_actors_pass_the_context_on(tracer: Tracer, system_actors: bool) -> None:
    from gactors.routing import RoundRobinPool

    config = {"tracing": {"tracer_provider": tracer.provider, "system_actors": system_actors}}
    s = ActorSystem("routed", config=config)
    try:
        router = s.actor_of(RoundRobinPool(2).props(Props(Echo)), "pool")
        with tracer.tracer.start_as_current_span("request") as root:
            assert router.ask("hi", timeout=5.0) == ("echo", "hi")
        spans = _by_name(tracer.spans(3 if system_actors else 2))
        echo = spans["Echo receive str"]
        if system_actors:
            # The router's own span sits between the request and the routee.
            pool = spans["_PoolRouter receive str"]
            assert pool.parent.span_id == root.get_span_context().span_id
            assert echo.parent.span_id == pool.context.span_id
        else:
            assert set(spans) == {"request", "Echo receive str"}
            assert echo.parent.span_id == root.get_span_context().span_id
    finally:
        s.terminate()
        s.await_termination(10)


class Tick(NotInfluenceReceiveTimeout):
    """Does not reset the receive timeout (traced or not)."""


class Idle(Actor):
    def __init__(self, probe: ActorRef) -> None:
        self.probe = probe
        self.context.set_receive_timeout(0.3)

    def receive(self, m: Any) -> None:
        if m is ReceiveTimeout:
            self.probe.tell("timed out")


def test_a_traced_tick_does_not_reset_the_receive_timeout(
    traced: ActorSystem, tracer: Tracer
) -> None:
    import gevent

    probe = TestProbe(traced)
    ref = traced.actor_of(Props(Idle, probe.ref), "idle")

    def ticks() -> None:
        with tracer.tracer.start_as_current_span("ticking"):
            for _ in range(60):
                ref.tell(Tick())
                gevent.sleep(0.05)

    g = gevent.spawn(ticks)
    try:
        # Ticks every 50 ms for 3 s: the 0.3 s timeout fires all the same.
        assert probe.receive_one(timeout=2.0) == "timed out"
    finally:
        g.kill()


def test_tracing_without_a_cluster_loads_nothing_of_it() -> None:
    code = (
        "import sys\n"
        "import gactors\n"
        "s = gactors.ActorSystem('plain', config={'tracing': True})\n"
        "from gactors.contrib import otel\n"
        "assert otel.installed()\n"
        "s.terminate(); s.await_termination(5)\n"
        "bad = [m for m in ('gactors.cluster', 'gactors.delivery', 'redis', 'msgspec')"
        " if m in sys.modules]\n"
        "print('loaded:', bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "loaded: []" in out

"""gactors.contrib.dashboard: the WSGI app, its JSON, its limits and its refusals.

The page itself, in a real browser, is tested in ``test_dashboard_browser.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import gevent
import gevent.event
import pytest

import gactors.contrib as contrib
from gactors import Actor, ActorSystem, Directive, HubBlocked, OneForOneStrategy, Props
from gactors.contrib._members import cluster_members
from gactors.contrib.dashboard import DashboardApp, _cluster_state

TOKEN = "s3cret-token"


class Quiet(Actor):
    def receive(self, message: Any) -> None:
        if isinstance(message, BaseException):
            raise message
        if isinstance(message, Props):
            self.context.actor_of(message, None)


class Decides(Actor):
    """A parent whose strategy resumes on KeyError, stops on LookupError, restarts else."""

    supervisor_strategy = OneForOneStrategy(
        {KeyError: Directive.RESUME, LookupError: Directive.STOP, Exception: Directive.RESTART}
    )

    def receive(self, message: Any) -> None:
        name, props = message
        self.sender.tell(self.context.actor_of(props, name))


class Sleepy(Actor):
    """Waits (cooperatively) on every message until ``release`` is set: its mailbox fills."""

    release = gevent.event.Event()

    def receive(self, message: Any) -> None:
        Sleepy.release.wait(30)


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("dash")
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10)


def call(
    app: Any,
    path: str,
    query: str = "",
    *,
    method: str = "GET",
    script_name: str = "",
    headers: dict[str, str] | None = None,
) -> tuple[str, dict[str, str], bytes]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": script_name,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
    }
    environ.update(headers or {})
    seen: dict[str, Any] = {}

    def start_response(status: str, hdrs: list[tuple[str, str]]) -> None:
        seen["status"] = status
        seen["headers"] = dict(hdrs)

    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def state(app: Any, query: str = "") -> dict[str, Any]:
    status, headers, body = call(app, "/api/state", query)
    assert status == "200 OK", body
    assert headers["Content-Type"] == "application/json"
    result: dict[str, Any] = json.loads(body)
    return result


def eventually(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            gevent.sleep(0.02)


def by_path(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["path"]: n for n in st["tree"]}


# -- the token ------------------------------------------------------------------------------


def test_token_is_required_on_every_route(system: ActorSystem) -> None:
    app = DashboardApp(system, token=TOKEN)
    for path in ("/", "/api/state", "/api/tree", "/nope", ""):
        status, headers, body = call(app, path)
        assert status == "401 Unauthorized", path
        assert headers["WWW-Authenticate"].startswith("Bearer")
        assert TOKEN.encode() not in body
        assert "token" in json.loads(body)["error"]
    assert call(app, "/api/state", "token=wrong")[0] == "401 Unauthorized"
    assert call(app, "/api/state", f"token={TOKEN}x")[0] == "401 Unauthorized"
    wrong = {"HTTP_AUTHORIZATION": "Bearer nope"}
    assert call(app, "/api/state", headers=wrong)[0] == "401 Unauthorized"
    # A POST without the token is refused as unauthorized before anything else.
    assert call(app, "/api/state", method="POST")[0] == "401 Unauthorized"


def test_token_in_header_or_query(system: ActorSystem) -> None:
    app = DashboardApp(system, token=TOKEN)
    assert call(app, "/api/state", f"token={TOKEN}")[0] == "200 OK"
    ok = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert call(app, "/api/state", headers=ok)[0] == "200 OK"
    assert call(app, "/", headers=ok)[0] == "200 OK"


def test_token_must_be_a_non_empty_string(system: ActorSystem) -> None:
    with pytest.raises(ValueError, match="token"):
        DashboardApp(system, token="")
    with pytest.raises(ValueError, match="token"):
        DashboardApp(system, token=123)  # type: ignore[arg-type]


# -- read-only, and nothing but the views ------------------------------------------------


def test_only_get_and_head(system: ActorSystem) -> None:
    app = DashboardApp(system)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, _ = call(app, "/api/state", method=method)
        assert status == "405 Method Not Allowed"
        assert headers["Allow"] == "GET, HEAD"
    status, headers, body = call(app, "/api/state", method="HEAD")
    assert status == "200 OK" and body == b"" and int(headers["Content-Length"]) > 0


@pytest.mark.parametrize(
    "path",
    [
        "/static/../../etc/passwd",
        "/../../etc/passwd",
        "/index.html",
        "/dashboard.js",
        "/static/dashboard.js",
        "/api",
        "/api/state/",
        "/api/stop",
        "//api/state",
    ],
)
def test_no_other_path_reaches_anything(system: ActorSystem, path: str) -> None:
    status, _, body = call(DashboardApp(system), path)
    assert status == "404 Not Found"
    assert b"root:" not in body


def test_bad_queries_are_refused_clearly(system: ActorSystem) -> None:
    app = DashboardApp(system)
    status, _, body = call(app, "/api/state", "limit=lots")
    assert status == "400 Bad Request" and b"limit must be an integer" in body
    assert call(app, "/api/state", "limit=0")[0] == "400 Bad Request"
    assert call(app, "/api/state", "limit=100000")[0] == "400 Bad Request"
    status, _, body = call(app, "/api/tree", "path=user")
    assert status == "400 Bad Request" and b"must start with" in body
    status, _, body = call(app, "/api/tree", "path=/user/nobody")
    assert status == "404 Not Found" and b"no actor at /user/nobody" in body


def test_the_page_is_self_contained_and_locked_down(system: ActorSystem) -> None:
    status, headers, body = call(DashboardApp(system), "/")
    assert status == "200 OK"
    assert headers["Content-Type"].startswith("text/html")
    html = body.decode()
    # Script and style are inlined: no other file is ever fetched from the server, and
    # the CSP allows exactly those two (by hash) and requests to the same origin.
    assert "/*__JS__*/" not in html and "/*__CSS__*/" not in html
    assert "<script src" not in html and "<link" not in html
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp
    assert "connect-src 'self'" in csp
    assert "innerHTML" not in html  # server text only ever goes in through textContent
    # Relative links only, so that any mount prefix works.
    assert 'fetch("api/state?' in html
    assert headers["Cache-Control"] == "no-store"


# -- mounting under a prefix ------------------------------------------------------------------


def test_mounted_under_a_prefix(system: ActorSystem) -> None:
    app = DashboardApp(system, token=TOKEN)
    status, headers, _ = call(app, "", f"token={TOKEN}", script_name="/admin/actors")
    assert status == "301 Moved Permanently"
    assert headers["Location"] == f"/admin/actors/?token={TOKEN}"
    status, _, _ = call(app, "/api/state", f"token={TOKEN}", script_name="/admin/actors")
    assert status == "200 OK"


def test_in_a_flask_app_with_dispatcher_middleware(system: ActorSystem) -> None:
    flask = pytest.importorskip("flask")
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    web = flask.Flask("shop")

    @web.route("/")
    def index() -> str:
        return "the shop"

    web.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
        web.wsgi_app, {"/ops/actors": DashboardApp(system, token=TOKEN)}
    )
    client = web.test_client()
    assert client.get("/").data == b"the shop"
    assert client.get("/ops/actors/api/state").status_code == 401
    r = client.get("/ops/actors", query_string={"token": TOKEN})
    assert r.status_code == 301 and r.headers["Location"].endswith("/ops/actors/?token=" + TOKEN)
    r = client.get("/ops/actors/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and b"gactors dashboard" in r.data
    r = client.get("/ops/actors/api/state", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and r.json["system"]["name"] == "dash"


# -- what the state says ----------------------------------------------------------------------


def test_tree_shows_new_actors_with_state_mailbox_and_restarts(system: ActorSystem) -> None:
    app = DashboardApp(system)
    st = state(app)
    assert st["cluster"] is None
    assert st["version"] == 1
    nodes = by_path(st)
    assert {"/", "/user", "/system"} <= set(nodes)
    assert nodes["/"]["parent"] is None and nodes["/user"]["parent"] == "/"
    assert st["totals"]["actors"] == 3

    worker = system.actor_of(Props(Quiet), "worker")
    worker.tell(ValueError("first"))
    worker.tell(ValueError("second"))

    def restarted() -> dict[str, Any]:
        st = state(app)
        node = by_path(st)["/user/worker"]
        assert node["restarts"] == 2
        # The totals come from a walk that is reused for up to TOTALS_TTL.
        assert st["totals"]["actors"] == 4
        return st

    st = eventually(restarted)
    node = by_path(st)["/user/worker"]
    assert node["state"] == "running" and node["actor"] == "Quiet"
    assert node["recent_restart"] is True
    assert st["hot"]["restarts"][0] == {"path": "/user/worker", "restarts": 2}
    assert [f["message"] for f in st["failures"][:2]] == ["second", "first"]
    assert st["failures"][0]["directive"] == "restart"
    assert st["failures"][0]["exception"] == "ValueError"
    assert st["failures"][0]["path"] == "/user/worker"
    assert st["directives"] == {"restart": 2}


def test_failures_carry_every_directive(system: ActorSystem) -> None:
    app = DashboardApp(system)
    parent = system.actor_of(Props(Decides), "parent")
    refs = {
        name: parent.ask((name, Props(Quiet)), timeout=5)
        for name in ("resumed", "stopped", "restarted")
    }
    refs["resumed"].tell(KeyError("k"))
    refs["stopped"].tell(IndexError("i"))
    refs["restarted"].tell(RuntimeError("r"))

    def all_three() -> dict[str, str]:
        got = {f["path"]: f["directive"] for f in state(app)["failures"]}
        assert len(got) == 3
        return got

    assert eventually(all_three) == {
        "/user/parent/resumed": "resume",
        "/user/parent/stopped": "stop",
        "/user/parent/restarted": "restart",
    }


def test_mailbox_depth_and_the_deepest_mailboxes(system: ActorSystem) -> None:
    app = DashboardApp(system)
    sleepy = system.actor_of(Props(Sleepy), "sleepy")
    for i in range(25):
        sleepy.tell(i)

    def queued() -> dict[str, Any]:
        st = state(app)
        assert by_path(st)["/user/sleepy"]["mailbox"] == 24  # one is being processed
        assert st["totals"]["mailbox"] == 24 and st["totals"]["max_mailbox"] == 24
        return st

    try:
        st = eventually(queued)
        assert st["hot"]["mailbox"][0] == {"path": "/user/sleepy", "mailbox": 24}
    finally:
        Sleepy.release.set()


def test_dead_letters_per_second_and_processed_messages(system: ActorSystem) -> None:
    app = DashboardApp(system)
    before = state(app)
    echo = system.actor_of(Props(Quiet))
    for i in range(50):
        echo.tell(i)
    for i in range(30):
        system.dead_letters.tell(i)

    def moved() -> dict[str, Any]:
        st = state(app)
        assert st["dead_letters"]["total"] == 30
        assert st["messages"]["processed"] >= before["messages"]["processed"] + 50
        # The per-second figure counts whole seconds, the current one excluded.
        assert st["dead_letters"]["per_second"] > 0
        return st

    st = eventually(moved, timeout=15)
    assert sum(st["dead_letters"]["history"]) == 30
    assert len(st["dead_letters"]["history"]) == 60


def test_hub_blocked_events_name_the_actor(system: ActorSystem) -> None:
    app = DashboardApp(system)
    system.event_stream.publish(
        HubBlocked("gactors://dash/user/slowpoke", 0.25, 'File "x.py", line 3, in receive')
    )
    system.event_stream.publish(HubBlocked(None, 0.5, ""))
    st = state(app)
    hb = st["hub_blocked"]
    assert hb["total"] == 2 and hb["seconds"] == pytest.approx(0.75)
    assert [b["path"] for b in hb["recent"]] == [None, "/user/slowpoke"]
    assert hb["recent"][1]["seconds"] == 0.25 and "receive" in hb["recent"][1]["stack"]


# -- large and deep trees -------------------------------------------------------------------


def test_ten_thousand_actors_are_summarized(system: ActorSystem) -> None:
    app = DashboardApp(system)
    big = system.actor_of(Props(Quiet), "big")
    for _ in range(10_000):
        big.tell(Props(Quiet))

    def all_there() -> None:
        assert state(app)["totals"]["actors"] == 3 + 1 + 10_000

    eventually(all_there, timeout=30)
    t0 = time.perf_counter()
    status, _, body = call(app, "/api/state", "open=/user/big")
    took = time.perf_counter() - t0
    assert status == "200 OK"
    st = json.loads(body)
    big_node = by_path(st)["/user/big"]
    assert big_node["children"] == 10_000 and big_node["more"] == 10_000 - 100
    assert len(st["tree"]) == 4 + 100
    assert len(body) < 100_000, "a large tree must be summarized, not dumped"
    # Not a speed assertion: a bound an order of magnitude above what it takes, so that
    # a walk gone quadratic shows.
    assert took < 10
    # Collapsed, the big node is one line with its child count.
    st = state(app)
    assert "more" not in by_path(st)["/user/big"] and len(st["tree"]) == 4
    # One level at a time, with a chosen limit.
    status, _, body = call(app, "/api/tree", "path=/user/big&limit=10")
    level = json.loads(body)
    assert level["node"]["children"] == 10_000
    assert len(level["children"]) == 10 and level["more"] == 9_990
    child = level["children"][0]
    assert child["parent"] == "/user/big" and child["path"].startswith("/user/big/")


def test_a_tree_thousands_deep_is_walked_without_recursion(system: ActorSystem) -> None:
    depth = 2_500

    class Chain(Actor):
        def __init__(self, left: int) -> None:
            self.left = left

        def pre_start(self) -> None:
            if self.left:
                self.context.actor_of(Props(Chain, self.left - 1), "c")

    app = DashboardApp(system)
    system.actor_of(Props(Chain, depth - 1), "c")

    def built() -> None:
        assert state(app)["totals"]["actors"] == 3 + depth

    eventually(built, timeout=30)
    deepest = "/user" + "/c" * depth
    status, _, body = call(app, "/api/tree", f"path={deepest}")
    assert status == "200 OK"
    level = json.loads(body)
    assert level["node"]["path"] == deepest and level["node"]["children"] == 0
    # Open nodes beyond MAX_OPEN (500, "/" and "/user" included) are ignored, not an
    # error: the chain shows down to the child of the last open one.
    opened = "&".join(f"open=/user{'/c' * i}" for i in range(1, 600))
    nodes = by_path(state(app, opened))
    assert "/user" + "/c" * 499 in nodes and "/user" + "/c" * 500 not in nodes
    assert len(nodes) == 3 + 499


# -- where the state is read from -------------------------------------------------------------


def test_called_from_another_os_thread(system: ActorSystem) -> None:
    app = DashboardApp(system)
    system.actor_of(Props(Quiet), "seen")
    box: list[Any] = []
    start = gevent.monkey.get_original("_thread", "start_new_thread")
    lock = gevent.monkey.get_original("_thread", "allocate_lock")()
    lock.acquire()

    def in_thread() -> None:
        try:
            box.append(call(app, "/api/state"))
        finally:
            lock.release()

    start(in_thread, ())
    while not lock.acquire(False):
        gevent.sleep(0.01)
    status, _, body = box[0]
    assert status == "200 OK" and "/user/seen" in by_path(json.loads(body))


def test_without_a_system_it_uses_the_worker_system(system: ActorSystem) -> None:
    app = DashboardApp()
    contrib.set_worker_system(None)
    status, _, body = call(app, "/api/state")
    assert status == "503 Service Unavailable" and b"no gactors worker system" in body
    contrib.set_worker_system(system)
    try:
        assert state(app)["system"]["name"] == "dash"
    finally:
        contrib.set_worker_system(None)


def test_no_cluster_no_cluster_import(system: ActorSystem) -> None:
    assert _cluster_state(system) is None
    assert cluster_members(system) is None
    modules = "gactors.contrib.dashboard"
    if importlib.util.find_spec("prometheus_client") is not None:
        modules += ", gactors.contrib.prometheus"
    code = (
        f"import sys; import {modules}; "
        "assert 'gactors.cluster' not in sys.modules, 'imported at module import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- served alone -----------------------------------------------------------------------------


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_served_alone_from_the_command_line() -> None:
    env = dict(os.environ, GACTORS_DASHBOARD_TOKEN=TOKEN, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gactors", "dashboard", "--bind", "127.0.0.1:0", "--system", "cli"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
        assert port, "".join(lines)
        base = f"http://127.0.0.1:{port}"
        assert _get(base + "/api/state")[0] == 401
        status, body = _get(base + f"/api/state?token={TOKEN}")
        assert status == 200 and json.loads(body)["system"]["name"] == "cli"
        # Without --cluster-url it says what it shows and how to point it at a cluster.
        notice = json.loads(body)["notice"]
        assert "its own actor system 'cli'" in notice and "--cluster-url" in notice
        status, body = _get(base + "/", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and b"gactors dashboard" in body
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        # The access log does not keep the token.
        assert "token=***" in out and TOKEN not in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_bind_must_be_host_and_port() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gactors", "dashboard", "--bind", "8020"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "HOST:PORT" in r.stderr


def test_bind_parsing_and_loopback() -> None:
    from gactors.__main__ import _is_loopback, _parse_bind

    assert _parse_bind("127.0.0.1:8020") == ("127.0.0.1", 8020)
    assert _parse_bind(":9000") == ("127.0.0.1", 9000)
    assert _parse_bind("[::1]:9000") == ("::1", 9000)
    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and _is_loopback("localhost")
    assert not _is_loopback("0.0.0.0") and not _is_loopback("example.com")


@pytest.mark.parametrize("throughput", [1, 5, 100])
def test_processed_messages_are_counted_exactly(throughput: int) -> None:
    """Full batches, batches ended by an empty mailbox and by failures all count."""
    from gactors._observer import observer_for

    done = gevent.event.Event()

    class Last(Actor):
        def receive(self, message: Any) -> None:
            if isinstance(message, BaseException):
                raise message
            if message == "last":
                done.set()

    with ActorSystem("count", config={"dispatcher_throughput": throughput}) as s:
        obs = observer_for(s)
        base = obs.processed()
        refs = [s.actor_of(Props(Last)) for _ in range(3)]
        for ref in refs[:2]:
            for i in range(23):
                ref.tell(ValueError("x") if i in (4, 11) else i)
        refs[2].tell("last")
        assert done.wait(10)
        expected = 2 * 23 + 1

        def counted() -> None:
            assert obs.processed() - base == expected

        eventually(counted)
        gevent.sleep(0.1)  # and not one more once the worker has parked
        assert obs.processed() - base == expected


def test_cli_says_why_it_cannot_join_a_cluster() -> None:
    # Without cluster support, or with nothing listening at that address: a clear error.
    r = subprocess.run(
        [sys.executable, "-m", "gactors", "dashboard", "--bind", "127.0.0.1:0",
         "--cluster-url", "redis://127.0.0.1:1/0"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.startswith("python -m gactors dashboard: ") and "Traceback" not in r.stderr

"""gactors.contrib: the worker system, the WSGI middleware and the gunicorn hooks.

The hooks are driven here with a stand-in for gunicorn's worker (``cfg`` and ``log``),
which is all they use; ``test_gunicorn_e2e.py`` runs them under real gunicorn.
"""

from __future__ import annotations

import logging
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pytest
from _actors import Echo

import gactors.contrib as contrib
from gactors import Actor, ActorSystem, IllegalStateError, Props
from gactors.contrib import gunicorn as hooks_mod
from gactors.contrib.gunicorn import GunicornHooks, queued_messages, resolve_factory
from gactors.contrib.wsgi import ENVIRON_KEY, GactorsMiddleware, get_system

WORKER_LOG = "tests.contrib.worker"


class Stuck(Actor):
    """Waits (cooperatively) until ``release`` is set: it cannot stop before that."""

    release = gevent.event.Event()

    def receive(self, message: Any) -> None:
        Stuck.release.wait(10)


class FakeConfig:
    def __init__(self, graceful_timeout: float) -> None:
        self.graceful_timeout = graceful_timeout


class FakeWorker:
    """The parts of gunicorn's Worker that the hooks use."""

    def __init__(self, graceful_timeout: float = 30) -> None:
        self.cfg = FakeConfig(graceful_timeout)
        self.log = logging.getLogger(WORKER_LOG)


@pytest.fixture(autouse=True)
def no_worker_system() -> Iterator[None]:
    contrib.set_worker_system(None)
    yield
    contrib.set_worker_system(None)


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("wsgi")
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10), s.tree()


@pytest.fixture
def factory_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A throw-away module with system factories; returns its name."""
    name = "gactors_test_factories"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from gactors import ActorSystem, Props
            from tests_echo import Echo

            made = []

            def make_system():
                system = ActorSystem("from-factory", config={"shutdown_timeout": 4.0})
                system.actor_of(Props(Echo), "echo")
                made.append(system)
                return system

            class Nested:
                @staticmethod
                def build():
                    return make_system()

            def not_a_system():
                return 42
            """
        )
    )
    (tmp_path / "tests_echo.py").write_text(
        textwrap.dedent(
            """
            from gactors import Actor

            class Echo(Actor):
                def receive(self, message):
                    self.sender.tell(message)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for mod in (name, "tests_echo"):
        sys.modules.pop(mod, None)


def worker_messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == WORKER_LOG]


# -- the worker system ------------------------------------------------------------------------


def test_worker_system_is_per_process(system: ActorSystem, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not contrib.has_worker_system()
    with pytest.raises(IllegalStateError, match="no gactors worker system"):
        contrib.worker_system()
    contrib.set_worker_system(system)
    assert contrib.has_worker_system()
    assert contrib.worker_system() is system
    # As seen from a child process after a fork:
    real_pid = contrib.os.getpid()
    monkeypatch.setattr(contrib.os, "getpid", lambda: real_pid + 1)
    assert not contrib.has_worker_system()
    with pytest.raises(IllegalStateError, match="before a fork"):
        contrib.worker_system()


# -- the middleware ---------------------------------------------------------------------------


def call_app(app: Any, environ: dict[str, Any] | None = None) -> tuple[list[Any], list[bytes]]:
    started: list[Any] = []
    body = app(environ if environ is not None else {}, lambda *a: started.append(a))
    return started, list(body)


def inner_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    system = get_system(environ)
    echo = system.lookup("/user/echo")
    assert echo is not None
    reply = echo.ask("hi", timeout=5)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"{system.name}:{reply}".encode()]


def test_middleware_with_an_explicit_system(system: ActorSystem) -> None:
    system.actor_of(Props(Echo), "echo")
    environ: dict[str, Any] = {}
    started, body = call_app(GactorsMiddleware(inner_app, system), environ)
    assert body == [b"wsgi:hi"]
    assert started[0][0] == "200 OK"
    assert environ[ENVIRON_KEY] is system


def test_middleware_defaults_to_the_worker_system_at_request_time(system: ActorSystem) -> None:
    system.actor_of(Props(Echo), "echo")
    app = GactorsMiddleware(inner_app)  # built before the worker system exists
    with pytest.raises(IllegalStateError, match="no gactors worker system"):
        call_app(app)
    contrib.set_worker_system(system)
    assert call_app(app)[1] == [b"wsgi:hi"]


def test_middleware_with_a_callable_and_a_custom_key(system: ActorSystem) -> None:
    calls: list[int] = []

    def source() -> ActorSystem:
        calls.append(1)
        return system

    seen: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.update(environ)
        start_response("204 No Content", [])
        return []

    wrapped = GactorsMiddleware(app, source, environ_key="my.system")
    call_app(wrapped)
    call_app(wrapped)
    assert calls == [1, 1]
    assert seen["my.system"] is system and ENVIRON_KEY not in seen
    assert get_system(seen, "my.system") is system


def test_middleware_rejects_what_is_not_a_system() -> None:
    with pytest.raises(TypeError, match="WSGI callable"):
        GactorsMiddleware("not an app")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ActorSystem"):
        GactorsMiddleware(inner_app, 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="returned int"):
        call_app(GactorsMiddleware(inner_app, lambda: 42))  # type: ignore[arg-type,return-value]
    with pytest.raises(IllegalStateError, match="GactorsMiddleware"):
        get_system({})


def test_with_flask(system: ActorSystem) -> None:
    flask = pytest.importorskip("flask")
    system.actor_of(Props(Echo), "echo")
    app = flask.Flask("gactors-test")
    app.wsgi_app = GactorsMiddleware(app.wsgi_app, system)

    @app.get("/echo/<word>")
    def echo(word: str) -> Any:
        ref = get_system(flask.request.environ).lookup("/user/echo")
        return {"reply": ref.ask(word, timeout=5)}

    response = app.test_client().get("/echo/hello")
    assert response.status_code == 200
    assert response.get_json() == {"reply": "hello"}


# -- the gunicorn hooks -------------------------------------------------------------------------


def test_factory_specs_are_checked_early() -> None:
    with pytest.raises(ValueError, match=r"package\.module:callable"):
        GunicornHooks("no_colon_here")
    with pytest.raises(TypeError, match="callable"):
        GunicornHooks(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shutdown_budget"):
        GunicornHooks("a:b", shutdown_budget=0)
    with pytest.raises(ImportError, match="cannot import the system factory"):
        resolve_factory("gactors_no_such_module:make")
    with pytest.raises(AttributeError, match="has no 'nope'"):
        resolve_factory("gactors:nope")


def test_post_worker_init_and_worker_exit(
    factory_module: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    hooks = GunicornHooks(f"{factory_module}:Nested.build")
    worker = FakeWorker()
    hooks.post_worker_init(worker)
    system = hooks.system
    assert system is not None and contrib.worker_system() is system
    echo = system.lookup("/user/echo")
    assert echo is not None and echo.ask("up", timeout=5) == "up"

    hooks.worker_exit(None, worker)
    assert system.is_terminated
    assert hooks.system is None and not contrib.has_worker_system()
    messages = worker_messages(caplog)
    (started,) = [text for _, text in messages if "started in worker" in text]
    assert started.startswith("gactors: actor system 'from-factory' started in worker ")
    assert started.endswith("(shutdown budget 4.0 s)")  # the system's shutdown_timeout
    assert (
        logging.INFO,
        f"gactors: no messages queued in worker {contrib.os.getpid()} at shutdown",
    ) in messages
    assert any(
        level == logging.INFO
        and "actor system 'from-factory' terminated cleanly in " in text
        and "(budget 4.0 s, worker" in text
        for level, text in messages
    ), messages
    hooks.worker_exit(None, worker)  # again, or without post_worker_init: nothing to do


def test_worker_exit_logs_what_was_still_queued(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    hooks = GunicornHooks(lambda: ActorSystem("queued"), shutdown_budget=5)
    worker = FakeWorker()
    hooks.post_worker_init(worker)
    system = hooks.system
    assert system is not None
    # Told, but the hub has not run since: all three are still in the mailbox.
    ref = system.actor_of(Props(Echo), "late")
    for i in range(3):
        ref.tell(i)
    assert queued_messages(system) == [("gactors://queued/user/late", 3)]
    hooks.worker_exit(None, worker)
    assert system.is_terminated
    messages = worker_messages(caplog)
    assert (
        logging.WARNING,
        f"gactors: 3 message(s) still queued in worker {contrib.os.getpid()} at shutdown; "
        "they go to dead letters: gactors://queued/user/late (3)",
    ) in messages
    assert any("terminated cleanly" in text and "(budget 5.0 s" in text for _, text in messages)


def test_worker_exit_gives_up_after_the_budget(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    Stuck.release.clear()
    hooks = GunicornHooks(lambda: ActorSystem("stuck"), shutdown_budget=0.3)
    worker = FakeWorker()
    hooks.post_worker_init(worker)
    system = hooks.system
    assert system is not None
    try:
        stuck = system.actor_of(Props(Stuck), "stuck")
        stuck.tell("wait")
        gevent.sleep(0.05)  # let it start waiting
        hooks.worker_exit(None, worker)
        assert not system.is_terminated
        (error,) = [text for level, text in worker_messages(caplog) if level == logging.ERROR]
        assert "actor system 'stuck' did not terminate within its budget of 0.3 s" in error
        assert "\n    stuck  [running] mailbox=0" in error  # the tree shows who held it up
    finally:
        Stuck.release.set()
        assert system.await_termination(10)


def test_budget_stays_below_graceful_timeout(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    hooks = GunicornHooks(lambda: ActorSystem("capped"), shutdown_budget=10)
    worker = FakeWorker(graceful_timeout=2)
    hooks.post_worker_init(worker)
    try:
        messages = worker_messages(caplog)
        assert (
            logging.WARNING,
            "gactors: shutdown budget capped at 1.8 s (90% of graceful_timeout 2.0 s)",
        ) in messages
        (started,) = [text for _, text in messages if "started in worker" in text]
        assert started.endswith("(shutdown budget 1.8 s)")
    finally:
        hooks.worker_exit(None, worker)


def test_warns_when_the_worker_is_not_monkey_patched(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gevent import monkey

    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    for patched in (True, False):
        monkeypatch.setattr(monkey, "is_module_patched", lambda name, p=patched: p)
        hooks = GunicornHooks(lambda: ActorSystem("sync-worker"))
        worker = FakeWorker()
        hooks.post_worker_init(worker)
        hooks.worker_exit(None, worker)
    warnings = [text for level, text in worker_messages(caplog) if level == logging.WARNING]
    assert warnings == [
        "gactors: this gunicorn worker did not monkey-patch the process: actors only run "
        "while gevent's hub runs; use the gevent worker (worker_class = 'gevent')"
    ]


def test_factory_must_return_a_system(factory_module: str) -> None:
    hooks = GunicornHooks(f"{factory_module}:not_a_system")
    with pytest.raises(TypeError, match=r"returned int, not a gactors\.ActorSystem"):
        hooks.post_worker_init(FakeWorker())
    assert hooks.system is None and not contrib.has_worker_system()


def test_module_level_hooks_use_the_environment(
    factory_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(hooks_mod.ENV_FACTORY, raising=False)
    with pytest.raises(IllegalStateError, match=hooks_mod.ENV_FACTORY):
        hooks_mod.post_worker_init(FakeWorker())
    monkeypatch.setenv(hooks_mod.ENV_FACTORY, f"{factory_module}:make_system")
    worker = FakeWorker()
    hooks_mod.post_worker_init(worker)
    system = contrib.worker_system()
    assert system.name == "from-factory"
    hooks_mod.worker_exit(None, worker)
    assert system.is_terminated


def test_gactors_logs_go_to_gunicorns_error_log(monkeypatch: pytest.MonkeyPatch) -> None:
    gactors_log = logging.getLogger("gactors")
    saved = (list(gactors_log.handlers), gactors_log.level, gactors_log.propagate)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # nothing configured logging
    handler = logging.NullHandler()
    error_log = logging.getLogger("tests.contrib.gunicorn.error")
    error_log.handlers = [handler]
    error_log.setLevel(logging.INFO)
    worker = FakeWorker()
    worker.log.error_log = error_log  # type: ignore[attr-defined]
    gactors_log.handlers = []
    try:
        hooks_mod._route_gactors_logs(worker)
        assert gactors_log.handlers == [handler]
        assert gactors_log.level == logging.INFO and gactors_log.propagate is False
        # Configured already: left alone.
        other = logging.NullHandler()
        gactors_log.handlers = [other]
        hooks_mod._route_gactors_logs(worker)
        assert gactors_log.handlers == [other]
    finally:
        del worker.log.error_log  # type: ignore[attr-defined]
        error_log.handlers = []
        gactors_log.handlers, level, gactors_log.propagate = saved
        gactors_log.setLevel(level)

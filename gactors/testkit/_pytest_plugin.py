"""The gactors pytest plugin: fixtures ``actor_system`` and ``probe``.

Installed with gactors and registered through the ``pytest11`` entry point, so a
project that depends on gactors gets the fixtures without any configuration.

* ``actor_system`` — a fresh :class:`~gactors.ActorSystem` per test, named after the
  test. After the test it is terminated; if it does not terminate within its
  ``shutdown_timeout`` setting (scaled by ``GACTORS_TEST_TIMEFACTOR``), the test fails
  (at teardown) with the actors still alive (``system.tree()``) in the message.
  Settings come from the ``actor_system_config`` fixture (override it in a
  ``conftest.py``) updated with the ``@pytest.mark.gactors_config(...)`` marker.
* ``probe`` — a :class:`~gactors.testkit.TestProbe` of ``actor_system``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from gactors._system import ActorSystem
from gactors.testkit import TestProbe, dilated

__all__ = ["actor_system", "actor_system_config", "probe"]

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

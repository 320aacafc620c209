"""Fixtures of the supervision conformance suite.

``actor_system`` and ``probe`` are defined here (overriding gactors.testkit's plugin
fixtures of the same names when that plugin is loaded) so that this area runs on its
own too; ``probe`` is a ``gactors.testkit.TestProbe`` whenever that is importable.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gactors import ActorSystem

from ._kit import Probe


@pytest.fixture
def actor_system() -> Iterator[ActorSystem]:
    """A fresh system per test, terminated after it (the test fails if it cannot)."""
    system = ActorSystem("supervision")
    try:
        yield system
    finally:
        system.terminate()
        assert system.await_termination(10.0), "actor system did not terminate:\n" + system.tree()


@pytest.fixture
def probe(actor_system: ActorSystem) -> Probe:
    return Probe(actor_system)


@pytest.fixture(autouse=True)
def _fresh_generations() -> Iterator[None]:
    """Worker generations are counted per tag; every test starts at generation 0."""
    from ._actors import Worker

    Worker.generations.clear()
    yield
    Worker.generations.clear()

"""Fixtures of the persistence tests: a system on the memory store, recording actors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("msgspec")

from gactors import ActorSystem
from gactors.testkit.persistence import MEMORY_CONFIG, MemoryPersistence


@pytest.fixture
def mem(memory_persistence: MemoryPersistence) -> MemoryPersistence:
    """The memory store, cleared around the test."""
    return memory_persistence


@pytest.fixture
def psys(mem: MemoryPersistence, request: pytest.FixtureRequest) -> Iterator[ActorSystem]:
    """A system whose journal, snapshots and states live in the memory store."""
    system = ActorSystem("persist", config={"persistence": dict(MEMORY_CONFIG)})
    try:
        yield system
    finally:
        system.terminate()
        assert system.await_termination(10), system.tree()


def memory_config(**extra: Any) -> dict[str, Any]:
    """A config selecting the memory store, with ``extra`` persistence settings."""
    return {"persistence": {**MEMORY_CONFIG, **extra}}

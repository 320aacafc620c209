"""Fixtures for the runtime-core tests (the run is monkey-patched by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from gevent.queue import Queue

import gactors
from gactors import Actor, ActorSystem


@pytest.fixture
def system(request: pytest.FixtureRequest) -> Iterator[ActorSystem]:
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40].strip("-") or "t"
    s = ActorSystem(name)
    yield s
    s.terminate()
    assert s.await_termination(10), f"system did not terminate:\n{s.tree()}"


class Collector:
    """Collects events published on the event stream (a plain callable subscriber)."""

    def __init__(self) -> None:
        self.queue: Queue = Queue()

    def __call__(self, event: Any) -> None:
        self.queue.put(event)

    def get(self, timeout: float = 3.0) -> Any:
        return self.queue.get(timeout=timeout)

    def drain(self) -> list[Any]:
        out = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out


@pytest.fixture
def dead_letters(system: ActorSystem) -> Collector:
    c = Collector()
    system.event_stream.subscribe(c, gactors.DeadLetter)
    return c


class Echo(Actor):
    def receive(self, message: Any) -> None:
        self.sender.tell(message)


class Recorder(Actor):
    """Puts every message it gets into a gevent queue given to its constructor."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def receive(self, message: Any) -> None:
        self.queue.put(message)

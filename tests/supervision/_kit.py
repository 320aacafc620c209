"""Test helpers of the supervision conformance suite.

``Probe`` and ``event_filter`` are ``gactors.testkit``'s ``TestProbe`` and
``event_filter`` (SPEC §15): the suite dogfoods the testkit. ``mute`` and ``LogRecorder``
are local; a condition no message reports is awaited with
``gactors.testkit.await_condition``. Every wait has an explicit timeout.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from gactors import ActorSystem, LogEvent
from gactors.testkit import TestProbe as Probe
from gactors.testkit import event_filter

__all__ = ["DEFAULT_TIMEOUT", "LogRecorder", "Probe", "event_filter", "mute"]

DEFAULT_TIMEOUT = 5.0
"""Generous: the machine is shared; a passing test never waits this long."""


@contextlib.contextmanager
def mute(system: ActorSystem, *exc_types: type[BaseException]) -> Iterator[None]:
    """Swallow any log event caused by one of ``exc_types`` (count not checked)."""

    def f(event: LogEvent) -> bool:
        return event.cause is not None and isinstance(event.cause, exc_types)

    system.log_filters.append(f)
    try:
        yield
    finally:
        system.log_filters.remove(f)


class LogRecorder:
    """Every ``LogEvent`` published on the event stream, at WARNING or above."""

    def __init__(self, system: ActorSystem, min_level: int = logging.WARNING) -> None:
        self.events: list[LogEvent] = []
        self.min_level = min_level
        self._system = system
        system.event_stream.subscribe(self._on_event, LogEvent)

    def _on_event(self, event: LogEvent) -> None:
        if event.level >= self.min_level:
            self.events.append(event)

    def caused_by(self, exc: BaseException) -> list[LogEvent]:
        return [e for e in self.events if e.cause is exc]

    def close(self) -> None:
        self._system.event_stream.unsubscribe(self._on_event)

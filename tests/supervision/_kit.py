"""Test helpers of the supervision conformance suite.

``Probe`` and ``event_filter`` are ``gactors.testkit``'s ``TestProbe`` and
``event_filter`` (SPEC §15) when that package is importable; otherwise the small local
equivalents below stand in, with the same call shapes. ``mute``, ``LogRecorder`` and
``wait_for`` are local. Every wait has an explicit timeout.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import gevent
from gevent.event import Event
from gevent.queue import Empty, Queue

from gactors import Actor, ActorRef, ActorSystem, LogEvent, Props, Terminated

DEFAULT_TIMEOUT = 5.0
"""Generous: the machine is shared; a passing test never waits this long."""

QUIET = 0.3
"""How long ``expect_no_message`` listens by default."""


class _WatchRequest:
    __slots__ = ("ref",)

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref


class _UnwatchRequest:
    __slots__ = ("ref",)

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref


_ACK = object()


class _ProbeActor(Actor):
    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def receive(self, message: Any) -> None:
        if type(message) is _WatchRequest:
            self.context.watch(message.ref)
            self.sender.tell(_ACK)
        elif type(message) is _UnwatchRequest:
            self.context.unwatch(message.ref)
            self.sender.tell(_ACK)
        else:
            self.queue.put((message, self.sender))


class _LocalProbe:
    """An actor whose messages the test reads, in order, with timeouts."""

    def __init__(self, system: ActorSystem, name: str | None = None) -> None:
        self.system = system
        self.queue: Queue = Queue()
        # Under /system, like gactors.testkit's probe: it outlives the user's actors
        # while the system shuts down.
        self.ref = system._system_cell.attach_child(Props(_ProbeActor, self.queue), name)
        self.last_sender: ActorRef | None = None

    # -- receiving ----------------------------------------------------------------------------
    def receive_one(self, timeout: float = DEFAULT_TIMEOUT) -> Any:
        try:
            message, sender = self.queue.get(timeout=timeout)
        except Empty:
            raise AssertionError(f"probe: no message within {timeout} s") from None
        self.last_sender = sender
        return message

    def expect_msg(self, obj: Any, timeout: float = DEFAULT_TIMEOUT) -> Any:
        got = self.receive_one(timeout)
        assert got == obj, f"probe: expected {obj!r}, got {got!r}"
        return got

    def expect_msg_type(self, cls: type, timeout: float = DEFAULT_TIMEOUT) -> Any:
        got = self.receive_one(timeout)
        assert isinstance(got, cls), f"probe: expected a {cls.__name__}, got {got!r}"
        return got

    def expect_no_message(self, duration: float = QUIET) -> None:
        try:
            message, _ = self.queue.get(timeout=duration)
        except Empty:
            return
        raise AssertionError(f"probe: expected no message, got {message!r}")

    def receive_n(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
        return [self.receive_one(timeout) for _ in range(n)]

    def fish_for_message(
        self, predicate: Callable[[Any], bool], timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """Skip messages until one satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("probe: no matching message in time")
            got = self.receive_one(left)
            if predicate(got):
                return got

    # -- death watch ---------------------------------------------------------------------------
    def watch(self, ref: ActorRef) -> ActorRef:
        assert self.ref.ask(_WatchRequest(ref), timeout=DEFAULT_TIMEOUT) is _ACK
        return ref

    def unwatch(self, ref: ActorRef) -> ActorRef:
        assert self.ref.ask(_UnwatchRequest(ref), timeout=DEFAULT_TIMEOUT) is _ACK
        return ref

    def expect_terminated(self, ref: ActorRef, timeout: float = DEFAULT_TIMEOUT) -> Terminated:
        got = self.receive_one(timeout)
        assert type(got) is Terminated and got.actor == ref, (
            f"probe: expected Terminated({ref!r}), got {got!r}"
        )
        return got

    def tell(self, message: Any) -> None:
        """Send to the probe itself (used as a sink by actors under test)."""
        self.ref.tell(message, None)


# -- log events ---------------------------------------------------------------------------------
def _matches(
    event: LogEvent,
    exc_type: type[BaseException] | None,
    message: str | None,
    level: int | None,
    source: str | None,
) -> bool:
    if exc_type is not None:
        cause = event.cause
        if cause is None or not isinstance(cause, exc_type):
            return False
    if (
        message is not None
        and message not in event.message
        and (event.cause is None or message not in str(event.cause))
    ):
        return False
    if level is not None and event.level != level:
        return False
    return source is None or event.source == source


class _Matched:
    """What the local event filter matched (``.events``, as gactors.testkit's)."""

    def __init__(self) -> None:
        self.events: list[LogEvent] = []


@contextlib.contextmanager
def _local_event_filter(
    system: ActorSystem,
    exc_type: type[BaseException] | None = None,
    message: str | None = None,
    level: int | None = None,
    occurrences: int = 1,
    *,
    source: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Iterator[_Matched]:
    """Expect and swallow exactly ``occurrences`` matching log events.

    After the block, waits (up to ``timeout``) until that many arrived, then fails if
    the count differs.
    """
    matched = _Matched()
    got = matched.events
    enough = Event()

    def f(event: LogEvent) -> bool:
        if _matches(event, exc_type, message, level, source):
            got.append(event)
            if len(got) >= occurrences:
                enough.set()
            return True
        return False

    system._log_filters.append(f)
    try:
        yield matched
        if occurrences > 0:
            enough.wait(timeout)
    finally:
        system._log_filters.remove(f)
    assert len(got) == occurrences, (
        f"event_filter: expected {occurrences} log event(s) matching "
        f"exc_type={exc_type}, message={message!r}, level={level}, got {len(got)}: {got!r}"
    )


@contextlib.contextmanager
def mute(system: ActorSystem, *exc_types: type[BaseException]) -> Iterator[None]:
    """Swallow any log event caused by one of ``exc_types`` (count not checked)."""

    def f(event: LogEvent) -> bool:
        return event.cause is not None and isinstance(event.cause, exc_types)

    system._log_filters.append(f)
    try:
        yield
    finally:
        system._log_filters.remove(f)


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


def wait_for(predicate: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Poll a condition on internal state that no message can report (sparingly used)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        gevent.sleep(0.005)


try:
    from gactors.testkit import TestProbe as Probe
    from gactors.testkit import event_filter
except ImportError:  # the shared testkit is not there: the local stand-ins
    Probe = _LocalProbe  # type: ignore[assignment, misc]
    event_filter = _local_event_filter  # type: ignore[assignment]

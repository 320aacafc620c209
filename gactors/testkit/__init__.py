"""Testing support for actors (docs/testing.md).

* :class:`TestProbe` — an actor whose messages the test reads in order, with timeouts:
  ``probe.expect_msg("pong")``, ``probe.expect_terminated(ref)``, ...
* :func:`event_filter` — expect (and swallow) log events such as the failure records
  of supervised actors: ``with event_filter(system, ValueError): ref.tell("boom")``.
* :func:`await_condition` — poll a condition no message reports (internal state, a
  file, another process) until it holds: ``await_condition(lambda: ref.is_terminated)``.
* :func:`dilated` / :func:`time_factor` — every timeout of the testkit is multiplied
  by the ``GACTORS_TEST_TIMEFACTOR`` environment variable (default 1), so that a slow
  CI machine can be given more time without editing tests.
* A pytest plugin (``gactors.testkit._pytest_plugin``, registered through the
  ``pytest11`` entry point) with the fixtures ``actor_system`` and ``probe``, and for
  the cluster ``redis_url`` (a throwaway Redis-protocol server for the session, or
  ``GACTORS_TEST_REDIS_URL``), ``redis_server`` (a private server a test may stop
  and restart) and ``redis_key_prefix``.

Everything here may be used from the system's hub thread (the usual case: the test
itself runs in the main greenlet) or from any other OS thread.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import os
import re
from collections import deque
from collections.abc import Callable, Iterable
from datetime import timedelta
from time import monotonic
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import gevent

from gactors._actor import Actor
from gactors._duration import seconds
from gactors._future import Future
from gactors._messages import Terminated
from gactors._props import Props
from gactors._ref import ActorRef
from gactors._text import safe_str
from gactors._threads import get_ident

if TYPE_CHECKING:
    from gactors._cell import ActorCell
    from gactors._eventstream import LogEvent
    from gactors._ref import LocalActorRef
    from gactors._system import ActorSystem

T = TypeVar("T")
P = ParamSpec("P")

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_TIMEOUT",
    "EventFilter",
    "TestProbe",
    "await_condition",
    "dilated",
    "event_filter",
    "time_factor",
]

TIMEFACTOR_ENV = "GACTORS_TEST_TIMEFACTOR"
DEFAULT_TIMEOUT = 3.0
"""Seconds a probe waits when no timeout is given (before dilation)."""
DEFAULT_NO_MESSAGE = 0.1
"""Seconds ``expect_no_message()`` listens when no duration is given (before dilation)."""


def time_factor() -> float:
    """The value of ``GACTORS_TEST_TIMEFACTOR`` (a positive number; default 1.0)."""
    raw = os.environ.get(TIMEFACTOR_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        factor = float(raw)
    except ValueError:
        raise ValueError(f"{TIMEFACTOR_ENV} must be a positive number, not {raw!r}") from None
    if not factor > 0 or factor == float("inf"):
        raise ValueError(f"{TIMEFACTOR_ENV} must be a positive finite number, not {raw!r}")
    return factor


def dilated(seconds: float) -> float:
    """``seconds`` scaled by :func:`time_factor`."""
    return float(seconds) * time_factor()


DEFAULT_INTERVAL = 0.01
"""Seconds between two checks of :func:`await_condition` when no interval is given."""


def _describe_predicate(predicate: Callable[[], object]) -> str:
    """The lambda's source (what a reader recognises), else the callable's name."""
    name = getattr(predicate, "__qualname__", None)
    if isinstance(name, str) and name.endswith("<lambda>"):
        try:
            source = inspect.getsource(predicate).strip()
        except (OSError, TypeError):  # no source file: a REPL, exec'd code
            source = ""
        if source:
            # The lambda's whole line comes back; a very long one is cut.
            return source if len(source) <= 200 else source[:197] + "..."
    return name if isinstance(name, str) else repr(predicate)


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception as e:  # a broken __repr__ must not hide the timeout
        text = f"<{type(value).__name__} whose repr raised {type(e).__name__}>"
    return text if len(text) <= 200 else text[:197] + "..."


def await_condition(
    predicate: Callable[[], T],
    timeout: float | timedelta | None = None,
    interval: float | timedelta = DEFAULT_INTERVAL,
    message: str | None = None,
) -> T:
    """Call ``predicate()`` until it returns a true value, and return that value.

    For what no message reports (an actor's internal state, a file another process
    writes, a metric): a test that can expect a message should use a
    :class:`TestProbe` instead. Between two checks the calling greenlet sleeps
    ``interval`` seconds (default 0.01), so the actors and other greenlets run; the
    predicate is checked once more when ``timeout`` (default 3 s, multiplied by
    ``GACTORS_TEST_TIMEFACTOR`` like every testkit timeout, an explicit one too)
    has passed, then :class:`AssertionError` is raised, naming ``message`` (or the
    predicate: a lambda's source line), the time waited and the last value returned.
    ``timeout=0`` checks once. Durations are float seconds or a ``timedelta``. An
    exception raised by ``predicate`` is not caught: it ends the wait at once.
    """
    if not callable(predicate):
        raise TypeError(f"predicate must be callable, not {type(predicate).__name__}")
    limit = dilated(
        DEFAULT_TIMEOUT if timeout is None else seconds(timeout, "timeout", zero_ok=True)
    )
    pause = seconds(interval, "interval")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"message must be a str or None, not {type(message).__name__}")
    deadline = monotonic() + limit
    checks = 0
    while True:
        value = predicate()
        checks += 1
        if value:
            return value
        remaining = deadline - monotonic()
        if remaining <= 0:
            break
        gevent.sleep(min(pause, remaining))
    what = message if message is not None else _describe_predicate(predicate)
    factor = time_factor()
    scaled = f", GACTORS_TEST_TIMEFACTOR={factor:g}" if factor != 1.0 else ""
    raise AssertionError(
        f"await_condition: {what} not met within {limit:.3g} s{scaled} "
        f"({checks} checks, every {pause:.3g} s; last value {_short_repr(value)})"
    )


def _in_hub(system: ActorSystem, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    if get_ident() == system._tid:
        return fn(*args, **kwargs)
    return system.run_in_hub(fn, *args, **kwargs)


# -- the probe ------------------------------------------------------------------------------------
class _Inbox:
    """What the probe actor received, read by the test (any greenlet or thread)."""

    __slots__ = ("_system", "items", "waiter")

    def __init__(self, system: ActorSystem) -> None:
        self._system = system
        self.items: deque[tuple[Any, ActorRef | None]] = deque()
        self.waiter: Future[None] | None = None

    def put(self, item: tuple[Any, ActorRef | None]) -> None:  # hub thread
        self.items.append(item)
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            waiter._set_result(None)

    def get(self, deadline: float) -> tuple[Any, ActorRef | None] | None:
        """The next item, or None when ``deadline`` (monotonic) passed first."""
        items = self.items
        while True:
            if items:
                return items.popleft()
            remaining = deadline - monotonic()
            if remaining <= 0:
                return None
            system = self._system
            waiter: Future[None] = Future(system._hub, system._tid)
            self.waiter = waiter
            # put() from the hub thread may have run between the check above and
            # publishing the waiter: check again before waiting.
            if items:
                self.waiter = None
                continue
            try:
                waiter.get(remaining)
            except TimeoutError:
                pass
            finally:
                if self.waiter is waiter:
                    self.waiter = None


class _ProbeActor(Actor):
    def __init__(self, inbox: _Inbox) -> None:
        self.inbox = inbox

    def receive(self, message: Any) -> None:
        # Terminated of a watched actor is recorded like any message (no DeathPact).
        self.inbox.put((message, self._gactors_cell.sender))


_probe_ids = itertools.count(1)


class TestProbe:
    """An actor driven by the test: what it receives can be expected, in order.

    ``TestProbe(system)`` creates the probe actor under ``/system`` (so that it outlives
    the user's actors while the system shuts down). Every timeout is in seconds,
    defaults to 3 s, and is multiplied by ``GACTORS_TEST_TIMEFACTOR``. A failed
    expectation raises :class:`AssertionError` saying what was expected and what came.
    """

    __test__ = False  # not a test class, whatever pytest thinks of its name

    def __init__(self, system: ActorSystem, name: str | None = None) -> None:
        self.system = system
        self._inbox = _Inbox(system)
        self._last_sender: ActorRef | None = None
        self._last_message: Any = None
        if name is None:
            name = f"testProbe-{next(_probe_ids)}"
        self.ref: ActorRef = _in_hub(
            system, system.system_cell.attach_child, Props(_ProbeActor, self._inbox), name
        )
        """The probe's own ref: give it to the actors under test."""

    # -- state -----------------------------------------------------------------------------------
    @property
    def last_sender(self) -> ActorRef | None:
        """The sender of the last message received (None if it had none)."""
        return self._last_sender

    @property
    def last_message(self) -> Any:
        """The last message received (None before the first)."""
        return self._last_message

    @property
    def _cell(self) -> ActorCell:
        # The probe's own actor: a local ref, whose cell is the ActorCell the system made.
        ref = cast("LocalActorRef", self.ref)
        return cast("ActorCell", ref._cell)  # noqa: SLF001  own cell

    # -- receiving -------------------------------------------------------------------------------
    @staticmethod
    def _timeout(timeout: float | None) -> float:
        if timeout is None:
            return dilated(DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
        return dilated(timeout)

    def _next(self, deadline: float) -> tuple[bool, Any]:
        item = self._inbox.get(deadline)
        if item is None:
            return False, None
        message, sender = item
        self._last_message = message
        self._last_sender = sender
        return True, message

    def _receive(self, timeout: float, what: str) -> Any:
        ok, message = self._next(monotonic() + timeout)
        if not ok:
            raise AssertionError(f"timeout ({timeout:.3g} s) during {what}")
        return message

    def receive_one(self, timeout: float | None = None) -> Any:
        """The next message, whatever it is."""
        t = self._timeout(timeout)
        return self._receive(t, "receive_one")

    def expect_msg(self, obj: Any, timeout: float | None = None) -> Any:
        """The next message must equal ``obj``; returns it."""
        t = self._timeout(timeout)
        message = self._receive(t, f"expect_msg while waiting for {obj!r}")
        if message != obj:
            raise AssertionError(f"expected {obj!r}, found {message!r}")
        return message

    def expect_msg_type(self, cls: type | tuple[type, ...], timeout: float | None = None) -> Any:
        """The next message must be an instance of ``cls``; returns it."""
        t = self._timeout(timeout)
        name = cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls)
        message = self._receive(t, f"expect_msg_type while waiting for a {name}")
        if not isinstance(message, cls):
            raise AssertionError(f"expected a {name}, found {type(message).__name__} {message!r}")
        return message

    def expect_msg_any_of(self, *objs: Any, timeout: float | None = None) -> Any:
        """The next message must equal one of ``objs``; returns it."""
        t = self._timeout(timeout)
        message = self._receive(t, f"expect_msg_any_of while waiting for one of {objs!r}")
        if message not in objs:
            raise AssertionError(f"expected one of {objs!r}, found {message!r}")
        return message

    def expect_no_message(self, duration: float | None = None) -> None:
        """No message may arrive during ``duration`` seconds (default 0.1)."""
        d = dilated(DEFAULT_NO_MESSAGE) if duration is None else self._timeout(duration)
        ok, message = self._next(monotonic() + d)
        if ok:
            raise AssertionError(f"expected no message during {d:.3g} s, received {message!r}")

    def receive_n(self, n: int, timeout: float | None = None) -> list[Any]:
        """The next ``n`` messages, all within ``timeout`` in total."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, not {n!r}")
        t = self._timeout(timeout)
        deadline = monotonic() + t
        out: list[Any] = []
        for _ in range(n):
            ok, message = self._next(deadline)
            if not ok:
                raise AssertionError(
                    f"timeout ({t:.3g} s) during receive_n while waiting for {n} messages "
                    f"(got {len(out)}: {out!r})"
                )
            out.append(message)
        return out

    def fish_for_message(
        self, predicate: Callable[[Any], bool], timeout: float | None = None
    ) -> Any:
        """Receive until ``predicate(message)`` is true and return that message; the
        messages before it are dropped. All within ``timeout`` in total."""
        t = self._timeout(timeout)
        deadline = monotonic() + t
        skipped: list[Any] = []
        while True:
            ok, message = self._next(deadline)
            if not ok:
                shown = skipped if len(skipped) <= 10 else [*skipped[:10], "..."]
                raise AssertionError(
                    f"timeout ({t:.3g} s) during fish_for_message; "
                    f"{len(skipped)} message(s) did not match: {shown!r}"
                )
            if predicate(message):
                return message
            skipped.append(message)

    # -- death watch ---------------------------------------------------------------------------
    def watch(self, ref: ActorRef) -> ActorRef:
        """Watch ``ref``: the probe receives ``Terminated(ref)`` when it stops."""
        if not isinstance(ref, ActorRef):
            raise TypeError(f"watch() needs an ActorRef, not {type(ref).__name__}")
        return _in_hub(self.system, self._cell.watch, ref, None)

    def unwatch(self, ref: ActorRef) -> ActorRef:
        """Stop watching ``ref`` (a ``Terminated`` not yet received is dropped)."""
        if not isinstance(ref, ActorRef):
            raise TypeError(f"unwatch() needs an ActorRef, not {type(ref).__name__}")
        return _in_hub(self.system, self._cell.unwatch, ref)

    def expect_terminated(self, ref: ActorRef, timeout: float | None = None) -> Terminated:
        """The next message must be ``Terminated(ref)`` (watch ``ref`` first)."""
        t = self._timeout(timeout)
        message = self._receive(t, f"expect_terminated while waiting for Terminated({ref})")
        if type(message) is not Terminated or message.actor != ref:
            raise AssertionError(f"expected Terminated({ref!r}), found {message!r}")
        return message

    # -- sending ---------------------------------------------------------------------------------
    def send(self, ref: ActorRef, message: Any) -> None:
        """Tell ``message`` to ``ref`` with the probe as sender."""
        ref.tell(message, self.ref)

    def reply(self, message: Any) -> None:
        """Tell ``message`` to the sender of the last message received."""
        sender = self._last_sender
        if sender is None:
            raise AssertionError(
                "reply(): the last message had no sender (or nothing was received yet)"
            )
        sender.tell(message, self.ref)

    def forward(self, ref: ActorRef, message: Any = None) -> None:
        """Tell ``ref`` the last message (or ``message``) keeping its original sender."""
        ref.tell(self._last_message if message is None else message, self._last_sender)

    def __repr__(self) -> str:
        return f"<TestProbe {self.ref.path}>"


# -- log events ---------------------------------------------------------------------------------
def _level(level: int | str | None) -> int | None:
    if level is None or (isinstance(level, int) and not isinstance(level, bool)):
        return level
    if isinstance(level, str):
        value = logging.getLevelName(level.upper())
        if isinstance(value, int):
            return value
    raise ValueError(f"level must be a logging level (int or name), not {level!r}")


class EventFilter:
    """Expects (and swallows) log events of an actor system; see :func:`event_filter`.

    ``events`` lists what matched so far.
    """

    __test__ = False

    def __init__(
        self,
        system: ActorSystem,
        exc_type: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        message: str | re.Pattern[str] | None = None,
        level: int | str | None = None,
        occurrences: int | None = 1,
        *,
        source: str | ActorRef | None = None,
        timeout: float | None = None,
    ) -> None:
        if occurrences is not None and (
            isinstance(occurrences, bool) or not isinstance(occurrences, int) or occurrences < 0
        ):
            raise ValueError(f"occurrences must be an int >= 0 or None, not {occurrences!r}")
        self.system = system
        self.exc_type = exc_type
        self.message = message
        self.level = _level(level)
        self.occurrences = occurrences
        self.source = str(source.path) if isinstance(source, ActorRef) else source
        self.timeout = timeout
        self.events: list[LogEvent] = []
        self._enough: Future[None] | None = None

    def matches(self, event: LogEvent) -> bool:
        """Whether ``event`` is one this filter expects."""
        if self.exc_type is not None and not isinstance(event.cause, self.exc_type):
            return False
        if self.level is not None and event.level != self.level:
            return False
        if self.source is not None and event.source != self.source:
            return False
        m = self.message
        if m is not None:
            # safe_str: a cause whose __str__ raises must not break supervision.
            texts: Iterable[str] = (event.message, safe_str(event.cause) if event.cause else "")
            if isinstance(m, re.Pattern):
                return any(m.search(t) for t in texts)
            return any(m in t for t in texts)
        return True

    def _filter(self, event: LogEvent) -> bool:  # hub thread, from system.publish_log
        if not self.matches(event):
            return False
        self.events.append(event)
        enough = self._enough
        occurrences = self.occurrences
        if enough is not None and occurrences is not None and len(self.events) >= occurrences:
            enough._set_result(None)
        return True

    def _describe(self) -> str:
        parts = []
        if self.exc_type is not None:
            parts.append(f"exc_type={getattr(self.exc_type, '__name__', self.exc_type)}")
        if self.message is not None:
            parts.append(f"message={self.message!r}")
        if self.level is not None:
            parts.append(f"level={logging.getLevelName(self.level)}")
        if self.source is not None:
            parts.append(f"source={self.source!r}")
        return ", ".join(parts) or "any event"

    def __enter__(self) -> EventFilter:
        system = self.system
        self._enough = Future(system._hub, system._tid)
        if self.occurrences == 0:
            self._enough._set_result(None)
        # The innermost filter sees events first.
        _in_hub(system, system.log_filters.insert, 0, self._filter)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        system = self.system
        try:
            if exc_type is None and self.occurrences is not None and self._enough is not None:
                t = dilated(DEFAULT_TIMEOUT if self.timeout is None else self.timeout)
                try:
                    self._enough.get(t)
                except TimeoutError:
                    pass
        finally:
            _in_hub(system, self._remove)
        if exc_type is not None or self.occurrences is None:
            return
        got = len(self.events)
        if got < self.occurrences:
            raise AssertionError(
                f"event_filter: timeout waiting for {self.occurrences} log event(s) matching "
                f"{self._describe()}; got {got}: {self.events!r}"
            )
        if got > self.occurrences:
            raise AssertionError(
                f"event_filter: expected {self.occurrences} log event(s) matching "
                f"{self._describe()}, got {got} (excess): {self.events!r}"
            )

    def _remove(self) -> None:
        try:
            self.system.log_filters.remove(self._filter)
        except ValueError:
            pass

    def __repr__(self) -> str:
        return f"<EventFilter {self._describe()}: {len(self.events)}/{self.occurrences}>"


def event_filter(
    system: ActorSystem,
    exc_type: type[BaseException] | tuple[type[BaseException], ...] | None = None,
    message: str | re.Pattern[str] | None = None,
    level: int | str | None = None,
    occurrences: int | None = 1,
    *,
    source: str | ActorRef | None = None,
    timeout: float | None = None,
) -> EventFilter:
    """A context manager expecting ``occurrences`` log events of ``system``.

    While the block runs, every log event that matches all the given criteria is
    swallowed (neither published on the event stream nor logged) and counted:
    ``exc_type`` (the event's cause is an instance), ``message`` (a substring, or a
    compiled regex, of the log text or of the cause's text), ``level`` (a logging level
    or its name), ``source`` (the actor path, or an ActorRef). On leaving the block
    it waits up to ``timeout`` (default 3 s, scaled by ``GACTORS_TEST_TIMEFACTOR``)
    for the expected count, then raises :class:`AssertionError` if fewer or more
    events matched. ``occurrences=None`` swallows any number without checking. The
    filter is returned by ``__enter__``: ``with event_filter(...) as f: ...;
    f.events``.
    """
    return EventFilter(
        system, exc_type, message, level, occurrences, source=source, timeout=timeout
    )

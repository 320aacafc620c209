"""The event stream: publish/subscribe by class, and the log events gactors emits."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

from gactors._ref import ActorRef
from gactors._threads import get_ident

if TYPE_CHECKING:
    from gactors._decisions import Directive
    from gactors._spi import SystemSPI

__all__ = ["EventStream", "LogEvent"]

_log = logging.getLogger("gactors.eventstream")

Subscriber = Union[ActorRef, Callable[[Any], Any]]


class LogEvent:
    """A log record of gactors itself (failures, lifecycle, dead letters), as published
    on the event stream. ``level`` is a :mod:`logging` level; ``source`` the actor path;
    ``directive`` is the supervisor's decision (a :class:`~gactors.Directive`) when the
    event reports a handled failure, else None."""

    __slots__ = ("cause", "directive", "level", "logger_class", "message", "source")

    def __init__(
        self,
        level: int,
        source: str,
        message: str,
        cause: BaseException | None = None,
        logger_class: type | None = None,
        directive: Directive | None = None,
    ) -> None:
        self.level = level
        self.source = source
        self.message = message
        self.cause = cause
        self.logger_class = logger_class
        self.directive = directive

    @property
    def level_name(self) -> str:
        return logging.getLevelName(self.level)

    def __repr__(self) -> str:
        return f"LogEvent({self.level_name}, {self.source!r}, {self.message!r})"


class EventStream:
    """Class-based publish/subscribe for system events.

    A subscriber is an :class:`ActorRef` (the event is told to it) or a plain callable
    (called in the hub's thread; an exception it raises is logged and does not reach
    the publisher). It receives instances of the class it subscribed to and of its
    subclasses.
    """

    def __init__(self, system: SystemSPI) -> None:
        self._system = system
        self._subs: list[tuple[type, Subscriber]] = []
        self._cache: dict[type, tuple[Subscriber, ...]] = {}

    def subscribe(self, subscriber: Subscriber, cls: type) -> bool:
        """Subscribe to ``cls`` and its subclasses; False if already subscribed."""
        if get_ident() != self._system._tid:
            return self._system.run_in_hub(self.subscribe, subscriber, cls)
        if not isinstance(subscriber, ActorRef) and not callable(subscriber):
            raise TypeError(
                f"a subscriber must be an ActorRef or a callable, not {type(subscriber).__name__}"
            )
        if not isinstance(cls, type):
            raise TypeError(f"cls must be a class, not {cls!r}")
        if (cls, subscriber) in self._subs:
            return False
        self._subs.append((cls, subscriber))
        self._cache.clear()
        return True

    def unsubscribe(self, subscriber: Subscriber, cls: type | None = None) -> bool:
        """Remove the subscription to ``cls`` (all of them when ``cls`` is None)."""
        if get_ident() != self._system._tid:
            return self._system.run_in_hub(self.unsubscribe, subscriber, cls)
        before = len(self._subs)
        self._subs = [
            (c, s) for (c, s) in self._subs if not (s == subscriber and (cls is None or c is cls))
        ]
        self._cache.clear()
        return len(self._subs) != before

    def has_subscribers(self, cls: type) -> bool:
        """True if an event of class ``cls`` would reach anybody."""
        return bool(self._subscribers_for(cls))

    def _subscribers_for(self, cls: type) -> tuple[Subscriber, ...]:
        subs = self._cache.get(cls)
        if subs is None:
            seen: list[Subscriber] = []
            for c, s in self._subs:
                if issubclass(cls, c) and s not in seen:
                    seen.append(s)
            subs = self._cache[cls] = tuple(seen)
        return subs

    def publish(self, event: Any) -> None:
        """Deliver ``event`` to every matching subscriber. Safe from any thread."""
        if event is None:
            raise ValueError("cannot publish None")
        system = self._system
        if get_ident() != system._tid:
            system.run_in_hub_async(self.publish, event)
            return
        for s in self._subscribers_for(type(event)):
            if isinstance(s, ActorRef):
                s.tell(event, None)
            else:
                try:
                    s(event)
                except Exception:
                    _log.exception("event stream subscriber %r failed on %r", s, event)

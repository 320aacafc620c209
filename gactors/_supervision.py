"""Supervisor strategies, directives and deciders (docs/concepts/supervision.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, ClassVar, Union

from zope.interface import implementer

from gactors import _sysmsg as sm
from gactors._decisions import ChildRestartStats, Directive
from gactors._text import failure_text
from gactors.exceptions import (
    ActorInitializationException,
    ActorKilledException,
    DeathPactException,
)
from gactors.interfaces import ISupervisorStrategy, ISupervisorStrategyConfigurator

if TYPE_CHECKING:
    from gactors._context import ActorContext
    from gactors._ref import ActorRef

__all__ = [
    "AllForOneStrategy",
    "ChildRestartStats",
    "DefaultSupervisorStrategy",
    "Directive",
    "FailureHandled",
    "OneForOneStrategy",
    "StoppingSupervisorStrategy",
    "SupervisorStrategy",
    "SupervisorStrategyConfigurator",
    "default_decider",
    "make_decider",
]


Resume = Directive.RESUME
Restart = Directive.RESTART
Stop = Directive.STOP
Escalate = Directive.ESCALATE

Decider = Callable[[BaseException], Union[Directive, None]]
DeciderLike = Union[
    Callable[[BaseException], Union[Directive, None]],
    Mapping[type, Directive],
    Sequence[type],
]


def default_decider(exc: BaseException) -> Directive:
    """Stop on initialization/kill/death-pact errors, restart on any other ``Exception``,
    escalate anything else."""
    if isinstance(exc, (ActorInitializationException, ActorKilledException, DeathPactException)):
        return Directive.STOP
    if isinstance(exc, Exception):
        return Directive.RESTART
    return Directive.ESCALATE


def _check_exc_type(t: object, where: str) -> type:
    if not (isinstance(t, type) and issubclass(t, BaseException)):
        raise TypeError(f"{where}: {t!r} is not an exception class")
    return t


def make_decider(decider: DeciderLike) -> Decider:
    """Normalise the three accepted decider forms into a callable."""
    if isinstance(decider, Mapping):
        table: dict[type, Directive] = {}
        for k, v in decider.items():
            _check_exc_type(k, "decider mapping key")
            if not isinstance(v, Directive):
                raise TypeError(f"decider mapping value for {k.__name__} must be a Directive")
            table[k] = v

        def mapping_decider(exc: BaseException) -> Directive | None:
            # The most specific matching class wins, whatever the mapping's order.
            for klass in type(exc).__mro__:
                d = table.get(klass)
                if d is not None:
                    return d
            return None

        return mapping_decider
    if isinstance(decider, (list, tuple)):
        types = tuple(_check_exc_type(t, "decider sequence item") for t in decider)

        def sequence_decider(exc: BaseException) -> Directive:
            return Directive.RESTART if isinstance(exc, types) else Directive.ESCALATE

        return sequence_decider
    if callable(decider):
        return decider
    raise TypeError(
        "a decider must be a callable, a mapping {ExceptionType: Directive} or a "
        f"sequence of exception types, not {type(decider).__name__}"
    )


_failure_log = logging.getLogger("gactors.supervision")


class FailureHandled:
    """Published on the event stream for every failure a :class:`SupervisorStrategy`
    decides on (resume, restart or stop; an escalation is reported by the supervisor
    that handles it), whether or not the strategy logs it (``logging_enabled=False``).

    What the dashboard and the Prometheus metrics count: supervision's record, not the
    log's. ``source`` is the failed child's path, ``strategy`` the deciding strategy's
    class. Failures are rare: publishing costs nothing on the message path.
    """

    __slots__ = ("cause", "directive", "source", "strategy")

    def __init__(
        self, source: str, cause: BaseException, directive: Directive, strategy: type
    ) -> None:
        self.source = source
        self.cause = cause
        self.directive = directive
        self.strategy = strategy

    def __repr__(self) -> str:
        return (
            f"FailureHandled({self.source!r}, {type(self.cause).__name__}, "
            f"{self.directive.name.lower()})"
        )


@implementer(ISupervisorStrategy)
class SupervisorStrategy:
    """Base class: how an actor handles the failures of its children.

    Subclasses implement :meth:`process_failure`. ``default_strategy`` and
    ``stopping_strategy`` are ready-made instances.
    """

    default_strategy: ClassVar[SupervisorStrategy]
    stopping_strategy: ClassVar[SupervisorStrategy]

    def __init__(
        self,
        decider: DeciderLike = default_decider,
        *,
        max_retries: int | None = None,
        within: float | timedelta | None = None,
        logging_enabled: bool = True,
    ) -> None:
        if isinstance(within, timedelta):
            within = within.total_seconds()
        if max_retries is not None and (
            isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < -1
        ):
            raise ValueError(f"max_retries must be None, -1 or an int >= 0, not {max_retries!r}")
        if max_retries == -1:
            max_retries = None
        if within is not None:
            if isinstance(within, bool) or not isinstance(within, (int, float)) or not within > 0:
                raise ValueError(f"within must be a positive number of seconds, not {within!r}")
            if max_retries is None:
                raise ValueError(
                    "within needs an explicit max_retries >= 0 (None and -1 mean no limit, "
                    "which a window cannot bound)"
                )
        self.decider: Decider = make_decider(decider)
        self.max_retries: int | None = max_retries
        self.within: float | None = float(within) if within is not None else None
        self.logging_enabled = bool(logging_enabled)

    # -- the ISupervisorStrategy protocol ---------------------------------------------------
    def handle_failure(
        self,
        context: ActorContext,
        child: ActorRef,
        cause: BaseException,
        stats: ChildRestartStats,
        children: Sequence[ChildRestartStats],
    ) -> bool:
        """Decide and act; return False to escalate."""
        directive = self.decider(cause)
        if directive is None:
            directive = Directive.ESCALATE
        elif not isinstance(directive, Directive):
            raise TypeError(
                f"decider returned {directive!r}, expected a Directive or None (escalate)"
            )
        if directive is not Directive.ESCALATE:
            context.system.event_stream.publish(
                FailureHandled(str(child.path), cause, directive, type(self))
            )
        self.log_failure(context, child, cause, directive)
        if directive is Directive.RESUME:
            self.resume_child(child, cause)
            return True
        if directive is Directive.ESCALATE:
            return False
        self.process_failure(context, directive is Directive.RESTART, child, cause, stats, children)
        return True

    def handle_child_terminated(
        self, context: ActorContext, child: ActorRef, children: Iterable[ActorRef]
    ) -> None:
        """Called when a child terminated. Default: nothing."""

    def process_failure(
        self,
        context: ActorContext,
        restart: bool,
        child: ActorRef,
        cause: BaseException,
        stats: ChildRestartStats,
        children: Sequence[ChildRestartStats],
    ) -> None:
        """Restart (``restart=True``) or stop the affected children."""
        raise NotImplementedError

    # -- helpers for subclasses and plugins --------------------------------------------------
    @staticmethod
    def resume_child(child: ActorRef, cause: BaseException) -> None:
        """Resume ``child`` (and its subtree) keeping its state."""
        child._send_system(sm.Resume(cause))

    @staticmethod
    def restart_child(child: ActorRef, cause: BaseException, suspend_first: bool) -> None:
        """Restart ``child`` with ``cause`` as the reason."""
        if suspend_first:
            child._send_system(sm.Suspend())
        child._send_system(sm.Recreate(cause))

    def log_failure(
        self, context: ActorContext, child: ActorRef, cause: BaseException, directive: Directive
    ) -> None:
        """One record per handled failure: warning for resume, error for restart/stop."""
        if not self.logging_enabled or directive is Directive.ESCALATE:
            return
        text = failure_text(cause)
        level = logging.WARNING if directive is Directive.RESUME else logging.ERROR
        context.system.publish_log(
            level,
            str(child.path),
            f"{text} ({directive.name.lower()})",
            cause,
            type(self),
            directive=directive,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(max_retries={self.max_retries}, within={self.within}, "
            f"logging_enabled={self.logging_enabled})"
        )


class OneForOneStrategy(SupervisorStrategy):
    """Apply the directive to the failing child only."""

    def process_failure(
        self,
        context: ActorContext,
        restart: bool,
        child: ActorRef,
        cause: BaseException,
        stats: ChildRestartStats,
        children: Sequence[ChildRestartStats],
    ) -> None:
        if restart and stats.request_restart_permission(self.max_retries, self.within):
            self.restart_child(child, cause, suspend_first=False)
        else:
            context.stop(child)


class AllForOneStrategy(SupervisorStrategy):
    """Apply restart/stop to every child; resume only the failing one."""

    def process_failure(
        self,
        context: ActorContext,
        restart: bool,
        child: ActorRef,
        cause: BaseException,
        stats: ChildRestartStats,
        children: Sequence[ChildRestartStats],
    ) -> None:
        if not children:
            return
        if restart and all(
            s.request_restart_permission(self.max_retries, self.within) for s in children
        ):
            for s in children:
                self.restart_child(s.child, cause, suspend_first=s.child != child)
        else:
            for s in children:
                context.stop(s.child)


def _stopping_decider(exc: BaseException) -> Directive:
    return Directive.STOP if isinstance(exc, Exception) else Directive.ESCALATE


SupervisorStrategy.default_strategy = OneForOneStrategy()
SupervisorStrategy.stopping_strategy = OneForOneStrategy(_stopping_decider)


@implementer(ISupervisorStrategyConfigurator)
class SupervisorStrategyConfigurator:
    """Creates the strategy of the ``/user`` guardian (``guardian_supervisor_strategy``)."""

    def create(self) -> SupervisorStrategy:
        """Return the strategy to use."""
        raise NotImplementedError


class DefaultSupervisorStrategy(SupervisorStrategyConfigurator):
    """``"default"``: restart on ``Exception`` (``SupervisorStrategy.default_strategy``)."""

    def create(self) -> SupervisorStrategy:
        return SupervisorStrategy.default_strategy


class StoppingSupervisorStrategy(SupervisorStrategyConfigurator):
    """``"stopping"``: stop any failing top-level actor."""

    def create(self) -> SupervisorStrategy:
        return SupervisorStrategy.stopping_strategy

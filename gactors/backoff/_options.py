"""``BackoffOpts``: the immutable options of a backoff supervisor."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal, cast

from gactors import plugins
from gactors._duration import seconds
from gactors._path import validate_name
from gactors._props import Props
from gactors._supervision import SupervisorStrategy
from gactors.backoff._policies import ExponentialBackoff
from gactors.exceptions import InvalidActorNameException

__all__ = ["BackoffOpts"]

Mode = Literal["on_stop", "on_failure"]


class _NoReply:
    """The ``reply_while_stopped`` default: forward to dead letters instead."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no reply>"


NO_REPLY: Any = _NoReply()


@dataclasses.dataclass(frozen=True)
class BackoffOpts:
    """Options of a :class:`~gactors.backoff.BackoffSupervisor` (docs/backoff.md).

    Build them with :meth:`on_stop` or :meth:`on_failure`, refine them with the
    ``with_*`` builders (each returns new options; options are immutable and may be
    shared), and pass them to :meth:`BackoffSupervisor.props
    <gactors.backoff.BackoffSupervisor.props>`. Every invalid value raises
    :class:`ValueError` (or :class:`TypeError` for a value of the wrong type) when the
    options are built, not when the supervisor starts.
    """

    mode: Mode
    """``"on_stop"`` or ``"on_failure"``."""
    child_props: Props
    """How to build the child."""
    child_name: str
    """The child's name (the same for every incarnation)."""
    min_backoff: float
    """Seconds: the first delay (before the random part)."""
    max_backoff: float
    """Seconds: the cap of the exponential part."""
    random_factor: float
    """In [0, 1]: the delay is multiplied by ``1 + random() * random_factor``."""
    auto_reset: float | None = None
    """Seconds a restarted child must run before the restart count goes back to 0;
    None with :attr:`manual_reset`."""
    manual_reset: bool = False
    """True: only a :data:`~gactors.backoff.Reset` message resets the count."""
    strategy: Any = None
    """The supervisor's own strategy (None: ``SupervisorStrategy.default_strategy``)."""
    max_retries: int | None = None
    """Most restarts before the supervisor stops itself; None: not set (no limit, or
    the strategy's ``max_retries`` under ``on_failure``); -1: no limit."""
    reply_while_stopped: Any = NO_REPLY
    """Sent back to the sender of a message arriving while there is no child."""
    final_stop_message: Callable[[Any], bool] | None = None
    """Predicate: a message for which it is true makes the supervisor stop together
    with the child (``on_stop``) instead of restarting it."""
    policy: Any = ExponentialBackoff
    """The backoff policy factory ``(min_backoff, max_backoff, random_factor) ->
    IBackoffPolicy``."""

    def __post_init__(self) -> None:
        # Validated on every construction, so that every builder re-checks.
        if self.mode not in ("on_stop", "on_failure"):
            raise ValueError(f"mode must be 'on_stop' or 'on_failure', not {self.mode!r}")
        if not isinstance(self.child_props, Props):
            raise TypeError(f"child_props must be a Props, not {type(self.child_props).__name__}")
        try:
            validate_name(self.child_name)
        except InvalidActorNameException as e:
            raise ValueError(f"invalid child_name: {e}") from None
        set_ = object.__setattr__
        # A min_backoff of 0 would restart a child that stops at once in a busy loop
        # (tens of thousands of restarts a second at full CPU): not positive is refused.
        set_(self, "min_backoff", seconds(self.min_backoff, "min_backoff"))
        set_(self, "max_backoff", seconds(self.max_backoff, "max_backoff"))
        if self.min_backoff > self.max_backoff:
            raise ValueError(
                f"min_backoff ({self.min_backoff} s) must not be greater than max_backoff "
                f"({self.max_backoff} s)"
            )
        rf = self.random_factor
        if isinstance(rf, bool) or not isinstance(rf, (int, float)):
            raise TypeError(f"random_factor must be a number in [0, 1], not {rf!r}")
        if not 0.0 <= rf <= 1.0:
            raise ValueError(f"random_factor must be in [0, 1], not {rf!r}")
        set_(self, "random_factor", float(rf))
        if self.auto_reset is not None:
            set_(self, "auto_reset", seconds(self.auto_reset, "auto reset"))
            if self.manual_reset:
                raise ValueError("auto_reset and manual_reset exclude each other")
        elif not self.manual_reset:
            set_(self, "auto_reset", self.min_backoff)
        mr = self.max_retries
        if mr is not None and (isinstance(mr, bool) or not isinstance(mr, int) or mr < -1):
            raise ValueError(f"max_retries must be None, -1 or an int >= 0, not {mr!r}")
        if self.reply_while_stopped is None:
            raise ValueError("reply_while_stopped must not be None (None is not a message)")
        if self.final_stop_message is not None and not callable(self.final_stop_message):
            raise TypeError(
                "final_stop_message must be a predicate (message) -> bool, not "
                f"{type(self.final_stop_message).__name__}"
            )
        if self.strategy is not None:
            set_(self, "strategy", plugins.resolve_strategy(self.strategy))
        set_(self, "policy", plugins.resolve_backoff_policy(self.policy))

    # -- the two constructors ------------------------------------------------------------------
    @classmethod
    def on_stop(
        cls,
        child_props: Props,
        child_name: str,
        min_backoff: float | timedelta,
        max_backoff: float | timedelta,
        random_factor: float,
    ) -> BackoffOpts:
        """Restart the child, after a growing delay, each time it stops.

        Failures of the child are handled by the supervisor's strategy as usual (the
        default restarts it at once, without backoff; see
        :meth:`with_default_stopping_strategy` to turn failures into backoff restarts).
        """
        # (__post_init__ turns a timedelta into seconds: the fields are floats after it)
        mn, mx = cast(float, min_backoff), cast(float, max_backoff)
        return cls("on_stop", child_props, child_name, mn, mx, random_factor)

    @classmethod
    def on_failure(
        cls,
        child_props: Props,
        child_name: str,
        min_backoff: float | timedelta,
        max_backoff: float | timedelta,
        random_factor: float,
    ) -> BackoffOpts:
        """Restart the child, after a growing delay, each time it fails.

        The supervisor's strategy decides as usual; a RESTART becomes "stop the child
        now, start a new one after the delay". A child that stops on its own (or is
        stopped by the strategy) stops the supervisor too.
        """
        mn, mx = cast(float, min_backoff), cast(float, max_backoff)  # (as in on_stop)
        return cls("on_failure", child_props, child_name, mn, mx, random_factor)

    # -- builders ---------------------------------------------------------------------------------
    def _replace(self, **changes: Any) -> BackoffOpts:
        return dataclasses.replace(self, **changes)

    def with_auto_reset(self, seconds: float | timedelta) -> BackoffOpts:
        """Reset the restart count once a restarted child has run for ``seconds`` without
        stopping (or failing) again. The default, with ``min_backoff`` seconds."""
        return self._replace(auto_reset=seconds, manual_reset=False)

    def with_manual_reset(self) -> BackoffOpts:
        """Reset the restart count only when the child sends
        :data:`~gactors.backoff.Reset` to its parent (the supervisor)."""
        return self._replace(auto_reset=None, manual_reset=True)

    def with_supervisor_strategy(self, strategy: Any) -> BackoffOpts:
        """The supervisor's own strategy: an ``ISupervisorStrategy``, a registered name or
        a ``"package.module:Name"`` reference. A ``None`` from its decider falls back to
        the default decider, as in Akka."""
        if strategy is None:
            raise ValueError("strategy must not be None")
        return self._replace(strategy=strategy)

    def with_default_stopping_strategy(self) -> BackoffOpts:
        """Stop the child on any ``Exception`` (so that, under ``on_stop``, every failure
        becomes a backoff restart)."""
        return self._replace(strategy=SupervisorStrategy.stopping_strategy)

    def with_max_retries(self, max_retries: int) -> BackoffOpts:
        """Stop the supervisor (and the child) instead of restarting the child for the
        ``max_retries + 1``-th time in a row; -1 means no limit."""
        return self._replace(max_retries=max_retries)

    def with_reply_while_stopped(self, message: Any) -> BackoffOpts:
        """Reply ``message`` to the sender of any message arriving while the child is not
        running (instead of sending it to dead letters)."""
        return self._replace(reply_while_stopped=message)

    def with_final_stop_message(self, predicate: Callable[[Any], bool]) -> BackoffOpts:
        """After forwarding a message for which ``predicate(message)`` is true, the
        supervisor stops together with the child instead of restarting it (a graceful
        shutdown of both: send the child's own stop message through the supervisor)."""
        return self._replace(final_stop_message=predicate)

    def with_policy(self, policy: Any) -> BackoffOpts:
        """The backoff policy: a registered name (``"exponential"`` -- the default --,
        ``"full-jitter"``, ``"decorrelated-jitter"``, ``"constant"``, or a plugin's), a
        ``"package.module:Name"`` reference, a factory ``(min_backoff, max_backoff,
        random_factor) -> IBackoffPolicy``, or an ``IBackoffPolicy`` instance (then shared
        by every supervisor built from these options). An unknown name raises
        :class:`~gactors.PluginError` listing the known ones."""
        return self._replace(policy=policy)

    def __repr__(self) -> str:
        reset = "manual" if self.manual_reset else f"auto {self.auto_reset}"
        return (
            f"BackoffOpts.{self.mode}({self.child_props!r}, {self.child_name!r}, "
            f"{self.min_backoff}, {self.max_backoff}, {self.random_factor}; reset={reset}, "
            f"max_retries={self.max_retries}, policy={self.policy!r})"
        )

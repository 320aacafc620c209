"""``BackoffSupervisor``: restart a child after growing delays (Akka's backoff pattern).

The supervisor is an ordinary actor: it creates its one child, watches it, and starts
a new incarnation after the delay given by its backoff policy, using its own
``self.timers`` (so that a restart or stop of the supervisor cancels whatever it had
scheduled). Two modes, chosen by the options:

* ``on_stop`` (Akka's ``BackoffOnStopSupervisor``): when the child *stops*, a new one
  starts after the delay. Failures of the child are left to the supervisor's strategy.
* ``on_failure`` (Akka's ``BackoffOnRestartSupervisor``): the supervisor's strategy
  turns every RESTART of the child into "stop it now, start a new one after the
  delay". A child that stops for any other reason stops the supervisor.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gactors import plugins
from gactors._actor import Actor
from gactors._messages import Terminated, _Singleton, register_wire_class, register_wire_singleton
from gactors._props import Props
from gactors._supervision import (
    Directive,
    OneForOneStrategy,
    SupervisorStrategy,
    default_decider,
)
from gactors.backoff._options import NO_REPLY, BackoffOpts

if TYPE_CHECKING:
    from gactors._ref import ActorRef

__all__ = [
    "BackoffSupervisor",
    "CurrentChild",
    "GetCurrentChild",
    "GetRestartCount",
    "Reset",
    "RestartCount",
]

_log = logging.getLogger("gactors.backoff")


# -- the public messages -------------------------------------------------------------------------
MIN_RESTART_DELAY = 0.01
"""Seconds: no child is restarted sooner than this after it went, whatever the policy
says (at most 100 restarts a second per supervisor)."""


class _Reset(_Singleton):
    __slots__ = ()
    _name = "Reset"


class _GetCurrentChild(_Singleton):
    __slots__ = ()
    _name = "GetCurrentChild"


class _GetRestartCount(_Singleton):
    __slots__ = ()
    _name = "GetRestartCount"


Reset: Any = _Reset()
"""Sent by the child to its parent (the supervisor) to reset the restart count; only
with :meth:`BackoffOpts.with_manual_reset`."""

GetCurrentChild: Any = _GetCurrentChild()
"""Ask the supervisor for its current child: it replies :class:`CurrentChild`."""

GetRestartCount: Any = _GetRestartCount()
"""Ask the supervisor for its restart count: it replies :class:`RestartCount`."""


class CurrentChild:
    """The reply to :data:`GetCurrentChild`: the running child's ref, or None."""

    __slots__ = ("ref",)

    def __init__(self, ref: ActorRef | None) -> None:
        self.ref = ref

    def __eq__(self, other: object) -> bool:
        return type(other) is CurrentChild and other.ref == self.ref

    def __hash__(self) -> int:
        return hash((CurrentChild, self.ref))

    def __repr__(self) -> str:
        return f"CurrentChild({self.ref!r})"


class RestartCount:
    """The reply to :data:`GetRestartCount`: restarts since the start or the last reset."""

    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count

    def __eq__(self, other: object) -> bool:
        return type(other) is RestartCount and other.count == self.count

    def __hash__(self) -> int:
        return hash((RestartCount, self.count))

    def __repr__(self) -> str:
        return f"RestartCount({self.count})"


# -- private messages (sent by the supervisor's timers to itself) ----------------------------------
# Wire numbers of the supervisor's messages (the cluster's msgpack serializer carries
# them as their number and fields; gactors._messages, "wire numbers"). Never renumber.
register_wire_singleton(13, Reset)
register_wire_singleton(14, GetCurrentChild)
register_wire_singleton(15, GetRestartCount)
register_wire_class(16, CurrentChild, 1, lambda m: (m.ref,))
register_wire_class(17, RestartCount, 1, lambda m: (m.count,))


class _StartChildType(_Singleton):
    __slots__ = ()
    _name = "BackoffSupervisor.StartChild"


_StartChild: Any = _StartChildType()


class _ResetRestartCount:
    """Reset the count if it is still ``count`` (no stop or failure meanwhile)."""

    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count

    def __repr__(self) -> str:
        return f"BackoffSupervisor.ResetRestartCount({self.count})"


def _combined_decider(strategy: Any) -> Callable[[BaseException], Directive | None]:
    """The strategy's decider, falling back to the default decider where it has no
    opinion (returns None), as Akka's backoff supervisors do."""
    user = strategy.decider

    def decider(exc: BaseException) -> Directive | None:
        d = user(exc)
        return d if d is not None else default_decider(exc)

    return decider


class BackoffSupervisor(Actor):
    """An actor that restarts its one child after growing delays.

    Create it with :meth:`props`. Every message it receives is forwarded to the child
    (keeping the sender), except :data:`GetCurrentChild`, :data:`GetRestartCount` and
    :data:`Reset`; messages the child sends to the supervisor go to the supervisor's
    parent. While there is no child, messages go to dead letters, or are answered with
    the ``with_reply_while_stopped`` message.
    """

    @staticmethod
    def props(options: BackoffOpts) -> Props:
        """Props of a backoff supervisor configured by ``options``."""
        if not isinstance(options, BackoffOpts):
            raise TypeError(
                "BackoffSupervisor.props needs BackoffOpts (BackoffOpts.on_stop(...) or "
                f"BackoffOpts.on_failure(...)), not {type(options).__name__}"
            )
        cls = _OnStopSupervisor if options.mode == "on_stop" else _OnFailureSupervisor
        return Props(cls, options)

    def __init__(self, options: BackoffOpts) -> None:
        self.options = options
        self.policy = plugins.create_backoff_policy(
            options.policy, options.min_backoff, options.max_backoff, options.random_factor
        )
        self.child: ActorRef | None = None
        self.restart_count = 0
        self._final_stop_received = False
        user = (
            options.strategy
            if options.strategy is not None
            else SupervisorStrategy.default_strategy
        )
        self._user_strategy = user
        self._strategy = self._make_strategy(user)

    @property
    def supervisor_strategy(self) -> Any:  # type: ignore[override]
        """The strategy built from the options (see the two modes)."""
        return self._strategy

    def _make_strategy(self, user: Any) -> Any:
        raise NotImplementedError

    # -- lifecycle --------------------------------------------------------------------------------
    def pre_start(self) -> None:
        self._start_child()

    # -- the child --------------------------------------------------------------------------
    def _start_child(self) -> None:
        if self.child is None:
            context = self.context
            opts = self.options
            self.child = context.watch(context.actor_of(opts.child_props, opts.child_name))

    def _schedule_restart(self) -> None:
        """The child is gone: start a new one after the policy's delay."""
        delay = self.policy.next_delay(self.restart_count)
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay >= 0:
            raise TypeError(
                f"backoff policy {self.policy!r} returned {delay!r} from next_delay(), "
                "expected a number of seconds >= 0"
            )
        self.restart_count += 1
        self.log.debug(
            "child %r gone: restart #%d in %.3f s",
            self.options.child_name,
            self.restart_count,
            delay,
        )
        # Timers of this instance die with it (restart or stop of the supervisor). The
        # floor keeps a tiny positive min_backoff (or a policy returning 0) from
        # restarting a child that stops at once thousands of times a second.
        self.timers.start_single_timer("start", _StartChild, max(float(delay), MIN_RESTART_DELAY))

    def _max_retries(self) -> int | None:
        mr = self.options.max_retries
        return None if mr is None or mr < 0 else mr

    def _reset(self) -> None:
        self.restart_count = 0
        self.policy.reset()

    # -- messages ---------------------------------------------------------------------------
    def receive(self, message: Any) -> None:
        t = type(message)
        if t is Terminated:
            self._on_terminated(message.actor)
        elif message is _StartChild:
            self._start_child()
            reset = self.options.auto_reset
            if reset is not None:
                # The quiet period starts when the child starts: if the count is unchanged
                # when it ends, the child ran long enough.
                self.timers.start_single_timer(
                    "reset", _ResetRestartCount(self.restart_count), reset
                )
        elif t is _ResetRestartCount:
            if message.count == self.restart_count:
                self._reset()
        elif message is Reset:
            if self.options.manual_reset:
                self._reset()
            else:
                self.unhandled(message)
        elif message is GetRestartCount:
            self.sender.tell(RestartCount(self.restart_count), self.ref)
        elif message is GetCurrentChild:
            self.sender.tell(CurrentChild(self.child), self.ref)
        elif self.child is not None and self.sender == self.child:
            # From the child: it talks to the outside world through us.
            self.context.parent.tell(message, self.ref)
        else:
            self._to_child(message)

    def _to_child(self, message: Any) -> None:
        child = self.child
        final = self.options.final_stop_message
        if child is not None:
            child.forward(message)
            if final is not None and not self._final_stop_received and final(message):
                self._final_stop_received = True
            return
        reply = self.options.reply_while_stopped
        if reply is not NO_REPLY:
            self.sender.tell(reply, self.ref)
        else:
            cell = self._gactors_cell
            self.context.system.publish_dead_letter(message, cell.sender_or_none, self.ref)
        if final is not None and final(message):
            self.context.stop(self.ref)

    def _on_terminated(self, ref: ActorRef) -> None:
        raise NotImplementedError

    def _give_up(self) -> None:
        self.log.warning(
            "child %r %s for the %d%s time in a row: over the limit of %s restarts, "
            "stopping the backoff supervisor",
            self.options.child_name,
            "failed" if self.options.mode == "on_failure" else "stopped",
            self.restart_count + 1,
            _ordinal(self.restart_count + 1),
            self._max_retries(),
        )
        self.context.stop(self.ref)


def _ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


class _OnStopSupervisor(BackoffSupervisor):
    """``BackoffOpts.on_stop``: a new child after the delay whenever the child stops."""

    def _make_strategy(self, user: Any) -> Any:
        if isinstance(user, SupervisorStrategy):
            strategy = copy.copy(user)
            strategy.decider = _combined_decider(user)
            return strategy
        return user

    def _on_terminated(self, ref: ActorRef) -> None:
        if ref != self.child:
            return
        self.child = None
        if self._final_stop_received:
            self.context.stop(self.ref)
            return
        max_retries = self._max_retries()
        if max_retries is not None and self.restart_count >= max_retries:
            self._give_up()
            return
        self._schedule_restart()


class _OnFailureSupervisor(BackoffSupervisor):
    """``BackoffOpts.on_failure``: a RESTART of the child becomes stop + delayed start."""

    _waiting_for: ActorRef | None = None

    def _make_strategy(self, user: Any) -> Any:
        self._user_decider = _combined_decider(user)
        return OneForOneStrategy(
            self._decide, logging_enabled=getattr(user, "logging_enabled", True)
        )

    def _max_retries(self) -> int | None:
        mr = self.options.max_retries
        if mr is None:
            mr = getattr(self._user_strategy, "max_retries", None)
        return None if mr is None or mr < 0 else mr

    def _decide(self, exc: BaseException) -> Directive | None:
        directive = self._user_decider(exc)
        if directive is not Directive.RESTART:
            return directive
        # While a decider runs, self.sender is the failing child.
        failed = self.sender
        next_count = self.restart_count + 1
        within = getattr(self._user_strategy, "within", None)
        if within is not None and self.restart_count == 0:
            # The strategy's window bounds the restarts: start counting afresh after it.
            self.timers.start_single_timer("within", _ResetRestartCount(next_count), within)
        max_retries = self._max_retries()
        if max_retries is not None and next_count > max_retries:
            self._give_up()
        else:
            self._waiting_for = failed
        return Directive.STOP

    def _on_terminated(self, ref: ActorRef) -> None:
        if ref == self._waiting_for:
            self._waiting_for = None
            if ref == self.child:
                self.child = None
            self._schedule_restart()
        elif ref == self.child:
            # Stopped on its own, or by the strategy: the supervisor stops with it.
            self.child = None
            self.log.debug(
                "child %r terminated without failing: stopping the backoff supervisor",
                self.options.child_name,
            )
            self.context.stop(self.ref)

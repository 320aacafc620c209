"""The actor cell: one per actor incarnation, holding everything but the user's code.

The concerns live in :mod:`gactors._dungeon`; this module mixes them together and
holds what a dispatcher worker calls when a user message fails
(:meth:`ActorCell.user_failure`; the system queue is run by
``gactors._dungeon.dispatch.Dispatch.process_system``), the instance and its
behaviours, and the table of auto-received messages (``PoisonPill``, ``Kill``,
``Identify``, ``Terminated``, timer messages), which the cell handles itself instead of
handing them to ``receive``. The batch loop is :meth:`gactors._dispatch.Dispatcher._run`.
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from greenlet import getcurrent

from gactors import _sysmsg as sm
from gactors._actor import Actor, ActorLogger, _constructing
from gactors._context import ActorContext
from gactors._dungeon._state import EMPTY
from gactors._dungeon.children import Children, Recreation
from gactors._dungeon.deathwatch import DeathWatch
from gactors._dungeon.dispatch import NO_MAILBOX, NO_STASH, NO_SYSQ, Dispatch
from gactors._dungeon.faulthandling import FATAL, FaultHandling
from gactors._dungeon.receivetimeout import ReceiveTimeoutTimer
from gactors._messages import (
    _CARRIERS,
    ActorIdentity,
    Identify,
    Terminated,
    _Kill,
    _PoisonPill,
)
from gactors._props import Props
from gactors._ref import LocalActorRef, PromiseRef
from gactors._supervision import SupervisorStrategy
from gactors._timers import TimerMsg, TimerMsgNotInfluenceReceiveTimeout
from gactors.exceptions import ActorKilledException, IllegalStateError

if TYPE_CHECKING:
    from gactors._dungeon._state import ActorSPI, PropsSPI, StrategySPI
    from gactors._path import ActorPath
    from gactors._ref import ActorRef
    from gactors._system import ActorSystem

__all__ = ["AUTO_RECEIVED", "ActorCell"]

_uids = itertools.count(1)
_actor_log = logging.getLogger("gactors.actor")


class ActorCell(Children, DeathWatch, Dispatch, FaultHandling, ReceiveTimeoutTimer):
    """Everything about one actor incarnation except the user's instance."""

    if TYPE_CHECKING:  # narrower than the concerns' protocols (gactors/_dungeon/_state.py)
        system: ActorSystem
        props: Props
        parent_cell: ActorCell | None
        context_obj: ActorContext | None
        logger_obj: ActorLogger | None

    __slots__ = (
        "actor",
        "behavior",
        "behavior_stack",
        "capacity",
        "child_cells",
        "context_obj",
        "current_message",
        "current_sys",
        "dead",
        "dispatcher",
        "failed",
        "failed_message",
        "failure_seq",
        "logger_obj",
        "mailbox",
        "name",
        "name_counter",
        "open",
        "parent",
        "parent_cell",
        "props",
        "ref",
        "restart_stats",
        "restarts",
        "rt_seconds",
        "rt_timer",
        "scheduled",
        "sender",
        "senders",
        "stash_obj",
        "suspend_count",
        "sys_stash",
        "sysq",
        "system",
        "terminated_queued",
        "termination_reason",
        "tid",
        "timers_obj",
        "to_die",
        "uid",
        "watched_by",
        "watching",
    )

    def __init__(
        self,
        system: ActorSystem,
        props: Props,
        name: str,
        parent: ActorRef,
        parent_cell: ActorCell | None,
        path: ActorPath | None = None,
    ) -> None:
        """``path`` is given for the root only; the others' are made when first used."""
        self.system = system
        self.props = props
        self.name = name
        self.parent = parent
        self.parent_cell = parent_cell
        self.uid = next(_uids)
        self.tid = system._tid
        self.dispatcher = system.dispatcher
        # The mailbox deque is only allocated on the first message: an idle actor that
        # never got one should not pay for it. Until then `open` is False, which sends
        # tell() down the slow path that allocates it.
        self.mailbox = NO_MAILBOX
        self.senders = NO_MAILBOX
        self.sysq = NO_SYSQ
        self.sys_stash = NO_STASH
        self.scheduled = False
        self.capacity = props.mailbox_capacity
        self.open = False
        self.dead = False
        self.actor = None
        self.behavior = None
        self.behavior_stack = None
        self.sender = None
        self.current_message = None
        self.restarts = 0
        self.timers_obj = None
        self.stash_obj = None
        self.logger_obj = None
        self.suspend_count = 0
        self.failed = None
        self.failure_seq = 0
        self.failed_message = None
        self.current_sys = None
        self.child_cells = EMPTY
        self.restart_stats = None
        self.to_die = EMPTY
        self.termination_reason = None
        self.name_counter = 0
        self.watching = EMPTY
        self.watched_by = EMPTY
        self.terminated_queued = EMPTY
        self.rt_seconds = None
        self.rt_timer = None
        self.context_obj = None
        self.ref = LocalActorRef(self, path)

    @property
    def path(self) -> ActorPath:
        return self.ref.path

    def new_child_cell(self, props: PropsSPI, name: str) -> ActorCell:
        """The cell of a new child of this one (the factory ``Children.attach_child`` uses)."""
        # A Props: attach_child checked it (check_props) before asking for the cell.
        return ActorCell(self.system, cast("Props", props), name, self.ref, self)

    def check_props(self, props: object) -> None:
        """Raise TypeError (saying how to make one) unless ``props`` is a Props."""
        if not isinstance(props, Props):
            raise TypeError(_not_props(props))

    @property
    def context(self) -> ActorContext:
        ctx = self.context_obj
        if ctx is None:
            ctx = self.context_obj = ActorContext(self)
        return ctx

    def user_failure(self, exc: BaseException, message: Any, sender: ActorRef | None) -> None:
        if isinstance(exc, FATAL):
            raise exc
        # Taken before the asker gets the exception: re-raising it there extends its
        # __traceback__ with the asker's frames, which the failure log must not show.
        tb = exc.__traceback__
        if type(sender) is PromiseRef:
            # The asker learns of the failure at once instead of timing out, with an
            # exception of its own: what it does to it (add_note, re-raising, changing
            # an attribute) must not show in the failure log, which is written later.
            sender.fail_from_target(_own_copy(exc))
        elif sender is not None and type(sender) is not LocalActorRef:
            # A remote asker's promise (a cluster ref to another node's /temp path)
            # learns of it too: the ref sends it a Status.Failure. Refs that are not
            # promises have no such method.
            fail = getattr(sender, "fail_from_target", None)
            if fail is not None:
                fail(exc)
        unpack = _CARRIERS.get(type(message))
        if unpack is not None:
            # A wrapper that ran the one message it carries (a traced message): that
            # message is the one that failed, as pre_restart must see it.
            carried = list(unpack(message, sender))
            if len(carried) == 1:
                message = carried[0][0]
        self.failed_message = message
        self.handle_invoke_failure(exc, tb=tb)

    def receive_message(self, message: Any) -> None:
        """Hand ``message`` to the current behavior (used by auto-received messages)."""
        self.current_message = message
        behavior = self.behavior
        if behavior is None:  # the actor's own receive, bound on first use
            # Only a cell with a live actor is handed messages.
            behavior = self.behavior = cast("Actor", self.actor).receive
        behavior(message)

    # -- the instance -----------------------------------------------------------------------------
    def new_actor(self) -> Actor:
        self.behavior_stack = None
        g = getcurrent()
        _constructing[g] = self
        try:
            instance = self.props.new_actor()
        finally:
            _constructing.pop(g, None)
        if not isinstance(instance, Actor):
            raise TypeError(
                f"the Props factory of {self.path} returned {type(instance).__name__}, "
                "not a gactors.Actor"
            )
        if getattr(instance, "_gactors_cell", None) is not self:
            raise IllegalStateError(
                f"the Props factory of {self.path} returned an actor built for another cell"
            )
        return instance

    def install_actor(self, instance: ActorSPI) -> None:
        self.actor = instance
        stack = self.behavior_stack  # non-empty only if the constructor called become()
        hook = self.system.receive_hook
        if hook is not None:
            # Timing of chosen actor classes (gactors._timing): wraps this instance's
            # receive (and what its constructor became). None for every other system.
            hook(self, instance, None)
            if stack:
                stack[-1] = hook(self, instance, stack[-1])
        # None stands for instance.receive, bound on the first message: an idle actor
        # does not keep a bound method alive.
        self.behavior = stack[-1] if stack else None

    def strategy(self) -> StrategySPI:
        actor = self.actor
        s = actor.supervisor_strategy if actor is not None else SupervisorStrategy.default_strategy
        if not hasattr(s, "handle_failure"):
            raise TypeError(
                f"{self.path}: supervisor_strategy must be a SupervisorStrategy, not {s!r}"
            )
        return s

    # -- behavior ----------------------------------------------------------------------------
    def become(self, behavior: Callable[[Any], Any], discard_old: bool) -> None:
        if not callable(behavior):
            raise TypeError(f"become() needs a callable, not {type(behavior).__name__}")
        stack = self.behavior_stack
        if stack is None:
            # The stack is only materialised on the first become(): most actors never do.
            actor = self.actor
            stack = self.behavior_stack = [actor.receive] if actor is not None else []
        if discard_old and stack:
            stack.pop()
        hook = self.system.receive_hook
        if hook is not None and self.actor is not None:
            behavior = hook(self, self.actor, behavior)  # timed like receive (gactors._timing)
        stack.append(behavior)
        self.behavior = behavior

    def unbecome(self) -> None:
        stack = self.behavior_stack
        if stack is not None and len(stack) > 1:
            stack.pop()
            self.behavior = stack[-1]
        else:
            self.behavior_stack = None
            self.behavior = None  # the actor's own receive

    # -- misc ---------------------------------------------------------------------------
    @property
    def sender_or_none(self) -> ActorRef | None:
        return self.sender

    @property
    def logger(self) -> ActorLogger:
        lg = self.logger_obj
        if lg is None:
            lg = self.logger_obj = ActorLogger(_actor_log, {"actor_path": str(self.path)})
        return lg

    def lifecycle_debug(self, what: str) -> None:
        if self.system.settings.debug_lifecycle:
            cls = type(self.actor).__qualname__ if self.actor is not None else "?"
            self.system.publish_log(
                logging.DEBUG, str(self.path), f"{what} ({cls})", category="lifecycle"
            )

    @property
    def state_name(self) -> str:
        if self.dead:
            return "dead"
        if self.is_terminating:
            return "terminating"
        if type(self.current_sys) is sm.Terminate:
            # Stopping, without children to wait for: in post_stop (or stuck in it).
            return "stopping"
        if isinstance(self.termination_reason, Recreation):
            return "restarting"
        if self.failed is not None:
            return "failed"
        if self.actor is None:
            return "starting"
        if self.suspend_count:
            return "suspended"
        return "running"

    def stop_self(self) -> None:
        self.send_system(sm.TERMINATE)

    def __repr__(self) -> str:
        return f"<ActorCell {self.path}#{self.uid} {self.state_name}>"


# -- auto-received messages ----------------------------------------------------------------------
def _own_copy(exc: BaseException) -> BaseException:
    """A copy of ``exc`` for the asker: same type, arguments, attributes, notes, cause,
    context and traceback (so far), sharing no mutable state the asker could change.

    An exception that cannot be copied (a constructor that refuses its own ``args``,
    state outside ``args`` and ``__dict__``) is given as it is, as before.
    """
    try:
        dup = copy.copy(exc)
    except Exception:
        try:
            cls = type(exc)
            dup = cls.__new__(cls, *exc.args)
            dup.__dict__.update(exc.__dict__)
        except Exception:
            return exc
    if type(dup) is not type(exc):  # a __reduce__ of its own making another thing
        return exc
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        # (copy.copy shares the list; __notes__ is an entry of the instance __dict__,
        # which the stubs of Python 3.10, the oldest supported, do not declare.)
        dup.__dict__["__notes__"] = list(notes)
    dup.__traceback__ = exc.__traceback__
    dup.__cause__ = exc.__cause__
    dup.__context__ = exc.__context__
    dup.__suppress_context__ = exc.__suppress_context__
    return dup


def _on_poison_pill(cell: ActorCell, message: Any) -> None:
    cell.stop_self()


def _on_kill(cell: ActorCell, message: Any) -> None:
    raise ActorKilledException(f"{cell.path}: Kill")


def _on_identify(cell: ActorCell, message: Identify) -> None:
    sender = cell.sender
    if sender is not None:
        sender.tell(ActorIdentity(message.message_id, cell.ref), cell.ref)


def _on_terminated(cell: ActorCell, message: Terminated) -> None:
    cell.received_terminated(message)


def _on_timer(cell: ActorCell, message: TimerMsg) -> None:
    # Deliver only if the timer still exists with this generation (docs/api/time.md).
    timers = cell.timers_obj
    inner = timers.intercept(message) if timers is not None else None
    if inner is not None:
        handler = AUTO_RECEIVED.get(type(inner))
        if handler is None:
            cell.receive_message(inner)
        else:
            handler(cell, inner)


AUTO_RECEIVED: dict[type, Callable[[ActorCell, Any], None]] = {
    _PoisonPill: _on_poison_pill,
    _Kill: _on_kill,
    Identify: _on_identify,
    Terminated: _on_terminated,
    TimerMsg: _on_timer,
    TimerMsgNotInfluenceReceiveTimeout: _on_timer,
}


def _not_props(props: object) -> str:
    """What ``actor_of`` says to a value that is not a Props: how to make one of it."""
    if isinstance(props, type) and issubclass(props, Actor):
        name = props.__qualname__
        return (
            f"actor_of needs a Props, not the class {name}: pass Props({name}) "
            f"(with the constructor's arguments after the class: Props({name}, arg, key=value))"
        )
    if isinstance(props, Actor):
        name = type(props).__qualname__
        return (
            f"actor_of needs a Props, not an instance of {name}: gactors builds the actor "
            f"itself (again on every restart); pass Props({name}, arg, key=value) with the "
            "constructor's arguments"
        )
    return f"actor_of needs a Props, not {type(props).__name__}"

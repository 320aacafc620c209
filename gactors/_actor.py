"""The ``Actor`` base class."""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, ClassVar

from greenlet import getcurrent

from gactors._messages import Terminated, UnhandledMessage
from gactors._supervision import SupervisorStrategy
from gactors._timers import TimerScheduler, timers_of
from gactors.exceptions import DeathPactException, IllegalStateError

if TYPE_CHECKING:
    from gactors._cell import ActorCell
    from gactors._context import ActorContext
    from gactors._ref import ActorRef

    # Generic for the type checker only: subscripting it at run time needs Python 3.11.
    _LoggerAdapter = logging.LoggerAdapter[logging.Logger]
else:
    _LoggerAdapter = logging.LoggerAdapter

__all__ = ["Actor", "ActorLogger"]

# The cell whose actor is being constructed in a given greenlet. Actor.__new__ takes it
# from here, which is what makes self.ref/self.context usable inside __init__ without
# subclasses having to call super().__init__().
_constructing: dict[Any, ActorCell] = {}


class ActorLogger(_LoggerAdapter):
    """``self.log``: a logger that puts the actor's path into every record."""

    extra: Mapping[str, object]  # always given: {"actor_path": ...} (see ActorCell.log)

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        extra = kwargs.get("extra")
        kwargs["extra"] = {**self.extra, **extra} if extra else self.extra
        return f"[{self.extra['actor_path']}] {msg}", kwargs


class Actor:
    """Base class of every actor: subclass it and implement :meth:`receive`.

    Subclasses need not call ``super().__init__()``; ``self.ref``, ``self.context`` and
    ``self.log`` already work inside ``__init__``. Instances are only ever created by
    gactors, from :class:`~gactors.Props`.
    """

    supervisor_strategy: ClassVar[SupervisorStrategy] = SupervisorStrategy.default_strategy
    """How this actor supervises its children (class attribute or property)."""

    _gactors_cell: ActorCell

    sender: ActorRef
    """The sender of the current message (``system.dead_letters`` if none).

    A plain attribute, set by gactors before each message (a property would cost a
    call per access on the hottest path); assigning to it has no effect on gactors,
    and a subclass defining a ``sender`` of its own is refused with ``TypeError``.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "sender" in cls.__dict__:
            # gactors sets self.sender before every message; a class-level `sender`
            # (a property, a method) would shadow it or make every instance fail.
            raise TypeError(
                f"{cls.__qualname__} defines 'sender', which gactors sets on every actor "
                "before each message: choose another name"
            )

    def __new__(cls, *args: Any, **kwargs: Any) -> Actor:
        cell = _constructing.pop(getcurrent(), None)
        if cell is None:
            raise IllegalStateError(
                f"{cls.__qualname__} cannot be instantiated directly: actors are created by "
                f"gactors, use system.actor_of(Props({cls.__qualname__}, ...)) or "
                "self.context.actor_of(...)"
            )
        if (args or kwargs) and cls.__init__ is object.__init__:
            # Defining __new__ makes object.__init__ accept any arguments: refuse them as
            # Python does for a class without __init__ (a factory such as
            # ``lambda: Cls("typo")``; Props refuses its own arguments earlier).
            raise TypeError(f"{cls.__qualname__}() takes no arguments (it defines no __init__)")
        self = object.__new__(cls)
        self._gactors_cell = cell
        s = cell.sender
        self.sender = s if s is not None else cell.system.dead_letters
        return self

    # -- the message handler ------------------------------------------------------------------
    def receive(self, message: Any) -> None:
        """Handle one message. Default: :meth:`unhandled`."""
        self.unhandled(message)

    def unhandled(self, message: Any) -> None:
        """A message the actor does not handle.

        ``Terminated`` raises :class:`DeathPactException`; anything else is published
        as :class:`UnhandledMessage` on the event stream.
        """
        if type(message) is Terminated:
            raise DeathPactException(message.actor)
        cell = self._gactors_cell
        cell.system.event_stream.publish(UnhandledMessage(message, cell.sender_or_none, cell.ref))

    # -- lifecycle hooks -------------------------------------------------------------------------
    def pre_start(self) -> None:
        """After construction, before the first message. Default: nothing."""

    def post_stop(self) -> None:
        """After the actor and all its children stopped. Default: nothing."""

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        """On the failed instance before a restart.

        Default: unwatch and stop every child, then :meth:`post_stop`.
        """
        context = self.context
        for child in context.children:
            context.unwatch(child)
            context.stop(child)
        self.post_stop()

    def post_restart(self, reason: BaseException) -> None:
        """On the fresh instance after a restart. Default: :meth:`pre_start`."""
        self.pre_start()

    # -- accessors ---------------------------------------------------------------------------
    @property
    def ref(self) -> ActorRef:
        """This actor's own ref (stable across restarts)."""
        return self._gactors_cell.ref

    @property
    def context(self) -> ActorContext:
        """This actor's :class:`~gactors.ActorContext`."""
        return self._gactors_cell.context

    @property
    def timers(self) -> TimerScheduler:
        """This actor's timers (docs/api/time.md); cancelled on restart and stop."""
        return timers_of(self._gactors_cell)

    @property
    def log(self) -> ActorLogger:
        """A logger tagging records with this actor's path (logger ``gactors.actor``)."""
        return self._gactors_cell.logger

    def __repr__(self) -> str:
        cell = self.__dict__.get("_gactors_cell")
        where = f" {cell.path}" if cell is not None else ""
        return f"<{type(self).__qualname__}{where}>"

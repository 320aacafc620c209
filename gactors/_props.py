"""``Props``: the recipe for building (and re-building) an actor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gactors._actor import Actor

__all__ = ["Props"]


class Props:
    """How to build an actor: ``Props(factory, *args, **kwargs)``.

    ``factory`` is an :class:`~gactors.Actor` subclass or any callable returning an
    actor; it is called again, with the same arguments, on every restart.
    """

    __slots__ = ("args", "dispatcher", "factory", "kwargs", "mailbox_capacity")

    def __init__(self, factory: Callable[..., Actor], *args: Any, **kwargs: Any) -> None:
        if not callable(factory):
            raise TypeError(f"Props factory must be callable, not {type(factory).__name__}")
        if isinstance(factory, type):
            if not issubclass(factory, Actor):
                raise TypeError(
                    f"Props factory {factory.__qualname__} is a class but not a gactors.Actor "
                    "subclass"
                )
            if (args or kwargs) and factory.__init__ is object.__init__:
                # Actor defines __new__, so object.__init__ would swallow the arguments
                # in silence: say what Python says for a class without __init__.
                raise TypeError(
                    f"{factory.__qualname__}() takes no arguments (it defines no __init__), "
                    f"but Props was given {len(args)} positional and {len(kwargs)} keyword "
                    "argument(s)"
                )
        self.factory = factory
        self.args = args
        self.kwargs = kwargs
        self.dispatcher = "default"
        self.mailbox_capacity: int | None = None

    @classmethod
    def empty(cls) -> Props:
        """Props of an actor that handles nothing (every message is unhandled)."""
        return cls(Actor)

    def _copy(self) -> Props:
        p = Props.__new__(Props)
        p.factory, p.args, p.kwargs = self.factory, self.args, self.kwargs
        p.dispatcher, p.mailbox_capacity = self.dispatcher, self.mailbox_capacity
        return p

    def with_dispatcher(self, name: str) -> Props:
        """A copy that runs on the named dispatcher (only ``"default"`` exists today)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"dispatcher name must be a non-empty str, not {name!r}")
        p = self._copy()
        p.dispatcher = name
        return p

    def with_mailbox(self, capacity: int | None = None) -> Props:
        """A copy with a bounded mailbox: messages beyond ``capacity`` go to dead letters."""
        if capacity is not None and (
            isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1
        ):
            raise ValueError(f"mailbox capacity must be None or an int >= 1, not {capacity!r}")
        p = self._copy()
        p.mailbox_capacity = capacity
        return p

    def new_actor(self) -> Actor:
        return self.factory(*self.args, **self.kwargs)

    def __repr__(self) -> str:
        name = getattr(self.factory, "__qualname__", repr(self.factory))
        return f"Props({name}, args={self.args!r}, kwargs={self.kwargs!r})"

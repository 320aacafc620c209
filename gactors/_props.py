"""``Props``: the recipe for building (and re-building) an actor."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

from gactors._actor import Actor

__all__ = ["Props"]

# The argument shapes (number of positionals, keyword names) already found to fit a
# factory: Props are often made in loops (one per child), and whether arguments bind
# depends on their shape only, not on their values, so each shape is checked once.
_fitting: weakref.WeakKeyDictionary[Any, set[tuple[int, tuple[str, ...]]]] = (
    weakref.WeakKeyDictionary()
)


def _signature(factory: Callable[..., Any]) -> inspect.Signature | None:
    """The parameters the factory takes; None if they cannot be read (a builtin)."""
    try:
        if isinstance(factory, type):
            # The constructor's own parameters: Actor defines __new__ (taking anything),
            # which inspect.signature(cls) could report instead of __init__.
            sig = inspect.signature(factory.__init__)  # type: ignore[misc]
            return sig.replace(parameters=list(sig.parameters.values())[1:])  # no self
        return inspect.signature(factory)
    except (TypeError, ValueError):
        return None


def _check_arguments(
    factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Refuse, when the Props is made, arguments the factory cannot take (rather than
    at every creation of the actor, as an ``ActorInitializationException``)."""
    shape = (len(args), tuple(kwargs))
    try:
        fitting = _fitting.get(factory)
    except TypeError:  # not weakly referenceable: checked every time
        fitting = None
    if fitting is not None and shape in fitting:
        return
    sig = _signature(factory)
    if sig is not None:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            name = getattr(factory, "__qualname__", repr(factory))
            # Shown without annotations: the names and kinds are what the message is about.
            sig = sig.replace(
                parameters=[
                    p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()
                ],
                return_annotation=inspect.Signature.empty,
            )
            raise TypeError(
                f"Props({name}, ...): the arguments do not fit {name}{sig}: {e}"
            ) from None
    try:
        _fitting.setdefault(factory, set()).add(shape)
    except TypeError:
        pass


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
        _check_arguments(factory, args, kwargs)
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

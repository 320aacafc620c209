"""The messages with a meaning of their own to every actor, and the published events."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from gactors._ref import ActorRef

__all__ = [
    "ActorIdentity",
    "AutoReceivedMessage",
    "DeadLetter",
    "HubBlocked",
    "Identify",
    "Kill",
    "NotInfluenceReceiveTimeout",
    "PoisonPill",
    "ReceiveTimeout",
    "Status",
    "Terminated",
    "UnhandledMessage",
]


class AutoReceivedMessage:
    """Marker base of the messages the actor cell handles before ``receive``."""

    __slots__ = ()


class NotInfluenceReceiveTimeout:
    """Mixin: messages of such classes do not reset the receive timeout."""

    __slots__ = ()


class _Singleton:
    """Base of the message classes with exactly one instance (``PoisonPill``, ``Kill``,
    ``ReceiveTimeout``, the backoff supervisor's ``Reset``, ...).

    The public name is bound to the instance, so ``message is PoisonPill`` is the test
    and ``tell(PoisonPill)`` needs no call. ``isinstance(message, PoisonPill)`` works too
    (the instance answers it through ``__instancecheck__``: true for itself only), so
    code written either way, or against a tuple of such names, is right. The instance
    pickles by reference to its module-level name: it unpickles as the same object.
    """

    __slots__ = ()
    _name = "?"

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name

    def __instancecheck__(self, instance: object) -> bool:
        # isinstance(x, PoisonPill) looks __instancecheck__ up on type(PoisonPill), that is
        # here: the one instance is the only member of its "class".
        return instance is self


class _PoisonPill(_Singleton, AutoReceivedMessage):
    __slots__ = ()
    _name = "PoisonPill"


class _Kill(_Singleton, AutoReceivedMessage):
    __slots__ = ()
    _name = "Kill"


class _ReceiveTimeout(_Singleton):
    __slots__ = ()
    _name = "ReceiveTimeout"


PoisonPill: Final = _PoisonPill()
"""Stops the actor when processed; the messages ahead of it are processed first."""

Kill: Final = _Kill()
"""Makes the actor fail with :class:`~gactors.ActorKilledException` when processed."""

ReceiveTimeout: Final = _ReceiveTimeout()
"""Sent when no message arrived for ``context.receive_timeout`` seconds."""


class Identify(AutoReceivedMessage):
    """Any actor answers with :class:`ActorIdentity` (``ref`` is ``None`` when dead)."""

    __slots__ = ("message_id",)

    def __init__(self, message_id: Any):
        self.message_id = message_id

    def __eq__(self, other: object) -> bool:
        return type(other) is Identify and other.message_id == self.message_id

    def __hash__(self) -> int:
        return hash((Identify, self.message_id))

    def __repr__(self) -> str:
        return f"Identify({self.message_id!r})"


class ActorIdentity:
    """The answer to :class:`Identify`."""

    __slots__ = ("correlation_id", "ref")

    def __init__(self, correlation_id: Any, ref: ActorRef | None):
        self.correlation_id = correlation_id
        self.ref = ref

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is ActorIdentity
            and other.correlation_id == self.correlation_id
            and other.ref == self.ref
        )

    def __hash__(self) -> int:
        return hash((ActorIdentity, self.correlation_id, self.ref))

    def __repr__(self) -> str:
        return f"ActorIdentity({self.correlation_id!r}, {self.ref!r})"


class Terminated(AutoReceivedMessage):
    """Delivered to a watcher when the watched actor stopped. Equal by ``actor`` only."""

    __slots__ = ("actor", "address_terminated", "existence_confirmed")

    def __init__(
        self, actor: ActorRef, existence_confirmed: bool = True, address_terminated: bool = False
    ):
        self.actor = actor
        self.existence_confirmed = existence_confirmed
        self.address_terminated = address_terminated

    def __eq__(self, other: object) -> bool:
        return type(other) is Terminated and other.actor == self.actor

    def __hash__(self) -> int:
        return hash((Terminated, self.actor))

    def __repr__(self) -> str:
        return f"Terminated({self.actor!r})"


class _StatusValue:
    __slots__ = ()
    _field = ""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and getattr(other, self._field) == getattr(
            self, self._field
        )

    def __hash__(self) -> int:
        return hash((type(self), getattr(self, self._field)))

    def __repr__(self) -> str:
        return f"Status.{type(self).__name__}({getattr(self, self._field)!r})"


class Status:
    """Namespace of the two reply envelopes understood by ``ask`` and ``pipe_to``."""

    class Success(_StatusValue):
        """A successful result; ``ask`` unwraps it to ``value``."""

        __slots__ = ("value",)
        _field = "value"

        def __init__(self, value: Any):
            self.value = value

    class Failure(_StatusValue):
        """A failed result; ``ask`` raises ``cause``."""

        __slots__ = ("cause",)
        _field = "cause"

        def __init__(self, cause: BaseException):
            if not isinstance(cause, BaseException):
                # Refused here, where the mistake is, rather than as a confusing
                # TypeError in the asker when ask raises the cause.
                raise TypeError(
                    "Status.Failure needs an exception instance as its cause, not "
                    f"{type(cause).__name__} {cause!r}"
                )
            self.cause = cause


class _Envelope:
    """Base of published events that describe a message: ``message``, ``sender``, ``recipient``."""

    __slots__ = ("message", "recipient", "sender")

    def __init__(self, message: Any, sender: ActorRef | None, recipient: ActorRef | None):
        self.message = message
        self.sender = sender
        self.recipient = recipient

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and other.message == self.message
            and other.sender == self.sender
            and other.recipient == self.recipient
        )

    def __hash__(self) -> int:
        return hash((type(self), id(self.message), self.recipient))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, {self.sender!r}, {self.recipient!r})"


class DeadLetter(_Envelope):
    """Published when a message could not be delivered."""

    __slots__ = ()


_Unpack = Callable[[Any, Any], Iterable[tuple[Any, Any]]]
#: Internal message classes that carry other messages (the cluster's sharding wraps an
#: entity's message on its way through regions and shards), with how to take them
#: apart: a carrier that cannot be delivered is published as the dead letters of the
#: messages it carries, so that each one is seen, counted and can be retried.
_CARRIERS: dict[type, _Unpack] = {}


def register_carrier(cls: type, unpack: _Unpack) -> None:
    """Declare ``cls`` a carrier: ``unpack(message, sender)`` returns the
    ``(message, sender)`` pairs it carries (for extensions, not applications)."""
    _CARRIERS[cls] = unpack


class UnhandledMessage(_Envelope):
    """Published when an actor called ``unhandled`` on a message."""

    __slots__ = ()


class HubBlocked:
    """Published when an actor blocked the gevent hub for ``seconds``."""

    __slots__ = ("actor_path", "seconds", "stack")

    def __init__(self, actor_path: str | None, seconds: float, stack: str):
        self.actor_path = actor_path
        self.seconds = seconds
        self.stack = stack

    def __repr__(self) -> str:
        return f"HubBlocked({self.actor_path!r}, {self.seconds:.3f})"


# -- wire numbers of gactors' own messages defined above the core ------------------------
# The cluster's msgpack serializer carries gactors' own messages as a small number and
# their fields. The core's messages have their numbers in the cluster's table; the
# packages built on the kernel (routing, backoff) register theirs here when they are
# imported, so that the cluster never imports them to learn their numbers (it reads
# this table, see gactors/cluster/_msgpack_serializer.py). A number is part of the wire
# format between nodes: never reuse or renumber one.

#: number -> a message that is a singleton (``PoisonPill``-like), sent as its number.
WIRE_SINGLETONS: dict[int, Any] = {}
#: number -> (class, number of fields, the fields of an instance in its constructor's
#: order): rebuilt as ``cls(*fields)``.
WIRE_CLASSES: dict[int, tuple[type, int, Callable[[Any], tuple[Any, ...]]]] = {}


def _check_wire_number(number: int, what: Any) -> None:
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise ValueError(f"a wire number must be an int >= 0, not {number!r}")
    taken = WIRE_SINGLETONS.get(number)
    if taken is None and number in WIRE_CLASSES:
        taken = WIRE_CLASSES[number][0]
    if taken is not None and taken is not what:
        raise ValueError(f"wire number {number} is taken by {taken!r}, cannot give it to {what!r}")


def register_wire_singleton(number: int, message: Any) -> None:
    """Give the singleton ``message`` the wire number ``number`` (for the packages
    built on the kernel; idempotent for the same message)."""
    _check_wire_number(number, message)
    WIRE_SINGLETONS[number] = message


def register_wire_class(
    number: int, cls: type, arity: int, fields: Callable[[Any], tuple[Any, ...]]
) -> None:
    """Give ``cls`` the wire number ``number``: an instance travels as its ``arity``
    ``fields(instance)`` and is rebuilt as ``cls(*fields)`` (for the packages built on
    the kernel; idempotent for the same class)."""
    _check_wire_number(number, cls)
    WIRE_CLASSES[number] = (cls, arity, fields)

"""The registry of the classes that keep their type on the wire and in storage
(:func:`register_message`, public as :mod:`gactors.serialization`; persistence uses
the same registry), the serializer ids (:func:`serializer_id`), and what every
serializer shares: :class:`WireError`, the :class:`RefCodec` protocol and
:func:`describe_payload`. See ``_serialization.py`` for the whole wire format.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import zlib
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar, overload

try:
    import msgspec
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError("the gactors cluster needs msgspec: pip install 'gactors[cluster]'") from _e

from gactors._ref import ActorRef
from gactors.exceptions import (
    ClusterError,
)

T = TypeVar("T")

# Fixed ids of the built-in serializers; others get one derived from their name.
_BUILTIN_IDS: Final = {"msgpack": 1, "pickle": 2}


class WireError(ClusterError):
    """Bytes from the wire that cannot be decoded: garbage, a truncated batch, an unknown
    tag, a refused serializer, too large. Internal: the node logs it and dead-letters."""


class RefCodec(Protocol):
    """Turns refs into wire triples and back; provided by the node, bound to one system."""

    def ref_to_wire(self, ref: ActorRef) -> tuple[str, str, int]:
        """``(address, path without address, uid)`` of ``ref``, e.g.
        ``("gactors://shop@n1", "/user/a", 17)``."""
        ...

    def ref_from_wire(self, address: str, path: str, uid: int) -> ActorRef:
        """The ref a triple made by :meth:`ref_to_wire` (on any node) stands for here."""
        ...


def serializer_id(name: str) -> int:
    """The number tagging payloads of the serializer ``name`` on the wire.

    The built-ins have fixed small ids (msgpack 1, pickle 2; 0 is the system codec);
    any other name gets a stable id >= 256 derived from it (CRC-32), the same on every
    node without any coordination.
    """
    sid = _BUILTIN_IDS.get(name)
    if sid is None:
        sid = 256 + zlib.crc32(name.encode("utf-8", "surrogatepass")) % (2**31 - 256)
    return sid


def describe_payload(data: bytes | bytearray | memoryview, limit: int = 32) -> str:
    """A short printable summary of undecodable bytes, for logs and dead letters."""
    view = bytes(data[:limit])
    more = "..." if len(data) > limit else ""
    return f"<{len(data)} bytes: {view.hex()}{more}>"


def _type_name(obj: Any) -> str:
    t = type(obj)
    mod = t.__module__
    return t.__qualname__ if mod == "builtins" else f"{mod}.{t.__qualname__}"


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# -- registered classes ----------------------------------------------------------------
class _Entry:
    """How one registered class travels: its tag, its fields out and back in."""

    __slots__ = ("cls", "from_fields", "names", "shape", "tag")

    def __init__(self, cls: type, tag: str, shape: str, names: tuple[str, ...]) -> None:
        self.cls = cls
        self.tag = tag
        self.shape = shape  # "fields" (dataclass, Struct), "tuple", "enum", "exception"
        self.names = names
        self.from_fields = self._builder()

    def _builder(self) -> Callable[[list[Any]], Any]:
        cls, names, shape = self.cls, self.names, self.shape
        n = len(names)
        if shape == "fields":

            def build(values: list[Any]) -> Any:
                if len(values) != n:
                    raise WireError(
                        f"message tag {self.tag!r}: {len(values)} fields on the wire, "
                        f"{n} expected ({', '.join(names)})"
                    )
                return cls(**dict(zip(names, values, strict=True)))

        elif shape == "tuple":

            def build(values: list[Any]) -> Any:
                if len(values) != n:
                    raise WireError(
                        f"message tag {self.tag!r}: {len(values)} fields on the wire, "
                        f"{n} expected ({', '.join(names)})"
                    )
                return cls(*values)

        elif shape == "enum":

            def build(values: list[Any]) -> Any:
                if len(values) != 1:
                    raise WireError(f"message tag {self.tag!r}: expected one enum value")
                return cls(values[0])

        else:

            def build(values: list[Any]) -> Any:
                # Like pickle: BaseException.__new__ sets args without calling a custom
                # __init__ (whose signature need not match args), then the state.
                if len(values) != 2 or type(values[0]) is not tuple:
                    raise WireError(f"message tag {self.tag!r}: expected (args, state)")
                args, state = values
                exc = cls.__new__(cls, *args)
                exc.args = args
                if state:
                    if type(state) is not dict:
                        raise WireError(f"message tag {self.tag!r}: state is not a dict")
                    exc.__dict__.update(state)
                return exc

        return build


_by_class: dict[type, _Entry] = {}
_by_tag: dict[str, _Entry] = {}
_registry_lock = threading.Lock()


def _shape_of(cls: type) -> tuple[str, tuple[str, ...]]:
    if issubclass(cls, BaseException):
        if not issubclass(cls, Exception):
            raise TypeError(
                f"register_message: {_class_name(cls)} is a BaseException but not an "
                "Exception; only Exception subclasses can be registered"
            )
        return "exception", ()
    if issubclass(cls, enum.Enum):
        return "enum", ()
    if issubclass(cls, msgspec.Struct):
        return "fields", tuple(cls.__struct_fields__)
    fields = getattr(cls, "_fields", None)  # a namedtuple's
    if issubclass(cls, tuple) and isinstance(fields, tuple):
        return "tuple", fields
    if dataclasses.is_dataclass(cls):
        return "fields", tuple(f.name for f in dataclasses.fields(cls) if f.init)
    raise TypeError(
        f"register_message: {_class_name(cls)} is not a dataclass, NamedTuple, Enum, "
        "msgspec.Struct or Exception subclass"
    )


def _register(cls: Any, tag: str | None) -> None:
    if not isinstance(cls, type):
        raise TypeError(f"register_message needs a class, not {_type_name(cls)}: {cls!r}")
    if tag is None:
        tag = _class_name(cls)
    elif not isinstance(tag, str) or not tag:
        raise TypeError(f"register_message: the tag must be a non-empty str, not {tag!r}")
    shape, names = _shape_of(cls)
    with _registry_lock:
        old = _by_tag.get(tag)
        if old is not None:
            if old.cls is cls:
                return  # the same registration again (a module imported twice): harmless
            raise ValueError(
                f"message tag {tag!r} is already registered for {_class_name(old.cls)}; "
                f"cannot register {_class_name(cls)} under it (give it another tag)"
            )
        mine = _by_class.get(cls)
        if mine is not None:
            raise ValueError(
                f"{_class_name(cls)} is already registered under tag {mine.tag!r}; "
                f"cannot register it again as {tag!r}"
            )
        entry = _Entry(cls, tag, shape, names)
        _by_tag[tag] = entry
        _by_class[cls] = entry


@overload
def register_message(cls: type[T], tag: str | None = None) -> type[T]: ...


@overload
def register_message(cls: None = None, tag: str | None = None) -> Callable[[type[T]], type[T]]: ...


def register_message(cls: Any = None, tag: str | None = None) -> Any:
    """Let instances of ``cls`` travel between nodes as themselves.

    For dataclasses, ``NamedTuple``\\ s, ``Enum``\\ s, ``msgspec.Struct``\\ s and
    ``Exception`` subclasses (an exception raised by an asked actor then reaches the
    asker as itself instead of a :class:`~gactors.RemoteError`). ``tag`` names the class
    on the wire and defaults to ``"module.qualname"``; it must be the same on every
    node. Use it as ``register_message(Cls)``, ``@register_message`` or
    ``@register_message(tag="orders.Placed")``; returns the class.

    Fields travel by name (dataclass fields with ``init=False`` do not travel; they are
    rebuilt by ``__init__``), an Enum member by its value, an exception by its ``args``
    and ``__dict__`` (rebuilt without calling ``__init__``, as pickle does). Field
    values may be anything the serializer carries, refs included.

    Raises ``TypeError`` for anything else and ``ValueError`` when the tag is taken by
    another class (naming both) or the class is registered under another tag.
    """
    if cls is None:

        def decorate(c: type[T]) -> type[T]:
            _register(c, tag)
            return c

        return decorate
    _register(cls, tag)
    return cls


def registered_tag(cls: type) -> str | None:
    """The tag ``cls`` is registered under, or None."""
    entry = _by_class.get(cls)
    return entry.tag if entry is not None else None

"""The cluster's wire format, in one place (docs/cluster/concepts.md, "Serialization").

**Batches and records.** One entry in a node's inbox stream is one *batch*: a msgpack
array of *records*, each ``[kind, recipient, sender, serializer_id, payload]``:

* ``kind``: :data:`KIND_USER` (0) for a user message, :data:`KIND_SYSTEM` (1) for a
  system message (watch, unwatch, death-watch notification), whose payload is encoded
  by this module's own fixed codec (:meth:`WireCodec.encode_system`).
* ``recipient``: ``[path, uid]``, the path without its address (``"/user/a"``,
  ``"/temp/$12"``) and the incarnation uid (0: whatever lives at the path).
* ``sender``: a ref triple ``[address, path, uid]`` or nil.
* ``serializer_id``: which serializer made ``payload`` (:func:`serializer_id`), so a
  node decodes what a node configured with another serializer it knows sends.
* ``payload``: bytes.

**The "msgpack" serializer** (:class:`MsgpackSerializer`, msgspec underneath) carries
``None``, ``bool``, ``int`` (any size), ``float``, ``str``, ``bytes``, ``list``,
``dict``, ``tuple``, ``set``, ``frozenset`` nested at any depth, refs, gactors' own
messages and the classes registered with :func:`register_message`, each arriving as
the same type; also ``datetime``, ``date``, ``time``, ``timedelta``, ``UUID`` and
``Decimal``, which messages carry too often to make everyone wrap them. msgpack has
only arrays and maps, so whatever else must keep its type travels as a msgpack
*extension* (a code and bytes): tuples, sets, frozensets, dicts whose keys are not
plain scalars, ints beyond 64 bits, refs (address, path, uid: resolved by the
receiving node's :class:`RefCodec`), gactors' messages (a small number and the fields),
the standard-library values and registered classes (the tag and the fields). Decoding
never builds a class that was not registered; an unknown tag is a :class:`WireError`.

Speed: a ``str``, ``bytes``, ``int``, ``float``, ``bool`` or ``None`` message is one
msgspec call each way. A container is walked once in Python before encoding, by a
dispatch table on the exact type (a subclass of a registered class is not that class:
it is refused, never sent as its base); decoding is msgspec's, calling back only for
the extensions.

**Errors.** Whatever cannot be sent raises :class:`~gactors.SerializationError` naming
the type (and where it sits in the message) before anything is sent; a message larger
than ``max_message_size`` too. Whatever cannot be decoded raises :class:`WireError`
with a short description, never an exception of msgspec or pickle: garbage in an
inbox costs a warning and a dead letter, nothing more.

**pickle** (:class:`PickleSerializer`) is for trusted networks only, never the default:
a node decodes a pickle payload only when ``"pickle"`` is its configured serializer.

**How a node uses it** (one :class:`WireCodec` per node)::

    codec = WireCodec.create(settings.serializer, ref_codec, settings.max_message_size)
    # tell time, in the hub: SerializationError goes to the caller, nothing is sent
    record = codec.user_record("/user/a", uid, message, sender)
    record = codec.system_record("/user/a", uid, Watch(watchee, watcher))
    # flush: one stream entry per element, each within max_message_size
    entries = codec.encode_batches(pending)
    # arrival: a WireError costs a warning and a dead letter, the reader goes on
    for record in codec.decode_batch(entry):
        message = codec.decode_record(record)  # user message or SystemMessage
        sender = codec.sender_from_wire(record.sender)
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import io
import pickle
import threading
import uuid
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol, TypeVar, overload

try:
    import msgspec
    from msgspec.msgpack import Decoder, Encoder, Ext
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError("the gactors cluster needs msgspec: pip install 'gactors[cluster]'") from _e
from zope.interface import implementer

from gactors import plugins
from gactors._messages import (
    ActorIdentity,
    Identify,
    Kill,
    PoisonPill,
    ReceiveTimeout,
    Status,
    Terminated,
)
from gactors._ref import ActorRef
from gactors._sysmsg import DeathWatchNotification, SystemMessage, Unwatch, Watch
from gactors._text import safe_str
from gactors.backoff import (
    CurrentChild,
    GetCurrentChild,
    GetRestartCount,
    Reset,
    RestartCount,
)
from gactors.exceptions import (
    ActorNotFound,
    AskTimeoutError,
    ClusterError,
    RemoteError,
    SerializationError,
)
from gactors.interfaces import ISerializer
from gactors.routing import (
    AdjustPoolSize,
    Broadcast,
    ConsistentHashableEnvelope,
    GetRoutees,
    Routees,
)

__all__ = [
    "KIND_SYSTEM",
    "KIND_USER",
    "SYSTEM_SERIALIZER_ID",
    "MsgpackSerializer",
    "PickleSerializer",
    "Record",
    "RefCodec",
    "WireCodec",
    "WireError",
    "describe_payload",
    "register_message",
    "registered_tag",
    "serializer_id",
]

T = TypeVar("T")

KIND_USER: Final = 0
KIND_SYSTEM: Final = 1
SYSTEM_SERIALIZER_ID: Final = 0
"""The ``serializer_id`` of system records (this module's own codec, not a plugin)."""

# Fixed ids of the built-in serializers; others get one derived from their name.
_BUILTIN_IDS: Final = {"msgpack": 1, "pickle": 2}
# Room for a record's header (recipient path, sender ref) on top of the payload: a
# batch holding one message of max_message_size bytes is still accepted.
_HEADER_ALLOWANCE: Final = 64 * 1024
# The longest path text (recipient + sender, in characters) a record may carry, so its
# header stays within _HEADER_ALLOWANCE whatever the characters (4 bytes each at most).
_MAX_HEADER_CHARS: Final = _HEADER_ALLOWANCE // 4 - 64


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
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return "tuple", tuple(cls._fields)  # type: ignore[attr-defined]
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


# -- the msgpack serializer --------------------------------------------------------------
# Extension codes (0..127 in msgpack).
_X_TUPLE: Final = 1
_X_SET: Final = 2
_X_FROZENSET: Final = 3
_X_DICT: Final = 4  # a dict with keys msgpack maps cannot hold as such: [k, v, k, v, ...]
_X_BIGINT: Final = 5  # an int outside [-2**63, 2**64): signed big-endian bytes
_X_REF: Final = 6  # [address, path, uid]
_X_GACTORS: Final = 7  # [number, *fields]: gactors' own messages
_X_CLASS: Final = 8  # [tag, *fields]: registered classes
_X_LIST: Final = 9  # a list at the top of a message (see MsgpackSerializer.encode)
_X_STDLIB: Final = 10  # [number, value]: common standard-library value types (_STDLIB)

# Value types of the standard library that messages often carry (not in the documented list;
# carried as themselves so nobody has to wrap them): number -> (type, to wire, from wire).
# A datetime keeps its UTC offset; a ZoneInfo zone arrives as a fixed-offset timezone
# (equal instant, same type). The numbers are part of the wire format.
_STDLIB: Final[dict[int, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]]] = {
    0: (datetime.datetime, datetime.datetime.isoformat, datetime.datetime.fromisoformat),
    1: (datetime.date, datetime.date.isoformat, datetime.date.fromisoformat),
    2: (datetime.time, datetime.time.isoformat, datetime.time.fromisoformat),
    3: (
        datetime.timedelta,
        lambda d: [d.days, d.seconds, d.microseconds],
        lambda v: datetime.timedelta(*v),
    ),
    4: (uuid.UUID, lambda u: u.bytes, lambda b: uuid.UUID(bytes=b)),
    5: (decimal.Decimal, str, decimal.Decimal),
}

_PLAIN: Final = frozenset({str, int, float, bool, type(None), bytes})
_PLAIN_NO_INT: Final = _PLAIN - {int}


class _Unsupported(Exception):
    """Internal: the walk met an object it cannot encode."""


def _remote_error(exc: BaseException) -> RemoteError:
    return RemoteError(_type_name(exc), safe_str(exc))


# gactors' own messages: number -> (class, builder from the fields). The numbers are
# part of the wire format: never reuse or renumber one.
_G_SINGLETONS: Final[dict[int, Any]] = {
    0: PoisonPill,
    1: Kill,
    2: ReceiveTimeout,
    9: GetRoutees,
    13: Reset,
    14: GetCurrentChild,
    15: GetRestartCount,
}
_G_CLASSES: Final[dict[int, tuple[type, Callable[..., Any], int]]] = {
    # number: (class, builder, number of fields)
    3: (Identify, Identify, 1),
    4: (ActorIdentity, ActorIdentity, 2),
    5: (Status.Success, Status.Success, 1),
    6: (Status.Failure, Status.Failure, 1),
    7: (Terminated, Terminated, 3),
    8: (Broadcast, Broadcast, 1),
    10: (Routees, Routees, 1),
    11: (AdjustPoolSize, AdjustPoolSize, 1),
    12: (ConsistentHashableEnvelope, ConsistentHashableEnvelope, 2),
    16: (CurrentChild, CurrentChild, 1),
    17: (RestartCount, RestartCount, 1),
    18: (RemoteError, RemoteError, 2),
    19: (ActorNotFound, ActorNotFound, 1),
    20: (AskTimeoutError, AskTimeoutError, 1),
}
# The fields of each class above, in its constructor's order.
_G_FIELDS: Final[dict[type, Callable[[Any], tuple[Any, ...]]]] = {
    Identify: lambda m: (m.message_id,),
    ActorIdentity: lambda m: (m.correlation_id, m.ref),
    Status.Success: lambda m: (m.value,),
    Terminated: lambda m: (m.actor, m.existence_confirmed, m.address_terminated),
    Broadcast: lambda m: (m.message,),
    Routees: lambda m: (m.routees,),
    AdjustPoolSize: lambda m: (m.change,),
    ConsistentHashableEnvelope: lambda m: (m.message, m.hash_key),
    CurrentChild: lambda m: (m.ref,),
    RestartCount: lambda m: (m.count,),
    RemoteError: lambda m: (m.type_name, m.message),
    ActorNotFound: lambda m: (safe_str(m),),
    AskTimeoutError: lambda m: (safe_str(m),),
}


def _constant(value: Any) -> Callable[[Any], Any]:
    def c(obj: Any) -> Any:
        return value

    return c


class _Walker:
    """Turns a message into what msgspec encodes as the right msgpack, keeping types.

    ``conv`` is the walk: plain scalars are returned as they are (checked inline by the
    containers, so a list of ints costs one comprehension), everything else goes through
    ``dispatch``, a table by exact type filled lazily for refs and registered classes.
    """

    def __init__(self, refs: RefCodec | None, big_ints: bool) -> None:
        enc = Encoder().encode
        plain = _PLAIN_NO_INT if big_ints else _PLAIN
        dispatch: dict[type, Callable[[Any], Any]] = {}
        g_number = {cls: n for n, (cls, _, _) in _G_CLASSES.items()}

        def conv(obj: Any) -> Any:
            t = type(obj)
            if t in plain:
                return obj
            f = dispatch.get(t)
            if f is None:
                f = resolve(t)
            return f(obj)

        def items(obj: Any) -> list[Any]:
            return [x if type(x) in plain else conv(x) for x in obj]

        def c_list(obj: list[Any]) -> list[Any]:
            return [x if type(x) in plain else conv(x) for x in obj]

        def c_tuple(obj: tuple[Any, ...]) -> Ext:
            return Ext(_X_TUPLE, enc([x if type(x) in plain else conv(x) for x in obj]))

        def c_set(obj: set[Any]) -> Ext:
            return Ext(_X_SET, enc(items(obj)))

        def c_frozenset(obj: frozenset[Any]) -> Ext:
            return Ext(_X_FROZENSET, enc(items(obj)))

        def c_dict(obj: dict[Any, Any]) -> Any:
            out = {}
            for k, v in obj.items():
                if type(k) not in plain:
                    # A key that becomes an extension (a tuple...) cannot be a key of the
                    # dict msgspec encodes (extensions are unhashable): send pairs.
                    flat: list[Any] = []
                    for k2, v2 in obj.items():
                        flat.append(conv(k2))
                        flat.append(conv(v2))
                    return Ext(_X_DICT, enc(flat))
                out[k] = v if type(v) in plain else conv(v)
            return out

        def c_int(obj: int) -> Any:
            if -(2**63) <= obj < 2**64:
                return obj
            n = (obj.bit_length() + 8) // 8
            return Ext(_X_BIGINT, obj.to_bytes(n, "big", signed=True))

        def c_ref(obj: ActorRef) -> Ext:
            if refs is None:
                raise SerializationError(
                    f"cannot serialize the ref {obj!r}: this serializer is not bound to an "
                    "actor system (call bind(ref_codec))"
                )
            return Ext(_X_REF, enc(refs.ref_to_wire(obj)))

        def c_failure(obj: Any) -> Ext:
            cause = obj.cause
            if type(cause) in _by_class or type(cause) in g_number:
                try:
                    return Ext(_X_GACTORS, enc([6, conv(cause)]))
                except (_Unsupported, SerializationError, RecursionError):
                    pass  # its state cannot travel: the asker gets a RemoteError
            return Ext(_X_GACTORS, enc([6, conv(_remote_error(cause))]))

        def g_message(number: int, fields: Callable[[Any], tuple[Any, ...]]) -> Callable[..., Any]:
            def c(obj: Any) -> Ext:
                return Ext(_X_GACTORS, enc([number, *items(fields(obj))]))

            return c

        def stdlib(number: int, to_wire: Callable[[Any], Any]) -> Callable[[Any], Ext]:
            def c(obj: Any) -> Ext:
                return Ext(_X_STDLIB, enc([number, to_wire(obj)]))

            return c

        def registered(entry: _Entry) -> Callable[[Any], Ext]:
            tag = entry.tag
            if entry.shape == "fields":
                names = entry.names

                def c(obj: Any) -> Ext:
                    return Ext(_X_CLASS, enc([tag, *[conv(getattr(obj, n)) for n in names]]))

            elif entry.shape == "tuple":

                def c(obj: Any) -> Ext:
                    return Ext(_X_CLASS, enc([tag, *items(obj)]))

            elif entry.shape == "enum":

                def c(obj: Any) -> Ext:
                    return Ext(_X_CLASS, enc([tag, conv(obj.value)]))

            else:

                def c(obj: Any) -> Ext:
                    state = getattr(obj, "__dict__", None) or None
                    return Ext(_X_CLASS, enc([tag, conv(obj.args), conv(state)]))

            return c

        def resolve(t: type) -> Callable[[Any], Any]:
            entry = _by_class.get(t)
            if entry is not None:
                f = registered(entry)
            elif issubclass(t, ActorRef):
                f = c_ref
            else:
                raise _Unsupported(t)
            dispatch[t] = f
            return f

        dispatch.update({list: c_list, tuple: c_tuple, dict: c_dict, set: c_set})
        dispatch[frozenset] = c_frozenset
        if big_ints:
            dispatch[int] = c_int
        for number, single in _G_SINGLETONS.items():
            dispatch[type(single)] = _constant(Ext(_X_GACTORS, enc([number])))
        for number, (cls, _, _) in _G_CLASSES.items():
            if cls is not Status.Failure:
                dispatch[cls] = g_message(number, _G_FIELDS[cls])
        dispatch[Status.Failure] = c_failure
        for number, (std_type, to_wire, _) in _STDLIB.items():
            dispatch[std_type] = stdlib(number, to_wire)
        self.conv = conv
        self.dispatch = dispatch
        self.items = items
        self.resolve = resolve
        self.encode = enc


def _find_unsupported(obj: Any, walker: _Walker, where: str, depth: int = 0) -> str | None:
    """Where in ``obj`` the first object that cannot be encoded sits (the slow path of an
    error message: nothing of this runs while encoding succeeds)."""
    if depth > 100:
        return None
    t = type(obj)
    if t in _PLAIN:
        return None
    if t in (list, tuple, set, frozenset):
        for i, x in enumerate(obj):
            found = _find_unsupported(
                x,
                walker,
                f"{where}[{i}]" if t in (list, tuple) else f"{where} (an element)",
                depth + 1,
            )
            if found:
                return found
        return None
    if t is dict:
        for k, v in obj.items():
            found = _find_unsupported(k, walker, f"{where} (a key)", depth + 1)
            found = found or _find_unsupported(v, walker, f"{where}[{k!r}]", depth + 1)
            if found:
                return found
        return None
    if t not in walker.dispatch:
        try:
            walker.resolve(t)
        except _Unsupported:
            return f"{where} of type {_type_name(obj)}"
    entry = _by_class.get(t)
    if entry is not None and entry.shape == "fields":
        for n in entry.names:
            found = _find_unsupported(getattr(obj, n, None), walker, f"{where}.{n}", depth + 1)
            if found:
                return found
    elif t in _G_FIELDS:
        for i, x in enumerate(_G_FIELDS[t](obj)):
            found = _find_unsupported(x, walker, f"{where}[field {i}]", depth + 1)
            if found:
                return found
    return None


def _encode_error(message: Any, walker: _Walker, exc: BaseException | None) -> SerializationError:
    tname = _type_name(message)
    if isinstance(exc, RecursionError):
        return SerializationError(
            f"cannot serialize a message of type {tname}: nested too deeply (or it contains itself)"
        )
    where = None
    try:
        where = _find_unsupported(message, walker, "message")
    except RecursionError:  # pragma: no cover - guarded by the depth limit
        pass
    if where is not None:
        return SerializationError(
            f"cannot serialize a message of type {tname}: {where} cannot be sent to another "
            "node (send None, bool, int, float, str, bytes, tuple, list, dict, set, "
            "frozenset, datetime, date, time, timedelta, UUID, Decimal, refs, gactors "
            "messages, or classes registered with gactors.cluster.register_message)"
        )
    detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
    return SerializationError(f"cannot serialize a message of type {tname}{detail}")


@implementer(ISerializer)
class MsgpackSerializer:
    """The default serializer: msgpack through msgspec, every type arriving as itself.

    Unbound (no :class:`RefCodec`), it refuses refs; :meth:`bind` returns one bound to
    a node's system.
    """

    name = "msgpack"

    def __init__(self, refs: RefCodec | None = None) -> None:
        self._refs = refs
        self._encode_plain = Encoder().encode
        self._walker = _Walker(refs, big_ints=False)
        self._big_walker: _Walker | None = None
        self._conv = self._walker.conv
        self._items = self._walker.items
        self._decode_any = self._make_decoder(refs)

    def bind(self, ref_codec: RefCodec) -> MsgpackSerializer:
        """A serializer of this kind whose refs resolve through ``ref_codec``."""
        return MsgpackSerializer(ref_codec)

    def encode(self, obj: Any) -> bytes:
        """``obj`` as msgpack; :class:`~gactors.SerializationError` naming the type (and
        where it sits) if a part of it cannot be sent.

        The top of a message is special: tuples (``("seq", 1)``) are the most common
        messages, so a top-level tuple is a plain msgpack array and a top-level *list*
        the extension; inside, tuples are extensions and lists arrays.
        """
        try:
            t = type(obj)
            if t in _PLAIN:
                return self._encode_plain(obj)
            if t is tuple:
                for x in obj:
                    if type(x) not in _PLAIN:
                        return self._encode_plain(self._items(obj))
                return self._encode_plain(obj)  # msgspec writes a tuple as an array
            if t is list:
                return self._encode_plain(Ext(_X_LIST, self._encode_plain(self._items(obj))))
            return self._encode_plain(self._conv(obj))
        except OverflowError:
            # An int beyond 64 bits somewhere: walk again, turning big ints into
            # extensions (rare, so the common walk does not check every int).
            return self._encode_big(obj)
        except SerializationError:
            raise
        except Exception as e:
            raise _encode_error(obj, self._walker, e) from None

    def _encode_big(self, obj: Any) -> bytes:
        walker = self._big_walker
        if walker is None:
            walker = self._big_walker = _Walker(self._refs, big_ints=True)
        try:
            t = type(obj)
            if t is tuple:
                return self._encode_plain(walker.items(obj))
            if t is list:
                return self._encode_plain(Ext(_X_LIST, self._encode_plain(walker.items(obj))))
            return self._encode_plain(walker.conv(obj))
        except SerializationError:
            raise
        except Exception as e:
            raise _encode_error(obj, walker, e) from None

    def decode(self, data: bytes) -> Any:
        """The object encoded in ``data``; raises :class:`WireError` (or msgspec's
        ``DecodeError``) on bad input."""
        obj = self._decode_any(data)
        if type(obj) is list:
            # A top-level array is a tuple; a top-level list came as an extension
            # (first byte 0xc7..0xc9 or 0xd4..0xd8, any other array header is 0x9X/0xdc/0xdd).
            head = data[0]
            if head < 0xC7 or head > 0xD8 or 0xCA <= head <= 0xD3:
                return tuple(obj)
        return obj

    @staticmethod
    def _make_decoder(refs: RefCodec | None) -> Callable[[bytes], Any]:
        def ext_hook(code: int, data: memoryview) -> Any:
            if code == _X_TUPLE:
                return tuple(_array(dec(data)))
            if code == _X_GACTORS:
                return _gactors_message(_array(dec(data)))
            if code == _X_CLASS:
                values = _array(dec(data))
                if not values or type(values[0]) is not str:
                    raise WireError("a registered-class extension without a tag")
                entry = _by_tag.get(values[0])
                if entry is None:
                    raise WireError(
                        f"unknown message tag {values[0]!r} (register the class with "
                        "gactors.cluster.register_message on this node too)"
                    )
                try:
                    return entry.from_fields(values[1:])
                except WireError:
                    raise
                except Exception as e:
                    raise WireError(
                        f"message tag {entry.tag!r}: cannot rebuild {_class_name(entry.cls)}: "
                        f"{type(e).__name__}: {e}"
                    ) from e
            if code == _X_REF:
                v = _array(dec(data))
                if (
                    len(v) != 3
                    or type(v[0]) is not str
                    or type(v[1]) is not str
                    or type(v[2]) is not int
                ):
                    raise WireError("a ref extension that is not [address, path, uid]")
                if refs is None:
                    raise WireError("a ref in a message decoded without a RefCodec")
                return refs.ref_from_wire(v[0], v[1], v[2])
            if code == _X_SET:
                return set(_array(dec(data)))
            if code == _X_FROZENSET:
                return frozenset(_array(dec(data)))
            if code == _X_DICT:
                flat = _array(dec(data))
                if len(flat) % 2:
                    raise WireError("a dict extension with an odd number of items")
                return dict(zip(flat[::2], flat[1::2], strict=True))
            if code == _X_BIGINT:
                return int.from_bytes(data, "big", signed=True)
            if code == _X_LIST:
                return _array(dec(data))
            if code == _X_STDLIB:
                v = _array(dec(data))
                spec = _STDLIB.get(v[0]) if len(v) == 2 and type(v[0]) is int else None
                if spec is None:
                    raise WireError(f"an unknown standard-library value {describe_payload(data)}")
                try:
                    return spec[2](v[1])
                except Exception as e:
                    raise WireError(
                        f"a bad {spec[0].__name__} value on the wire: {type(e).__name__}: {e}"
                    ) from e
            raise WireError(f"unknown msgpack extension type {code}")

        dec = Decoder(ext_hook=ext_hook).decode
        return dec


def _array(v: Any) -> list[Any]:
    if type(v) is not list:
        raise WireError(f"an extension holding {type(v).__name__}, not an array")
    return v


def _gactors_message(values: list[Any]) -> Any:
    if not values or type(values[0]) is not int:
        raise WireError("a gactors-message extension without its number")
    number = values[0]
    single = _G_SINGLETONS.get(number)
    if single is not None:
        return single
    spec = _G_CLASSES.get(number)
    if spec is None:
        raise WireError(f"unknown gactors message number {number}")
    cls, build, n = spec
    if len(values) != n + 1:
        raise WireError(
            f"gactors message {cls.__qualname__}: {len(values) - 1} fields, {n} expected"
        )
    try:
        return build(*values[1:])
    except Exception as e:
        raise WireError(
            f"gactors message {cls.__qualname__}: cannot rebuild it: {type(e).__name__}: {e}"
        ) from e


# -- the pickle serializer ------------------------------------------------------------------
class _RefPickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, refs: RefCodec | None) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._refs = refs

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, ActorRef):
            if self._refs is None:
                raise SerializationError(
                    f"cannot serialize the ref {obj!r}: this serializer is not bound to an "
                    "actor system (call bind(ref_codec))"
                )
            return self._refs.ref_to_wire(obj)
        return None


class _RefUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, refs: RefCodec | None) -> None:
        super().__init__(file)
        self._refs = refs

    def persistent_load(self, pid: Any) -> Any:
        if self._refs is None:
            raise WireError("a ref in a message decoded without a RefCodec")
        if (
            type(pid) is not tuple
            or len(pid) != 3
            or type(pid[0]) is not str
            or type(pid[1]) is not str
            or type(pid[2]) is not int
        ):
            raise WireError("a pickled ref that is not (address, path, uid)")
        return self._refs.ref_from_wire(*pid)


@implementer(ISerializer)
class PickleSerializer:
    """pickle, for trusted networks only: never the default.

    Unpickling runs whatever code the bytes name, so a node decodes pickle payloads only
    when ``"pickle"`` is its configured serializer (``unsafe``). Refs travel as
    persistent ids and resolve against the receiving node's system. Any picklable
    exception travels as itself; a ``Status.Failure`` whose cause cannot be pickled
    carries a :class:`~gactors.RemoteError` instead.
    """

    name = "pickle"
    unsafe = True

    def __init__(self, refs: RefCodec | None = None) -> None:
        self._refs = refs

    def bind(self, ref_codec: RefCodec) -> PickleSerializer:
        """A pickle serializer whose refs resolve through ``ref_codec``."""
        return PickleSerializer(ref_codec)

    def encode(self, obj: Any) -> bytes:
        """``obj`` pickled; :class:`~gactors.SerializationError` if it cannot be."""
        try:
            return self._dump(obj)
        except SerializationError:
            raise
        except Exception as e:
            if type(obj) is Status.Failure:
                return self._dump(Status.Failure(_remote_error(obj.cause)))
            raise SerializationError(
                f"cannot serialize a message of type {_type_name(obj)} with pickle: "
                f"{type(e).__name__}: {e}"
            ) from None

    def _dump(self, obj: Any) -> bytes:
        buf = io.BytesIO()
        _RefPickler(buf, self._refs).dump(obj)
        return buf.getvalue()

    def decode(self, data: bytes) -> Any:
        """Unpickle ``data`` (trusted input only)."""
        return _RefUnpickler(io.BytesIO(data), self._refs).load()


# -- records and batches ---------------------------------------------------------------------
class Record(msgspec.Struct, array_like=True, gc=False):
    """One message in a batch: ``[kind, recipient, sender, serializer_id, payload]``.

    ``kind`` is checked by :meth:`WireCodec.decode_record` (a ``Literal`` type would
    make every batch decode slower).
    """

    kind: int
    recipient: tuple[str, int]
    sender: tuple[str, str, int] | None
    serializer_id: int
    payload: bytes


class _WatchW(msgspec.Struct, array_like=True, frozen=True, gc=False, tag=1):
    watchee: tuple[str, str, int]
    watcher: tuple[str, str, int]


class _UnwatchW(msgspec.Struct, array_like=True, frozen=True, gc=False, tag=2):
    watchee: tuple[str, str, int]
    watcher: tuple[str, str, int]


class _DeathWatchNotificationW(msgspec.Struct, array_like=True, frozen=True, gc=False, tag=3):
    actor: tuple[str, str, int]
    existence_confirmed: bool
    address_terminated: bool


_batch_decode = Decoder(list[Record]).decode
_system_decode = Decoder(_WatchW | _UnwatchW | _DeathWatchNotificationW).decode
_wire_encode = Encoder().encode


def _text_len(s: str) -> int:
    # An upper bound of the UTF-8 size without encoding (isascii is O(1) on str).
    return len(s) if s.isascii() else 4 * len(s)


class WireCodec:
    """Everything a node encodes for and decodes from the wire; one per node.

    ``serializer`` is an :class:`~gactors.interfaces.ISerializer` (bound here to
    ``refs`` when it has ``bind``), ``refs`` the node's :class:`RefCodec`,
    ``max_message_size`` the largest payload in bytes, enforced when encoding
    (:class:`~gactors.SerializationError`) and when decoding (:class:`WireError`). A
    batch may be larger by a header allowance (64 KiB) so that one message of the
    maximum size still fits.
    """

    def __init__(self, serializer: Any, refs: RefCodec, max_message_size: int) -> None:
        if (
            isinstance(max_message_size, bool)
            or not isinstance(max_message_size, int)
            or max_message_size <= 0
        ):
            raise ValueError(
                f"max_message_size must be a positive int (bytes), not {max_message_size!r}"
            )
        self.refs = refs
        self.serializer = self._bind(serializer, refs)
        self.name: str = self.serializer.name
        self.serializer_id = serializer_id(self.name)
        self.max_message_size = max_message_size
        self.max_batch_size = max_message_size + _HEADER_ALLOWANCE
        self._encode = self.serializer.encode
        self._decode = self.serializer.decode
        self._foreign: dict[int, Callable[[bytes], Any]] = {}

    @classmethod
    def create(cls, serializer: Any, refs: RefCodec, max_message_size: int) -> WireCodec:
        """Like the constructor, ``serializer`` being a registered name, a
        ``"package.module:Name"`` reference or the object (:func:`gactors.plugins.resolve`)."""
        return cls(plugins.resolve_serializer(serializer), refs, max_message_size)

    @staticmethod
    def _bind(serializer: Any, refs: RefCodec) -> Any:
        bind = getattr(serializer, "bind", None)
        bound = bind(refs) if callable(bind) else serializer
        # Verifies the interface (PluginError naming what is missing).
        plugins.resolve("serializer", bound)
        if getattr(bound, "name", None) != getattr(serializer, "name", None):
            raise ValueError(f"serializer {serializer!r}: bind() returned one named {bound.name!r}")
        return bound

    # -- user messages --
    def encode_message(self, message: Any) -> tuple[int, bytes]:
        """``(serializer_id, payload)`` of ``message``; :class:`~gactors.SerializationError`
        naming the type if it cannot be serialized or is larger than max_message_size."""
        try:
            data = self._encode(message)
        except SerializationError:
            raise
        except Exception as e:
            raise SerializationError(
                f"cannot serialize a message of type {_type_name(message)} with "
                f"{self.name!r}: {type(e).__name__}: {e}"
            ) from e
        if len(data) > self.max_message_size:
            raise SerializationError(
                f"a message of type {_type_name(message)} is {len(data)} bytes serialized, "
                f"more than max_message_size ({self.max_message_size} bytes)"
            )
        return self.serializer_id, data

    def decode_message(self, serializer_id: int, payload: bytes) -> Any:
        """The message in ``payload``; :class:`WireError` if it cannot be decoded."""
        if len(payload) > self.max_message_size:
            raise WireError(
                f"a payload of {len(payload)} bytes, more than max_message_size "
                f"({self.max_message_size} bytes)"
            )
        try:
            if serializer_id == self.serializer_id:
                return self._decode(payload)
            return self._foreign_decoder(serializer_id)(payload)
        except WireError:
            raise
        except Exception as e:
            raise WireError(
                f"undecodable payload {describe_payload(payload)} (serializer id "
                f"{serializer_id}): {type(e).__name__}: {e}"
            ) from e

    def _foreign_decoder(self, sid: int) -> Callable[[bytes], Any]:
        decode = self._foreign.get(sid)
        if decode is not None:
            return decode
        if sid == SYSTEM_SERIALIZER_ID:
            raise WireError("a user record carrying a system payload (serializer id 0)")
        try:
            known = plugins.names("serializer")
        except Exception as e:  # pragma: no cover - the registry itself failing
            raise WireError(f"cannot list the serializers: {e}") from e
        name = next((n for n in known if serializer_id(n) == sid), None)
        if name is None:
            # Not cached: the serializer may be registered later.
            raise WireError(
                f"a payload of an unknown serializer (id {sid}); this node knows "
                + ", ".join(f"{n!r} ({serializer_id(n)})" for n in known)
            )
        try:
            serializer = plugins.get_serializer(name)
        except Exception as e:
            raise WireError(f"a payload of serializer {name!r}, which fails to load: {e}") from e
        if getattr(serializer, "unsafe", False):
            refused = WireError(
                f"refused a payload of the {name!r} serializer: it decodes only when it is "
                f"the configured serializer (this node uses {self.name!r}); nothing is "
                "unpickled otherwise"
            )

            def decode(data: bytes) -> Any:
                raise refused

        else:
            decode = self._bind(serializer, self.refs).decode
        self._foreign[sid] = decode
        return decode

    # -- system messages --
    def encode_system(self, message: SystemMessage) -> bytes:
        """A Watch, Unwatch or DeathWatchNotification for a system record's payload."""
        ref = self.refs.ref_to_wire
        t = type(message)
        # type(message), not t: mypy narrows the message by it
        if type(message) is Watch:
            m: Any = _WatchW(ref(message.watchee), ref(message.watcher))
        elif type(message) is Unwatch:
            m = _UnwatchW(ref(message.watchee), ref(message.watcher))
        elif type(message) is DeathWatchNotification:
            m = _DeathWatchNotificationW(
                ref(message.actor),
                bool(message.existence_confirmed),
                bool(message.address_terminated),
            )
        else:
            raise SerializationError(
                f"system message {t.__name__} does not travel between nodes "
                "(only Watch, Unwatch and DeathWatchNotification do)"
            )
        return _wire_encode(m)

    def decode_system(self, payload: bytes) -> SystemMessage:
        """The system message of a system record; :class:`WireError` if undecodable."""
        if len(payload) > self.max_message_size:
            raise WireError(f"a system payload of {len(payload)} bytes")
        try:
            m = _system_decode(payload)
            if type(m) is _DeathWatchNotificationW:
                return DeathWatchNotification(
                    self.refs.ref_from_wire(*m.actor), m.existence_confirmed, m.address_terminated
                )
            watchee = self.refs.ref_from_wire(*m.watchee)
            watcher = self.refs.ref_from_wire(*m.watcher)
        except WireError:
            raise
        except Exception as e:
            raise WireError(
                f"undecodable system payload {describe_payload(payload)}: {type(e).__name__}: {e}"
            ) from e
        return Watch(watchee, watcher) if type(m) is _WatchW else Unwatch(watchee, watcher)

    # -- refs and records --
    def sender_to_wire(self, sender: ActorRef | None) -> tuple[str, str, int] | None:
        """The ``sender`` field of a record."""
        return None if sender is None else self.refs.ref_to_wire(sender)

    def sender_from_wire(self, sender: tuple[str, str, int] | None) -> ActorRef | None:
        """The sender ref of a record (:class:`WireError` if the node rejects it)."""
        if sender is None:
            return None
        try:
            return self.refs.ref_from_wire(*sender)
        except WireError:
            raise
        except Exception as e:
            raise WireError(f"an unusable sender {sender!r}: {type(e).__name__}: {e}") from e

    def user_record(
        self, recipient_path: str, recipient_uid: int, message: Any, sender: ActorRef | None
    ) -> Record:
        """A user message's record (encodes it: :class:`~gactors.SerializationError`).

        The one call per message at ``tell`` time, so :meth:`encode_message` is inlined.
        """
        try:
            payload = self._encode(message)
        except SerializationError:
            raise
        except Exception:
            self.encode_message(message)  # raises SerializationError naming the type
            raise
        if len(payload) > self.max_message_size:
            self.encode_message(message)  # raises the error naming type and size
        if sender is None:
            snd = None
            if len(recipient_path) > _MAX_HEADER_CHARS:
                self._check_header(recipient_path, snd)
        else:
            snd = self.refs.ref_to_wire(sender)
            if len(recipient_path) + len(snd[0]) + len(snd[1]) > _MAX_HEADER_CHARS:
                self._check_header(recipient_path, snd)
        return Record(KIND_USER, (recipient_path, recipient_uid), snd, self.serializer_id, payload)

    def system_record(
        self, recipient_path: str, recipient_uid: int, message: SystemMessage
    ) -> Record:
        """A system message's record."""
        self._check_header(recipient_path, None)
        return Record(
            KIND_SYSTEM,
            (recipient_path, recipient_uid),
            None,
            SYSTEM_SERIALIZER_ID,
            self.encode_system(message),
        )

    @staticmethod
    def _check_header(path: str, sender: tuple[str, str, int] | None) -> None:
        n = len(path) if sender is None else len(path) + len(sender[0]) + len(sender[1])
        if n > _MAX_HEADER_CHARS:
            raise SerializationError(
                f"the recipient and sender paths are {n} characters long, more than a "
                f"record allows ({_MAX_HEADER_CHARS})"
            )

    def decode_record(self, record: Record) -> Any:
        """The message of ``record`` (user or system); :class:`WireError` if undecodable."""
        kind = record.kind
        if kind == KIND_USER:
            return self.decode_message(record.serializer_id, record.payload)
        if kind == KIND_SYSTEM:
            return self.decode_system(record.payload)
        raise WireError(f"a record of unknown kind {kind!r}")

    # -- batches --
    def encode_batch(self, records: Sequence[Record]) -> bytes:
        """One inbox entry holding ``records`` in order."""
        return _wire_encode(records)

    def encode_batches(self, records: Sequence[Record]) -> list[bytes]:
        """``records`` in order, in as few entries as fit: each at most max_message_size
        bytes, except a single record of a message near the maximum (header allowance)."""
        return [data for data, _ in self.split_batches(records)]

    def split_batches(self, records: Sequence[Record]) -> list[tuple[bytes, int]]:
        """:meth:`encode_batches` with the number of records in each entry (the
        flusher settles each entry's messages by that entry's outcome)."""
        limit = self.max_message_size
        whole = _wire_encode(records)
        if len(whole) <= limit or len(records) <= 1:
            return [(whole, len(records))]  # the common case: one entry, no estimates
        out: list[tuple[bytes, int]] = []
        start = 0
        size = 5  # the array header
        for i, r in enumerate(records):
            s = r.sender
            n = 48 + len(r.payload) + _text_len(r.recipient[0])
            if s is not None:
                n += _text_len(s[0]) + _text_len(s[1])
            if size + n > limit and i > start:
                out.append((_wire_encode(records[start:i]), i - start))
                start, size = i, 5
            size += n
        if start < len(records):
            out.append((_wire_encode(records[start:]), len(records) - start))
        return out

    def decode_batch(self, data: bytes) -> list[Record]:
        """The records of one inbox entry; :class:`WireError` on garbage or if too large."""
        if len(data) > self.max_batch_size:
            raise WireError(
                f"an entry of {len(data)} bytes, more than max_message_size "
                f"({self.max_message_size} bytes) plus the header allowance"
            )
        try:
            return _batch_decode(data)
        except Exception as e:
            raise WireError(
                f"undecodable entry {describe_payload(data)}: {type(e).__name__}: {e}"
            ) from e

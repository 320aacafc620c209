"""The "msgpack" serializer (:class:`MsgpackSerializer`, msgspec underneath), the
default: every type arrives as itself (``_serialization.py`` describes what it carries
and how).

gactors' own messages travel as a number and their fields (extension 7). The core's
messages have their numbers in the table below; the packages built on the kernel
(routing, backoff) register theirs in :mod:`gactors._messages` when imported
(``register_wire_class``), and this module reads that table lazily
(:func:`_load_gactors_messages`): the cluster imports neither package statically. So
that a node decodes their messages even if nothing on it imported them yet, the first
use of the table imports the modules that register wire numbers (``_WIRE_MODULES``,
by name).
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Callable
from typing import Any, Final

try:
    from msgspec.msgpack import Decoder, Encoder, Ext
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError("the gactors cluster needs msgspec: pip install 'gactors[cluster]'") from _e
import importlib

from zope.interface import implementer

from gactors._messages import (
    WIRE_CLASSES,
    WIRE_SINGLETONS,
    ActorIdentity,
    Identify,
    Kill,
    PoisonPill,
    ReceiveTimeout,
    Status,
    Terminated,
)
from gactors._ref import ActorRef
from gactors._text import safe_str
from gactors.cluster._registry import (
    RefCodec,
    WireError,
    _by_class,
    _by_tag,
    _class_name,
    _Entry,
    _type_name,
    describe_payload,
)
from gactors.exceptions import (
    ActorNotFound,
    AskTimeoutError,
    RemoteError,
    SerializationError,
)
from gactors.interfaces import ISerializer

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


# gactors' own messages of the core: number -> (class, builder from the fields). The
# numbers are part of the wire format: never reuse or renumber one. 8-17 are routing's
# and backoff's (registered by them, see the module docstring).
_G_SINGLETONS: Final[dict[int, Any]] = {
    0: PoisonPill,
    1: Kill,
    2: ReceiveTimeout,
}
_G_CLASSES: Final[dict[int, tuple[type, Callable[..., Any], int]]] = {
    # number: (class, builder, number of fields)
    3: (Identify, Identify, 1),
    4: (ActorIdentity, ActorIdentity, 2),
    5: (Status.Success, Status.Success, 1),
    6: (Status.Failure, Status.Failure, 1),
    7: (Terminated, Terminated, 3),
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
    RemoteError: lambda m: (m.type_name, m.message),
    ActorNotFound: lambda m: (safe_str(m),),
    AskTimeoutError: lambda m: (safe_str(m),),
}


def _constant(value: Any) -> Callable[[Any], Any]:
    def c(obj: Any) -> Any:
        return value

    return c


#: The modules that register wire numbers of their messages in gactors._messages
#: (imported by name on the first use of the table, never statically).
_WIRE_MODULES: Final = ("gactors.routing", "gactors.backoff")
_loaded = False


def _load_gactors_messages() -> None:
    """Add the wire numbers registered in :mod:`gactors._messages` (routing's and
    backoff's) to the tables above, once, importing their modules first."""
    global _loaded
    if _loaded:
        return
    for name in _WIRE_MODULES:
        importlib.import_module(name)
    for number, single in WIRE_SINGLETONS.items():
        _G_SINGLETONS.setdefault(number, single)
    for number, (cls, arity, fields) in WIRE_CLASSES.items():
        _G_CLASSES.setdefault(number, (cls, cls, arity))
        _G_FIELDS.setdefault(cls, fields)
    _loaded = True


class _Walker:
    """Turns a message into what msgspec encodes as the right msgpack, keeping types.

    ``conv`` is the walk: plain scalars are returned as they are (checked inline by the
    containers, so a list of ints costs one comprehension), everything else goes through
    ``dispatch``, a table by exact type filled lazily for refs and registered classes.
    """

    def __init__(self, refs: RefCodec | None, big_ints: bool) -> None:
        _load_gactors_messages()
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
        #: The types :meth:`encode` hands to msgspec unchanged, and msgspec's encoder:
        #: a caller encoding many messages (the wire codec, at ``tell``) encodes these
        #: itself, a call less per message, and calls :meth:`encode` if that raises
        #: (an int beyond 64 bits, which :meth:`encode` turns into an extension).
        self.plain_encoder = (_PLAIN, self._encode_plain)

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

    def decode_many(self, payloads: list[bytes]) -> list[Any]:
        """:meth:`decode` of each of ``payloads`` in one loop without a Python call
        per payload (the cost of a remote message's decoding was mostly those calls).
        Raises like :meth:`decode` if one of them is bad (the caller then decodes them
        one by one to find it)."""
        dec = self._decode_any
        out = [dec(p) for p in payloads]
        if list not in set(map(type, out)):
            return out
        for i, obj in enumerate(out):
            if type(obj) is list:
                # As in decode(): a top-level array is a tuple, a list came as an
                # extension.
                head = payloads[i][0]
                if head < 0xC7 or head > 0xD8 or 0xCA <= head <= 0xD3:
                    out[i] = tuple(obj)
        return out

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
    if not _loaded:
        _load_gactors_messages()
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

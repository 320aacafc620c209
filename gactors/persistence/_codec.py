"""How events, snapshots and states become bytes: the cluster's msgpack rules.

The encoder is the cluster's ``"msgpack"`` serializer (what it carries, how registered
classes travel: :mod:`gactors.cluster._serialization`), unbound: refs are refused, as a
ref names one incarnation of an actor and means nothing to the process that reads the
event back (store its path instead).

One difference on the way back, for schema evolution: what is stored is read years
later by newer code. A registered dataclass (or ``msgspec.Struct``, ``NamedTuple``)
that gained fields *with defaults* since the event was written decodes with those
defaults (its fields travel in declaration order, and new fields with defaults come
last). A stored value with *more* fields than the class has now, or missing a field
without a default, stays an error naming the tag.
"""

from __future__ import annotations

# This module reads the cluster codec's internals (its extension codes, registry and
# decoder) without changing them: one encoding, one registry.
# ruff: noqa: SLF001
from collections.abc import Callable
from typing import Any

from gactors.exceptions import SerializationError

try:
    from msgspec.msgpack import Decoder

    from gactors.cluster import _serialization as _wire
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "gactors.persistence needs msgspec: pip install 'gactors[persistence]'"
    ) from _e

from gactors.persistence._model import WriteRejected

__all__ = ["PersistenceCodec", "codec"]


class PersistenceCodec(_wire.MsgpackSerializer):
    """The cluster's msgpack serializer, tolerant of fields added with defaults."""

    def __init__(self) -> None:
        super().__init__(None)

    def encode_for_store(self, value: Any, what: str, max_size: int | None = None) -> bytes:
        """``value`` as bytes; :class:`WriteRejected` naming ``what`` and the problem
        when it cannot be encoded or is larger than ``max_size`` bytes."""
        try:
            data = self.encode(value)
        except SerializationError as e:
            raise WriteRejected(f"cannot store {what}: {e}") from e
        if max_size is not None and len(data) > max_size:
            raise WriteRejected(
                f"cannot store {what}: {len(data)} bytes encoded, over the limit of "
                f"{max_size} bytes"
            )
        return data

    @staticmethod
    def _make_decoder(refs: Any) -> Callable[[bytes], Any]:
        # The cluster's decoder handles every extension but the registered classes (and
        # the containers, whose contents must come back through this decoder so that a
        # registered class nested in a tuple is rebuilt tolerantly too).
        base_hook = _wire.MsgpackSerializer._make_decoder(refs).__self__.ext_hook  # type: ignore[attr-defined]
        array = _wire._array

        def ext_hook(code: int, data: memoryview) -> Any:
            if code == _wire._X_CLASS:
                values = array(dec(data))
                if not values or type(values[0]) is not str:
                    raise _wire.WireError("a registered-class extension without a tag")
                return _rebuild(values[0], values[1:])
            if code == _wire._X_TUPLE:
                return tuple(array(dec(data)))
            if code == _wire._X_LIST:
                return array(dec(data))
            if code == _wire._X_SET:
                return set(array(dec(data)))
            if code == _wire._X_FROZENSET:
                return frozenset(array(dec(data)))
            if code == _wire._X_DICT:
                flat = array(dec(data))
                if len(flat) % 2:
                    raise _wire.WireError("a dict extension with an odd number of items")
                return dict(zip(flat[::2], flat[1::2], strict=True))
            return base_hook(code, data)

        dec: Callable[[Any], Any] = Decoder(ext_hook=ext_hook).decode
        return dec


def _rebuild(tag: str, values: list[Any]) -> Any:
    entry = _wire._by_tag.get(tag)
    if entry is None:
        raise _wire.WireError(
            f"unknown message tag {tag!r} (register the class with "
            "gactors.serialization.register_message before it is read back)"
        )
    if entry.shape in ("fields", "tuple") and len(values) < len(entry.names):
        # Stored before the class gained fields: the missing ones take their defaults
        # (a missing field without one fails below, naming the class).
        names = entry.names[: len(values)]
        try:
            return entry.cls(**dict(zip(names, values, strict=True)))
        except Exception as e:
            raise _wire.WireError(
                f"message tag {tag!r}: {len(values)} fields stored, "
                f"{len(entry.names)} now ({', '.join(entry.names)}): cannot rebuild "
                f"{entry.cls.__qualname__}: {type(e).__name__}: {e}"
            ) from e
    try:
        return entry.from_fields(values)
    except _wire.WireError:
        raise
    except Exception as e:
        raise _wire.WireError(
            f"message tag {tag!r}: cannot rebuild {entry.cls.__qualname__}: {type(e).__name__}: {e}"
        ) from e


_codec: PersistenceCodec | None = None


def codec() -> PersistenceCodec:
    """The process's codec (stateless once built; its decoder is reentrant)."""
    global _codec
    c = _codec
    if c is None:
        c = _codec = PersistenceCodec()
    return c

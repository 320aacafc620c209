"""The "pickle" serializer (:class:`PickleSerializer`): for trusted networks only,
never the default (a node decodes a pickle payload only when ``"pickle"`` is its
configured serializer). Refs travel as persistent ids resolved by the node's
:class:`~gactors.cluster._registry.RefCodec`.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from zope.interface import implementer

from gactors._messages import (
    Status,
)
from gactors._ref import ActorRef
from gactors.cluster._msgpack_serializer import _remote_error
from gactors.cluster._registry import RefCodec, WireError, _type_name
from gactors.exceptions import (
    SerializationError,
)
from gactors.interfaces import ISerializer


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

"""The cluster's wire format (docs/cluster/concepts.md, "Serialization"), described
here and implemented in four modules, whose names this module re-exports:
``_registry.py`` (:func:`register_message`, the serializer ids, :class:`WireError`,
:class:`RefCodec`), ``_msgpack_serializer.py`` (:class:`MsgpackSerializer`),
``_pickle_serializer.py`` (:class:`PickleSerializer`) and ``_wire.py`` (records,
batches and :class:`WireCodec`).

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

On the wire a batch is *compact* (``_wire._Compact``): ``[2, heads, kinds, heads_of,
serializer_ids, payloads]``, the records in columns and each distinct ``[recipient,
sender]`` pair once in ``heads`` (record i's pair is ``heads[heads_of[i]]``), so many
messages between the same two actors carry their paths once. A batch in the first
layout (a plain array of records) is still decoded.

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

from gactors.cluster._msgpack_serializer import (
    _X_BIGINT,
    _X_CLASS,
    _X_DICT,
    _X_FROZENSET,
    _X_GACTORS,
    _X_LIST,
    _X_REF,
    _X_SET,
    _X_STDLIB,
    _X_TUPLE,
    MsgpackSerializer,
    _array,
    _gactors_message,
)
from gactors.cluster._pickle_serializer import PickleSerializer
from gactors.cluster._registry import (
    RefCodec,
    WireError,
    _by_class,
    _by_tag,
    describe_payload,
    register_message,
    registered_tag,
    serializer_id,
)
from gactors.cluster._wire import (
    KIND_SYSTEM,
    KIND_USER,
    SYSTEM_SERIALIZER_ID,
    Record,
    WireCodec,
)

# The private names are those the persistence codec and the tests reach for (the
# extension codes, the registry's tables, the array check).
__all__ = [
    "KIND_SYSTEM",
    "KIND_USER",
    "SYSTEM_SERIALIZER_ID",
    "_X_BIGINT",
    "_X_CLASS",
    "_X_DICT",
    "_X_FROZENSET",
    "_X_GACTORS",
    "_X_LIST",
    "_X_REF",
    "_X_SET",
    "_X_STDLIB",
    "_X_TUPLE",
    "MsgpackSerializer",
    "PickleSerializer",
    "Record",
    "RefCodec",
    "WireCodec",
    "WireError",
    "_array",
    "_by_class",
    "_by_tag",
    "_gactors_message",
    "describe_payload",
    "register_message",
    "registered_tag",
    "serializer_id",
]

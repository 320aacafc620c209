"""Records and batches, the framing of the cluster's wire format
(:class:`WireCodec`, one per node; ``_serialization.py`` describes the format): a
batch is a msgpack array of :class:`Record`, system messages have a fixed codec of
their own, and ``max_message_size`` is enforced both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

try:
    import msgspec
    from msgspec.msgpack import Decoder, Encoder
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError("the gactors cluster needs msgspec: pip install 'gactors[cluster]'") from _e

from gactors import plugins
from gactors._ref import ActorRef, LocalActorRef
from gactors._sysmsg import DeathWatchNotification, SystemMessage, Unwatch, Watch
from gactors.cluster._registry import (
    RefCodec,
    WireError,
    _type_name,
    describe_payload,
    serializer_id,
)
from gactors.exceptions import (
    SerializationError,
)

KIND_USER: Final = 0
KIND_SYSTEM: Final = 1
SYSTEM_SERIALIZER_ID: Final = 0
"""The ``serializer_id`` of system records (this module's own codec, not a plugin)."""

# Room for a record's header (recipient path, sender ref) on top of the payload: a
# batch holding one message of max_message_size bytes is still accepted.
_HEADER_ALLOWANCE: Final = 64 * 1024
# The longest path text (recipient + sender, in characters) a record may carry, so its
# header stays within _HEADER_ALLOWANCE whatever the characters (4 bytes each at most).
_MAX_HEADER_CHARS: Final = _HEADER_ALLOWANCE // 4 - 64


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


#: The first field of a compact batch (below): its format's number.
COMPACT: Final = 2


class _Compact(msgspec.Struct, array_like=True, gc=False):
    """A batch in columns: ``[2, heads, kinds, heads_of, serializer_ids, payloads]``.

    ``heads`` holds each distinct ``[recipient, sender]`` pair of the batch once, and
    ``heads_of[i]`` is the index of record i's pair: a batch of many messages between
    the same two actors carries their paths once instead of per message, so it is
    several times smaller and decodes several times faster than a list of
    :class:`Record` (no strings or tuples per message). The old layout (an array of
    records) is still decoded.
    """

    format: int
    heads: list[tuple[tuple[str, int], tuple[str, str, int] | None]]
    kinds: list[int]
    heads_of: list[int]
    serializer_ids: list[int]
    payloads: list[bytes]


_batch_decode = Decoder(list[Record]).decode
_compact_decode = Decoder(_Compact).decode
#: How a compact batch starts: a 6-element array whose first element is 2 (an array
#: of records starts with a 5-element array, 0x95, after its header).
_COMPACT_HEAD: Final = b"\x96\x02"
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
        # Optional (MsgpackSerializer has it): the types encoded as they are, and how.
        plain = getattr(self.serializer, "plain_encoder", None)
        self._plain_types: frozenset[type] = plain[0] if plain is not None else frozenset()
        self._plain_encode: Callable[[Any], bytes] = plain[1] if plain is not None else bytes
        self._decode = self.serializer.decode
        self._foreign: dict[int, Callable[[bytes], Any]] = {}
        # The last (local sender, recipient) of user_record_to and the sender's triple.
        self._last_sender: Any = None
        self._last_recipient: Any = None
        self._last_snd: Any = None
        # Optional: decodes a list of payloads in one call (MsgpackSerializer has it).
        self._decode_many: Callable[[list[bytes]], list[Any]] | None = getattr(
            self.serializer, "decode_many", None
        )

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
        """A user message's record (encodes it: :class:`~gactors.SerializationError`)."""
        return self.user_record_to((recipient_path, recipient_uid), message, sender)

    def user_record_to(
        self, recipient: tuple[str, int], message: Any, sender: ActorRef | None
    ) -> Record:
        """:meth:`user_record` with the recipient as a ``(path, uid)`` tuple (a remote
        ref keeps its own, so that no tuple is made per message: a record waiting for a
        flush holds nothing the cycle collector tracks). The one call per message at
        ``tell`` time, so :meth:`encode_message` is inlined."""
        try:
            if type(message) in self._plain_types:
                try:
                    payload = self._plain_encode(message)
                except Exception:  # (an int beyond 64 bits): the serializer's way
                    payload = self._encode(message)
            else:
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
            if len(recipient[0]) > _MAX_HEADER_CHARS:
                self._check_header(recipient[0], snd)
        elif sender is self._last_sender and recipient is self._last_recipient:
            # An actor telling many messages to the same remote ref in a row: its
            # triple and the header check once, not per message.
            snd = self._last_snd
        else:
            snd = self.refs.ref_to_wire(sender)
            if len(recipient[0]) + len(snd[0]) + len(snd[1]) > _MAX_HEADER_CHARS:
                self._check_header(recipient[0], snd)
            if type(sender) is LocalActorRef:
                # (Only a local actor's triple is constant; a promise's is exported
                # by ref_to_wire each time.)
                self._last_sender, self._last_recipient = sender, recipient
                self._last_snd = snd
        return Record(KIND_USER, recipient, snd, self.serializer_id, payload)

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
        """One inbox entry holding ``records`` in order (the compact layout)."""
        return _encode_compact(records)

    def encode_batches(self, records: Sequence[Record]) -> list[bytes]:
        """``records`` in order, in as few entries as fit: each at most max_message_size
        bytes, except a single record of a message near the maximum (header allowance)."""
        return [data for data, _ in self.split_batches(records)]

    def split_batches(self, records: Sequence[Record]) -> list[tuple[bytes, int]]:
        """:meth:`encode_batches` with the number of records in each entry (the
        flusher settles each entry's messages by that entry's outcome)."""
        limit = self.max_message_size
        rows = records
        whole = _encode_compact(rows)
        if len(whole) <= limit or len(rows) <= 1:
            return [(whole, len(rows))]  # the common case: one entry, no estimates
        out: list[tuple[bytes, int]] = []
        start = 0
        size = 5  # the array header
        for i, r in enumerate(rows):
            s = r.sender
            n = 48 + len(r.payload) + _text_len(r.recipient[0])
            if s is not None:
                n += _text_len(s[0]) + _text_len(s[1])
            if size + n > limit and i > start:
                out.append((_encode_compact(rows[start:i]), i - start))
                start, size = i, 5
            size += n
        if start < len(rows):
            out.append((_encode_compact(rows[start:]), len(rows) - start))
        return out

    def decode_batch(self, data: bytes) -> list[Record]:
        """The records of one inbox entry; :class:`WireError` on garbage or if too large."""
        heads, kinds, heads_of, sids, payloads = self.decode_columns(data)
        return [
            Record(kind, heads[h][0], heads[h][1], sid, payload)
            for kind, h, sid, payload in zip(kinds, heads_of, sids, payloads, strict=True)
        ]

    def decode_columns(
        self, data: bytes
    ) -> tuple[list[Any], list[int], list[int], list[int], list[bytes]]:
        """The records of one inbox entry in columns: ``(heads, kinds, heads_of,
        serializer_ids, payloads)``, record i being ``kinds[i]`` to the recipient and
        from the sender of ``heads[heads_of[i]]`` (a ``(recipient, sender)`` pair);
        the delivery's fast path. :class:`WireError` on garbage or if too large."""
        if len(data) > self.max_batch_size:
            raise WireError(
                f"an entry of {len(data)} bytes, more than max_message_size "
                f"({self.max_message_size} bytes) plus the header allowance"
            )
        try:
            if data[:2] == _COMPACT_HEAD:
                b = _compact_decode(data)
                n = len(b.kinds)
                if not (len(b.heads_of) == len(b.serializer_ids) == len(b.payloads) == n):
                    raise WireError("a compact batch whose columns differ in length")
                if n and (min(b.heads_of) < 0 or max(b.heads_of) >= len(b.heads)):
                    raise WireError("a compact batch referring to a head it does not have")
                return b.heads, b.kinds, b.heads_of, b.serializer_ids, b.payloads
            records = _batch_decode(data)
        except WireError as e:
            raise WireError(f"undecodable entry {describe_payload(data)}: {e}") from e
        except Exception as e:
            raise WireError(
                f"undecodable entry {describe_payload(data)}: {type(e).__name__}: {e}"
            ) from e
        return (
            [(r.recipient, r.sender) for r in records],
            [r.kind for r in records],
            list(range(len(records))),
            [r.serializer_id for r in records],
            [r.payload for r in records],
        )

    def decode_payloads(self, serializer_ids: list[int], payloads: list[bytes]) -> list[Any] | None:
        """The user messages of ``payloads`` decoded in one call when they are all of
        this node's serializer, it can decode many at once (``decode_many``) and none
        is larger than max_message_size; else (or if one is undecodable) None: the
        caller decodes each with :meth:`decode_message`, which names the problem."""
        decode_many = self._decode_many
        if decode_many is None or not payloads:
            return None
        sid = self.serializer_id
        if serializer_ids.count(sid) != len(serializer_ids):
            return None
        if max(map(len, payloads)) > self.max_message_size:
            return None
        try:
            messages: list[Any] = decode_many(payloads)
        except Exception:
            return None
        return messages


def _encode_compact(records: Sequence[Record]) -> bytes:
    """``records`` as a compact batch (see :class:`_Compact`)."""
    if len(records) == 1:
        # A flush of one message (every question and answer of a sequential ask):
        # its columns directly, without the head table's dict and six list passes.
        r = records[0]
        return _wire_encode(
            (COMPACT, [(r.recipient, r.sender)], [r.kind], [0], [r.serializer_id], [r.payload])
        )
    recipients = [r.recipient for r in records]
    senders = [r.sender for r in records]
    heads: dict[tuple[Any, Any], int] = {}
    setdefault = heads.setdefault
    heads_of = [setdefault(head, len(heads)) for head in zip(recipients, senders, strict=True)]
    return _wire_encode(
        (
            COMPACT,
            list(heads),
            [r.kind for r in records],
            heads_of,
            [r.serializer_id for r in records],
            [r.payload for r in records],
        )
    )

"""The values of gactors.persistence: errors, replies, metadata and what stores keep.

Nothing here imports msgspec or a store: :mod:`gactors.interfaces` and the plugin
registry refer to these names without pulling in an encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from gactors.exceptions import GactorsError

__all__ = [
    "AtomicWrite",
    "DeleteMessagesFailure",
    "DeleteMessagesSuccess",
    "DeleteSnapshotsFailure",
    "DeleteSnapshotsSuccess",
    "EventEnvelope",
    "FencedError",
    "PersistenceConflict",
    "PersistenceError",
    "Recovery",
    "RecoveryCompleted",
    "SaveSnapshotFailure",
    "SaveSnapshotSuccess",
    "SnapshotMetadata",
    "SnapshotOffer",
    "StateWrite",
    "StoredEvent",
    "StoredSnapshot",
    "StoredState",
    "WriteRejected",
    "check_persistence_id",
]


# -- errors ---------------------------------------------------------------------------------------
class PersistenceError(GactorsError):
    """Base class of the errors of :mod:`gactors.persistence` (a store that fails, a
    write that is refused, a recovery that cannot decode what is stored)."""


class PersistenceConflict(PersistenceError):
    """The store refused a write that does not follow what it has stored for that
    persistence id (another writer got there first): nothing of the write is stored."""


class FencedError(PersistenceError):
    """The store refused a write carrying a fencing token lower than one it has seen for
    that persistence id (an old incarnation woke up): nothing of the write is stored."""


class WriteRejected(PersistenceError):
    """The store (or the encoder, before it) refused one write for what it holds (an
    event that cannot be encoded, one that is too large): nothing of it is stored and
    the actor goes on (``on_persist_rejected``)."""


def check_persistence_id(value: Any) -> str:
    """``value`` if it is a usable persistence id (a non-empty str), else ``TypeError``
    / ``ValueError`` naming the problem."""
    if not isinstance(value, str):
        raise TypeError(
            f"a persistence_id must be a non-empty str, not {type(value).__name__} {value!r}"
        )
    if not value:
        raise ValueError("a persistence_id must be a non-empty str, not ''")
    return value


# -- what actors receive -------------------------------------------------------------------------
@dataclass(frozen=True)
class SnapshotMetadata:
    """Which snapshot: of ``persistence_id``, taken after event ``sequence_nr``, at
    ``timestamp`` (seconds since the epoch)."""

    persistence_id: str
    sequence_nr: int
    timestamp: float = 0.0


@dataclass(frozen=True)
class SnapshotOffer:
    """The first message of a recovery when a snapshot is stored: the state as it was
    after event ``metadata.sequence_nr``; the events after it follow."""

    metadata: SnapshotMetadata
    snapshot: Any


class _RecoveryCompleted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "RecoveryCompleted"

    def __reduce__(self) -> str:
        return "RecoveryCompleted"


RecoveryCompleted = _RecoveryCompleted()
"""The last message of a recovery (compare with ``is``); commands follow."""


@dataclass(frozen=True)
class SaveSnapshotSuccess:
    """Reply of :meth:`PersistentActor.save_snapshot`: the snapshot is stored."""

    metadata: SnapshotMetadata


@dataclass(frozen=True)
class SaveSnapshotFailure:
    """Reply of :meth:`PersistentActor.save_snapshot`: the snapshot is not stored."""

    metadata: SnapshotMetadata
    cause: BaseException


@dataclass(frozen=True)
class DeleteSnapshotsSuccess:
    """Reply of :meth:`PersistentActor.delete_snapshots`."""

    max_sequence_nr: int


@dataclass(frozen=True)
class DeleteSnapshotsFailure:
    """Reply of :meth:`PersistentActor.delete_snapshots`."""

    cause: BaseException
    max_sequence_nr: int


@dataclass(frozen=True)
class DeleteMessagesSuccess:
    """Reply of :meth:`PersistentActor.delete_messages`: the events up to
    ``to_sequence_nr`` are gone (the sequence numbers go on after the highest one)."""

    to_sequence_nr: int


@dataclass(frozen=True)
class DeleteMessagesFailure:
    """Reply of :meth:`PersistentActor.delete_messages`."""

    cause: BaseException
    to_sequence_nr: int


@dataclass(frozen=True)
class Recovery:
    """How a :class:`PersistentActor` recovers (its ``recovery`` class attribute).

    ``from_snapshot``: start from the latest snapshot (else replay every event);
    ``to_sequence_nr``: replay no event after it (None: all); ``replay_max``: replay at
    most that many events (None: all). New events always follow the highest stored
    sequence number, whatever was replayed.
    """

    from_snapshot: bool = True
    to_sequence_nr: int | None = None
    replay_max: int | None = None
    enabled: bool = True

    @classmethod
    def none(cls) -> Recovery:
        """No recovery at all: no snapshot, no event, straight to
        ``RecoveryCompleted``; sequence numbers still follow the stored ones."""
        return cls(from_snapshot=False, replay_max=0, enabled=False)

    def __post_init__(self) -> None:
        for name in ("to_sequence_nr", "replay_max"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"Recovery.{name} must be an int >= 0 or None, not {v!r}")


class EventEnvelope(NamedTuple):
    """One stored event as :mod:`gactors.persistence.query` returns it."""

    persistence_id: str
    sequence_nr: int
    event: Any
    timestamp: float


# -- what stores keep and receive ----------------------------------------------------------------
class AtomicWrite(NamedTuple):
    """One write to a journal: the events ``after_sequence_nr + 1 ...`` of
    ``persistence_id`` (encoded), all stored or none.

    The store refuses it with :class:`PersistenceConflict` unless its highest sequence
    number for the id is ``after_sequence_nr``, and with :class:`FencedError` when
    ``fencing_token`` (None: the writer has no lease) is lower than the highest token it
    stored for the id.
    """

    persistence_id: str
    after_sequence_nr: int
    fencing_token: int | None
    payloads: tuple[bytes, ...]
    timestamp: float


class StateWrite(NamedTuple):
    """One write to a durable-state store: ``persistence_id`` at revision
    ``after_revision + 1`` holds ``payload`` (None: the value is deleted; the revision
    still counts on). Refused like :class:`AtomicWrite`."""

    persistence_id: str
    after_revision: int
    fencing_token: int | None
    payload: bytes | None
    timestamp: float


class StoredEvent(NamedTuple):
    """One event as a journal returns it."""

    sequence_nr: int
    payload: bytes
    timestamp: float


class StoredSnapshot(NamedTuple):
    """One snapshot as a snapshot store returns it."""

    sequence_nr: int
    payload: bytes
    timestamp: float


class StoredState(NamedTuple):
    """A durable state as its store returns it (``payload`` None: deleted)."""

    revision: int
    payload: bytes | None
    timestamp: float

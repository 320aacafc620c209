"""Persistence: actors whose state survives any process (SPEC section 19, docs/persistence.md).

* :class:`PersistentActor` -- event sourcing: the actor stores events and is rebuilt
  from them (and from its latest snapshot) wherever it starts next.
* :class:`DurableStateActor` -- the whole state stored as one value, with a revision.
* One writer per persistence id, enforced by the store: every write names the sequence
  number (revision) it follows and carries the writer's fencing token, if any; a stale
  one is refused (:class:`PersistenceConflict`, :class:`FencedError`) and nothing of it
  is stored.
* Stores are plugins (:class:`~gactors.interfaces.IJournal`,
  :class:`~gactors.interfaces.ISnapshotStore`,
  :class:`~gactors.interfaces.IDurableStateStore`); built in: ``"sqlite"`` and
  ``"memory"`` (tests, with fault injection in :mod:`gactors.testkit.persistence`).
* :mod:`gactors.persistence.query` reads what is stored.

Needs ``gactors[persistence]`` (msgspec, for the encoding).
"""

from __future__ import annotations

from gactors.persistence._actor import PersistentActor
from gactors.persistence._durable import DurableStateActor
from gactors.persistence._extension import Persistence, PersistenceExtension
from gactors.persistence._model import (
    AtomicWrite,
    DeleteMessagesFailure,
    DeleteMessagesSuccess,
    DeleteSnapshotsFailure,
    DeleteSnapshotsSuccess,
    EventEnvelope,
    FencedError,
    PersistenceConflict,
    PersistenceError,
    Recovery,
    RecoveryCompleted,
    SaveSnapshotFailure,
    SaveSnapshotSuccess,
    SnapshotMetadata,
    SnapshotOffer,
    StateWrite,
    StoredEvent,
    StoredSnapshot,
    StoredState,
    WriteRejected,
)
from gactors.persistence._settings import PersistenceSettings

__all__ = [
    "AtomicWrite",
    "DeleteMessagesFailure",
    "DeleteMessagesSuccess",
    "DeleteSnapshotsFailure",
    "DeleteSnapshotsSuccess",
    "DurableStateActor",
    "EventEnvelope",
    "FencedError",
    "Persistence",
    "PersistenceConflict",
    "PersistenceError",
    "PersistenceExtension",
    "PersistenceSettings",
    "PersistentActor",
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
]

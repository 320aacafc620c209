"""The ``"memory"`` store: journal, snapshots and durable state in one process's memory.

For tests. One store per process, shared by every actor system (so a test can stop a
system and recover in another one); :mod:`gactors.testkit.persistence` clears it and
injects faults into it.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from typing import Any

from zope.interface import implementer

from gactors.interfaces import IDurableStateStore, IJournal, ISnapshotStore
from gactors.persistence._model import (
    AtomicWrite,
    FencedError,
    PersistenceConflict,
    PersistenceError,
    StateWrite,
    StoredEvent,
    StoredSnapshot,
    StoredState,
    WriteRejected,
)

__all__ = ["MemoryStore", "memory_store"]


class _Id:
    """What the store keeps of one persistence id."""

    __slots__ = ("events", "highest", "snapshots", "state", "token")

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []  # sorted by sequence number
        self.highest = 0
        self.token: int | None = None
        self.snapshots: list[StoredSnapshot] = []  # sorted by sequence number
        self.state: StoredState | None = None


def check_fence(pid: str, kept: int | None, token: int | None) -> None:
    """Raise :class:`FencedError` when ``token`` is older than the ``kept`` one."""
    if kept is not None and (token is None or token < kept):
        raise FencedError(
            f"persistence id {pid!r}: write with fencing token {token} refused, the store "
            f"has seen token {kept} (a newer incarnation writes this id)"
        )


@implementer(IJournal, ISnapshotStore, IDurableStateStore)
class MemoryStore:
    """Journal, snapshot store and durable state store in memory, with fault injection:
    :meth:`fail_next` and :meth:`reject_next` (see :mod:`gactors.testkit.persistence`)."""

    def __init__(self) -> None:
        self._ids: dict[str, _Id] = {}
        # Faults for the next writes: ("fail" | "reject", exception), oldest first.
        self._faults: deque[tuple[str, BaseException]] = deque()
        self.batches: list[int] = []
        """The size of every write batch received (for tests of batching)."""

    # -- faults -----------------------------------------------------------------------------
    def fail_next(self, cause: BaseException | None = None) -> None:
        """Make the next event or state write fail (as if the store were unreachable):
        ``on_persist_failure``; nothing is stored."""
        self._faults.append(("fail", cause or PersistenceError("injected failure (memory store)")))

    def reject_next(self, cause: BaseException | None = None) -> None:
        """Make the store refuse the next event or state write: ``on_persist_rejected``;
        nothing is stored."""
        self._faults.append(("reject", cause or WriteRejected("injected rejection (memory store)")))

    def clear(self) -> None:
        """Forget everything stored and every pending fault."""
        self._ids.clear()
        self._faults.clear()
        self.batches.clear()

    def _fault(self) -> tuple[str, BaseException] | None:
        return self._faults.popleft() if self._faults else None

    def _id(self, pid: str) -> _Id:
        rec = self._ids.get(pid)
        if rec is None:
            rec = self._ids[pid] = _Id()
        return rec

    # -- journal ----------------------------------------------------------------------------
    def write_batch(self, writes: Sequence[Any]) -> list[BaseException | None]:
        """Store event writes (:class:`AtomicWrite`) or state writes (:class:`StateWrite`)."""
        self.batches.append(len(writes))
        out: list[BaseException | None] = []
        for w in writes:
            fault = self._fault()
            if fault is not None:
                if fault[0] == "fail":
                    raise fault[1]
                out.append(fault[1])
                continue
            try:
                if isinstance(w, AtomicWrite):
                    self._append(w)
                else:
                    self._put_state(w)
                out.append(None)
            except PersistenceError as e:
                out.append(e)
        return out

    def _append(self, w: AtomicWrite) -> None:
        rec = self._id(w.persistence_id)
        if rec.highest != w.after_sequence_nr:
            raise PersistenceConflict(
                f"persistence id {w.persistence_id!r}: write after sequence number "
                f"{w.after_sequence_nr} refused, the store holds {rec.highest}"
            )
        check_fence(w.persistence_id, rec.token, w.fencing_token)
        for i, payload in enumerate(w.payloads, start=w.after_sequence_nr + 1):
            rec.events.append(StoredEvent(i, payload, w.timestamp))
        rec.highest = w.after_sequence_nr + len(w.payloads)
        if w.fencing_token is not None:
            rec.token = w.fencing_token

    def replay(
        self,
        persistence_id: str,
        from_sequence_nr: int,
        to_sequence_nr: int | None,
        max_count: int | None,
    ) -> list[StoredEvent]:
        rec = self._ids.get(persistence_id)
        if rec is None:
            return []
        start = bisect.bisect_left([e.sequence_nr for e in rec.events], from_sequence_nr)
        out: list[StoredEvent] = []
        for e in rec.events[start:]:
            if (to_sequence_nr is not None and e.sequence_nr > to_sequence_nr) or (
                max_count is not None and len(out) >= max_count
            ):
                break
            out.append(e)
        return out

    def highest_sequence_nr(self, persistence_id: str) -> int:
        rec = self._ids.get(persistence_id)
        return rec.highest if rec is not None else 0

    def fence(self, persistence_id: str, fencing_token: int) -> int:
        """Record ``fencing_token`` as the id's highest (:class:`FencedError` if a higher
        one is stored) and return the highest sequence number: what a recovering
        incarnation with a lease does first, so that an older one is refused from then
        on, even before the new one writes."""
        rec = self._id(persistence_id)
        check_fence(persistence_id, rec.token, fencing_token)
        rec.token = fencing_token
        return rec.highest

    def delete_to(
        self, persistence_id: str, to_sequence_nr: int, fencing_token: int | None
    ) -> None:
        rec = self._ids.get(persistence_id)
        if rec is None:
            return
        check_fence(persistence_id, rec.token, fencing_token)
        rec.events = [e for e in rec.events if e.sequence_nr > to_sequence_nr]

    def persistence_ids(self) -> list[str]:
        return [pid for pid, rec in self._ids.items() if rec.highest]

    # -- snapshots --------------------------------------------------------------------------
    def save(
        self,
        persistence_id: str,
        sequence_nr: int,
        timestamp: float,
        payload: bytes,
        fencing_token: int | None,
    ) -> None:
        rec = self._id(persistence_id)
        check_fence(persistence_id, rec.token, fencing_token)
        snaps = [s for s in rec.snapshots if s.sequence_nr != sequence_nr]
        snaps.append(StoredSnapshot(sequence_nr, payload, timestamp))
        snaps.sort(key=lambda s: s.sequence_nr)
        rec.snapshots = snaps

    def load(self, persistence_id: str, max_sequence_nr: int | None) -> StoredSnapshot | None:
        rec = self._ids.get(persistence_id)
        if rec is None:
            return None
        for s in reversed(rec.snapshots):
            if max_sequence_nr is None or s.sequence_nr <= max_sequence_nr:
                return s
        return None

    def delete(self, persistence_id: str, max_sequence_nr: int) -> None:
        rec = self._ids.get(persistence_id)
        if rec is not None:
            rec.snapshots = [s for s in rec.snapshots if s.sequence_nr > max_sequence_nr]

    # -- durable state ----------------------------------------------------------------------
    def _put_state(self, w: StateWrite) -> None:
        rec = self._id(w.persistence_id)
        revision = rec.state.revision if rec.state is not None else 0
        if revision != w.after_revision:
            raise PersistenceConflict(
                f"persistence id {w.persistence_id!r}: state write after revision "
                f"{w.after_revision} refused, the store holds revision {revision}"
            )
        check_fence(w.persistence_id, rec.token, w.fencing_token)
        rec.state = StoredState(w.after_revision + 1, w.payload, w.timestamp)
        if w.fencing_token is not None:
            rec.token = w.fencing_token

    def get(self, persistence_id: str) -> StoredState | None:
        rec = self._ids.get(persistence_id)
        return rec.state if rec is not None else None

    def close(self) -> None:
        """Nothing to release: the data stays for the next system of this process."""


_shared = MemoryStore()


def memory_store(settings: Any = None, system: Any = None) -> MemoryStore:
    """The factory of the ``"memory"`` plugins: the process's one :class:`MemoryStore`."""
    return _shared

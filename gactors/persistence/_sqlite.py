"""The ``"sqlite"`` store: journal, snapshots and durable state in one local file.

The embedded default for a system without a cluster (stdlib :mod:`sqlite3`, WAL).

**The hub never waits for the disk.** Every statement runs in a thread of gevent's
threadpool; the greenlet that asked waits for it, the hub and every other actor run on.
Writes go through one writer connection (SQLite has one writer at a time anyway), under
a real lock; reads open their own connections (WAL lets them read while the writer
writes). A batch of writes (all the writes of many actors gathered by
:mod:`gactors.persistence._extension`) is one transaction: one sync of the disk for the
whole batch, each write inside it under a savepoint so that a refused one stores
nothing and the others are kept.

**Durability.** ``synchronous=FULL``: a committed batch survives a crash of the process
and of the machine.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gevent import monkey
from gevent.hub import get_hub
from zope.interface import implementer

from gactors.interfaces import IDurableStateStore, IJournal, ISnapshotStore
from gactors.persistence._memory import check_fence
from gactors.persistence._model import (
    AtomicWrite,
    PersistenceConflict,
    PersistenceError,
    StateWrite,
    StoredEvent,
    StoredSnapshot,
    StoredState,
)

__all__ = ["SqliteStore", "sqlite_store"]

_log = logging.getLogger("gactors.persistence.sqlite")
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS persistence_ids (
    pid TEXT PRIMARY KEY,
    highest INTEGER NOT NULL DEFAULT 0,
    token INTEGER
);
CREATE TABLE IF NOT EXISTS events (
    pid TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (pid, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    pid TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (pid, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS states (
    pid TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    ts REAL NOT NULL,
    payload BLOB
);
"""

_Lock = monkey.get_original("threading", "Lock")


@implementer(IJournal, ISnapshotStore, IDurableStateStore)
class SqliteStore:
    """Journal, snapshot store and durable state store in the SQLite file ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = _Lock()
        self._writer: sqlite3.Connection | None = None
        self._users = 0
        self._run(self._open)

    # -- threads ----------------------------------------------------------------------------
    def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a thread of the hub's threadpool (this greenlet waits)."""
        return get_hub().threadpool.apply(fn, args)  # type: ignore[no-any-return]

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    def _open(self) -> None:
        with self._lock:
            if self._writer is not None:
                return
            try:
                conn = self._connect()
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                conn.executescript(_SCHEMA)
            except sqlite3.Error as e:
                raise PersistenceError(f"cannot open the SQLite store {self.path!r}: {e}") from e
            self._writer = conn

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            conn = self._writer
            if conn is None:
                raise PersistenceError(f"the SQLite store {self.path!r} is closed")
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._connect()
        try:
            return fn(conn)
        finally:
            conn.close()

    # -- writes -----------------------------------------------------------------------------
    def write_batch(self, writes: Sequence[Any]) -> list[BaseException | None]:
        """One transaction for the whole batch (:class:`AtomicWrite`\\ s or
        :class:`StateWrite`\\ s); a refused write is rolled back to its savepoint."""
        return self._run(self._write, lambda conn: [self._one(conn, w) for w in writes])

    @staticmethod
    def _one(conn: sqlite3.Connection, w: Any) -> BaseException | None:
        conn.execute("SAVEPOINT w")
        try:
            if isinstance(w, AtomicWrite):
                _append(conn, w)
            else:
                _put_state(conn, w)
        except PersistenceError as e:
            conn.execute("ROLLBACK TO w")
            conn.execute("RELEASE w")
            return e
        conn.execute("RELEASE w")
        return None

    def delete_to(self, persistence_id: str, to_sequence_nr: int, fencing_token: int | None) -> None:
        def go(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT token FROM persistence_ids WHERE pid = ?", (persistence_id,)
            ).fetchone()
            if row is None:
                return
            check_fence(persistence_id, row[0], fencing_token)
            conn.execute("DELETE FROM events WHERE pid = ? AND seq <= ?", (persistence_id, to_sequence_nr))

        self._run(self._write, go)

    def save(
        self,
        persistence_id: str,
        sequence_nr: int,
        timestamp: float,
        payload: bytes,
        fencing_token: int | None,
    ) -> None:
        def go(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT token FROM persistence_ids WHERE pid = ?", (persistence_id,)
            ).fetchone()
            check_fence(persistence_id, row[0] if row else None, fencing_token)
            conn.execute(
                "INSERT OR REPLACE INTO snapshots (pid, seq, ts, payload) VALUES (?, ?, ?, ?)",
                (persistence_id, sequence_nr, timestamp, payload),
            )

        self._run(self._write, go)

    def delete(self, persistence_id: str, max_sequence_nr: int) -> None:
        self._run(
            self._write,
            lambda conn: conn.execute(
                "DELETE FROM snapshots WHERE pid = ? AND seq <= ?", (persistence_id, max_sequence_nr)
            ),
        )

    # -- reads ------------------------------------------------------------------------------
    def replay(
        self,
        persistence_id: str,
        from_sequence_nr: int,
        to_sequence_nr: int | None,
        max_count: int | None,
    ) -> list[StoredEvent]:
        upper = to_sequence_nr if to_sequence_nr is not None else (1 << 62)
        limit = max_count if max_count is not None else -1

        def go(conn: sqlite3.Connection) -> list[StoredEvent]:
            rows = conn.execute(
                "SELECT seq, payload, ts FROM events WHERE pid = ? AND seq >= ? AND seq <= ? "
                "ORDER BY seq LIMIT ?",
                (persistence_id, from_sequence_nr, upper, limit),
            ).fetchall()
            return [StoredEvent(s, bytes(p), t) for s, p, t in rows]

        return self._run(self._read, go)

    def highest_sequence_nr(self, persistence_id: str) -> int:
        def go(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT highest FROM persistence_ids WHERE pid = ?", (persistence_id,)
            ).fetchone()
            return int(row[0]) if row else 0

        return self._run(self._read, go)

    def persistence_ids(self) -> list[str]:
        return self._run(
            self._read,
            lambda conn: [
                r[0]
                for r in conn.execute(
                    "SELECT pid FROM persistence_ids WHERE highest > 0 ORDER BY pid"
                ).fetchall()
            ],
        )

    def load(self, persistence_id: str, max_sequence_nr: int | None) -> StoredSnapshot | None:
        upper = max_sequence_nr if max_sequence_nr is not None else (1 << 62)

        def go(conn: sqlite3.Connection) -> StoredSnapshot | None:
            row = conn.execute(
                "SELECT seq, payload, ts FROM snapshots WHERE pid = ? AND seq <= ? "
                "ORDER BY seq DESC LIMIT 1",
                (persistence_id, upper),
            ).fetchone()
            return StoredSnapshot(row[0], bytes(row[1]), row[2]) if row else None

        return self._run(self._read, go)

    def get(self, persistence_id: str) -> StoredState | None:
        def go(conn: sqlite3.Connection) -> StoredState | None:
            row = conn.execute(
                "SELECT revision, payload, ts FROM states WHERE pid = ?", (persistence_id,)
            ).fetchone()
            if row is None:
                return None
            return StoredState(row[0], bytes(row[1]) if row[1] is not None else None, row[2])

        return self._run(self._read, go)

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Release one user; the last one closes the writer connection."""
        with _stores_lock:
            self._users -= 1
            if self._users > 0:
                return
            _stores.pop(self.path, None)

        def go() -> None:
            with self._lock:
                conn, self._writer = self._writer, None
                if conn is not None:
                    conn.close()

        self._run(go)


def _append(conn: sqlite3.Connection, w: AtomicWrite) -> None:
    pid = w.persistence_id
    row = conn.execute("SELECT highest, token FROM persistence_ids WHERE pid = ?", (pid,)).fetchone()
    highest, token = (row[0], row[1]) if row else (0, None)
    if highest != w.after_sequence_nr:
        raise PersistenceConflict(
            f"persistence id {pid!r}: write after sequence number {w.after_sequence_nr} "
            f"refused, the store holds {highest}"
        )
    check_fence(pid, token, w.fencing_token)
    new_token = w.fencing_token if w.fencing_token is not None else token
    n = len(w.payloads)
    conn.executemany(
        "INSERT INTO events (pid, seq, ts, payload) VALUES (?, ?, ?, ?)",
        [(pid, w.after_sequence_nr + 1 + i, w.timestamp, p) for i, p in enumerate(w.payloads)],
    )
    conn.execute(
        "INSERT INTO persistence_ids (pid, highest, token) VALUES (?, ?, ?) "
        "ON CONFLICT (pid) DO UPDATE SET highest = excluded.highest, token = excluded.token",
        (pid, w.after_sequence_nr + n, new_token),
    )


def _put_state(conn: sqlite3.Connection, w: StateWrite) -> None:
    pid = w.persistence_id
    row = conn.execute("SELECT revision FROM states WHERE pid = ?", (pid,)).fetchone()
    revision = row[0] if row else 0
    if revision != w.after_revision:
        raise PersistenceConflict(
            f"persistence id {pid!r}: state write after revision {w.after_revision} "
            f"refused, the store holds revision {revision}"
        )
    trow = conn.execute("SELECT token FROM persistence_ids WHERE pid = ?", (pid,)).fetchone()
    token = trow[0] if trow else None
    check_fence(pid, token, w.fencing_token)
    conn.execute(
        "INSERT INTO states (pid, revision, ts, payload) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (pid) DO UPDATE SET revision = excluded.revision, ts = excluded.ts, "
        "payload = excluded.payload",
        (pid, w.after_revision + 1, w.timestamp, w.payload),
    )
    if w.fencing_token is not None:
        conn.execute(
            "INSERT INTO persistence_ids (pid, highest, token) VALUES (?, 0, ?) "
            "ON CONFLICT (pid) DO UPDATE SET token = excluded.token",
            (pid, w.fencing_token),
        )


# One store object (one writer connection) per file in this process, shared by the
# systems (and the three store kinds) that use it.
_stores: dict[str, SqliteStore] = {}
_stores_lock = _Lock()


def sqlite_store(settings: Any, system: Any = None) -> SqliteStore:
    """The factory of the ``"sqlite"`` plugins: the store of ``settings.path``."""
    path = settings.path
    with _stores_lock:
        store = _stores.get(path)
        if store is not None:
            store._users += 1
            return store
    store = SqliteStore(path)
    with _stores_lock:
        other = _stores.get(path)
        if other is not None:  # opened meanwhile by another greenlet
            other._users += 1
            return other
        store._users = 1
        _stores[path] = store
        return store

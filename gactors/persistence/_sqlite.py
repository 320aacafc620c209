"""The ``"sqlite"`` store: journal, snapshots and durable state in one local file.

The embedded default for a system without a cluster (stdlib :mod:`sqlite3`, WAL).

**The hub never waits for the disk.** Every statement runs in a thread of gevent's
threadpool; the greenlet that asked waits for it, the hub and every other actor run on.
Writes go through one writer connection (SQLite has one writer at a time anyway), under
a real lock; reads open their own connections (WAL lets them read while the writer
writes). A batch of writes (all the writes of many actors gathered by
:mod:`gactors.persistence._extension`) is one transaction: one sync of the disk for the
whole batch: the checks of all its writes are one query, the accepted writes a few
``executemany`` calls, so a refused write stores nothing and the others are kept.

**Durability.** ``synchronous=FULL``: a committed batch survives a crash of the process
and of the machine.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

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


def _capture(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
    try:
        return True, fn(*args)
    except Exception as e:
        return False, e


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
_local = monkey.get_original("_thread", "_local")


@implementer(IJournal, ISnapshotStore, IDurableStateStore)
class SqliteStore:
    """Journal, snapshot store and durable state store in the SQLite file ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = _Lock()
        self._local = _local()  # this store's reader connection in each thread
        self._readers: list[sqlite3.Connection] = []
        self._writer: sqlite3.Connection | None = None
        self._users = 0
        self._run(self._open)

    # -- threads ----------------------------------------------------------------------------
    def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a thread of the hub's threadpool (this greenlet waits)."""
        # The exception comes back as a value and is raised here: raised in the thread,
        # gevent would also print it (a refused write is no error of the hub's).
        ok, value = get_hub().threadpool.apply(_capture, (fn, args))
        if not ok:
            raise value
        return cast(T, value)  # what fn returned (gevent's threadpool is untyped)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
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

    def _query(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` on a reader connection, in a thread of the hub's threadpool."""
        return cast(T, self._run(self._read, fn))  # (mypy cannot solve T through _run)

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # One reader connection per threadpool thread, kept (opening one per read costs
        # more than most reads); WAL lets them read while the writer writes.
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._writer is None:
                raise PersistenceError(f"the SQLite store {self.path!r} is closed")
            conn = self._local.conn = self._connect()
            with self._lock:
                self._readers.append(conn)
        return fn(conn)

    # -- writes -----------------------------------------------------------------------------
    def write_batch(self, writes: Sequence[Any]) -> list[BaseException | None]:
        """One transaction for the whole batch (:class:`AtomicWrite`\\ s or
        :class:`StateWrite`\\ s, at most one per persistence id).

        The checks of all writes are one query, the accepted writes a few
        ``executemany`` calls: a handful of statements per batch whatever its size,
        which keeps the time this thread holds the GIL (and so delays the hub) short."""
        if not writes:
            return []
        if isinstance(writes[0], AtomicWrite):
            return self._run(self._write, lambda conn: _append_all(conn, writes))
        return self._run(self._write, lambda conn: _put_states(conn, writes))

    def delete_to(
        self, persistence_id: str, to_sequence_nr: int, fencing_token: int | None
    ) -> None:
        def go(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT token FROM persistence_ids WHERE pid = ?", (persistence_id,)
            ).fetchone()
            if row is None:
                return
            check_fence(persistence_id, row[0], fencing_token)
            conn.execute(
                "DELETE FROM events WHERE pid = ? AND seq <= ?", (persistence_id, to_sequence_nr)
            )

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
                "DELETE FROM snapshots WHERE pid = ? AND seq <= ?",
                (persistence_id, max_sequence_nr),
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

        return self._query(go)

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

        return self._query(go)

    def get(self, persistence_id: str) -> StoredState | None:
        def go(conn: sqlite3.Connection) -> StoredState | None:
            row = conn.execute(
                "SELECT revision, payload, ts FROM states WHERE pid = ?", (persistence_id,)
            ).fetchone()
            if row is None:
                return None
            return StoredState(row[0], bytes(row[1]) if row[1] is not None else None, row[2])

        return self._query(go)

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Release one user; the last one closes the writer connection."""
        with _stores_lock:
            self._users -= 1
            if self._users > 0:
                return
            if _stores.get(self.path) is self:
                del _stores[self.path]

        def go() -> None:
            with self._lock:
                conn, self._writer = self._writer, None
                readers, self._readers = self._readers, []
            for c in [*readers, conn]:
                if c is not None:
                    c.close()

        self._run(go)


_CHUNK = 500  # ids per IN (...) query, far below SQLite's limit on variables


def _rows(conn: sqlite3.Connection, sql: str, pids: list[str]) -> dict[str, tuple[Any, ...]]:
    """``{pid: row}`` of ``sql`` (which selects pid first and ends with ``IN``)."""
    out: dict[str, tuple[Any, ...]] = {}
    for i in range(0, len(pids), _CHUNK):
        chunk = pids[i : i + _CHUNK]
        q = f"{sql} ({', '.join('?' * len(chunk))})"
        for row in conn.execute(q, chunk):
            out[row[0]] = row
    return out


def _refusal(
    pid: str, after: int, stored: int, kept: int | None, token: int | None, what: str
) -> PersistenceError | None:
    if stored != after:
        return PersistenceConflict(
            f"persistence id {pid!r}: {what} after {after} refused, the store holds {stored}"
        )
    try:
        check_fence(pid, kept, token)
    except PersistenceError as e:
        return e
    return None


def _append_all(
    conn: sqlite3.Connection, writes: Sequence[AtomicWrite]
) -> list[BaseException | None]:
    known = _rows(
        conn,
        "SELECT pid, highest, token FROM persistence_ids WHERE pid IN",
        [w.persistence_id for w in writes],
    )
    results: list[BaseException | None] = []
    events: list[tuple[str, int, float, bytes]] = []
    heads: list[tuple[str, int, int | None]] = []
    for w in writes:
        pid = w.persistence_id
        row = known.get(pid)
        highest, token = (row[1], row[2]) if row else (0, None)
        refused = _refusal(
            pid, w.after_sequence_nr, highest, token, w.fencing_token, "write after sequence number"
        )
        results.append(refused)
        if refused is not None:
            continue
        seq = w.after_sequence_nr
        for payload in w.payloads:
            seq += 1
            events.append((pid, seq, w.timestamp, payload))
        heads.append((pid, seq, w.fencing_token if w.fencing_token is not None else token))
    if heads:
        conn.executemany("INSERT INTO events (pid, seq, ts, payload) VALUES (?, ?, ?, ?)", events)
        conn.executemany(
            "INSERT INTO persistence_ids (pid, highest, token) VALUES (?, ?, ?) "
            "ON CONFLICT (pid) DO UPDATE SET highest = excluded.highest, token = excluded.token",
            heads,
        )
    return results


def _put_states(
    conn: sqlite3.Connection, writes: Sequence[StateWrite]
) -> list[BaseException | None]:
    pids = [w.persistence_id for w in writes]
    revisions = _rows(conn, "SELECT pid, revision FROM states WHERE pid IN", pids)
    tokens = _rows(conn, "SELECT pid, token FROM persistence_ids WHERE pid IN", pids)
    results: list[BaseException | None] = []
    rows: list[tuple[str, int, float, bytes | None]] = []
    fences: list[tuple[str, int]] = []
    for w in writes:
        pid = w.persistence_id
        rev = revisions[pid][1] if pid in revisions else 0
        kept = tokens[pid][1] if pid in tokens else None
        refused = _refusal(
            pid, w.after_revision, rev, kept, w.fencing_token, "state write after revision"
        )
        results.append(refused)
        if refused is not None:
            continue
        rows.append((pid, w.after_revision + 1, w.timestamp, w.payload))
        if w.fencing_token is not None:
            fences.append((pid, w.fencing_token))
    if rows:
        conn.executemany(
            "INSERT INTO states (pid, revision, ts, payload) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (pid) DO UPDATE SET revision = excluded.revision, ts = excluded.ts, "
            "payload = excluded.payload",
            rows,
        )
    if fences:
        conn.executemany(
            "INSERT INTO persistence_ids (pid, highest, token) VALUES (?, 0, ?) "
            "ON CONFLICT (pid) DO UPDATE SET token = excluded.token",
            fences,
        )
    return results


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
            store._users += 1  # noqa: SLF001
            return store
    store = SqliteStore(path)
    with _stores_lock:
        other = _stores.get(path)
        if other is None:
            store._users = 1  # noqa: SLF001
            _stores[path] = store
            return store
        other._users += 1  # noqa: SLF001
    # Opened meanwhile by another greenlet: use that one, release ours.
    store._users = 1  # noqa: SLF001
    store.close()
    return other

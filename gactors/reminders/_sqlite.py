"""Reminders of a single process in the SQLite file of SPEC section 19.

One table ``gactors_reminders`` (path, name) -> next due time (epoch ms), period,
misfire and the encoded message, with an index on the due time: the tick asks
``due <= now`` once per tick. Every call runs in gevent's thread pool (the hub never
waits for the disk) on one connection guarded by a lock; ``synchronous=FULL`` in WAL
mode, so a registration that returned is on disk.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar, cast

import gevent
from gevent.lock import Semaphore

__all__ = ["SqliteReminderStore"]

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS gactors_reminders (
  path TEXT NOT NULL, name TEXT NOT NULL, due INTEGER NOT NULL, record BLOB NOT NULL,
  PRIMARY KEY (path, name));
CREATE INDEX IF NOT EXISTS gactors_reminders_due ON gactors_reminders (due);
"""


class SqliteReminderStore:
    """The reminders table in the file ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = Semaphore()
        self._db: sqlite3.Connection | None = None

    def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock:

            def call() -> _T:
                db = self._db
                if db is None:
                    db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute("PRAGMA synchronous=FULL")
                    db.executescript(_SCHEMA)
                    self._db = db
                return fn(db)

            # gevent is untyped: apply() returns what call() returns.
            return cast(_T, gevent.get_hub().threadpool.apply(call))

    def register(self, path: str, name: str, due: int, record: bytes) -> None:
        self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO gactors_reminders (path, name, due, record) "
                "VALUES (?, ?, ?, ?)",
                (path, name, due, record),
            )
        )

    def unregister(self, path: str, name: str) -> bool:
        cur = self._run(
            lambda db: db.execute(
                "DELETE FROM gactors_reminders WHERE path = ? AND name = ?", (path, name)
            )
        )
        return bool(cur.rowcount)

    def names(self, path: str) -> list[str]:
        rows = self._run(
            lambda db: db.execute(
                "SELECT name FROM gactors_reminders WHERE path = ? ORDER BY name", (path,)
            ).fetchall()
        )
        return [r[0] for r in rows]

    def due(self, now: int, limit: int) -> list[tuple[str, str, int, bytes]]:
        return self._run(
            lambda db: db.execute(
                "SELECT path, name, due, record FROM gactors_reminders WHERE due <= ? "
                "ORDER BY due LIMIT ?",
                (now, limit),
            ).fetchall()
        )

    def advance(self, path: str, name: str, due: int, record: bytes, nxt: int | None) -> bool:
        def go(db: sqlite3.Connection) -> Any:
            if nxt is None:
                return db.execute(
                    "DELETE FROM gactors_reminders WHERE path = ? AND name = ? AND due = ? "
                    "AND record = ?",
                    (path, name, due, record),
                )
            return db.execute(
                "UPDATE gactors_reminders SET due = ? WHERE path = ? AND name = ? AND due = ? "
                "AND record = ?",
                (nxt, path, name, due, record),
            )

        return bool(self._run(go).rowcount)

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

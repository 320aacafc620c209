"""Order numbers in SQLite, fenced: a writer with an older fencing token is refused.

The allocator of the shop is a cluster singleton. Its lease makes it run on one worker
at a time *as far as a lease can promise*: a worker that was paused (a long GC, a
stopped VM, a swapped-out process) may still believe it holds the lease after another
worker took over, and a write it had already sent may arrive late. The database is the
last line: every write carries the allocator's fencing token
(``self.context.fencing_token``), which only grows from one lease holder to the next,
and the database refuses a write whose token is older than the newest it has seen.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


class StaleWriter(Exception):
    """The database holds a newer fencing token: another allocator took over since."""


def open_orders_db(path: Path | str) -> sqlite3.Connection:
    """The counter table, created on first use (any worker may be the first)."""
    db = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS counter ("
        " id INTEGER PRIMARY KEY CHECK (id = 1),"
        " last INTEGER NOT NULL,"  # the last order number handed out
        " token INTEGER NOT NULL)"  # the newest fencing token that wrote it
    )
    db.execute("INSERT OR IGNORE INTO counter (id, last, token) VALUES (1, 0, 0)")
    return db


def allocate(db: sqlite3.Connection, token: int) -> int:
    """The next order number, written under ``token``.

    Raises :class:`StaleWriter` (and writes nothing) if a writer with a newer token
    wrote first.
    """
    # One statement, so the check and the increment are atomic in the database, whatever
    # the allocators believe about their leases. `<=`: the same holder writes many times.
    row = db.execute(
        "UPDATE counter SET last = last + 1, token = ? WHERE id = 1 AND token <= ? RETURNING last",
        (token, token),
    ).fetchone()
    if row is None:
        (newest,) = db.execute("SELECT token FROM counter WHERE id = 1").fetchone()
        raise StaleWriter(f"fencing token {token} is older than {newest}")
    return int(row[0])


def last_order(db: sqlite3.Connection) -> tuple[int, int]:
    """(last order number, newest fencing token) as the database has them."""
    last, token = db.execute("SELECT last, token FROM counter WHERE id = 1").fetchone()
    return int(last), int(token)

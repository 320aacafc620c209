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
    # The number of each order placed through the ReliableSender: its id is the
    # idempotency key, so a copy processed again (a new allocator incarnation has no
    # books of what the last one processed) gets the number it already has.
    db.execute(
        "CREATE TABLE IF NOT EXISTS orders ("
        " order_id TEXT PRIMARY KEY, number INTEGER NOT NULL, user TEXT NOT NULL)"
    )
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


def place(db: sqlite3.Connection, token: int, order_id: str, user: str) -> tuple[int, bool]:
    """The number of order ``order_id``: allocated under ``token`` the first time,
    the same one again after. Returns (number, True if allocated now). Raises
    :class:`StaleWriter` (and writes nothing) like :func:`allocate`."""
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute("SELECT number FROM orders WHERE order_id = ?", (order_id,)).fetchone()
        if row is not None:
            db.execute("COMMIT")
            return int(row[0]), False
        number = allocate(db, token)
        db.execute(
            "INSERT INTO orders (order_id, number, user) VALUES (?, ?, ?)",
            (order_id, number, user),
        )
        db.execute("COMMIT")
        return number, True
    except BaseException:
        db.execute("ROLLBACK")
        raise


def number_of(db: sqlite3.Connection, order_id: str) -> int | None:
    """The number order ``order_id`` got, or None while it is not allocated."""
    row = db.execute("SELECT number FROM orders WHERE order_id = ?", (order_id,)).fetchone()
    return None if row is None else int(row[0])

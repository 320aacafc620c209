"""Backoff supervision: retry a connection after growing delays, not in a tight loop.

Run: python examples/backoff.py

A ``Connection`` actor connects in ``pre_start`` and fails while the database is down.
Restarting it at once would hammer the database; a ``BackoffSupervisor`` starts a new
one after 0.1 s, 0.2 s, 0.4 s, ... (plus up to 20 % random jitter) until it connects.
"""

from gevent import monkey

monkey.patch_all()

import logging  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from gactors import Actor, ActorRef, ActorSystem, Props  # noqa: E402
from gactors.backoff import BackoffOpts, BackoffSupervisor  # noqa: E402

START = time.monotonic()


def elapsed() -> str:
    return f"{time.monotonic() - START:5.2f} s"


class Database:
    """A stand-in for a database that comes back up after ``down_for`` seconds."""

    def __init__(self, down_for: float) -> None:
        self.up_at = time.monotonic() + down_for

    def connect(self) -> str:
        if time.monotonic() < self.up_at:
            raise ConnectionRefusedError("database is down")
        return "connection #1"


@dataclass(frozen=True)
class Connected:
    attempt: int


class Connection(Actor):
    attempts = 0  # class-level, so it counts across instances (each attempt is one)

    def __init__(self, db: Database) -> None:
        self.db = db

    def pre_start(self) -> None:
        Connection.attempts += 1
        print(f"{elapsed()}  attempt {Connection.attempts}: connecting...")
        self.conn = self.db.connect()  # raises while the database is down
        # Messages to the parent (the backoff supervisor) go on to *its* parent.
        self.context.parent.tell(Connected(Connection.attempts))

    def receive(self, message: Any) -> None:
        self.sender.tell(f"{message!r} via {self.conn}")


class App(Actor):
    """Owns the backoff supervisor and tells whoever asks once we are connected."""

    def __init__(self, db: Database) -> None:
        opts = (
            BackoffOpts.on_stop(
                Props(Connection, db),
                "connection",
                min_backoff=0.1,
                max_backoff=2.0,
                random_factor=0.2,
            )
            # A failure in pre_start stops the child; on_stop then backs off. Without
            # this the default strategy would restart it at once.
            .with_default_stopping_strategy()
        )
        self.db_ref = self.context.actor_of(BackoffSupervisor.props(opts), "db")
        self.connected: Connected | None = None
        self.waiting: list[ActorRef] = []

    def receive(self, message: Any) -> None:
        if isinstance(message, Connected):
            print(f"{elapsed()}  connected on attempt {message.attempt}")
            self.connected = message
            for asker in self.waiting:
                asker.tell(message)
        elif message == "await-connected":
            if self.connected is not None:
                self.sender.tell(self.connected)
            else:
                self.waiting.append(self.sender)  # reply once connected
        elif message == "db":
            self.sender.tell(self.db_ref)
        else:
            self.unhandled(message)


def main() -> None:
    # Each failed attempt is logged by gactors; the prints above tell the story.
    logging.getLogger("gactors").setLevel(logging.CRITICAL)
    with ActorSystem("backoff") as system:
        app = system.actor_of(Props(App, Database(down_for=1.0)), "app")
        connected = app.ask("await-connected", timeout=10.0)
        db = app.ask("db", timeout=2.0)
        # The supervisor forwards ordinary messages to its current child.
        print(db.ask("SELECT 1", timeout=2.0))
        # (The restart count goes back to 0 once the child has run for min_backoff: the
        # default auto reset. GetRestartCount asks the supervisor for it.)
        print(f"connected after {connected.attempt - 1} backoff restarts")


if __name__ == "__main__":
    main()

"""A process that persists without pause into a SQLite file, for the restart test.

``python _sqlite_writer.py PATH N``: N persistent actors ``w0`` ... each persisting
1, 2, 3, ... one event after the other; every handler that ran prints ``"<id> <n>"``
(a line the parent reads: that event was confirmed). Runs until it is killed.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402

from gactors import ActorSystem, Props  # noqa: E402
from gactors.persistence import PersistentActor, RecoveryCompleted  # noqa: E402


class Writer(PersistentActor):
    def __init__(self, pid: str) -> None:
        self.persistence_id = pid

    def receive_recover(self, event: Any) -> None:
        if event is RecoveryCompleted:
            self.ref.tell(self.last_sequence_nr + 1)

    def receive_command(self, n: Any) -> None:
        self.persist(n, self.confirmed)

    def confirmed(self, n: int) -> None:
        os.write(1, f"{self.persistence_id} {n}\n".encode())
        self.ref.tell(n + 1)


def main() -> None:
    path, n = sys.argv[1], int(sys.argv[2])
    system = ActorSystem("writer", config={"persistence": {"path": path}})
    for i in range(n):
        system.actor_of(Props(Writer, f"w{i}"))
    os.write(1, b"started\n")
    while True:
        gevent.sleep(1)


if __name__ == "__main__":
    main()

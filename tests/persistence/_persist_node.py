"""A cluster node in a process of its own whose sharded entities persist, for the fault
tests of ``test_redis_faults.py``.

``python _persist_node.py URL NAME CLUSTER_JSON BOOK`` joins the cluster NAME at URL (the
rest of the ``cluster`` table as JSON; persistence defaults to the redis store on the
cluster's server), starts the region of type ``Acc`` whose entities are
:class:`Account`\\ s, prints ``{"address": ..., "pid": ...}``, then reads one JSON command
per line on stdin:

* ``{"cmd": "send", "n": N, "rate": R, "entities": E, "base": B}``: tells
  ``("add", B + i)`` to entity ``a<i % E>`` for i in 0..N-1, R a second (paced by the
  clock, so a process that was paused catches up in a burst); answers ``{"sent": N}``.
* ``{"cmd": "slow-store", "delay": D}``: from now on every batch of journal writes
  waits D seconds before it goes to the server (a slow link: writes are always in
  flight), and each write's outcome is booked: ``W <pid> <after seq> <token> ok`` or
  ``W <pid> <after seq> <token> <error type>``. Answers ``{"slow": D}``.

The books (file BOOK, one ``os.write`` per line, so a SIGKILL loses at most the line
being written): ``H <entity> <seq> <value> <token>`` when the handler of a persisted
command ran (both events of the command are confirmed: the command persists
``("v", value, 0)`` and ``("v", value, 1)`` with ``persist_all``), ``R <entity> <seq>
<token>`` when an incarnation completed its recovery, ``F <entity> <value> <error
type>`` when a write failed (``on_persist_failure``).
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import json
import logging
import os
import sys
import time
from typing import Any

import gevent
from gevent.fileobject import FileObject

from gactors import ActorSystem, Props
from gactors.cluster import ClusterSharding
from gactors.cluster._access import cluster_node
from gactors.persistence import Persistence, PersistentActor, RecoveryCompleted
from gactors.persistence._redis_store import redis_store


class Books:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")


class Account(PersistentActor):
    """Persists two events per ``("add", value)``; its persistence id is the default
    ``"Acc|<entity id>"`` and its writes carry its shard lease's token."""

    def __init__(self, books: Books) -> None:
        self.books = books
        self.values: list[int] = []

    def receive_recover(self, event: Any) -> None:
        if event is RecoveryCompleted:
            self.books.write(
                f"R {self.context.entity_id} {self.last_sequence_nr} {self.context.fencing_token}"
            )
        elif event[2] == 0:
            self.values.append(event[1])

    def receive_command(self, message: Any) -> None:
        if isinstance(message, tuple) and message[0] == "add":
            value = message[1]
            self.persist_all([("v", value, 0), ("v", value, 1)], self._handled)

    def _handled(self, event: Any) -> None:
        if event[2] == 1:
            self.values.append(event[1])
            self.books.write(
                f"H {self.context.entity_id} {self.last_sequence_nr} {event[1]} "
                f"{self.context.fencing_token}"
            )

    def on_persist_failure(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        self.books.write(f"F {self.context.entity_id} {event[1]} {type(cause).__name__}")
        super().on_persist_failure(cause, event, sequence_nr)


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _send(system: ActorSystem, n: int, rate: float, entities: int, base: int) -> None:
    sharding = ClusterSharding(system)
    refs = [sharding.entity_ref("Acc", f"a{k}") for k in range(entities)]
    start = time.monotonic()
    i = 0
    while i < n and not system.when_terminated.done():
        refs[i % entities].tell(("add", base + i))
        i += 1
        gevent.sleep(max(0.0, start + i / rate - time.monotonic()))
    emit({"sent": i})


def _slow_store(system: ActorSystem, books: Books, delay: float) -> None:
    persistence = Persistence.get(system)
    journal = persistence.journal
    # A store of its own for the slow writes: the system's closes when the system
    # terminates (a downed node does at once), and the point is what the server says
    # to a write that arrives late, not what a closed connection does.
    own = redis_store(persistence.settings, system)

    def slow(writes: Any) -> Any:
        gevent.sleep(delay)
        try:
            results = own.write_batch(writes)
        except Exception as e:
            results = [e] * len(writes)
        for w, r in zip(writes, results, strict=True):
            outcome = "ok" if r is None else type(r).__name__
            books.write(f"W {w.persistence_id} {w.after_sequence_nr} {w.fencing_token} {outcome}")
        return results

    journal.write_batch = slow


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    url, name, extra, book_path = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    books = Books(book_path)
    system = ActorSystem(name, config={"cluster": {"url": url, **extra}})
    ClusterSharding(system).start("Acc", Props(Account, books), passivate_idle_after=None)
    node = cluster_node(system)
    emit({"address": str(node.address), "pid": os.getpid()})

    def commands() -> None:
        for line in FileObject(sys.stdin.fileno(), "r"):
            cmd = json.loads(line)
            if cmd["cmd"] == "send":
                gevent.spawn(_send, system, cmd["n"], cmd["rate"], cmd["entities"], cmd["base"])
            elif cmd["cmd"] == "slow-store":
                _slow_store(system, books, cmd["delay"])
                emit({"slow": cmd["delay"]})

    gevent.spawn(commands)
    system.when_terminated.get()
    gevent.sleep(3.0)  # slow writes in flight reach the server and are booked
    emit({"terminated": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())

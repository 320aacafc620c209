"""A cluster node in a process of its own for the reliable-delivery fault tests
(``test_delivery_faults.py``).

``python _reliable_node.py URL NAME CLUSTER_JSON BOOK ROLE``:

* ROLE ``host``: hosts the sharded type ``Rel``, whose entities are :class:`Tally`
  (``ReliableEntity`` + ``PersistentActor`` on the cluster's redis store). Books
  ``H <entity> <producer> <seq> <value>`` when the handler of a processed message ran.
  ``{"cmd": "leave"}`` on stdin: leave the cluster gracefully (its shards are handed
  over); it prints ``{"left": true}`` once its system terminated.
* ROLE ``sender``: a proxy of ``Rel`` with a durable :class:`ReliableSender` (producer
  ``P``). After its recovery it prints ``{"queued": K}``: how many messages it has
  queued over all its lives (message i goes to entity ``r<i % E>``, one at a time, so
  what is queued is always 0..K-1). Commands (one JSON per line on stdin):
  ``{"cmd": "stream", "start": S, "n": N, "entities": E, "rate": R}`` sends i = S..N-1
  (R a second at most) and answers ``{"sent": N}``; ``{"cmd": "drain"}`` answers
  ``{"drained": ..., "resent": ...}`` once nothing is unconfirmed.

Every node prints ``{"address": ..., "pid": ...}`` first. Books are written with one
``os.write`` per line, so a SIGKILL loses at most the line being written.
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
from gactors.cluster import Cluster, ClusterSharding
from gactors.cluster._access import cluster_node
from gactors.delivery import ReliableEntity, ReliableSender
from gactors.persistence import PersistentActor


class Books:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")


class Tally(ReliableEntity, PersistentActor):
    """Persists every value it gets; its journal is what the test checks."""

    def __init__(self, books: Books) -> None:
        self.books = books
        self.count = 0

    def receive_recover(self, event: Any) -> None:
        if isinstance(event, int):
            self.count += 1

    def receive_command(self, message: Any) -> None:
        d = self.delivery
        assert d is not None
        self.persist(message, lambda v: self._handled(v, d.producer_id, d.sequence_nr))

    def _handled(self, value: int, producer: str, seq: int) -> None:
        self.count += 1
        self.books.write(f"H {self.context.entity_id} {producer} {seq} {value}")


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _stream(sender: ReliableSender, start: int, n: int, entities: int, rate: float) -> None:
    t0 = time.monotonic()
    for i in range(start, n):
        sender.send(f"r{i % entities}", i)
        gevent.sleep(max(0.0, t0 + (i - start + 1) / rate - time.monotonic()))
    emit({"sent": n})


def _drain(sender: ReliableSender) -> None:
    while any(sender.pending(e) for e in list(sender.protocol.queues)):
        gevent.sleep(0.1)
    emit({"drained": True, "resent": sender.stats.resent})


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    url, name, extra, book_path, role = sys.argv[1:6]
    books = Books(book_path)
    cfg = json.loads(extra)
    system = ActorSystem(name, config={"cluster": {"url": url, "roles": [role], **cfg}})
    sharding = ClusterSharding(system)
    node = cluster_node(system)
    emit({"address": str(node.address), "pid": os.getpid()})
    if role == "host":
        sharding.start("Rel", Props(Tally, books), role="host", passivate_idle_after=None)

        def host_commands() -> None:
            for line in FileObject(sys.stdin.fileno(), "r"):
                if json.loads(line)["cmd"] == "leave":
                    Cluster(system).leave()

        gevent.spawn(host_commands)
        system.when_terminated.get()
        emit({"left": True})
        return 0
    sharding.start_proxy("Rel", role="host")
    sender = ReliableSender(system, "Rel", "P", window=50, durable=True).ready(30)
    emit({"queued": sum(q.next_seq - 1 for q in sender.protocol.queues.values())})

    def commands() -> None:
        for line in FileObject(sys.stdin.fileno(), "r"):
            cmd = json.loads(line)
            if cmd["cmd"] == "stream":
                gevent.spawn(_stream, sender, cmd["start"], cmd["n"], cmd["entities"], cmd["rate"])
            elif cmd["cmd"] == "drain":
                gevent.spawn(_drain, sender)

    gevent.spawn(commands)
    system.when_terminated.get()
    return 0


if __name__ == "__main__":
    sys.exit(main())

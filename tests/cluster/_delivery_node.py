"""A cluster node in a process of its own that keeps the books of the delivery tests
(``test_delivery.py``: SPEC §17 "Precisely").

``python _delivery_node.py URL NAME CLUSTER_JSON BOOK`` joins the cluster NAME at URL
(the rest of the ``cluster`` table as JSON), starts ``/user/sink``, prints
``{"address": ..., "pid": ...}`` on stdout, then reads one JSON command per line on
stdin and answers each with one JSON line:

* ``{"cmd": "send", "to": PATH, "n": N, "rate": R}``: tells ``("t", i)`` for i in
  0..N-1 to the actor at PATH, R messages a second (in bursts every 10 ms); answers
  ``{"sent": N}`` once all were told.
* ``{"cmd": "block", "seconds": S}``: holds the hub for S seconds (a busy loop, like
  a CPU-bound request): nothing else of this process runs meanwhile, but the
  heartbeat thread keeps beating. Answers ``{"blocked": S}`` afterwards.
* ``{"cmd": "stats"}``: answers the node's delivery counters (``ClusterNode.stats``).
* ``{"cmd": "leave"}``: terminates the system (a graceful leave).
* ``{"cmd": "shard-start", "type": T}``: starts the region of sharded type T, whose
  entities book what they process like the sink; answers ``{"started": T}``.
* ``{"cmd": "shard-send", "type": T, "n": N, "rate": R, "entities": E}``: tells
  ``("t", i)`` to entity ``e<i % E>`` of type T, R a second; answers ``{"sent": N}``.

The books (file BOOK, one line per event, written with one ``os.write`` each so that a
SIGKILL loses at most the line being written): ``P i`` when the sink processed
message i, ``D i`` when a ``DeadLetter`` of message i was published on this node. When
the system terminates (``leave``, or downed) the node prints ``{"terminated": true,
"stats": ...}`` and exits.
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

from gactors import Actor, ActorSystem, DeadLetter, Props
from gactors.cluster import ClusterSharding, ShardingEnvelope
from gactors.cluster._access import cluster_node


def emit(obj: dict[str, Any]) -> None:
    """One JSON line on stdout (the test reads them)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Books:
    """The append-only record of what this process processed and dead-lettered."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")


class Sink(Actor):
    """Records every ``("t", i)`` it processes, at once (a receiver that processes
    instantly: what a crash loses is only what its node had read)."""

    def __init__(self, books: Books) -> None:
        self.books = books

    def receive(self, message: Any) -> None:
        if isinstance(message, tuple) and message[0] == "t":
            self.books.write(f"P {message[1]}")


#: How many messages this process told so far (the send stops when the system ends).
SENT = [0]


def _send(system: ActorSystem, to: str, n: int, rate: float, entities: Any = None) -> None:
    if entities is None:
        ref = system.actor_selection(to).resolve_one(timeout=10.0)
        refs = [ref]
    else:
        sharding = ClusterSharding(system)
        refs = [sharding.entity_ref(to, f"e{k}") for k in range(entities)]
    per_tick = max(1, round(rate / 100))
    start = time.monotonic()
    i = 0
    done = system.when_terminated
    while i < n and not done.done():
        for _ in range(min(per_tick, n - i)):
            refs[i % len(refs)].tell(("t", i))
            i += 1
            SENT[0] = i
        # Paced by the clock, so a blocked hub does not slow the whole stream down.
        gevent.sleep(max(0.0, start + i / rate - time.monotonic()))
    emit({"sent": i})


def main() -> int:
    """Run the node until its system terminates."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    url, name, extra, book_path = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    books = Books(book_path)
    system = ActorSystem(name, config={"cluster": {"url": url, **extra}})

    def on_dead_letter(event: DeadLetter) -> None:
        message = event.message
        if isinstance(message, ShardingEnvelope):
            message = message.message
        if isinstance(message, tuple) and len(message) == 2 and message[0] == "t":
            books.write(f"D {message[1]} {time.time():.3f}")
        else:
            books.write(f"X {type(message).__name__} {message!r:.200}")

    system.event_stream.subscribe(on_dead_letter, DeadLetter)
    system.actor_of(Props(Sink, books), "sink")
    node = cluster_node(system)
    emit({"address": str(node.address), "pid": os.getpid()})

    def commands() -> None:
        # A cooperative file object: a plain sys.stdin read would block the hub.
        for line in FileObject(sys.stdin.fileno(), "r"):
            cmd = json.loads(line)
            what = cmd["cmd"]
            if what == "send":
                gevent.spawn(_send, system, cmd["to"], cmd["n"], cmd["rate"])
            elif what == "block":
                end = time.monotonic() + cmd["seconds"]
                while time.monotonic() < end:
                    pass
                emit({"blocked": cmd["seconds"]})
            elif what == "stats":
                emit({"stats": node.stats})
            elif what == "leave":
                system.terminate()
            elif what == "shard-start":
                ClusterSharding(system).start(cmd["type"], Props(Sink, books))
                emit({"started": cmd["type"]})
            elif what == "shard-send":
                gevent.spawn(_send, system, cmd["type"], cmd["n"], cmd["rate"], cmd["entities"])

    gevent.spawn(commands)
    system.when_terminated.get()
    gevent.sleep(0.5)  # the last flush's dead letters are in the books
    emit({"terminated": True, "stats": node.stats, "told": SENT[0]})
    return 0


if __name__ == "__main__":
    sys.exit(main())

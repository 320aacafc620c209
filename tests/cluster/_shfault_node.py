"""A cluster node in a process of its own for the sharding fault tests
(``test_sharding_faults.py``), using the public sharding API only.

``python _shfault_node.py URL NAME CLUSTER_JSON BOOK KIND SHARDS`` joins the cluster
NAME at URL (the rest of the ``cluster`` table as JSON). KIND ``host`` starts the
region of type ``acct`` (role ``host``) whose entities book what they process; KIND
``client`` starts a proxy region of it. It prints ``{"address": ..., "pid": ...}``,
then reads one JSON command per line on stdin:

* ``{"cmd": "members"}``: answers ``{"members": <number of members up>}``.
* ``{"cmd": "stream", "senders": [SID, ...], "entities": [E, ...], "rate": R}``:
  starts one sender actor per SID; sender SID tells ``("m", SID, seq)`` for seq = 0,
  1, 2, ... to entity ``E[(seq + k) % len(E)]`` (k: the sender's index), R a second
  each, in ticks of 20 ms. Answers ``{"streaming": n}``.
* ``{"cmd": "stop"}``: stops the senders; answers ``{"sent": {SID: count}}`` (seqs
  0..count-1 were told).
* ``{"cmd": "leave"}``: terminates the system (a graceful leave).

The book (file BOOK; one ``os.write`` per line on O_APPEND, so a SIGKILL never cuts a
line and the file says what this process did up to the kill), times from
``time.monotonic()`` (one clock for every process of the machine):

* ``S t entity inc`` an entity incarnation started, ``T t entity inc`` it stopped;
* ``M t entity inc sid seq`` it processed message (sid, seq);
* ``D t sid seq`` a ``DeadLetter`` of message (sid, seq) was published here;
* ``K t sid seq`` sender sid is about to tell seqs from ``seq`` on (one per tick);
* ``E t sid seq`` it told every seq below ``seq`` (so the book of a node that left
  says what its senders sent).

When the system terminates it prints ``{"terminated": true}`` and exits.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import json
import logging
import os
import sys
import time
import uuid
from typing import Any

import gevent
from gevent.fileobject import FileObject

from gactors import Actor, ActorSystem, DeadLetter, Props
from gactors.cluster import Cluster, ClusterSharding, ShardingEnvelope
from gactors.cluster._access import cluster_node

TYPE = "acct"
TICK = 0.02


def emit(obj: dict[str, Any]) -> None:
    """One JSON line on stdout (the test reads them)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Book:
    """The append-only record of what this process did."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, *fields: Any) -> None:
        line = f"{fields[0]} {time.monotonic():.6f} " + " ".join(str(f) for f in fields[1:])
        os.write(self.fd, line.encode() + b"\n")


class Entity(Actor):
    """Books its start, its stop and every ``("m", sid, seq)`` it processes, at once."""

    def __init__(self, book: Book, entity_id: str) -> None:
        self.book = book
        self.entity_id = entity_id
        self.inc = uuid.uuid4().hex[:10]

    def pre_start(self) -> None:
        self.book.write("S", self.entity_id, self.inc)

    def post_stop(self) -> None:
        self.book.write("T", self.entity_id, self.inc)

    def receive(self, message: Any) -> None:
        if isinstance(message, tuple) and len(message) == 3 and message[0] == "m":
            self.book.write("M", self.entity_id, self.inc, message[1], message[2])


class Sender(Actor):
    """Tells numbered messages to the entities, ``rate`` a second, paced by the clock
    (so that a busy moment does not slow the stream down)."""

    def __init__(self, book: Book, sid: str, entities: list[str], rate: float, k: int) -> None:
        self.book = book
        self.sid = sid
        sharding = ClusterSharding(self.context.system)
        self.refs = [sharding.entity_ref(TYPE, e) for e in entities]
        self.rate = rate
        self.k = k
        self.seq = 0
        self.stopped = False
        self.start = time.monotonic()

    def pre_start(self) -> None:
        self.context.self.tell("tick")

    def receive(self, message: Any) -> None:
        if message == "tick" and not self.stopped:
            due = int((time.monotonic() - self.start) * self.rate) + 1
            if due > self.seq:
                self.book.write("K", self.sid, self.seq)
            n = len(self.refs)
            told = self.seq < due
            while self.seq < due:
                self.refs[(self.seq + self.k) % n].tell(("m", self.sid, self.seq))
                self.seq += 1
            if told:
                self.book.write("E", self.sid, self.seq)
            gevent.spawn_later(TICK, self.context.self.tell, "tick")
        elif message == "stop":
            self.stopped = True
            self.sender.tell((self.sid, self.seq))


def main() -> int:
    """Run the node until its system terminates."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    url, name, extra, book_path, kind, shards = sys.argv[1:7]
    book = Book(book_path)
    cluster = {"url": url, **json.loads(extra)}
    if kind == "host":
        cluster["roles"] = ["host"]
    system = ActorSystem(name, config={"cluster": cluster})

    def on_dead_letter(event: DeadLetter) -> None:
        message = event.message
        if isinstance(message, ShardingEnvelope):
            message = message.message
        if isinstance(message, tuple) and len(message) == 3 and message[0] == "m":
            book.write("D", message[1], message[2])
        else:
            book.write("X", type(message).__name__, f"{message!r:.200}".replace("\n", " "))

    system.event_stream.subscribe(on_dead_letter, DeadLetter)
    sharding = ClusterSharding(system)
    if kind == "host":
        sharding.start(
            TYPE,
            lambda eid: Props(Entity, book, eid),
            number_of_shards=int(shards),
            role="host",
            passivate_idle_after=None,
        )
    else:
        sharding.start_proxy(TYPE, number_of_shards=int(shards), role="host")
    node = cluster_node(system)
    emit({"address": str(node.address), "pid": os.getpid()})
    senders: list[Any] = []

    def commands() -> None:
        # A cooperative file object: a plain sys.stdin read would block the hub.
        for line in FileObject(sys.stdin.fileno(), "r"):
            cmd = json.loads(line)
            what = cmd["cmd"]
            if what == "members":
                up = [m for m in Cluster(system).members if m.status == "up"]
                emit({"members": len(up)})
            elif what == "stream":
                for k, sid in enumerate(cmd["senders"]):
                    props = Props(Sender, book, sid, cmd["entities"], cmd["rate"], k)
                    senders.append(system.actor_of(props, f"sender-{sid}"))
                emit({"streaming": len(senders)})
            elif what == "stop":
                sent = dict(ref.ask("stop", timeout=10.0) for ref in senders)
                emit({"sent": sent})
            elif what == "leave":
                system.terminate()

    gevent.spawn(commands)
    system.when_terminated.get()
    gevent.sleep(0.5)  # the last dead letters are in the book
    emit({"terminated": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())

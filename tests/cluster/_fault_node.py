"""A cluster node in a process of its own, for the fault tests (``test_faults.py``).

``python _fault_node.py URL NAME [CLUSTER_JSON]`` joins the cluster NAME at URL (the
rest of the ``cluster`` table as JSON), starts ``/user/echo`` (answers every message
with itself) and ``/user/sink`` (counts messages per tag: ``(tag, i)``; answers
``("count", tag)`` with the count), prints ``{"address": ..., "pid": ...}`` on stdout,
and runs until its system terminates: SIGTERM (graceful), or the node finding itself
downed. It then prints ``{"terminated": true}`` and exits 0. Its log goes to stderr.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import json
import logging
import os
import signal
import sys
from collections import Counter
from typing import Any

import gevent

from gactors import Actor, ActorSystem, Props
from gactors.cluster import Cluster


class Echo(Actor):
    """Answers every message with itself."""

    def receive(self, message: Any) -> None:
        self.sender.tell(message)


class Sink(Actor):
    """Counts ``(tag, i)`` messages per tag; answers ``("count", tag)``."""

    def __init__(self) -> None:
        self.counts: Counter[Any] = Counter()

    def receive(self, message: Any) -> None:
        if message[0] == "count":
            self.sender.tell(self.counts[message[1]])
        else:
            self.counts[message[0]] += 1


def main() -> int:
    """Run the node until its system terminates."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    url, name = sys.argv[1], sys.argv[2]
    extra = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    system = ActorSystem(name, config={"cluster": {"url": url, **extra}})
    system.actor_of(Props(Echo), "echo")
    system.actor_of(Props(Sink), "sink")
    gevent.signal_handler(signal.SIGTERM, system.terminate)
    info = {"address": str(Cluster(system).self_address), "pid": os.getpid()}
    sys.stdout.write(json.dumps(info) + "\n")
    sys.stdout.flush()
    system.when_terminated.get()
    sys.stdout.write(json.dumps({"terminated": True}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The second node of the cluster benchmark (and nothing else): ``remote_node.py URL NAME``.

Started by ``remote_gactors.py`` with the same interpreter. Joins the cluster named NAME
on the Redis server at URL (the rest of the ``cluster`` table comes as JSON in
``GACTORS_BENCH_CLUSTER``), starts a ``Sink`` at ``/user/sink`` and an ``Echo`` at
``/user/echo``, prints one JSON line ``{"address": ..., "pid": ...}`` on stdout and then
runs until SIGTERM (graceful: the system terminates, leaving the cluster) or SIGKILL
(the crash the detection workload measures).
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import json
import logging
import os
import signal
import sys
from typing import Any

import gevent

from gactors import Actor, ActorSystem, Props
from gactors.cluster import Cluster

CLUSTER_ENV = "GACTORS_BENCH_CLUSTER"
# How many messages the sink acknowledges at once (the sender's credit unit).
CHUNK = 1_000


class Sink(Actor):
    """Counts the ints it receives; acknowledges every CHUNK to their sender."""

    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> None:
        self.count += 1
        if self.count % CHUNK == 0:
            self.sender.tell(("ack", self.count))


class Echo(Actor):
    """Answers every message with itself."""

    def receive(self, message: Any) -> None:
        self.sender.tell(message)


def main(url: str, name: str) -> int:
    """Run the node until it is told to stop."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    extra = json.loads(os.environ.get(CLUSTER_ENV, "{}"))
    system = ActorSystem(name, config={"cluster": {"url": url, **extra}})
    system.actor_of(Props(Sink), "sink")
    system.actor_of(Props(Echo), "echo")
    gevent.signal_handler(signal.SIGTERM, system.terminate)
    address = str(Cluster(system).self_address)
    sys.stdout.write(json.dumps({"address": address, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    system.when_terminated.get()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

"""A fencing token refusing a stale writer: the order-number allocator hands over.

    python examples/cluster-shop/fencing.py [redis://127.0.0.1:6379/0]

Two nodes (two actor systems of the cluster ``fencing`` in this process; in production,
two gunicorn workers) run the order-number allocator of the shop as a cluster singleton.
Its counter lives in SQLite (orders.py), and every write carries the allocator's fencing
token, ``self.context.fencing_token``.

1. node-1 runs the allocator: it hands out orders #1 and #2, then starts a write that
   will land late (a write-behind stuck in a slow disk, a GC pause, a congested network).
2. node-1 leaves the cluster: the allocator stops, node-2 starts the next one under a
   larger fencing token, and hands out #3.
3. The late write of the old allocator lands -- and the database refuses it: its token
   is older than the one that wrote #3. Without the token it would have handed out #3
   a second time.

Without a URL (and without ``GACTORS_REDIS_URL``) it starts a throwaway
``redis-server`` (or ``valkey-server``) found on PATH.
"""

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event
from orders import StaleWriter, allocate, last_order, open_orders_db

from gactors import Actor, ActorSystem, Props
from gactors.cluster import ClusterSingleton

# The late write waits for this: the example opens it once node-2 has allocated.
LATE_WRITE_MAY_LAND = Event()
late_result: list[str] = []


class Allocator(Actor):
    """The singleton: ``"allocate"`` -> the next order number (with the token used);
    ``"allocate later"`` -> starts a write that lands once LATE_WRITE_MAY_LAND is set."""

    def __init__(self, db_path: str, node: str) -> None:
        self.db_path = db_path
        self.db = open_orders_db(db_path)
        self.node = node

    def receive(self, message: Any) -> None:
        token = self.context.fencing_token
        assert token is not None  # a singleton always runs under its lease's token
        if message == "allocate":
            self.sender.tell((allocate(self.db, token), token, self.node))
        elif message == "allocate later":
            gevent.spawn(late_write, self.db_path, token)
            self.sender.tell(token)
        else:
            self.unhandled(message)

    def post_stop(self) -> None:
        self.db.close()


def late_write(db_path: str, token: int) -> None:
    """A write sent by the allocator before it stopped, arriving after its successor
    wrote (its own connection: the allocator that sent it is gone by then)."""
    LATE_WRITE_MAY_LAND.wait()
    db = open_orders_db(db_path)
    try:
        number = allocate(db, token)
        late_result.append(f"ACCEPTED as order #{number} (no fencing: a duplicate!)")
    except StaleWriter as e:
        late_result.append(f"refused: {e}")
    finally:
        db.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[str, subprocess.Popen[bytes]]:
    binary = shutil.which("redis-server") or shutil.which("valkey-server")
    if binary is None:
        sys.exit("no redis-server or valkey-server on PATH: pass a redis:// URL")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="gactors-example-redis-")
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return f"redis://127.0.0.1:{port}/0", server
        except OSError:
            time.sleep(0.05)
    server.kill()
    sys.exit("the redis server did not start")


def node(url: str, name: str, db_path: str) -> tuple[ActorSystem, Any]:
    """A node of the cluster with the allocator singleton; returns (system, proxy)."""
    cluster = {"url": url, "heartbeat_interval": 0.2, "unreachable_after": 1.0}
    cluster |= {"down_after": 2.0, "lease_ttl": 3.0}
    system = ActorSystem("fencing", config={"cluster": cluster})
    proxy = ClusterSingleton(system).init("order-numbers", Props(Allocator, db_path, name))
    return system, proxy


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GACTORS_REDIS_URL")
    server = None
    if not url:
        url, server = start_server()
    db_path = str(Path(tempfile.mkdtemp(prefix="gactors-fencing-")) / "orders.sqlite")
    try:
        node1, proxy1 = node(url, "node-1", db_path)
        for _ in range(2):
            number, token, where = proxy1.ask("allocate", timeout=10)
            print(f"{where} allocated order #{number} (fencing token {token})")
        # node-2 joins now: the allocator stays on the oldest node, node-1.
        node2, proxy2 = node(url, "node-2", db_path)
        old = proxy1.ask("allocate later", timeout=10)
        print(f"node-1's allocator (fencing token {old}) sent a write that will land late")

        node1.terminate()  # graceful leave: the allocator stops before node-2 starts one
        print(f"node-1 left the cluster: {node1.await_termination(20)}")
        number, token, where = proxy2.ask("allocate", timeout=20)
        print(f"{where} allocated order #{number} (fencing token {token})")

        LATE_WRITE_MAY_LAND.set()
        while not late_result:
            gevent.sleep(0.01)
        print(f"the late write of fencing token {old} landed: {late_result[0]}")
        db = open_orders_db(db_path)
        last, newest = last_order(db)
        db.close()
        print(f"database: last order #{last}, written under fencing token {newest}")
        node2.terminate()
        node2.await_termination(20)
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()

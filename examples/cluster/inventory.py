"""The inventory node: one actor, ``/user/inventory``, that other nodes ask.

    python examples/cluster/inventory.py redis://127.0.0.1:6379/0

Prints the full path of its actor (with this node's address), then serves until
stdin closes or the process is killed.
"""

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import logging
import sys
from typing import Any

from gevent.fileobject import FileObject
from settings import cluster_settings

from gactors import Actor, ActorSystem, Props, Status


class Inventory(Actor):
    def __init__(self) -> None:
        self.stock = {"apple": 3, "pear": 1}

    def receive(self, message: Any) -> None:
        match message:
            case ("stock", item):
                self.sender.tell(self.stock.get(item, 0))
            case ("reserve", item, qty) if self.stock.get(item, 0) >= qty:
                self.stock[item] -= qty
                self.sender.tell(("reserved", item, qty))
            case ("reserve", item, _):
                # The asker's ask raises: a RemoteError, as LookupError is not a
                # registered class (gactors.cluster.register_message).
                self.sender.tell(Status.Failure(LookupError(f"not enough {item}")))
            case _:
                self.unhandled(message)


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    system = ActorSystem("shop", config={"cluster": cluster_settings(sys.argv[1])})
    inventory = system.actor_of(Props(Inventory), "inventory")
    print(f"inventory at {inventory.path}", flush=True)
    for _ in FileObject(sys.stdin.fileno(), "r"):
        pass  # stdin closed: leave the cluster
    system.terminate()
    system.await_termination(10)


if __name__ == "__main__":
    main()

"""The shop node: asks the inventory node's actor, then watches it.

    python examples/cluster/shop.py redis://127.0.0.1:6379/0 gactors://shop@<node>/user/inventory

Prints each answer; when the inventory node dies (``run.py`` kills it with SIGKILL)
the watch delivers ``Terminated`` with ``address_terminated=True`` once the cluster
downed that node.
"""

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import logging
import sys
import time
from typing import Any

from settings import cluster_settings

from gactors import Actor, ActorRef, ActorSystem, Props, Terminated
from gactors.cluster import Cluster, MemberRemoved, RemoteError


class Watcher(Actor):
    """Watches the ref it is told; reports the membership change and the death."""

    def __init__(self) -> None:
        self.since = 0.0

    def receive(self, message: Any) -> None:
        if isinstance(message, Terminated):
            print(
                f"inventory terminated: address_terminated={message.address_terminated} "
                f"after {time.monotonic() - self.since:.1f} s",
                flush=True,
            )
            self.context.system.terminate()  # the example is over
        elif isinstance(message, MemberRemoved):
            print(f"member removed: {message.member.address}", flush=True)
        elif isinstance(message, ActorRef):
            self.context.watch(message)
            self.since = time.monotonic()
            self.sender.tell("watching")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    url, inventory_path = sys.argv[1], sys.argv[2]
    system = ActorSystem("shop", config={"cluster": cluster_settings(url)})
    print(f"shop node {Cluster(system).self_address}", flush=True)

    inventory = system.actor_selection(inventory_path).resolve_one(timeout=5.0)
    print(f"resolved {inventory!r}", flush=True)
    print(f"stock of apple: {inventory.ask(('stock', 'apple'), timeout=5.0)}", flush=True)
    print(f"reserve: {inventory.ask(('reserve', 'apple', 2), timeout=5.0)}", flush=True)
    try:
        inventory.ask(("reserve", "pear", 5), timeout=5.0)
    except RemoteError as e:
        print(f"the remote ask failed: {e.type_name}: {e.message}", flush=True)

    # DeathWatch across the nodes: Terminated comes when the actor stops, or, if its
    # node crashes, once the cluster downed that node.
    watcher = system.actor_of(Props(Watcher), "watcher")
    Cluster(system).subscribe(watcher, MemberRemoved)
    watcher.ask(inventory, timeout=5.0)
    print("watching the inventory", flush=True)
    print(f"shop left the cluster: {system.await_termination(60)}", flush=True)


if __name__ == "__main__":
    main()

"""Concepts, guardians: the /user guardian's strategy, and the order of shutdown."""

from gevent import monkey

monkey.patch_all()

import logging  # noqa: E402
from typing import Any  # noqa: E402

from gactors import Actor, ActorSystem, Identify, Props  # noqa: E402

order: list[str] = []


class Node(Actor):
    def __init__(self, *children: str) -> None:
        for name in children:
            self.context.actor_of(Props(Node), name)

    def receive(self, message: Any) -> None:
        if message == "fail":
            raise RuntimeError("top-level failure")

    def post_stop(self) -> None:
        order.append(self.ref.name)


def main() -> None:
    # [start shutdown]
    system = ActorSystem("shop")
    system.actor_of(Props(Node, "pricer", "packer"), "orders")
    system.actor_of(Props(Node, "ledger"), "accounts")
    system.register_on_termination(lambda: order.append("hook 1"))
    system.register_on_termination(lambda: order.append("hook 2"))
    system.terminate()  # returns system.when_terminated, a Future
    system.await_termination(timeout=5.0)
    print("stopped:", ", ".join(order))
    # [end shutdown]

    # [start stopping]
    with ActorSystem("strict", config={"guardian_supervisor_strategy": "stopping"}) as strict:
        worker = strict.actor_of(Props(Node), "worker")
        worker.tell("fail")  # /user's strategy is now "stop on any Exception"
        print("worker after a failure:", worker.ask(Identify(0), timeout=1.0).ref)
    # [end stopping]


if __name__ == "__main__":
    logging.getLogger("gactors").setLevel(logging.CRITICAL)  # the failure is on purpose
    main()

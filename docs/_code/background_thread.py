"""How-to, threads: an actor system in a thread of its own, in an unpatched program."""

import threading
from typing import Any

from gactors import Actor, ActorSystem, Props


class Counter(Actor):
    def __init__(self) -> None:
        self.n = 0

    def receive(self, message: Any) -> None:
        if message == "get":
            self.sender.tell(self.n)
        else:
            self.n += message


# [start thread]
started = threading.Event()
box: dict[str, ActorSystem] = {}


def run_system() -> None:
    system = box["system"] = ActorSystem("background")
    started.set()
    system.await_termination()  # runs this thread's hub until terminate() is called


threading.Thread(target=run_system, daemon=True).start()
started.wait(5.0)
system = box["system"]

counter = system.actor_of(Props(Counter), "counter")  # carried over to the hub's thread
counter.tell(1)
counter.tell(2)
print("count:", counter.ask("get", timeout=2.0))  # blocks this thread only
system.terminate()
print("terminated:", system.await_termination(5.0))
# [end thread]

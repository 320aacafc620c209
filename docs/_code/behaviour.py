"""Concepts, actors: become/unbecome, the stash, and the receive timeout."""

from gevent import monkey

monkey.patch_all()

from typing import Any  # noqa: E402

import gevent  # noqa: E402

from gactors import (  # noqa: E402
    Actor,
    ActorSystem,
    Identify,
    Props,
    ReceiveTimeout,
    Stash,
)


# [start door]
class Door(Stash, Actor):
    """Lets people in while open; while locked, keeps them waiting (in the stash)."""

    def __init__(self) -> None:
        self.inside: list[str] = []
        self.context.become(self.locked)  # start locked (receive is the open behaviour)

    def receive(self, message: Any) -> None:  # open
        if message == "lock":
            self.context.become(self.locked)
        elif isinstance(message, str):
            self.inside.append(message)
        elif message == ("who", None):
            self.sender.tell(list(self.inside))

    def locked(self, message: Any) -> None:
        if message == "unlock":
            self.unstash_all()  # the waiting messages go back to the head of the mailbox
            self.context.unbecome()  # back to receive
        elif message == ("who", None):
            self.sender.tell(list(self.inside))
        else:
            self.stash()  # not now: keep the message for later


# [end door]


# [start session]
class Session(Actor):
    """Stops itself after 0.2 s without any message."""

    def pre_start(self) -> None:
        self.context.set_receive_timeout(0.2)

    def receive(self, message: Any) -> None:
        if message is ReceiveTimeout:
            self.log.info("idle for %.1f s, closing", self.context.receive_timeout)
            self.context.stop(self.ref)
        # any other message resets the timeout


# [end session]

if __name__ == "__main__":
    with ActorSystem("behaviour") as system:
        door = system.actor_of(Props(Door), "door")
        door.tell("ada")
        door.tell("alan")
        print("while locked:", door.ask(("who", None), timeout=1.0))
        door.tell("unlock")
        print("after unlock:", door.ask(("who", None), timeout=1.0))

        session = system.actor_of(Props(Session), "session")
        session.tell("keep-alive")
        gevent.sleep(0.5)  # idle: the session times out and stops itself
        # Identify is answered with None once the actor is gone.
        print("session after 0.5 s idle:", session.ask(Identify(0), timeout=1.0).ref)

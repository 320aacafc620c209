"""Hello, actors: define an actor, create it, tell it, ask it.

Run: python examples/hello.py

An actor is an object that only ever handles one message at a time, so its state
needs no locks. You never call its methods: you send it messages through its
``ActorRef``, either with ``tell`` (fire and forget) or with ``ask`` (wait for a reply).
"""

from gevent import monkey

monkey.patch_all()  # first thing, as in any gevent application

from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from gactors import Actor, ActorSystem, Props  # noqa: E402


# Messages are ordinary immutable objects; frozen dataclasses make good ones.
@dataclass(frozen=True)
class Greet:
    name: str


@dataclass(frozen=True)
class SetGreeting:
    greeting: str


@dataclass(frozen=True)
class Greeted:
    text: str
    count: int


class Greeter(Actor):
    """Greets whoever it is asked to and counts the greetings."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting
        self.count = 0

    def receive(self, message: Any) -> None:
        if isinstance(message, Greet):
            self.count += 1
            # self.sender is whoever sent the message being handled: here the ask.
            self.sender.tell(Greeted(f"{self.greeting}, {message.name}!", self.count))
        elif isinstance(message, SetGreeting):
            self.greeting = message.greeting
        else:
            self.unhandled(message)  # published as UnhandledMessage on the event stream


def main() -> None:
    # Leaving the block terminates the system: every actor stops, children first.
    with ActorSystem("hello") as system:
        # actor_of returns a ref at once; the actor itself is built asynchronously.
        greeter = system.actor_of(Props(Greeter, "Hello"), "greeter")
        print("created", greeter.path)

        # ask: send, then block this greenlet (not the process) until the reply.
        reply = greeter.ask(Greet("world"), timeout=1.0)
        print(reply.text, f"(greeting #{reply.count})")

        # tell: fire and forget. Messages from one sender arrive in the order sent,
        # so the next ask sees the new greeting.
        greeter.tell(SetGreeting("Bonjour"))
        print(greeter.ask(Greet("gevent"), timeout=1.0).text)

        # ask(block=False) returns a gactors.Future instead of waiting.
        futures = [greeter.ask(Greet(n), timeout=1.0, block=False) for n in ("Ada", "Alan")]
        print([f.get(timeout=1.0).text for f in futures])

        print(system.tree())
    print("system terminated:", system.is_terminated)


if __name__ == "__main__":
    main()

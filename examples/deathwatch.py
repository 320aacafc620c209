"""DeathWatch: be told when another actor stops, whoever it is.

Run: python examples/deathwatch.py

Supervision is for parents; DeathWatch is for anybody. ``context.watch(ref)`` delivers
``Terminated(ref)`` once ``ref`` has stopped -- after a PoisonPill, a stop, a failure
its supervisor answered with STOP, or because it was already dead when watched.
"""

from gevent import monkey

monkey.patch_all()

import logging  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from gactors import (  # noqa: E402
    Actor,
    ActorRef,
    ActorSystem,
    Identify,
    LogEvent,
    PoisonPill,
    Props,
    Terminated,
)


@dataclass(frozen=True)
class Watch:
    ref: ActorRef
    custom: bool = False  # watch_with: deliver SessionEnded instead of Terminated


@dataclass(frozen=True)
class SessionEnded:
    name: str


@dataclass(frozen=True)
class AwaitGone:
    name: str


class Session(Actor):
    def receive(self, message: Any) -> None:
        if message == "crash":
            raise PermissionError("session revoked")  # /user's default strategy: restart


class Partner(Actor):
    """Watches its peer and does not handle Terminated: a death pact."""

    def __init__(self, peer: ActorRef) -> None:
        self.context.watch(peer)

    def receive(self, message: Any) -> None:
        # Terminated is unhandled here: unhandled() raises DeathPactException, which
        # the default strategy answers with STOP. The partner dies with its peer.
        self.unhandled(message)

    def post_stop(self) -> None:
        print("   partner: post_stop, my peer is gone and so am I")


class Monitor(Actor):
    """Watches whatever it is told to and answers "is it gone yet?" questions."""

    def __init__(self) -> None:
        self.gone: dict[str, str] = {}
        self.waiting: dict[str, list[ActorRef]] = {}

    def receive(self, message: Any) -> None:
        if isinstance(message, Watch):
            if message.custom:
                self.context.watch_with(message.ref, SessionEnded(message.ref.name))
            else:
                self.context.watch(message.ref)
            self.sender.tell("watching")
        elif isinstance(message, Terminated):
            how = "confirmed" if message.existence_confirmed else "already dead when watched"
            self.record(message.actor.name, f"Terminated ({how})")
        elif isinstance(message, SessionEnded):
            self.record(message.name, "SessionEnded (the watch_with message)")
        elif message == "gone so far":
            self.sender.tell(sorted(self.gone))
        elif isinstance(message, AwaitGone):
            if message.name in self.gone:
                self.sender.tell(self.gone[message.name])
            else:
                # Reply later: keep the sender, it stays valid until the ask ends.
                self.waiting.setdefault(message.name, []).append(self.sender)
        else:
            self.unhandled(message)

    def record(self, name: str, what: str) -> None:
        self.gone[name] = what
        for asker in self.waiting.pop(name, []):
            asker.tell(what)


def main() -> None:
    # Failures are logged with a traceback; here they are on purpose, so print the
    # same events from the event stream, one line each, instead.
    logging.getLogger("gactors").setLevel(logging.CRITICAL)
    with ActorSystem("deathwatch") as system:
        system.event_stream.subscribe(
            lambda e: print(f"   log: {e.level_name} {e.source} {e.message}"), LogEvent
        )
        monitor = system.actor_of(Props(Monitor), "monitor")

        def watch(ref: ActorRef, custom: bool = False) -> None:
            assert monitor.ask(Watch(ref, custom), timeout=2.0) == "watching"

        def gone(name: str) -> str:
            return str(monitor.ask(AwaitGone(name), timeout=2.0))

        alice = system.actor_of(Props(Session), "alice")
        watch(alice)
        alice.tell(PoisonPill)  # processed in order, after anything sent before it
        print("alice (PoisonPill):", gone("alice"))

        bob = system.actor_of(Props(Session), "bob")
        watch(bob, custom=True)
        system.stop(bob)  # a system message: overtakes bob's queued messages
        print("bob (system.stop):", gone("bob"))

        # A restart is not a death: watchers see nothing, the ref stays valid.
        carol = system.actor_of(Props(Session), "carol")
        watch(carol)
        carol.tell("crash")
        alive = carol.ask(Identify("carol"), timeout=2.0).ref is not None
        seen = monitor.ask("gone so far", timeout=2.0)
        print(f"carol (crashed, restarted): alive={alive}, monitor saw {seen}")

        # Watching an actor that is already dead still delivers Terminated.
        erin = system.actor_of(Props(Session), "erin")
        erin.tell(PoisonPill)
        assert erin.ask(Identify("erin"), timeout=2.0).ref is None  # dead by now
        watch(erin)
        print("erin (watched after its death):", gone("erin"))

        # The death pact: dave's partner watches dave without handling Terminated.
        dave = system.actor_of(Props(Session), "dave")
        partner = system.actor_of(Props(Partner, dave), "partner")
        watch(partner)
        dave.tell(PoisonPill)
        print("partner (death pact):", gone("partner"))
        print(system.tree())


if __name__ == "__main__":
    main()

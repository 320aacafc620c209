"""The four directives: a supervisor resumes, restarts, stops or escalates.

Run: python examples/supervision.py

A ``Boss`` supervises one ``Worker``. Its strategy maps each kind of failure to a
directive; we make the worker fail in each way and look at what survived.
"""

from gevent import monkey

monkey.patch_all()

import logging  # noqa: E402
from typing import Any  # noqa: E402

from gactors import (  # noqa: E402
    Actor,
    ActorRef,
    ActorSystem,
    Directive,
    Identify,
    LogEvent,
    OneForOneStrategy,
    Props,
)


class CorruptState(Exception):
    """Something the boss cannot judge: its own supervisor must decide."""


class Worker(Actor):
    def __init__(self) -> None:
        self.jobs = 0  # the state a failure may or may not wipe out

    def receive(self, message: Any) -> None:
        if isinstance(message, Exception):
            raise message  # inject the failure we were sent
        if message == "job":
            self.jobs += 1
        elif message == "jobs":
            self.sender.tell(self.jobs)
        else:
            self.unhandled(message)


class Boss(Actor):
    # Which directive for which failure. In a mapping the most specific type wins,
    # whatever the order; an exception matching no entry escalates.
    supervisor_strategy = OneForOneStrategy(
        {
            TimeoutError: Directive.RESUME,  # transient: keep the state, drop the message
            ValueError: Directive.RESTART,  # a bug: a fresh instance, same ref and mailbox
            PermissionError: Directive.STOP,  # hopeless: stop the worker for good
            CorruptState: Directive.ESCALATE,  # not my call: fail myself, my parent decides
        },
        max_retries=10,  # more than 10 restarts of one child within 60 s stops it
        within=60.0,
    )

    def __init__(self) -> None:
        # Children created in the constructor are created again on every restart.
        self.context.actor_of(Props(Worker), "worker")

    def receive(self, message: Any) -> None:
        if message == "worker":
            self.sender.tell(self.context.child("worker"))
        else:
            self.unhandled(message)


def alive(ref: ActorRef) -> bool:
    """Identify is answered in mailbox order, after whatever was sent before it."""
    return ref.ask(Identify("ping"), timeout=2.0).ref is not None


def main() -> None:
    # Supervisors log every failure they handle, with a traceback. This example shows
    # the same events, one line each, from the event stream instead.
    logging.getLogger("gactors").setLevel(logging.CRITICAL)
    with ActorSystem("supervision") as system:
        system.event_stream.subscribe(
            lambda e: print(f"   log: {e.level_name} {e.source} {e.message}"), LogEvent
        )
        boss = system.actor_of(Props(Boss), "boss")
        worker: ActorRef = boss.ask("worker", timeout=2.0)
        for _ in range(3):
            worker.tell("job")

        print("RESUME: a TimeoutError; the state survives")
        worker.tell(TimeoutError("the backend was slow"))
        # Sent after the failure, so answered after the boss resumed the worker.
        print("   jobs:", worker.ask("jobs", timeout=2.0))

        print("RESTART: a ValueError; a fresh instance behind the same ref")
        try:
            # The asked actor fails while handling the ask: the ask raises at once.
            worker.ask(ValueError("a bug"), timeout=2.0)
        except ValueError as e:
            print(f"   the ask raised ValueError({e})")
        print("   jobs:", worker.ask("jobs", timeout=2.0))

        print("ESCALATE: a CorruptState; the boss fails and /user restarts it")
        worker.tell(CorruptState("the ledger does not add up"))
        # The boss's restart stops its old worker and creates a new one.
        print("   old worker alive:", alive(worker))
        worker = boss.ask("worker", timeout=2.0)
        print("   new worker alive:", alive(worker))

        print("STOP: a PermissionError; the worker is gone")
        worker.tell(PermissionError("credentials revoked"))
        print("   worker alive:", alive(worker))
        print(system.tree())


if __name__ == "__main__":
    main()

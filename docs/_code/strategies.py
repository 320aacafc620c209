"""Concepts, supervision: one-for-one versus all-for-one, and a retry limit."""

from gevent import monkey

monkey.patch_all()

import logging  # noqa: E402
from typing import Any  # noqa: E402

from gactors import (  # noqa: E402
    Actor,
    ActorSystem,
    AllForOneStrategy,
    Directive,
    Identify,
    OneForOneStrategy,
    Props,
)

events: list[str] = []


# [start strategies]
class Stage(Actor):
    def receive(self, message: Any) -> None:
        if message == "fail":
            raise ValueError(f"{self.ref.name} failed")

    def post_restart(self, reason: BaseException) -> None:
        events.append(f"{self.context.parent.name}/{self.ref.name} restarted ({reason})")


class Independent(Actor):
    """The children do unrelated work: a failure concerns only the failing child."""

    supervisor_strategy = OneForOneStrategy({ValueError: Directive.RESTART})

    def __init__(self) -> None:
        for name in ("a", "b", "c"):
            self.context.actor_of(Props(Stage), name)


class Pipeline(Independent):
    """The children share state downstream: if one fails, restart them all."""

    supervisor_strategy = AllForOneStrategy({ValueError: Directive.RESTART})


# [end strategies]


# [start limit]
class Limited(Actor):
    # At most two restarts of a child within 10 s; the third failure stops it.
    supervisor_strategy = OneForOneStrategy(max_retries=2, within=10.0)

    def __init__(self) -> None:
        self.context.actor_of(Props(Stage), "flaky")


# [end limit]

if __name__ == "__main__":
    logging.getLogger("gactors").setLevel(logging.CRITICAL)  # the failures are on purpose
    with ActorSystem("strategies") as system:
        for name, props in (("one-for-one", Props(Independent)), ("all-for-one", Props(Pipeline))):
            sup = system.actor_of(props, name)
            sup.ask(Identify(0), timeout=1.0)
            b = system.lookup(f"/user/{name}/b")
            assert b is not None
            b.tell("fail")
            # b answers once restarted, after its parent sent the siblings their restart.
            for child in ("b", "a", "c"):
                ref = system.lookup(f"/user/{name}/{child}")
                assert ref is not None
                ref.ask(Identify(0), timeout=1.0)
        print("\n".join(sorted(events)))

        limited = system.actor_of(Props(Limited), "limited")
        limited.ask(Identify(0), timeout=1.0)
        flaky = system.lookup("/user/limited/flaky")
        assert flaky is not None
        for attempt in range(1, 4):
            flaky.tell("fail")
            alive = flaky.ask(Identify(attempt), timeout=1.0).ref is not None
            print(f"after failure {attempt}: flaky alive = {alive}")

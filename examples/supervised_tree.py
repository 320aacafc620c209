"""A small supervised tree: work, an injected failure, and the live tree.

Run: python examples/supervised_tree.py
"""

from gevent import monkey

monkey.patch_all()

import logging  # noqa: E402
from typing import Any  # noqa: E402

from gactors import (  # noqa: E402
    Actor,
    ActorSystem,
    AllForOneStrategy,
    Identify,
    LogEvent,
    Props,
)


class Stage(Actor):
    def __init__(self) -> None:
        self.items = 0

    def receive(self, message: Any) -> None:
        if message == "corrupt":
            raise RuntimeError("corrupted batch")
        if message == "items":
            self.sender.tell(self.items)
        else:
            self.items += 1


class Pipeline(Actor):
    # The stages share state downstream: if one fails, restart them all together.
    supervisor_strategy = AllForOneStrategy(max_retries=5, within=60)

    def __init__(self) -> None:
        self.stages = [self.context.actor_of(Props(Stage), n) for n in ("parse", "enrich", "store")]

    def receive(self, message: Any) -> None:
        for stage in self.stages:
            stage.tell(message)


def main() -> None:
    # The failure below is on purpose: show its log event in one line, no traceback.
    logging.getLogger("gactors").setLevel(logging.CRITICAL)
    with ActorSystem("example") as system:
        system.event_stream.subscribe(lambda e: print("log:", e.message), LogEvent)
        pipeline = system.actor_of(Props(Pipeline), "pipeline")
        for i in range(100):
            pipeline.tell(f"record-{i}")
        # actor_of returns at once; Identify is answered after the constructor ran.
        pipeline.ask(Identify(0), timeout=2)
        store = system.lookup("/user/pipeline/store")
        assert store is not None
        print("store has", store.ask("items", timeout=2), "items")
        enrich = system.lookup("/user/pipeline/enrich")
        assert enrich is not None
        enrich.tell("corrupt")
        # Supervision is asynchronous. Identify is answered in mailbox order, so by the
        # time enrich answers it has been restarted -- and so has every sibling, since
        # the pipeline restarted them all at once.
        enrich.ask(Identify(1), timeout=2)
        print("after the failure, store has", store.ask("items", timeout=2), "items")
        print(system.tree())


if __name__ == "__main__":
    main()

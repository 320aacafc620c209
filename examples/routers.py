"""Routers: one ref in front of a pool of identical workers.

Run: python examples/routers.py

A pool router creates ``n`` routee children from one Props and forwards each message
to one of them (or to all), keeping the original sender so routees reply straight to
the asker. Because each routee handles its own messages, the pool works on ``n``
messages at a time -- here, ``n`` slow (monkey-patched, blocking-style) calls at once.
"""

from gevent import monkey

monkey.patch_all()

import logging  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

from gactors import Actor, ActorSystem, Directive, OneForOneStrategy, Props  # noqa: E402
from gactors.pattern import ask  # noqa: E402
from gactors.routing import (  # noqa: E402
    Broadcast,
    ConsistentHashingPool,
    GetRoutees,
    RoundRobinPool,
)


class Fetcher(Actor):
    def __init__(self) -> None:
        self.handled = 0

    def receive(self, message: Any) -> None:
        if message == "how many?":
            self.sender.tell((self.ref.name, self.handled))
            return
        if message == "reset":
            self.handled = 0
            return
        if message == "bad url":
            raise ValueError("cannot fetch a bad url")
        # Ordinary blocking code: under patch_all() it yields to the other greenlets.
        time.sleep(0.1)
        self.handled += 1
        self.sender.tell((self.ref.name, message))


def main() -> None:
    logging.getLogger("gactors").setLevel(logging.CRITICAL)  # the failure below is on purpose
    with ActorSystem("routers") as system:
        # Round robin: message i goes to routee i % 4.
        fetchers = system.actor_of(RoundRobinPool(4).props(Props(Fetcher)), "fetchers")
        started = time.monotonic()
        # Ask without blocking (gactors.pattern.ask returns a Future), then collect.
        futures = [ask(fetchers, f"url-{i}", timeout=5.0) for i in range(8)]
        replies = [f.get(timeout=5.0) for f in futures]
        took = time.monotonic() - started
        print(f"8 fetches of 0.1 s each on 4 routees took {took:.1f} s")
        print("handled by:", dict(Counter(name for name, _ in replies)))

        # Broadcast reaches every routee, whatever the pool's logic.
        fetchers.tell(Broadcast("reset"))
        # The router handles our messages in order: the Broadcast went out first.
        routees = fetchers.ask(GetRoutees, timeout=2.0).routees
        print("after Broadcast('reset'):", sorted(r.ask("how many?", timeout=2.0) for r in routees))

        # Consistent hashing: equal keys always reach the same routee (per-key state
        # without locks, e.g. one cache shard per user).
        shards = system.actor_of(
            ConsistentHashingPool(4, hash_mapping=lambda m: m[0]).props(Props(Fetcher)),
            "shards",
        )
        sent = [
            (user, ask(shards, (user, n), timeout=5.0))
            for user in ("ada", "bob", "cy", "dan", "eve", "fred")
            for n in range(2)
        ]
        owners: dict[str, set[str]] = {}
        for user, future in sent:
            owners.setdefault(user, set()).add(future.get(timeout=5.0)[0])
        print("routee(s) per user:", owners)

        # By default a pool escalates a routee's failure to the router's own parent.
        # A pool with its own strategy handles it instead: here, restart that routee.
        resilient = system.actor_of(
            RoundRobinPool(
                2, supervisor_strategy=OneForOneStrategy({ValueError: Directive.RESTART})
            ).props(Props(Fetcher)),
            "resilient",
        )
        resilient.tell("bad url")
        # Its mailbox kept, the restarted routee (restarts=1 below) goes on working.
        print("after a routee failed:", [resilient.ask(f"url-{i}", timeout=2.0)[1] for i in (1, 2)])
        print(system.tree())


if __name__ == "__main__":
    main()

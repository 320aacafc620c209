"""Tutorial, step 2: an actor owns the cache; the view asks it."""

from gevent import monkey

monkey.patch_all()

import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from flask import Flask  # noqa: E402
from upstream import RatesAPI  # noqa: E402

from gactors import Actor, ActorSystem, Props  # noqa: E402


# [start actor]
@dataclass(frozen=True)
class GetRate:
    currency: str


class RateCache(Actor):
    """Owns the cache: one message at a time, so no lock is needed."""

    def __init__(self, api: RatesAPI, ttl: float) -> None:
        self.api = api
        self.ttl = ttl
        self.cache: dict[str, tuple[float, float]] = {}  # currency -> (rate, fetched at)

    def receive(self, message: Any) -> None:
        if isinstance(message, GetRate):
            hit = self.cache.get(message.currency)
            if hit is None or time.monotonic() - hit[1] > self.ttl:
                hit = (self.api.fetch(message.currency), time.monotonic())
                self.cache[message.currency] = hit
            self.sender.tell(hit[0])  # reply to whoever asked
        else:
            self.unhandled(message)


# [end actor]


# [start app]
def create_app(system: ActorSystem, api: RatesAPI) -> Flask:
    rates = system.actor_of(Props(RateCache, api, ttl=60.0), "rates")
    app = Flask(__name__)

    @app.get("/rate/<currency>")
    def rate(currency: str) -> dict[str, object]:
        # Blocks this request's greenlet only; the actors and other requests go on.
        return {"currency": currency, "rate": rates.ask(GetRate(currency), timeout=2.0)}

    return app


# [end app]

if __name__ == "__main__":
    # [start check]
    api = RatesAPI()
    with ActorSystem("rates") as system:
        client = create_app(system, api).test_client()
        for _ in range(3):
            print(client.get("/rate/EUR").json)
        print("upstream calls:", api.calls)  # one: the next two came from the cache
    # [end check]

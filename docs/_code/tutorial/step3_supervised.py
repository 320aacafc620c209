"""Tutorial, step 3: children do the blocking work, and their parent supervises them."""

from gevent import monkey

monkey.patch_all()

import logging  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from flask import Flask  # noqa: E402
from upstream import RatesAPI  # noqa: E402

from gactors import (  # noqa: E402
    Actor,
    ActorRef,
    ActorSystem,
    AskTimeoutError,
    Directive,
    OneForOneStrategy,
    Props,
)


@dataclass(frozen=True)
class GetRate:
    currency: str


# [start messages]
@dataclass(frozen=True)
class Fetched:
    currency: str
    rate: float


# [end messages]


# [start fetcher]
class Fetcher(Actor):
    """Fetches the rate of one currency. It may fail: its parent decides what then."""

    def __init__(self, api: RatesAPI, currency: str) -> None:
        self.api = api
        self.currency = currency

    def receive(self, message: Any) -> None:
        if isinstance(message, GetRate):
            rate = self.api.fetch(self.currency)  # blocking I/O; may raise
            self.context.parent.tell(Fetched(self.currency, rate))  # update the cache
            self.sender.tell(rate)  # the original asker: the message was forwarded
        else:
            self.unhandled(message)


# [end fetcher]


# [start cache]
class RateCache(Actor):
    """Owns the cache and one Fetcher child per currency."""

    supervisor_strategy = OneForOneStrategy(
        {
            ConnectionError: Directive.RESTART,  # transient: a fresh fetcher, try again
            LookupError: Directive.STOP,  # an unknown currency: retrying cannot help
        },
        max_retries=3,  # a fetcher failing more than 3 times a minute is stopped
        within=60.0,
    )

    def __init__(self, api: RatesAPI, ttl: float) -> None:
        self.api = api
        self.ttl = ttl
        self.cache: dict[str, tuple[float, float]] = {}

    def receive(self, message: Any) -> None:
        if isinstance(message, GetRate):
            hit = self.cache.get(message.currency)
            if hit is not None and time.monotonic() - hit[1] <= self.ttl:
                self.sender.tell(hit[0])
            else:
                # forward keeps the sender: the fetcher replies straight to the asker.
                self.fetcher(message.currency).forward(message)
        elif isinstance(message, Fetched):
            self.cache[message.currency] = (message.rate, time.monotonic())
        else:
            self.unhandled(message)

    def fetcher(self, currency: str) -> ActorRef:
        existing = self.context.child(currency)
        if existing is not None:
            return existing
        return self.context.actor_of(Props(Fetcher, self.api, currency), currency)


# [end cache]


# [start app]
def create_app(system: ActorSystem, api: RatesAPI) -> Flask:
    rates = system.actor_of(Props(RateCache, api, ttl=60.0), "rates")
    app = Flask(__name__)

    @app.get("/rate/<currency>")
    def rate(currency: str) -> Any:
        try:
            return {"currency": currency, "rate": rates.ask(GetRate(currency), timeout=2.0)}
        except LookupError:
            return {"error": f"unknown currency {currency}"}, 404
        except (ConnectionError, AskTimeoutError):
            return {"error": "rates are unavailable, try again"}, 503

    @app.get("/debug/tree")
    def tree() -> Any:
        return system.tree(), 200, {"Content-Type": "text/plain"}

    return app


# [end app]

if __name__ == "__main__":
    logging.getLogger("gactors").setLevel(logging.CRITICAL)  # the failures are on purpose
    # [start check]
    api = RatesAPI()
    with ActorSystem("rates") as system:
        client = create_app(system, api).test_client()
        api.fail_next(ConnectionError("upstream reset the connection"))
        r = client.get("/rate/EUR")
        print(r.status_code, r.json)  # 503: the fetcher failed, its parent restarted it
        r = client.get("/rate/EUR")
        print(r.status_code, r.json)  # 200: the restarted fetcher got it
        r = client.get("/rate/XXX")
        print(r.status_code, r.json)  # 404: that fetcher was stopped
        print(client.get("/debug/tree").text)
    # [end check]

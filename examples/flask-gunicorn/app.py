"""A Flask app served by ``gunicorn -k gevent`` whose views ask supervised actors.

The actors of each worker process::

    /user/gateway            routes requests round-robin to its fetchers, supervises them
    /user/gateway/fetcher-N  each keeps an HTTP connection to the backend and does
                             ordinary (monkey-patched, so cooperative) blocking I/O

Views:

* ``GET /item/<key>`` asks the gateway, which forwards to a fetcher, which calls the
  backend and replies. While one fetcher waits on its socket, the other fetchers, the
  other requests and the gateway keep running: the worker's hub is never blocked.
* ``POST /crash`` makes the next fetcher fail on purpose. Its supervisor (the gateway)
  restarts it: the fetcher's connection is dropped and re-opened, the messages queued
  in its mailbox are kept, and requests keep succeeding.
* ``GET /stats`` reports the worker's restarts and requests served.

Run it with ``gunicorn -c gunicorn.conf.py app:app`` (see README.md).
"""

from __future__ import annotations

import http.client
import json
import os
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, jsonify, request

from gactors import Actor, ActorSystem, OneForOneStrategy, Props, Status
from gactors.contrib.wsgi import GactorsMiddleware, get_system

BACKEND_URL = os.environ.get("BACKEND_URL", "http://127.0.0.1:8001")
FETCHERS = int(os.environ.get("FETCHERS", "8"))
ASK_TIMEOUT = 5.0


# -- messages ------------------------------------------------------------------------------


class Fetch:
    """Fetch ``key`` from the backend; the reply is the backend's JSON object."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key


class Crash:
    """Fail on purpose (the supervisor restarts the fetcher)."""


class Restarted:
    """A fetcher tells its parent that it was restarted."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class GetStats:
    """Ask the gateway for its counters."""


# -- actors --------------------------------------------------------------------------------


class Fetcher(Actor):
    """Talks to the backend over one kept-alive HTTP connection."""

    def __init__(self, backend_url: str) -> None:
        url = urlsplit(backend_url)
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or 80
        self.conn: http.client.HTTPConnection | None = None

    def receive(self, message: Any) -> None:
        if isinstance(message, Fetch):
            self.sender.tell(self.fetch(message.key))
        elif isinstance(message, Crash):
            raise RuntimeError(f"{self.ref.name}: crash requested")
        else:
            self.unhandled(message)

    def fetch(self, key: str) -> dict[str, Any]:
        # Blocking I/O, cooperative because gunicorn's gevent worker patched sockets.
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=5.0)
        self.conn.request("GET", f"/item/{key}")
        response = self.conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"backend answered {response.status} for {key!r}")
        item: dict[str, Any] = json.loads(body)
        item["fetched_by"] = self.ref.name
        return item

    def post_stop(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def post_restart(self, reason: BaseException) -> None:
        self.log.info("restarted after %s: %s", type(reason).__name__, reason)
        self.context.parent.tell(Restarted(self.ref.name))


class Gateway(Actor):
    """Routes fetches round-robin and supervises the fetchers."""

    # Restart a failing fetcher (at most 50 times a minute, then stop it).
    supervisor_strategy = OneForOneStrategy(max_retries=50, within=60.0)

    def __init__(self, backend_url: str, fetchers: int) -> None:
        self.fetchers = [
            self.context.actor_of(Props(Fetcher, backend_url), f"fetcher-{i}")
            for i in range(fetchers)
        ]
        self.next = 0
        self.restarts = 0
        self.routed = 0

    def pick(self) -> Any:
        fetcher = self.fetchers[self.next % len(self.fetchers)]
        self.next += 1
        return fetcher

    def receive(self, message: Any) -> None:
        if isinstance(message, Fetch):
            self.routed += 1
            self.pick().forward(message)
        elif isinstance(message, Crash):
            victim = self.pick()
            victim.tell(message)
            self.sender.tell(Status.Success(str(victim.path)))
        elif isinstance(message, Restarted):
            self.restarts += 1
        elif isinstance(message, GetStats):
            self.sender.tell({"restarts": self.restarts, "routed": self.routed})
        else:
            self.unhandled(message)


def make_system() -> ActorSystem:
    """The system factory named in gunicorn.conf.py: one system per worker process."""
    system = ActorSystem(
        f"flask-{os.getpid()}",
        config={
            # Report any actor holding the hub for more than half a second.
            "blocking_threshold": 0.5,
            "shutdown_timeout": 5.0,
        },
    )
    system.actor_of(Props(Gateway, BACKEND_URL, FETCHERS), "gateway")
    return system


# -- the web application ------------------------------------------------------------------------

app = Flask(__name__)
app.wsgi_app = GactorsMiddleware(app.wsgi_app)  # type: ignore[method-assign]


def gateway() -> Any:
    ref = get_system(request.environ).lookup("/user/gateway")
    if ref is None:
        raise RuntimeError("the gateway actor is not running")
    return ref


@app.get("/item/<key>")
def item(key: str) -> Any:
    result = gateway().ask(Fetch(key), timeout=ASK_TIMEOUT)
    return jsonify({**result, "worker": os.getpid()})


@app.post("/crash")
def crash() -> Any:
    victim = gateway().ask(Crash(), timeout=ASK_TIMEOUT)
    return jsonify(crashed=victim, worker=os.getpid())


@app.get("/stats")
def stats() -> Any:
    counters = gateway().ask(GetStats(), timeout=ASK_TIMEOUT)
    return jsonify({**counters, "worker": os.getpid()})


@app.get("/health")
def health() -> Any:
    return jsonify(ok=True, worker=os.getpid())

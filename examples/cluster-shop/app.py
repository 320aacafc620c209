"""A Flask shop whose gunicorn workers form one gactors cluster.

Every gunicorn worker builds an actor system that joins the cluster ``shop`` on the
Redis server named by ``SHOP_REDIS_URL``. On that cluster:

* a **cart** per user is a sharded entity (``ClusterSharding``): whichever worker a
  request lands on, ``entity_ref("cart", user)`` reaches the one live cart of that user,
  wherever it runs; it is a ``PersistentActor`` whose events live in the cluster's
  Redis, so it keeps its items when its worker is killed or replaced. Adding an item
  (re-)arms its durable reminder ``abandoned`` (``SHOP_ABANDON_AFTER`` seconds, 30
  minutes by default): a cart nobody touched for that long is emptied, whichever
  workers died or were replaced meanwhile; a checkout cancels it;
* one **order-number allocator** is a cluster singleton (``ClusterSingleton``): the
  numbers live in a small SQLite table, and every write carries the allocator's fencing
  token, so an allocator that lost its lease without noticing (a paused process) cannot
  hand out a number twice -- its stale write is refused. Orders reach it through a
  ``ReliableSender`` per worker (resent until the allocator confirms them, processed
  in order, duplicates dropped); the order id is also the key of its number in SQLite,
  so a copy processed again by the next allocator gets the number it already has.

Carts and the allocator append one line per start, stop and allocation to the lifecycle
log (``SHOP_DATA_DIR/lifecycle.log``): ``event pid=.. kind=.. id=.. token=.. mono=..
wall=..``. The monotonic clock is the machine's, so lines of different workers on one
machine can be compared; tests/cluster/test_gunicorn_cluster_e2e.py checks from it that
no cart ever lived in two workers at once.

Views (JSON):

* ``POST /cart/<user>/add/<item>`` -> the cart after adding ``item``
* ``GET  /cart/<user>``            -> the cart
* ``POST /cart/<user>/checkout``   -> an order number for the cart's items (the cart is
  emptied; the order goes to the allocator through the worker's ReliableSender, and the
  view waits for its number)
* ``GET  /health``                 -> this worker's pid, node address and member count

Run it with ``SHOP_REDIS_URL=redis://127.0.0.1:6379/0 gunicorn -c gunicorn.conf.py
app:app`` (see README.md).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import gevent
from flask import Flask, jsonify, request
from orders import StaleWriter, number_of, open_orders_db, place

from gactors import Actor, ActorSystem, AskTimeoutError, Props
from gactors.cluster import Cluster, ClusterSharding, ClusterSingleton, RemoteError
from gactors.contrib.wsgi import GactorsMiddleware, get_system
from gactors.delivery import ReliableEntity, ReliableSender
from gactors.persistence import PersistentActor
from gactors.reminders import Reminders

REDIS_URL = os.environ.get("SHOP_REDIS_URL", "redis://127.0.0.1:6379/0")
DATA_DIR = Path(os.environ.get("SHOP_DATA_DIR", "shop-data"))
# Extra settings of the ``cluster`` table as JSON (the tests shorten the timings).
CLUSTER_OVERRIDES: dict[str, Any] = json.loads(os.environ.get("SHOP_CLUSTER", "{}"))
ASK_TIMEOUT = float(os.environ.get("SHOP_ASK_TIMEOUT", "8.0"))
# An untouched cart is emptied after this many seconds (a durable reminder).
ABANDON_AFTER = float(os.environ.get("SHOP_ABANDON_AFTER", str(30 * 60)))
ALLOCATOR = "order-numbers"

# A child of gunicorn's error logger: its lines go to the same place as the worker's.
log = logging.getLogger("gunicorn.error.shop")


# -- the lifecycle log -------------------------------------------------------------------------


def lifecycle(event: str, **fields: Any) -> None:
    """Append one line to the lifecycle log.

    One ``os.write`` of a short line to a file opened with ``O_APPEND``: lines written by
    several worker processes at once never interleave.
    """
    parts = [event, f"pid={os.getpid()}"]
    parts += [f"{key}={value}" for key, value in fields.items()]
    parts += [f"mono={time.monotonic():.6f}", f"wall={time.time():.6f}"]
    line = (" ".join(parts) + "\n").encode()
    DATA_DIR.mkdir(parents=True, exist_ok=True)  # also when a test uses Cart without the app
    fd = os.open(DATA_DIR / "lifecycle.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


# -- the cart: one sharded entity per user ----------------------------------------------------


class Cart(PersistentActor):
    """The cart of one user (entity id = user id), event-sourced: every added item and
    every checkout is an event in the cluster's Redis (persistence id ``cart|<user>``,
    the default for an entity). When its shard moves to another worker (a crash, a
    deploy), the cart there recovers its items from the events; its writes carry its
    shard's fencing token, so a worker that lost the shard cannot write to it."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def pre_start(self) -> None:
        lifecycle("start", kind="cart", id=self.context.entity_id, token=self.token)
        super().pre_start()

    def post_stop(self) -> None:
        lifecycle("stop", kind="cart", id=self.context.entity_id, token=self.token)
        super().post_stop()

    @property
    def token(self) -> int | None:
        return self.context.fencing_token

    def state(self) -> dict[str, Any]:
        return {
            "user": self.context.entity_id,
            "items": list(self.items),
            "pid": os.getpid(),
            "token": self.token,
        }

    def apply(self, event: Any) -> None:
        match event:
            case ("added", str(item)):
                self.items.append(item)
            case ("checked_out",) | ("abandoned",):
                self.items = []

    def receive_recover(self, event: Any) -> None:
        if isinstance(event, tuple):
            self.apply(event)

    def receive_command(self, message: Any) -> None:
        match message:
            case ("add", str(item)):
                self.persist(("added", item), self._added)
            case ("get",):
                self.sender.tell(self.state())
            case ("checkout",):
                self.persist(("checked_out",), self._checked_out)
            case ("abandon",):
                # The reminder fired: nobody touched the cart for ABANDON_AFTER seconds
                # (the reminder is durable: it fires on whichever worker owns the cart
                # then, starting the cart if need be).
                if self.items:
                    self.persist(("abandoned",), self._abandoned)
            case _:
                self.unhandled(message)

    def _added(self, event: Any) -> None:
        self.apply(event)
        # Re-armed at every add: registering the same name replaces the due time.
        self.context.reminders.register("abandoned", ("abandon",), due=ABANDON_AFTER)
        self.sender.tell(self.state())

    def _checked_out(self, event: Any) -> None:
        reply = self.state()
        self.apply(event)
        self.context.reminders.unregister("abandoned")
        self.sender.tell(reply)

    def _abandoned(self, event: Any) -> None:
        emptied = len(self.items)
        self.apply(event)
        lifecycle("abandoned", kind="cart", id=self.context.entity_id, items=emptied)


# -- the order-number allocator: a cluster singleton ---------------------------------------------


class Allocator(ReliableEntity, Actor):
    """Hands out increasing order numbers, one at a time, from the SQLite counter, to
    the orders the workers' ReliableSenders deliver (each once, in order per worker;
    the confirm leaves after ``receive`` returned)."""

    def __init__(self, db_path: str) -> None:
        self.db = open_orders_db(Path(db_path))

    def pre_start(self) -> None:
        lifecycle("start", kind="allocator", id="order-numbers", token=self.context.fencing_token)

    def post_stop(self) -> None:
        lifecycle("stop", kind="allocator", id="order-numbers", token=self.context.fencing_token)
        self.db.close()

    def receive(self, message: Any) -> None:
        match message:
            case ("order", str(order_id), str(user)):
                token = self.context.fencing_token
                if token is None:
                    raise RuntimeError("the allocator runs without a fencing token")
                try:
                    number, new = place(self.db, token, order_id, user)
                except StaleWriter as e:
                    # Not confirmed (an exception in receive sends none): the sender
                    # resends it to the allocator that owns the numbers now.
                    log.warning("order-number allocator refused: %s", e)
                    raise RuntimeError(str(e)) from e
                # The number is answered from the orders table (the checkout view reads
                # it there), so the table is the record and the commit comes first; this
                # line is the trace the tests read. A worker killed between the two
                # leaves one committed order without its line, never a line without it.
                if new:
                    lifecycle("alloc", kind="allocator", number=number, user=user, token=token)
            case _:
                self.unhandled(message)


# -- the worker's actor system ---------------------------------------------------------------

#: per worker process: the ReliableSender of its orders, and its connection to SQLite
_senders: dict[int, ReliableSender] = {}
_orders_db: dict[int, sqlite3.Connection] = {}


def make_system() -> ActorSystem:
    """The system factory named in gunicorn.conf.py: one cluster node per worker."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    system = ActorSystem(
        "shop",
        config={
            "shutdown_timeout": 8.0,
            "cluster": {"url": REDIS_URL, **CLUSTER_OVERRIDES},
        },
    )
    # Carts stay until their shard moves (no passivation), so the test sees every move.
    ClusterSharding(system).start("cart", Props(Cart), passivate_idle_after=None)
    # Every node fires the reminders of the carts (and singletons) it hosts.
    Reminders(system)
    allocator = ClusterSingleton(system).init(
        ALLOCATOR, Props(Allocator, str(DATA_DIR / "orders.sqlite"))
    )
    # One producer per worker incarnation (a producer id must never run twice at once),
    # without a store: an order whose worker dies before its number is answered is
    # retried by the client.
    _senders[os.getpid()] = ReliableSender(
        system, ALLOCATOR, f"checkout-{uuid.uuid4().hex[:12]}", durable=False, target=allocator
    )
    _orders_db[os.getpid()] = open_orders_db(DATA_DIR / "orders.sqlite")
    log.info("shop worker %d joined as %s", os.getpid(), system.address)
    return system


# -- the web application ------------------------------------------------------------------------

app = Flask(__name__)
app.wsgi_app = GactorsMiddleware(app.wsgi_app)  # type: ignore[method-assign]


def ask_cart(user: str, message: Any) -> Any:
    system = get_system(request.environ)
    return ClusterSharding(system).entity_ref("cart", user).ask(message, timeout=ASK_TIMEOUT)


@app.errorhandler(AskTimeoutError)
@app.errorhandler(RemoteError)
@app.errorhandler(RuntimeError)
def unavailable(e: Exception) -> Any:
    # While a shard or the singleton moves (a worker died), an ask can time out or the
    # allocator can refuse: the client may retry.
    log.warning("%s %s failed: %s: %s", request.method, request.path, type(e).__name__, e)
    return jsonify(error=f"{type(e).__name__}: {e}", worker=os.getpid()), 503


@app.post("/cart/<user>/add/<item>")
def add(user: str, item: str) -> Any:
    return jsonify({**ask_cart(user, ("add", item)), "worker": os.getpid()})


@app.get("/cart/<user>")
def show(user: str) -> Any:
    return jsonify({**ask_cart(user, ("get",)), "worker": os.getpid()})


@app.post("/cart/<user>/checkout")
def checkout(user: str) -> Any:
    cart = ask_cart(user, ("checkout",))
    order_id = uuid.uuid4().hex
    pid = os.getpid()
    try:
        _senders[pid].send(ALLOCATOR, ("order", order_id, user), timeout=ASK_TIMEOUT)
    except gevent.Timeout:
        # The window to the allocator is full (it is moving): a 503, as for an ask.
        raise RuntimeError("the allocator confirms no orders (it is moving)") from None
    # Reliable delivery is one-way: the number is read where the allocator wrote it.
    deadline = time.monotonic() + ASK_TIMEOUT
    while (number := number_of(_orders_db[pid], order_id)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"order {order_id} has no number yet (the allocator is moving)")
        gevent.sleep(0.02)
    return jsonify(order=number, order_id=order_id, items=cart["items"], user=user, worker=pid)


@app.get("/health")
def health() -> Any:
    cluster = Cluster(get_system(request.environ))
    members = [m for m in cluster.members if m.status == "up"]
    return jsonify(worker=os.getpid(), node=str(cluster.self_address), up=len(members))

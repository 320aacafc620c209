"""The cluster shop (examples/cluster-shop) uses both halves of SPEC §20, under real
``gunicorn -k gevent -w 3`` on a real server:

* an abandoned cart is emptied by its durable reminder (``SHOP_ABANDON_AFTER``), which
  every add re-arms: a cart in use is never emptied, an untouched one is, a checked-out
  one has no reminder left;
* orders reach the allocator singleton through each worker's ``ReliableSender``: every
  checkout gets a number, each number once, each order id once in the orders table.
"""

from __future__ import annotations

import re
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from .test_gunicorn_cluster_e2e import WORKERS, Shop, request

pytestmark = [pytest.mark.slow, pytest.mark.timeout(110)]

ABANDON_AFTER = 4.0


def ok(port: int, method: str, path: str) -> dict:  # type: ignore[type-arg]
    """The JSON of a request that must succeed (retried while the cluster settles)."""
    deadline = time.monotonic() + 20
    while True:
        good, status, data = request(port, method, path)
        if good:
            return data
        assert time.monotonic() < deadline, f"{method} {path}: {status} {data}"
        time.sleep(0.2)


def test_abandoned_cart_is_emptied_and_orders_go_through_the_reliable_sender(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_ABANDON_AFTER", str(ABANDON_AFTER))
    shop = Shop(tmp_path, redis_url, f"shop-{uuid.uuid4().hex[:8]}")
    try:
        shop.wait_until_up(WORKERS)
        port = shop.port
        ok(port, "POST", "/cart/ada/add/book")
        ok(port, "POST", "/cart/ada/add/pen")
        # Orders: each checkout answered with a number, through the ReliableSender.
        answered = []
        for i in range(6):
            user = f"buyer-{i}"
            ok(port, "POST", f"/cart/{user}/add/cup")
            order = ok(port, "POST", f"/cart/{user}/checkout")
            assert order["items"] == ["cup"] and isinstance(order["order"], int), order
            answered.append((order["order_id"], order["order"], user))
        # A cart in use: every add re-arms its reminder, so for twice ABANDON_AFTER
        # nothing is emptied (each answer lists every item added so far).
        added = []
        until = time.monotonic() + 2 * ABANDON_AFTER
        while time.monotonic() < until:
            added.append(f"i{len(added)}")
            cart = ok(port, "POST", f"/cart/dan/add/{added[-1]}")
            assert cart["items"] == added, cart
            time.sleep(0.8)
        # The untouched cart was emptied by its reminder (due ABANDON_AFTER after its
        # last add, fired within a tick).
        deadline = time.monotonic() + 20
        while ok(port, "GET", "/cart/ada")["items"]:
            assert time.monotonic() < deadline, "the abandoned cart was never emptied"
            time.sleep(0.3)
        lifecycle = (shop.data / "lifecycle.log").read_text()
        emptied = re.findall(r"^abandoned .*kind=cart id=(\S+) items=(\d+)", lifecycle, re.M)
        assert ("ada", "2") in emptied, emptied
        # Checked-out carts had their reminder cancelled; dan's was re-armed until now.
        assert {who for who, _ in emptied} == {"ada"}, emptied
    finally:
        shop.kill()
    db = sqlite3.connect(shop.data / "orders.sqlite")
    rows = db.execute("SELECT order_id, number, user FROM orders").fetchall()
    db.close()
    assert sorted(rows) == sorted(answered)
    numbers = [n for _, n, _ in rows]
    assert len(set(numbers)) == len(numbers) == 6

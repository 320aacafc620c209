"""The drill-down, the per-class charts, the reminders and the reliable-delivery panels in
a real Chromium (Playwright; skipped without it, as in test_dashboard_browser.py).

``GACTORS_DASHBOARD_DRILL_SCREENSHOT=docs/_static/dashboard-drilldown.png`` also saves
the picture kept in the docs.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
from gevent.pywsgi import WSGIServer

from gactors import Actor, ActorSystem, Props
from gactors.contrib.dashboard import DashboardApp
from gactors.testkit import await_condition

from .test_dashboard_browser import TOKEN, browser  # noqa: F401  the fixture
from .test_dashboard_views import Parent, Silent, Watcher

pytest.importorskip("msgspec")

from persistence._recorder import Recorder

from gactors.reminders import Reminders


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ActorSystem, str]]:
    system = ActorSystem(
        "shop",
        config={
            "persistence": {"path": str(tmp_path / "p.sqlite3")},
            "reminders": {"tick": 0.2},
            "metrics": {"timed_actors": ["Kid", "Recorder", "Parent"]},
        },
    )
    server = WSGIServer(("127.0.0.1", 0), DashboardApp(system, token=TOKEN), log=None)
    server.start()
    try:
        yield system, f"http://127.0.0.1:{server.server_port}/?token={TOKEN}"
    finally:
        server.stop(timeout=1)
        system.terminate()
        assert system.await_termination(10)


class Pump(Actor):
    def receive(self, message: Any) -> None:
        pass


def test_the_drill_down_and_the_class_charts(
    browser: Any,  # noqa: F811  the fixture
    served: tuple[ActorSystem, str],
) -> None:
    """A click on an actor's name opens its details, which update without a reload:
    mailbox depth over time, the last failure with its traceback (not logged: the
    strategy does not log), children, watchers, the persistence fields and reminders."""
    from playwright.sync_api import expect

    system, url = served
    orders = system.actor_of(Props(Parent), "orders")
    await_condition(lambda: system.lookup("/user/orders/kid") is not None, 10)
    kid = system.lookup("/user/orders/kid")
    system.actor_of(Props(Watcher, kid), "auditor")
    cart = system.actor_of(Props(Recorder, "cart|1", []), "cart")
    for e in ("a", "b", "c"):
        cart.tell(("persist", e))
    rem = Reminders(system)
    rem.register("expire", "x", path="/user/cart", due=600)
    rem.register("nudge", "x", path="/user/cart", due=300)
    rem.register("retry", "x", path="/user/orders/kid", due=45)

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url)
    page.wait_for_selector("#status.live")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#drill")).to_be_hidden()

    # The failure happens while the page is open; the drill-down shows its traceback.
    orders.tell("boom")
    page.click('li[data-path="/user/orders/kid"] > .row .name')
    expect(page.locator("#drill")).to_be_visible()
    expect(page.locator("#d-path")).to_have_text("/user/orders/kid")
    kid_row = page.locator('li[data-path="/user/orders/kid"] > .row.selected')
    expect(kid_row).to_have_count(1)
    expect(page.locator("#d-failure summary")).to_contain_text("LookupError: no such sku: 42")
    expect(page.locator("#d-failure summary")).to_contain_text("restart")
    expect(page.locator("#d-failure pre")).to_contain_text('raise LookupError("no such sku: 42")')
    expect(page.locator("#d-watchers")).to_have_text("gactors://shop/user/auditor")
    expect(page.locator("#d-reminders")).to_contain_text("retry")
    # The mailbox depth is sampled each second while the page looks: it fills up.
    for _ in range(12):
        orders.tell("sleep")
    deadline = time.monotonic() + 15
    while int(page.locator("#d-mailbox").get_attribute("data-samples") or 0) < 3:
        assert time.monotonic() < deadline, "the mailbox chart did not grow"
        gevent.sleep(0.2)
    expect(page.locator("#d-mailbox-note")).not_to_contain_text("peak 0,")

    # The children of a parent, and from there (a click) the persistent actor.
    page.click('li[data-path="/user/orders"] > .row .name')
    expect(page.locator("#d-path")).to_have_text("/user/orders")
    expect(page.locator("#d-children")).to_contain_text("kid")
    page.click('li[data-path="/user/cart"] > .row .name')
    expect(page.locator("#d-path")).to_have_text("/user/cart")
    fields = page.locator("#d-persistence")
    expect(fields).to_contain_text("persistence id: cart|1")
    expect(fields).to_contain_text("last sequence number: 3")
    expect(fields).to_contain_text("fencing token: none (no lease)")
    expect(page.locator("#d-reminders")).to_contain_text("expire")
    expect(page.locator("#d-reminders")).to_contain_text("nudge")

    # The reminders panel: one row per target, the earliest next due first.
    rows = page.locator("#reminder-targets tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("data-target", "/user/orders/kid")
    expect(rows.nth(1).locator(".next-due")).to_contain_text("(in ")
    expect(rows.nth(1)).to_contain_text("nudge, expire")  # by due time

    # The per-class charts: one line per timed class, redrawn at every poll.
    expect(page.locator("#classes-hint")).to_be_hidden()
    expect(page.locator("#chart-class-messages .class-legend")).to_contain_text("Kid")
    expect(page.locator("#chart-class-p99 polyline[data-cls='Kid']")).to_have_count(1)
    expect(page.locator("#chart-class-restarts")).to_have_attribute("data-classes", "Kid")
    assert page.evaluate("window.notReloaded") is True
    _screenshot(page, system)


def _screenshot(page: Any, system: ActorSystem) -> None:
    target = os.environ.get("GACTORS_DASHBOARD_DRILL_SCREENSHOT")
    if not target:
        return
    pump = system.actor_of(Props(Pump), "checkout")
    orders = system.lookup("/user/orders")
    assert orders is not None

    def traffic() -> None:
        while True:
            for i in range(500):
                pump.tell(i)
                orders.tell(i)
            gevent.sleep(0.1)

    worker = gevent.spawn(traffic)
    try:
        page.click('li[data-path="/user/orders/kid"] > .row .name')
        gevent.sleep(4)
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=target, full_page=False)
    finally:
        worker.kill()


def test_without_timed_classes_the_page_says_how(browser: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect

    system = ActorSystem("plain")
    server = WSGIServer(("127.0.0.1", 0), DashboardApp(system), log=None)
    server.start()
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"http://127.0.0.1:{server.server_port}/")
        page.wait_for_selector("#status.live")
        expect(page.locator("#classes-hint")).to_be_visible()
        expect(page.locator("#classes-hint")).to_contain_text("metrics.timed_actors")
        expect(page.locator("#chart-class-messages")).to_be_hidden()
        expect(page.locator("#chart-class-restarts")).to_be_visible()  # untimed: counted
        expect(page.locator("#reminders")).to_be_hidden()
        expect(page.locator("#delivery")).to_be_hidden()
    finally:
        server.stop(timeout=1)
        system.terminate()
        assert system.await_termination(10)


def test_unconfirmed_messages_per_producer_in_chromium(
    browser: Any,  # noqa: F811  the fixture
    redis_url: str,
) -> None:
    pytest.importorskip("redis")
    from playwright.sync_api import expect

    from gactors.cluster import ClusterSharding
    from gactors.delivery import ReliableSender

    fast = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0}
    system = ActorSystem(f"dv{uuid.uuid4().hex[:8]}", config={"cluster": dict(fast, url=redis_url)})
    server = WSGIServer(("127.0.0.1", 0), DashboardApp(system), log=None)
    server.start()
    try:
        ClusterSharding(system).start("silent", Props(Silent), number_of_shards=4)
        sender = ReliableSender(system, "silent", "orders-api", window=10, durable=False)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"http://127.0.0.1:{server.server_port}/")
        page.wait_for_selector("#status.live")
        for i in range(4):
            sender.send("cart-7", i)
        sender.send("cart-9", "x")
        row = page.locator('#producers tr[data-producer="orders-api"]')
        expect(row.locator(".unconfirmed")).to_have_text("5")
        expect(row).to_contain_text("cart-7 4, cart-9 1")
        expect(row).to_contain_text("silent")
    finally:
        server.stop(timeout=1)
        system.terminate()
        system.await_termination(15)

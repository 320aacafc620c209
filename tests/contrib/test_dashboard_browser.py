"""The dashboard in a real Chromium, used as a person would (Playwright).

It needs Playwright (``pip install 'gactors[browser]'``) and a Chromium on this
machine (Debian/Ubuntu: ``apt-get install chromium``); Playwright's own browser
download is never used. Without them the test is skipped, saying so, unless
``GACTORS_REQUIRE_BROWSER=1`` (CI sets it) makes that a failure.

``GACTORS_DASHBOARD_SCREENSHOT=docs/_static/dashboard.png`` also saves the screenshot
kept in the docs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pytest
from gevent.pywsgi import WSGIServer

from gactors import Actor, ActorSystem, HubBlocked, Props
from gactors.contrib.dashboard import DashboardApp

TOKEN = "browser-token"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _unavailable(why: str) -> None:
    if os.environ.get("GACTORS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"GACTORS_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


def _chromium() -> str:
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    _unavailable(
        "no Chromium found (/usr/bin/chromium or chromium on PATH): install it with "
        "'apt-get install chromium' (Debian/Ubuntu) to run the dashboard's browser test"
    )
    raise AssertionError("unreachable")


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed: pip install 'gactors[browser]'")
    path = _chromium()
    expect.set_options(timeout=15_000)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Service(Actor):
    """Fails on an exception, makes children on Props, waits while ``hold`` is clear."""

    hold = gevent.event.Event()

    def receive(self, message: Any) -> None:
        if isinstance(message, BaseException):
            raise message
        if isinstance(message, Props):
            self.context.actor_of(message, None)
        elif message == "wait":
            Service.hold.wait(30)


@pytest.fixture
def served() -> Iterator[tuple[ActorSystem, str]]:
    system = ActorSystem("shop")
    server = WSGIServer(("127.0.0.1", 0), DashboardApp(system, token=TOKEN), log=None)
    server.start()
    try:
        yield system, f"http://127.0.0.1:{server.server_port}/"
    finally:
        Service.hold.set()
        server.stop(timeout=1)
        system.terminate()
        assert system.await_termination(10)


def test_the_dashboard_in_chromium(browser: Any, served: tuple[ActorSystem, str]) -> None:
    from playwright.sync_api import expect

    system, url = served
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    page.set_default_timeout(15_000)

    # Without the token, or with a wrong one: refused, nothing of the system shown.
    response = page.goto(url)
    assert response is not None and response.status == 401
    assert "needs its token" in page.content() and "/user" not in page.content()
    response = page.goto(url + "?token=nope")
    assert response is not None and response.status == 401

    # With it: the tree is there, and the page says it is live.
    response = page.goto(url + f"?token={TOKEN}")
    assert response is not None and response.status == 200
    page.wait_for_selector('li[data-path="/user"] .name')
    page.wait_for_selector("#status.live")
    assert page.inner_text('li[data-path="/system"] > .row .name') == "system"
    # A mark on the window: it survives as long as the page is not reloaded.
    page.evaluate("window.notReloaded = true")

    # An actor created now appears without a reload.
    orders = system.actor_of(Props(Service), "orders")
    row = 'li[data-path="/user/orders"] > .row'
    page.wait_for_selector(row)
    assert page.inner_text(f"{row} .restarts") == "restarts 0"
    assert page.inner_text(f"{row} .badge") == "running"

    # It fails: its restart count changes, it is highlighted, the failure is listed.
    orders.tell(ValueError("card declined"))
    # (The page's CSP forbids eval: the waits go through selectors, not JS strings.)
    expect(page.locator(f"{row} .restarts")).to_have_text("restarts 1")
    page.wait_for_selector(f"{row}.restarted")
    page.wait_for_selector("#failures tbody tr")
    failure = page.inner_text("#failures tbody tr")
    assert "/user/orders" in failure and "restart" in failure
    assert "ValueError: card declined" in failure

    # A large parent is collapsed to its child count; expanded, it lists the first 100
    # and "+k more".
    catalog = system.actor_of(Props(Service), "catalog")
    for _ in range(150):
        catalog.tell(Props(Service))
    crow = 'li[data-path="/user/catalog"] > .row'
    expect(page.locator(crow)).to_contain_text("150 children")
    page.click(f"{crow} .toggle")
    page.wait_for_selector('li[data-path="/user/catalog"] > ul > li.more')
    assert page.inner_text('li[data-path="/user/catalog"] > ul > li.more') == "+50 more"
    assert page.locator('li[data-path="/user/catalog"] > ul > li[data-path]').count() == 100

    # A hub-blocking event names the actor.
    system.event_stream.publish(HubBlocked("gactors://shop/user/orders", 0.42, "  in receive"))
    page.wait_for_selector("#blocks li")
    assert "/user/orders" in page.inner_text("#blocks li")

    # A growing mailbox is highlighted (it grows between every two polls here).
    slow = system.actor_of(Props(Service), "slow")
    slow.tell("wait")

    def grow() -> None:
        for i in range(100):
            slow.tell(i)
            gevent.sleep(0.3)

    grower = gevent.spawn(grow)
    try:
        page.wait_for_selector('li[data-path="/user/slow"] > .row.growing')
    finally:
        grower.kill()

    assert page.evaluate("window.notReloaded") is True
    _screenshot(page, system, crow)


def _screenshot(page: Any, system: ActorSystem, catalog_row: str) -> None:
    target = os.environ.get("GACTORS_DASHBOARD_SCREENSHOT")
    if not target:
        return
    # A little more going on, as on a real server: traffic, dead letters, a failure.
    page.click(f"{catalog_row} .toggle")  # collapse the 150 again
    for i in range(12):
        system.dead_letters.tell(i)
    payments = system.actor_of(Props(Service), "payments")
    for _ in range(3):
        payments.tell(Props(Service))
    payments.tell(KeyError("unknown card"))
    busy = system.actor_of(Props(Service), "checkout")

    def traffic() -> None:
        while True:
            for i in range(2000):
                busy.tell(i)
            gevent.sleep(0.05)

    pump = gevent.spawn(traffic)
    try:
        gevent.sleep(2.5)
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1360, "height": 560})
        page.screenshot(path=target, full_page=False)
    finally:
        pump.kill()


# What gactors.contrib.dashboard._cluster_state returns on a cluster node (the shape
# documented in docs/dashboard.md), stood in for here: the page's cluster rendering is
# tested without a cluster.
def _cluster_shape(system: ActorSystem) -> dict[str, Any]:
    remote_tree = [
        {"path": "/", "name": "/", "parent": None, "state": "running", "actor": "_RootGuardian",
         "mailbox": 0, "restarts": 0, "children": 1, "recent_restart": False, "more": 0},
        {"path": "/user", "name": "user", "parent": "/", "state": "running",
         "actor": "_UserGuardian", "mailbox": 0, "restarts": 0, "children": 1,
         "recent_restart": False, "more": 0},
        {"path": "/user/billing", "name": "billing", "parent": "/user", "state": "running",
         "actor": "Billing", "mailbox": 7, "restarts": 2, "children": 0,
         "recent_restart": True},
    ]  # fmt: skip
    return {
        "self": "gactors://shop@node-a",
        "members": [
            {"address": "gactors://shop@node-a", "status": "up", "roles": ["web"]},
            {"address": "gactors://shop@node-b", "status": "unreachable", "roles": ["jobs"]},
        ],
        "nodes": [
            {"address": "gactors://shop@node-a", "status": "up", "tree": [], "totals": None,
             "pid": 1, "as_of": 0, "truncated": False, "error": None},
            {"address": "gactors://shop@node-b", "status": "up", "tree": remote_tree,
             "totals": {"actors": 3, "mailbox": 7, "max_mailbox": 7, "restarts": 2,
                        "truncated": False},
             "pid": 4242, "as_of": 0, "truncated": False, "error": None},
            {"address": "gactors://shop@node-c", "status": "unreachable", "tree": None,
             "totals": None, "pid": None, "as_of": None, "truncated": False,
             "error": "unreachable (no heartbeat): not asked"},
        ],
        "singletons": [{"name": "scheduler", "node": "gactors://shop@node-b", "token": 7}],
        "sharding": [
            {"type_name": "cart", "number_of_shards": 100, "role": None,
             "allocation": {"gactors://shop@node-a": 100}, "running": 1, "entities": 3}
        ],
        "shards": [
            {"type_name": "cart", "shard": 17, "node": "gactors://shop@node-a", "entities": 3,
             "token": 9, "state": "running"}
        ],
    }  # fmt: skip


def test_the_cluster_part_of_the_page(
    browser: Any, served: tuple[ActorSystem, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    import gactors.contrib.dashboard as dashboard

    _, url = served
    page = browser.new_page()
    page.goto(url + f"?token={TOKEN}")
    page.wait_for_selector("#status.live")
    assert page.locator("#cluster").is_hidden()

    monkeypatch.setattr(dashboard, "_cluster_state", lambda system, *args: _cluster_shape(system))
    expect(page.locator("#cluster")).to_be_visible()
    members = page.inner_text("#members tbody")
    assert "gactors://shop@node-a (this node)" in members and "web" in members
    assert "unreachable" in members and "jobs" in members
    assert page.inner_text("#singletons") == "scheduler → gactors://shop@node-b · token 7"
    expect(page.locator("#shards")).to_contain_text("cart — 1 of 100 shards running, 3 entities")
    expect(page.locator("#shards")).to_contain_text("gactors://shop@node-a: 1 shards, 3 entities")
    page.click("#shards summary")
    expect(page.locator("#shards .shard-list")).to_have_text(
        "cart/17 → gactors://shop@node-a (3 entities)"
    )
    trees = page.locator("#cluster-trees")
    expect(trees).to_contain_text("Node gactors://shop@node-b")
    billing = trees.locator('li[data-path="/user/billing"] > .row')
    expect(billing).to_contain_text("mailbox 7")
    assert "restarted" in (billing.get_attribute("class") or "")
    expect(trees).to_contain_text("unreachable (no heartbeat): not asked")
    expect(trees).to_contain_text("pid 4242 · 3 actors")
    # The local tree is still the local one.
    assert page.locator('#tree li[data-path="/user/billing"]').count() == 0


def test_a_real_cluster_in_chromium(browser: Any, request: pytest.FixtureRequest) -> None:
    """Node A (this process) serves the page; node B is a process of its own: the page
    shows both members and B's tree, fetched from B, and expands a node of B's tree."""
    pytest.importorskip("redis")
    pytest.importorskip("msgspec")
    import uuid

    from cluster._nodeproc import NodeProc  # tests/cluster (tests/ is on sys.path)
    from playwright.sync_api import expect

    from gactors.cluster import Cluster

    url = request.getfixturevalue("redis_url")
    fast = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0}
    name = f"shop{uuid.uuid4().hex[:6]}"
    a = ActorSystem(name, config={"cluster": dict(fast, url=url, roles=["web"])})
    server = WSGIServer(("127.0.0.1", 0), DashboardApp(a, token=TOKEN), log=None)
    server.start()
    b = None
    try:
        b = NodeProc(url, name, roles=["worker"], **fast)
        assert b.command(cmd="spawn", name="billing")["ok"]
        a.actor_of(Props(Service), "orders")
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.set_default_timeout(15_000)
        page.goto(f"http://127.0.0.1:{server.server_port}/?token={TOKEN}")
        expect(page.locator("#cluster")).to_be_visible()
        members = page.locator("#members tbody")
        a_address = str(Cluster(a).self_address)
        expect(members).to_contain_text(f"{a_address} (this node)")
        expect(members).to_contain_text(b.address)
        expect(members).to_contain_text("worker")
        node_b = page.locator(f'#cluster-trees div[data-node="{b.address}"]')
        expect(node_b).to_contain_text(f"pid {b.pid}")
        expect(node_b.locator('li[data-path="/user/billing"] > .row')).to_be_visible()
        # Only B has billing; only A has orders.
        assert page.locator('#tree li[data-path="/user/billing"]').count() == 0
        assert node_b.locator('li[data-path="/user/orders"]').count() == 0
        # B's /system, expanded from A's page: B's inspector is there.
        node_b.locator('li[data-path="/system"] > .row .toggle').click()
        expect(node_b.locator('li[data-path="/system/inspector"]')).to_be_visible()
        _screenshot_cluster(page, a, node_b)
    finally:
        server.stop(timeout=1)
        if b is not None:
            b.close()
        a.terminate()
        assert a.await_termination(15)


def _screenshot_cluster(page: Any, system: ActorSystem, node_b: Any) -> None:
    target = os.environ.get("GACTORS_DASHBOARD_CLUSTER_SCREENSHOT")
    if not target:
        return
    for i in range(5):
        system.dead_letters.tell(i)
    gevent.sleep(2.0)
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1360, "height": 900})
    page.screenshot(path=target, full_page=False)

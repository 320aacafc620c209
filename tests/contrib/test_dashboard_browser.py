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
from gactors._observer import AUTO_EXPAND
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
    """Fails on an exception, makes children on Props (named: ``("child", name, props)``),
    waits while ``hold`` is clear."""

    hold = gevent.event.Event()

    def receive(self, message: Any) -> None:
        if isinstance(message, BaseException):
            raise message
        if isinstance(message, Props):
            self.context.actor_of(message, None)
        elif isinstance(message, tuple) and message[0] == "child":
            self.context.actor_of(message[2], message[1])
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
    assert "ValueError: card declined" in failure and "\u00d71" in failure
    # The same failure again: one row, counted twice (grouped by actor and exception).
    orders.tell(ValueError("card declined"))
    expect(page.locator("#failures tbody tr")).to_contain_text("\u00d72")
    assert page.locator("#failures tbody tr").count() == 1

    # In a large tree (more than AUTO_EXPAND actors) a parent with no hot actor below
    # is collapsed to its child count; expanded, it lists the first 100 and "+k more".
    catalog = system.actor_of(Props(Service), "catalog")
    for _ in range(AUTO_EXPAND + 50):
        catalog.tell(Props(Service))
    crow = 'li[data-path="/user/catalog"] > .row'
    expect(page.locator(crow)).to_contain_text(f"{AUTO_EXPAND + 50} children")
    page.click(f"{crow} .toggle")
    page.wait_for_selector('li[data-path="/user/catalog"] > ul > li.more')
    assert page.inner_text('li[data-path="/user/catalog"] > ul > li.more') == "+250 more"
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
    # At 1400x900 the hot spots are above the fold.
    page.set_viewport_size({"width": 1400, "height": 900})
    box = page.locator("#hot").bounding_box()
    assert box is not None and box["y"] + 60 < 900, box
    assert "/user/orders" in page.inner_text("#hot-restarts")
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
        page.set_viewport_size({"width": 1400, "height": 900})
        page.screenshot(path=target, full_page=False)
    finally:
        pump.kill()


# What gactors.contrib.dashboard._cluster_state returns on a cluster node (the shape
# documented in docs/dashboard.md), stood in for here: the page's cluster rendering is
# tested without a cluster.
def _activity() -> dict[str, Any]:
    """A node's ``activity`` (what its inspector reports besides the tree)."""
    return {
        "messages_per_second": 12.0, "dead_letters": 0, "dead_letters_per_second": 0.0,
        "hub_blocked": 0, "hub_blocked_seconds": 0.0,
        "failures": [{"path": "/user/billing", "exception": "KeyError", "directive": "restart",
                      "count": 2, "first": 1.0, "last": 2.0, "message": "'card'"}],
        "blocks": [],
        "hot": {"mailbox": [{"path": "/user/billing", "mailbox": 7}],
                "restarts": [{"path": "/user/billing", "restarts": 2}]},
        "history": {"end": 100, "messages": [12, 12], "restarts": [0, 2],
                    "dead_letters": [0, 0]},
    }  # fmt: skip


def _cluster_shape(system: ActorSystem) -> dict[str, Any]:
    from gactors.contrib.dashboard import _cluster_figures

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
    shape: dict[str, Any] = {
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
                        "truncated": False, "activity": _activity()},
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
    return {**shape, **_cluster_figures(shape["nodes"])}


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
    # The cards, failures and hot spots are the cluster's (node-b's, the one that
    # answered), and say so.
    expect(page.locator("#scope")).to_have_text("figures: the cluster's, 1 of 2 members counted")
    expect(page.locator("#c-restarts")).to_have_text("2")
    expect(page.locator("#b-restarts")).to_have_text("node-a ?\nnode-b 2\nnode-c ?")
    expect(page.locator("#failures tbody tr")).to_contain_text("/user/billing @node-b")
    expect(page.locator("#hot-restarts")).to_contain_text("/user/billing @node-b restarts 2")


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
        # B's tree is small: fully expanded, B's inspector is there without a click.
        inspector = node_b.locator('li[data-path="/system/inspector"]')
        expect(inspector).to_be_visible()
        # Collapsed from A's page, then expanded again.
        node_b.locator('li[data-path="/system"] > .row .toggle').click()
        expect(inspector).to_have_count(0)
        node_b.locator('li[data-path="/system"] > .row .toggle').click()
        expect(inspector).to_be_visible()

        # Known restarts: 3 on A, 5 on B. The cards are the cluster's: 8, with the
        # per-node breakdown; the failures and hot spots name their node.
        orders = a.lookup("/user/orders")
        assert orders is not None
        for i in range(3):
            orders.tell(ValueError(f"card declined {i}"))
        for _ in range(5):
            assert b.command(cmd="tell", path="/user/billing", message="boom")["ok"]
        a_node = a_address.rpartition("@")[2]
        b_node = b.address.rpartition("@")[2]
        expect(page.locator("#c-restarts")).to_have_text("8")
        expect(page.locator("#b-restarts")).to_have_text(f"{a_node} 3\n{b_node} 5")
        expect(page.locator("#scope")).to_have_text(
            "figures: the cluster's, 2 of 2 members counted"
        )
        failures = page.locator("#failures tbody")
        expect(failures).to_contain_text(f"/user/billing @{b_node}")
        expect(failures).to_contain_text("\u00d75")
        expect(failures).to_contain_text(f"/user/orders @{a_node}")
        expect(page.locator("#hot-restarts")).to_contain_text(f"/user/billing @{b_node} restarts 5")
        # The charts: the cluster's sum and one line per node.
        lines = page.locator("#chart-restarts polyline")
        expect(lines).to_have_count(3)
        assert lines.nth(1).get_attribute("data-node") == a_node
        assert lines.nth(2).get_attribute("data-node") == b_node
        # The actors card is the sum of both nodes' too.
        state = DashboardApp(a).state()
        per_node = state["cluster"]["per_node"]
        assert [n["restarts"] for n in per_node] == [3, 5]
        assert state["cluster"]["totals"]["actors"] == sum(n["actors"] for n in per_node)
        assert state["cluster"]["totals"]["restarts"] == 8
        # The drill-down of B's actor, asked of B's inspector: its last failure with
        # the traceback recorded on B.
        node_b.locator('li[data-path="/user/billing"] > .row .name').click()
        expect(page.locator("#d-path")).to_have_text(f"{b_node} /user/billing")
        expect(page.locator("#d-summary")).to_contain_text("restarts 5")
        expect(page.locator("#d-failure summary")).to_contain_text("\u00d75")
        expect(page.locator("#d-failure pre")).to_contain_text("Traceback (most recent call last)")
        expect(page.locator("#d-reminders")).to_contain_text("another node")
        page.click("#d-close")
        expect(page.locator("#drill")).to_be_hidden()
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
    page.set_viewport_size({"width": 1400, "height": 900})
    page.screenshot(path=target, full_page=False)


def test_restarts_below_are_never_hidden(browser: Any, served: tuple[ActorSystem, str]) -> None:
    """A small tree is fully expanded; in a large one the path to a restarted actor opens
    by itself (even past the first 100 children); a row the user collapsed shows the
    restarts and queued messages of its subtree. No click needed to see a restart."""
    from playwright.sync_api import expect

    system, url = served
    orders = system.actor_of(Props(Service), "orders")
    orders.tell(("child", "payments", Props(Service)))
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url + f"?token={TOKEN}")
    page.wait_for_selector("#status.live")
    payments_row = 'li[data-path="/user/orders/payments"] > .row'
    expect(page.locator(payments_row)).to_be_visible()  # small tree: all expanded
    payments = system.lookup("/user/orders/payments")
    assert payments is not None
    payments.tell(ValueError("declined"))
    expect(page.locator(f"{payments_row} .restarts")).to_have_text("restarts 1")

    # Large tree: a parent of 350 children, collapsed; one child far past the first
    # 100 restarts: its path opens, and it is listed among the first 100.
    bulk = system.actor_of(Props(Service), "bulk")
    for i in range(AUTO_EXPAND + 50):
        bulk.tell(("child", f"w{i}", Props(Service)))
    brow = 'li[data-path="/user/bulk"] > .row'
    expect(page.locator(brow)).to_contain_text(f"{AUTO_EXPAND + 50} children")
    expect(page.locator("#tree-note")).to_contain_text("expanded down to every hot actor")
    expect(page.locator(payments_row)).to_be_visible()  # still hot: still shown
    far = system.lookup("/user/bulk/w320")
    assert far is not None
    far.tell(KeyError("stock"))
    far_row = 'li[data-path="/user/bulk/w320"] > .row'
    expect(page.locator(f"{far_row} .restarts")).to_have_text("restarts 1")
    # The user collapses /user/orders: its row says what is below.
    page.click('li[data-path="/user/orders"] > .row .toggle')
    orow = page.locator('li[data-path="/user/orders"] > .row')
    expect(orow.locator(".subtree.below")).to_have_text("below: restarts 1 · queued 0")
    expect(page.locator(payments_row)).to_have_count(0)


def test_the_charts_update_without_a_reload(browser: Any, served: tuple[ActorSystem, str]) -> None:
    """The history (one sample a second) drawn as charts, redrawn at every poll."""
    import time

    system, url = served
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url + f"?token={TOKEN}")
    page.wait_for_selector("#status.live")
    page.evaluate("window.notReloaded = true")
    chart = page.locator("#chart-messages")
    before = int(chart.get_attribute("data-total") or 0)
    end_before = int(chart.get_attribute("data-end") or 0)
    worker = system.actor_of(Props(Service), "worker")
    for i in range(500):
        worker.tell(i)
    for i in range(7):
        system.dead_letters.tell(i)
    deadline = time.monotonic() + 20
    while True:
        total = int(chart.get_attribute("data-total") or 0)
        dead = int(page.locator("#chart-dead_letters").get_attribute("data-total") or 0)
        points = page.locator("#chart-messages polyline").get_attribute("points") or ""
        if total >= before + 500 and dead >= 7 and len(points.split()) >= 3:
            break
        assert time.monotonic() < deadline, f"the chart did not move: {total}, {dead}, {points}"
        gevent.sleep(0.2)
    # Drawn: a line of one point a second, newest at the right edge.
    assert int(chart.get_attribute("data-end") or 0) > end_before
    assert points.split()[-1].startswith("599,"), points
    assert page.evaluate("window.notReloaded") is True

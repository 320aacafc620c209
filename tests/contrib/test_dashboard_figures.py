"""The dashboard's figures (issue 28): failures from supervision (logged or not),
grouped failures and hub blocks, readable names for gactors' own actors, the tree
opened by itself (small trees entirely, the path to hot actors in large ones, subtree
sums on collapsed rows), the per-second history, and the cluster's sums.

The page drawing them is tested in Chromium (``test_dashboard_browser.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

from gactors import Actor, ActorSystem, Directive, HubBlocked, OneForOneStrategy, Props
from gactors._observer import AUTO_EXPAND, actor_label, observer_for
from gactors.contrib.dashboard import DashboardApp, _cluster_figures


class Node(Actor):
    """Fails on an exception; ``("child", name)`` makes a named child."""

    def receive(self, message: Any) -> None:
        if isinstance(message, BaseException):
            raise message
        if isinstance(message, tuple) and message[0] == "child":
            self.context.actor_of(Props(Node), message[1])
            self.sender.tell("made")


class Silent(Actor):
    """A parent whose strategy restarts its children without logging."""

    supervisor_strategy = OneForOneStrategy(lambda e: Directive.RESTART, logging_enabled=False)

    def receive(self, message: Any) -> None:
        self.context.actor_of(Props(Node), message)
        self.sender.tell("made")


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("figures")
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10)


def eventually(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            gevent.sleep(0.05)


def test_failures_come_from_supervision_even_when_not_logged(
    system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    app = DashboardApp(system)
    parent = system.actor_of(Props(Silent), "silent")
    assert parent.ask("quiet", timeout=5) == "made"
    child = system.lookup("/user/silent/quiet")
    assert child is not None
    for _ in range(3):
        child.tell(ValueError("not logged"))

    def listed() -> None:
        st = app.state()
        assert [f["path"] for f in st["failures"]] == ["/user/silent/quiet"] * 3
        (group,) = st["failure_groups"]
        assert group["path"] == "/user/silent/quiet" and group["count"] == 3
        assert group["exception"] == "ValueError" and group["directive"] == "restart"
        assert group["message"] == "not logged" and group["last"] >= group["first"]
        assert st["directives"] == {"restart": 3}

    eventually(listed)
    assert "not logged" not in caplog.text  # and indeed nothing was logged


def test_repeated_failures_and_blocks_are_grouped(system: ActorSystem) -> None:
    app = DashboardApp(system)
    a = system.actor_of(Props(Node), "a")
    for i in range(4):
        a.tell(ValueError(f"boom {i}"))
    a.tell(KeyError("other"))
    for _ in range(3):
        system.event_stream.publish(HubBlocked("gactors://figures/user/a", 0.2, "stack"))
    system.event_stream.publish(HubBlocked("", 0.5, ""))

    def grouped() -> None:
        st = app.state()
        groups = {(g["exception"], g["count"]) for g in st["failure_groups"]}
        assert groups == {("ValueError", 4), ("KeyError", 1)}
        assert next(g for g in st["failure_groups"] if g["count"] == 4)["message"] == "boom 3"
        blocks = {g["path"]: g for g in st["hub_blocked"]["groups"]}
        assert blocks["/user/a"]["count"] == 3
        assert blocks["/user/a"]["seconds"] == pytest.approx(0.6)
        assert blocks["/user/a"]["max_seconds"] == pytest.approx(0.2)
        assert blocks[None]["count"] == 1

    eventually(grouped)


def test_gactors_own_actors_are_named_for_what_they_are(system: ActorSystem) -> None:
    assert actor_label("_Region", "sharding-Counter", "system") == "shard region Counter"
    assert actor_label("_Shard", "17", "sharding-cart") == "shard 17 of cart"
    assert (
        actor_label("_SingletonManager", "singletonManager-order-numbers", "system")
        == "singleton manager order-numbers"
    )
    assert actor_label("_SingletonProxy", "singletonProxy-x", "system") == "singleton proxy x"
    assert actor_label("_main.<locals>._DeadLetters", "dl", "user") == "_DeadLetters"
    assert actor_label("Cart", "ada", "user") == "Cart"
    rows = {r["path"]: r for r in DashboardApp(system).state()["tree"]}
    assert rows["/"]["label"] == "root guardian" and rows["/"]["actor"] == "_RootGuardian"
    assert rows["/user"]["label"] == "user guardian"


def test_a_small_tree_is_all_open(system: ActorSystem) -> None:
    app = DashboardApp(system)
    a = system.actor_of(Props(Node), "a")
    assert a.ask(("child", "b"), timeout=5) == "made"
    b = system.lookup("/user/a/b")
    assert b is not None
    assert b.ask(("child", "c"), timeout=5) == "made"
    paths = {r["path"] for r in app.state(auto=True)["tree"]}
    assert {"/user/a", "/user/a/b", "/user/a/b/c"} <= paths
    # Without auto (the API's default) only / and /user are open, as before.
    assert "/user/a/b" not in {r["path"] for r in app.state()["tree"]}
    # A path the page closed stays closed, and says what is below it.
    b.tell(ValueError("x"))

    def closed_row() -> None:
        rows = {r["path"]: r for r in app.state(auto=True, closed_paths=["/user/a"])["tree"]}
        assert "/user/a/b" not in rows
        assert rows["/user/a"]["subtree"] == {"restarts": 1, "mailbox": 0}

    eventually(closed_row)


def test_a_large_tree_opens_the_path_to_hot_actors(system: ActorSystem) -> None:
    app = DashboardApp(system)
    bulk = system.actor_of(Props(Node), "bulk")
    quiet = system.actor_of(Props(Node), "quiet")
    for i in range(AUTO_EXPAND + 20):
        bulk.tell(("child", f"w{i}"))
    assert quiet.ask(("child", "q"), timeout=5) == "made"
    eventually(lambda: _assert(len(app.state()["tree"]) > 0 and _actors(app) > AUTO_EXPAND))
    hot = system.lookup(f"/user/bulk/w{AUTO_EXPAND + 10}")  # past the first 100
    assert hot is not None
    hot.tell(ValueError("hot"))

    def opened() -> None:
        rows = {r["path"]: r for r in app.state(auto=True)["tree"]}
        hot_row = rows.get(f"/user/bulk/w{AUTO_EXPAND + 10}")
        assert hot_row is not None and hot_row["restarts"] == 1
        assert rows["/user/bulk"]["more"] == AUTO_EXPAND + 20 - 101
        # /user/quiet has nothing hot below: collapsed, and nothing to sum.
        assert "/user/quiet/q" not in rows and "more" not in rows["/user/quiet"]
        assert rows["/user/quiet"]["subtree"] == {"restarts": 0, "mailbox": 0}

    eventually(opened)


def _actors(app: DashboardApp) -> int:
    return int(app.state()["totals"]["actors"])


def _assert(ok: bool) -> None:
    assert ok


def test_the_history_has_one_sample_a_second(system: ActorSystem) -> None:
    obs = observer_for(system)
    a = system.actor_of(Props(Node), "a")
    for _ in range(50):
        a.tell("m")
    a.tell(ValueError("r"))
    for i in range(3):
        system.dead_letters.tell(i)

    def sampled() -> None:
        h = DashboardApp(system).state()["history"]
        assert sum(h["messages"]) >= 51 and sum(h["restarts"]) == 1
        assert sum(h["dead_letters"]) == 3
        assert len(h["messages"]) == len(h["restarts"]) == len(h["dead_letters"]) >= 2
        assert h["end"] == obs.history[-1][0]

    eventually(sampled, timeout=15)


def test_the_cluster_figures_are_the_sums_of_the_nodes() -> None:
    def node(address: str, restarts: int, actors: int, end: int, messages: list[int]) -> Any:
        activity = {
            "messages_per_second": 10.5, "dead_letters_per_second": 0.2, "hub_blocked": 1,
            "failures": [{"path": "/user/x", "exception": "E", "directive": "restart",
                          "count": restarts, "first": 1.0, "last": float(end), "message": ""}],
            "blocks": [],
            "hot": {"mailbox": [], "restarts": [{"path": "/user/x", "restarts": restarts}]},
            "history": {"end": end, "messages": messages, "restarts": [0] * len(messages),
                        "dead_letters": [0] * len(messages)},
        }  # fmt: skip
        totals = {"actors": actors, "mailbox": 2, "max_mailbox": 2, "restarts": restarts,
                  "truncated": False, "activity": activity}  # fmt: skip
        return {"address": address, "totals": totals}

    nodes = [
        node("gactors://s@a", 12, 6, 100, [1, 2, 3]),
        node("gactors://s@b", 7, 9, 101, [10, 20]),
        {"address": "gactors://s@c", "totals": None},  # not answering: not counted
    ]
    got = _cluster_figures(nodes)
    t = got["totals"]
    assert (t["restarts"], t["actors"], t["mailbox"], t["nodes"]) == (19, 15, 4, 2)
    assert t["messages_per_second"] == 21 and t["dead_letters_per_second"] == 0.4
    assert [n["counted"] for n in got["per_node"]] == [True, True, False]
    assert [h["restarts"] for h in got["hot"]["restarts"]] == [12, 7]
    assert [f["node"] for f in got["failures"]] == ["gactors://s@b", "gactors://s@a"]
    # Seconds 98..101: a's 1, 2, 3 end at 100; b's 10, 20 end at 101.
    assert got["history"] == {
        "end": 101, "messages": [1, 2, 13, 20], "restarts": [0] * 4, "dead_letters": [0] * 4
    }  # fmt: skip


def test_restarts_and_dead_letters_per_class_are_summed_over_the_nodes() -> None:
    def node(address: str, end: int, kid: list[int], dl: list[int]) -> Any:
        events = {"end": end, "omitted": 0, "classes": {
            "Kid": {"restarts": kid, "dead_letters": [0] * len(kid)},
            "Cart": {"restarts": [0] * len(dl), "dead_letters": dl},
        }}  # fmt: skip
        activity = {
            "messages_per_second": 0.0, "dead_letters_per_second": 0.0, "hub_blocked": 0,
            "failures": [], "blocks": [], "hot": {"mailbox": [], "restarts": []},
            "history": {"end": end, "messages": [], "restarts": [], "dead_letters": []},
            "class_events": events,
        }  # fmt: skip
        totals = {"actors": 1, "mailbox": 0, "max_mailbox": 0, "restarts": 0,
                  "truncated": False, "activity": activity}  # fmt: skip
        return {"address": address, "totals": totals}

    got = _cluster_figures(
        [
            node("gactors://s@a", 100, [1, 0, 2], [0, 5, 0]),
            node("gactors://s@b", 101, [3, 4], [1, 1]),
        ]
    )["class_events"]
    # Seconds 98..101: a's end at 100, b's at 101.
    assert got["end"] == 101
    assert got["classes"]["Kid"]["restarts"] == [1, 0, 5, 4]
    assert got["classes"]["Cart"]["dead_letters"] == [0, 5, 1, 1]

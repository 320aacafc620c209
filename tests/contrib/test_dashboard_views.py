"""The dashboard's drill-down (``api/actor``) and the views of issue 26 in ``api/state``:
reminders per target with their next due time, unconfirmed messages per reliable-delivery
producer; and the per-class history of timed actor classes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

from gactors import Actor, ActorSystem, OneForOneStrategy, Props
from gactors.contrib.dashboard import DashboardApp
from gactors.testkit import await_condition

from .test_dashboard import call

pytest.importorskip("msgspec")

from gactors.reminders import Reminders


class Parent(Actor):
    """Makes a child ``kid`` that fails on ``"boom"``; its strategy does not log."""

    supervisor_strategy = OneForOneStrategy(logging_enabled=False)

    def __init__(self) -> None:
        self.kid = self.context.actor_of(Props(Kid), "kid")

    def receive(self, message: Any) -> None:
        self.kid.forward(message)


class Kid(Actor):
    def receive(self, message: Any) -> None:
        if message == "boom":
            raise LookupError("no such sku: 42")
        if message == "sleep":
            gevent.sleep(0.3)


class Watcher(Actor):
    def __init__(self, target: Any) -> None:
        self.context.watch(target)

    def receive(self, message: Any) -> None:
        pass


@pytest.fixture
def solo(tmp_path: Path) -> Iterator[ActorSystem]:
    system = ActorSystem(
        "views",
        config={
            "persistence": {"path": str(tmp_path / "p.sqlite3")},
            "reminders": {"tick": 0.2},
            "metrics": {"timed_actors": ["Kid"]},
        },
    )
    try:
        yield system
    finally:
        system.terminate()
        assert system.await_termination(10)


def get_json(app: DashboardApp, path: str, query: str = "") -> Any:
    status, _, body = call(app, path, query)
    assert status == "200 OK", body
    return json.loads(body)


def test_the_drill_down_shows_what_an_actor_is(solo: ActorSystem) -> None:
    app = DashboardApp(solo)
    parent = solo.actor_of(Props(Parent), "orders")
    await_condition(lambda: solo.lookup("/user/orders/kid") is not None, 10)
    kid = solo.lookup("/user/orders/kid")
    solo.actor_of(Props(Watcher, kid), "auditor")
    Reminders(solo).register("expire", "x", path="/user/orders/kid", due=120)
    parent.tell("boom")
    view = get_json(app, "/api/actor", "path=/user/orders/kid")
    deadline = time.monotonic() + 10
    while view["last_failure"] is None or view["reminders"] == []:
        assert time.monotonic() < deadline, view
        gevent.sleep(0.2)
        view = get_json(app, "/api/actor", "path=/user/orders/kid")
    assert view["node"]["restarts"] == 1 and view["node"]["actor"] == "Kid"
    failure = view["last_failure"]
    assert failure["exception"] == "LookupError" and failure["directive"] == "restart"
    assert failure["message"] == "no such sku: 42"
    # The traceback of the failure, down to the actor's own line, though not logged.
    assert (
        "Traceback" in failure["traceback"]
        and 'raise LookupError("no such sku: 42")' in (failure["traceback"])
    )
    assert view["watchers"] == ["gactors://views/user/auditor"]
    assert [r["name"] for r in view["reminders"]] == ["expire"]
    assert view["reminders"][0]["due"] > time.time() + 100
    up = get_json(app, "/api/actor", "path=/user/orders")
    assert [c["path"] for c in up["children"]] == ["/user/orders/kid"]
    assert up["watching"] == [] and up["last_failure"] is None


def test_the_mailbox_depth_is_sampled_while_a_page_looks(solo: ActorSystem) -> None:
    app = DashboardApp(solo)
    parent = solo.actor_of(Props(Parent), "orders")
    await_condition(lambda: solo.lookup("/user/orders/kid") is not None, 10)
    first = get_json(app, "/api/actor", "path=/user/orders/kid")
    assert len(first["mailbox_history"]["depth"]) == 1  # nothing sampled yet: just now
    for _ in range(20):
        parent.tell("sleep")  # 6 s of work: the mailbox fills, then drains
    deadline = time.monotonic() + 10
    while True:
        view = get_json(app, "/api/actor", "path=/user/orders/kid")
        depth = view["mailbox_history"]["depth"]
        if len(depth) >= 4:
            break
        assert time.monotonic() < deadline, depth
        gevent.sleep(0.3)
    seconds = view["mailbox_history"]["seconds"]
    assert seconds == sorted(seconds) and max(depth) >= 5, depth


def test_the_drill_down_refuses_bad_paths(solo: ActorSystem) -> None:
    app = DashboardApp(solo)
    status, _, body = call(app, "/api/actor", "path=user")
    assert status.startswith("400") and b"must start with '/'" in body
    status, _, body = call(app, "/api/actor", "path=/user/nobody")
    assert status.startswith("404") and b"no actor at /user/nobody" in body


def test_reminders_per_target_with_the_next_due_time(solo: ActorSystem) -> None:
    app = DashboardApp(solo)
    rem = Reminders(solo)
    rem.register("b", "x", path="/user/cart-1", due=60)
    rem.register("a", "x", path="/user/cart-1", due=30, period=60)
    rem.register("c", "x", path="/user/cart-2", due=10)
    deadline = time.monotonic() + 10
    while True:
        view = get_json(app, "/api/state")["reminders"]
        if view["count"] == 3:
            break
        assert time.monotonic() < deadline, view
        gevent.sleep(0.2)
    targets = view["targets"]
    assert [t["target"] for t in targets] == ["/user/cart-2", "/user/cart-1"]
    now = time.time()
    assert 0 < targets[0]["next_due"] - now <= 10
    assert 20 < targets[1]["next_due"] - now <= 30  # "a", the earlier of the two
    assert sorted(n["name"] for n in targets[1]["names"]) == ["a", "b"]


def test_no_reminders_no_reminders_view() -> None:
    with ActorSystem("plain") as system:
        assert DashboardApp(system).state()["reminders"] is None


def test_timed_classes_have_a_per_second_history(solo: ActorSystem) -> None:
    app = DashboardApp(solo)
    parent = solo.actor_of(Props(Parent), "orders")
    parent.tell("sleep")
    deadline = time.monotonic() + 10
    while True:
        classes = get_json(app, "/api/state")["classes"]
        kid = classes["classes"].get("Kid")
        if kid is not None and sum(kid["messages"]) >= 1:
            break
        assert time.monotonic() < deadline, classes
        gevent.sleep(0.3)
    assert "Parent" not in classes["classes"]  # not in metrics.timed_actors
    i = kid["messages"].index(1)
    assert 250 <= kid["p50"][i] <= 500  # ms: the 0.3 s receive, within its bucket


def test_restarts_and_dead_letters_per_class_per_second() -> None:
    """Counted from supervision's and the event stream's events, timed classes or not."""
    with ActorSystem("events") as system:
        app = DashboardApp(system)
        parent = system.actor_of(Props(Parent), "orders")
        await_condition(lambda: system.lookup("/user/orders/kid") is not None, 10)
        for _ in range(3):
            parent.tell("boom")
        gone = system.actor_of(Props(Watcher, parent), "gone")
        system.stop(gone)
        await_condition(lambda: system.lookup("/user/gone") is None, 10)
        for i in range(4):
            gone.tell(i)  # dead letters, for a Watcher
        deadline = time.monotonic() + 10
        while True:
            events = get_json(app, "/api/state")["class_events"]["classes"]
            kid = events.get("Kid", {}).get("restarts", [])
            watcher = events.get("Watcher", {}).get("dead_letters", [])
            if sum(kid) == 3 and sum(watcher) == 4:
                break
            assert time.monotonic() < deadline, events
            gevent.sleep(0.3)
        assert sum(events["Kid"]["dead_letters"]) == 0
        assert "Parent" not in events  # it did not fail, and got no dead letter
        assert len(kid) == len(watcher)  # one entry a second, the same window


def test_without_timed_classes_the_state_says_none() -> None:
    with ActorSystem("plain") as system:
        assert DashboardApp(system).state()["classes"] is None


# -- reliable delivery (a cluster node on a real server) ---------------------------------------
class Silent(Actor):
    """An entity that never confirms: what it is sent stays unconfirmed."""

    def receive(self, message: Any) -> None:
        pass


def test_unconfirmed_messages_per_producer(redis_url: str) -> None:
    pytest.importorskip("redis")
    from gactors.cluster import ClusterSharding
    from gactors.delivery import ReliableSender

    fast = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0}
    system = ActorSystem(f"dv{uuid.uuid4().hex[:8]}", config={"cluster": dict(fast, url=redis_url)})
    try:
        ClusterSharding(system).start("silent", Props(Silent), number_of_shards=4)
        sender = ReliableSender(system, "silent", "orders-api", window=10, durable=False)
        for i in range(3):
            sender.send("a", i)
        for i in range(5):
            sender.send("b", i)
        app = DashboardApp(system)
        producers = get_json(app, "/api/state")["delivery"]
        assert len(producers) == 1
        p = producers[0]
        assert p["producer_id"] == "orders-api" and p["type_name"] == "silent"
        assert p["unconfirmed"] == 8 and p["entities_pending"] == 2 and p["window"] == 10
        assert p["top"] == [
            {"entity_id": "b", "unconfirmed": 5},
            {"entity_id": "a", "unconfirmed": 3},
        ]
        drill = get_json(app, "/api/actor", f"path={p['path']}")
        assert drill["delivery"]["unconfirmed"] == 8
    finally:
        system.terminate()
        system.await_termination(15)

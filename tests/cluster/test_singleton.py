"""ClusterSingleton (SPEC section 17) with node processes on a real Redis-protocol server.

The instances write their own lifecycle log (``Lifecycle`` in ``_nodeproc.py``: start /
stop / messages with wall time, pid, node and fencing token, appended to one file by
every process); the tests check that log. Bounds are generous (shared machine).
"""

from __future__ import annotations

import json
import logging
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gactors.testkit import await_condition

pytest.importorskip("redis")
pytest.importorskip("msgspec")

import itertools

from ._nodeproc import NodeProc

pytestmark = [pytest.mark.timeout(180)]

_log = logging.getLogger(__name__)

FAST: dict[str, Any] = {
    "heartbeat_interval": 0.2,
    "unreachable_after": 1.0,
    "down_after": 2.0,
    "lease_ttl": 1.5,
}
SLACK = 3.0


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    text = path.read_text()
    # Nodes append while we read: a last line without its newline is still being
    # written (CI once read half a record), so it is left for the next read.
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


def incarnations(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per instance (pid + token + entity): start, stop (None while running)."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in records:
        key = (r["pid"], r["token"], r.get("entity"))
        inc = out.setdefault(
            key,
            {
                "pid": r["pid"],
                "token": r["token"],
                "entity": r.get("entity"),
                "node": r["node"],
                "start": None,
                "stop": None,
                "msgs": [],
            },
        )
        if r["ev"] == "start":
            inc["start"] = r["t"]
        elif r["ev"] == "stop":
            inc["stop"] = r["t"]
        elif r["ev"] == "msg":
            inc["msgs"].append((r["t"], r["x"]))
    return list(out.values())


def assert_no_overlap(records: list[dict[str, Any]]) -> None:
    """At most one live incarnation per entity (None: the singleton) at any time, and
    fencing tokens grow in start order."""
    by_entity: dict[Any, list[dict[str, Any]]] = {}
    for inc in incarnations(records):
        by_entity.setdefault(inc["entity"], []).append(inc)
    for entity, incs in by_entity.items():
        incs.sort(key=lambda i: i["start"])
        for a, b in itertools.pairwise(incs):
            assert a["stop"] is not None and a["stop"] <= b["start"], (
                f"{entity!r}: {a} still ran when {b} started"
            )
        tokens = [i["token"] for i in incs]
        # Tokens only grow per lease; an entity may restart under the same shard lease.
        assert tokens == sorted(tokens), f"{entity!r}: fencing tokens went down: {tokens}"


def wait_until(fn: Any, timeout: float, what: str) -> Any:
    """``await_condition`` as test_sharding.py imports it (positional arguments)."""
    return await_condition(fn, timeout=timeout, interval=0.05, message=what)


class Nodes:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.name = f"s{uuid.uuid4().hex[:10]}"
        self.log = tmp / "lifecycle.jsonl"
        self.procs: list[NodeProc] = []

    def spawn(self, singleton: str | None = "svc", **cluster: Any) -> NodeProc:
        p = NodeProc(self.url, self.name, **dict(FAST, **cluster))
        self.procs.append(p)
        if singleton is not None:
            assert p.command(cmd="singleton", name=singleton, log=str(self.log))["ok"]
        return p

    def records(self) -> list[dict[str, Any]]:
        return read_log(self.log)

    def running(self) -> list[dict[str, Any]]:
        return [i for i in incarnations(self.records()) if i["stop"] is None and i["start"]]

    def close(self) -> None:
        for p in self.procs:
            p.close()


@pytest.fixture
def nodes(redis_url: str, tmp_path: Path) -> Iterator[Nodes]:
    n = Nodes(redis_url, tmp_path)
    try:
        yield n
    finally:
        n.close()


def node_of(p: NodeProc) -> str:
    return p.address.rsplit("@", 1)[1]


def test_one_instance_on_the_oldest_node_reached_through_every_proxy(nodes: Nodes) -> None:
    a = nodes.spawn()
    b = nodes.spawn()
    c = nodes.spawn()
    running = await_condition(
        nodes.running, timeout=15, interval=0.05, message="a singleton instance"
    )
    assert len(running) == 1
    assert running[0]["node"] == node_of(a), "the oldest node runs it"
    for p in (a, b, c):
        reply = p.command(cmd="singleton-ask", name="svc", message=["who"])
        assert reply["ok"], reply
        assert reply["reply"][0] == node_of(a)
        assert reply["reply"][2] == running[0]["token"]
        assert reply["reply"][3] is None  # a singleton is no entity
    time.sleep(1.0)  # several renewals: still exactly one
    assert len(nodes.running()) == 1
    assert_no_overlap(nodes.records())


def test_graceful_leave_hands_over_old_terminated_before_new_started(nodes: Nodes) -> None:
    a = nodes.spawn()
    b = nodes.spawn()
    first = await_condition(nodes.running, timeout=15, interval=0.05, message="the first instance")[
        0
    ]
    assert first["node"] == node_of(a)
    assert a.command(cmd="leave")["ok"]
    assert a.wait_for("terminated", 15) is not None
    second = await_condition(
        lambda: [i for i in nodes.running() if i["node"] == node_of(b)],
        timeout=15,
        interval=0.05,
        message="the next instance",
    )[0]
    recs = nodes.records()
    stop_msg = [r for r in recs if r["ev"] == "stop-message" and r["pid"] == a.pid]
    assert stop_msg, "the old instance got its stop_message"
    old = next(i for i in incarnations(recs) if i["pid"] == a.pid)
    assert old["stop"] is not None and old["stop"] <= second["start"]
    assert second["token"] > old["token"]
    assert_no_overlap(recs)
    reply = b.command(cmd="singleton-ask", name="svc", message=["who"])
    assert reply["reply"][0] == node_of(b)


def test_failover_after_sigkill_once_the_lease_expired(nodes: Nodes) -> None:
    a = nodes.spawn()
    b = nodes.spawn()
    first = await_condition(nodes.running, timeout=15, interval=0.05, message="the first instance")[
        0
    ]
    assert first["node"] == node_of(a)
    killed_at = time.time()
    a.signal(signal.SIGKILL)
    second = await_condition(
        lambda: [i for i in nodes.running() if i["node"] == node_of(b)],
        timeout=30,
        interval=0.05,
        message="the failover",
    )[0]
    took = second["start"] - killed_at
    bound = FAST["down_after"] + FAST["lease_ttl"] + 1.0
    _log.warning("singleton failover after SIGKILL: %.2f s (bound %.1f s)", took, bound)
    # The lease of the killed node had to expire first.
    assert took >= FAST["lease_ttl"] * 0.5
    assert took <= bound + SLACK
    assert second["token"] > first["token"]
    reply = b.command(cmd="singleton-ask", name="svc", message=["who"])
    assert reply["reply"][0] == node_of(b)


def test_proxy_buffers_in_order_and_overflow_is_dead_letters(nodes: Nodes) -> None:
    # No node has the role yet: the proxy buffers.
    client = nodes.spawn(singleton=None)
    assert client.command(
        cmd="singleton", name="svc", log=str(nodes.log), role="worker", buffer_size=5
    )["ok"]
    msgs = [["rec", i] for i in range(8)]
    assert client.command(cmd="singleton-tell", name="svc", messages=msgs)["ok"]
    dl = await_condition(
        lambda: [d for d in client.command(cmd="dead-letters")["dead_letters"] if "rec" in d],
        timeout=10,
        interval=0.05,
        message="dead letters of the overflow",
    )
    assert dl == ["('rec', 5)", "('rec', 6)", "('rec', 7)"]
    worker = nodes.spawn(singleton=None, roles=["worker"])
    assert worker.command(
        cmd="singleton", name="svc", log=str(nodes.log), role="worker", buffer_size=5
    )["ok"]
    got = await_condition(
        lambda: (
            [x for i in incarnations(nodes.records()) for _, x in i["msgs"]]
            if len([1 for r in nodes.records() if r["ev"] == "msg"]) >= 5
            else None
        ),
        timeout=15,
        interval=0.05,
        message="the buffered messages",
    )
    assert got == [0, 1, 2, 3, 4]
    assert nodes.running()[0]["node"] == node_of(worker)


def test_a_paused_holder_stops_its_instance_and_tokens_only_grow(nodes: Nodes) -> None:
    # down_after long enough that the paused node is not downed: only its lease runs out.
    slow = {"down_after": 8.0}
    a = nodes.spawn(**slow)
    b = nodes.spawn(**slow)
    first = await_condition(nodes.running, timeout=15, interval=0.05, message="the first instance")[
        0
    ]
    assert first["node"] == node_of(a)
    a.signal(signal.SIGSTOP)
    try:
        second = await_condition(
            lambda: [i for i in nodes.running() if i["node"] == node_of(b)],
            timeout=20,
            interval=0.05,
            message="the takeover",
        )[0]
    finally:
        a.signal(signal.SIGCONT)
    # Resumed past its deadline, the old holder stops its instance at once.
    old = await_condition(
        lambda: [i for i in incarnations(nodes.records()) if i["pid"] == a.pid and i["stop"]],
        timeout=10,
        interval=0.05,
        message="the paused node to stop its instance",
    )[0]
    assert second["token"] > old["token"]
    # Messages after the takeover reach the new instance only.
    assert a.command(cmd="singleton-tell", name="svc", messages=[["rec", "after"]])["ok"]
    await_condition(
        lambda: [1 for r in nodes.records() if r["ev"] == "msg" and r["x"] == "after"],
        timeout=10,
        interval=0.05,
        message="the message after the takeover",
    )
    after = [r for r in nodes.records() if r["ev"] == "msg" and r["x"] == "after"]
    assert [r["pid"] for r in after] == [b.pid]
    assert len(nodes.running()) == 1


def test_three_nodes_leaving_at_once_hand_over_to_the_one_that_stays(nodes: Nodes) -> None:
    # A rolling deploy that stops three of four nodes at the same moment (what a HUP
    # of gunicorn does to its workers): the singleton must end on the node that stays,
    # never run twice, and every old instance must stop before the next one starts.
    a = nodes.spawn()
    b = nodes.spawn()
    c = nodes.spawn()
    d = nodes.spawn()
    wait_until(
        lambda: len([m for m in d.command(cmd="members")["members"] if m[1] == "up"]) == 4,
        15,
        "4 members up",
    )
    first = wait_until(nodes.running, 15, "the first instance")[0]
    assert first["node"] == node_of(a)
    leaving = (a, b, c)
    for p in leaving:  # one after the other within milliseconds: before any gossip round
        assert p.command(cmd="leave")["ok"]
    for p in leaving:
        assert p.wait_for("terminated", 30) is not None, f"{node_of(p)} did not leave"
    last = wait_until(
        lambda: [i for i in nodes.running() if i["node"] == node_of(d)],
        30,
        "the instance on the node that stays",
    )[0]
    recs = nodes.records()
    assert_no_overlap(recs)
    assert last["token"] > first["token"]
    assert [i for i in incarnations(recs) if i["stop"] is None] == [last], (
        "exactly one instance still runs"
    )
    reply = d.command(cmd="singleton-ask", name="svc", message=["who"])
    assert reply["ok"], reply
    assert reply["reply"][0] == node_of(d)
    assert reply["reply"][2] == last["token"]
    wait_until(
        lambda: [m[0] for m in d.command(cmd="members")["members"]] == [d.address],
        15,
        "the three that left removed from the membership",
    )

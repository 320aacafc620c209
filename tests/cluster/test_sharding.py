"""ClusterSharding (SPEC section 17) with node processes on a real Redis-protocol server.

Entities are ``Lifecycle`` actors (``_nodeproc.py``) writing their own lifecycle and the
messages they got (with wall time, pid, node, entity id, fencing token) to one shared
file; the tests check that log. Hosts have the role ``"host"``; the client node (no
role) runs a proxy region and sends. Bounds are generous (shared machine).
"""

from __future__ import annotations

import logging
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("redis")
pytest.importorskip("msgspec")

from gactors.cluster._sharding import allocate, shard_of

from ._nodeproc import NodeProc
from .test_singleton import FAST, SLACK, assert_no_overlap, incarnations, read_log, wait_until

pytestmark = [pytest.mark.timeout(240)]

_log = logging.getLogger(__name__)

SHARDS = 30


def node_of(p: NodeProc) -> str:
    return p.address.rsplit("@", 1)[1]


class Shards:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.name = f"h{uuid.uuid4().hex[:10]}"
        self.log = tmp / "entities.jsonl"
        self.procs: list[NodeProc] = []

    def host(
        self, passivate: float | None = None, extract: bool = False, **cluster: Any
    ) -> NodeProc:
        p = NodeProc(self.url, self.name, **dict(FAST, roles=["host"], **cluster))
        self.procs.append(p)
        r = p.command(
            cmd="shard-start",
            type="cart",
            log=str(self.log),
            shards=SHARDS,
            role="host",
            passivate=passivate,
            extract=extract,
        )
        assert r["ok"], r
        return p

    def client(self, extract: bool = False, **cluster: Any) -> NodeProc:
        p = NodeProc(self.url, self.name, **dict(FAST, **cluster))
        self.procs.append(p)
        r = p.command(cmd="shard-proxy", type="cart", shards=SHARDS, role="host", extract=extract)
        assert r["ok"], r
        return p

    def records(self) -> list[dict[str, Any]]:
        return read_log(self.log)

    def msgs(self, entity: str) -> list[Any]:
        return [r["x"] for r in self.records() if r["ev"] == "msg" and r["entity"] == entity]

    def close(self) -> None:
        for p in self.procs:
            p.close()


@pytest.fixture
def shards(redis_url: str, tmp_path: Path) -> Iterator[Shards]:
    s = Shards(redis_url, tmp_path)
    try:
        yield s
    finally:
        s.close()


def wait_members(p: NodeProc, n: int, timeout: float = 15.0) -> None:
    wait_until(
        lambda: len([m for m in p.command(cmd="members")["members"] if m[1] == "up"]) == n,
        timeout,
        f"{n} members up",
    )


def dead_letters(shards: Shards) -> dict[str, list[str]]:
    out = {}
    for p in shards.procs:
        if p.proc.poll() is None:
            out[node_of(p)] = p.command(cmd="dead-letters")["dead_letters"][:5]
        else:
            out[node_of(p)] = [
                line for line in p.log().splitlines() if "ead letter" in line or "WARN" in line
            ][:8]
    return out


def deliver_all(shards: Shards, ents: list[str], sent: int) -> None:
    """Every entity got 0..sent-1, each once, in order."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if all(len(shards.msgs(e)) >= sent for e in ents):
            break
        time.sleep(0.1)
    for e in ents:
        got = shards.msgs(e)
        missing = sorted(set(range(sent)) - set(got))
        assert got == list(range(sent)), (
            f"{e}: {len(got)} of {sent}; missing {missing[:20]}; "
            f"out of order at {[i for i in range(1, len(got)) if got[i] < got[i - 1]][:5]}; "
            f"dead letters: {dead_letters(shards)}"
        )


def assert_no_misroute(shards: Shards) -> None:
    """No region got a message for a shard it does not own from a member: the
    "cannot happen" of the allocation table (RegionState.misrouted, logged)."""
    for p in shards.procs:
        bad = [line for line in p.log().splitlines() if "which should have sent it to" in line]
        assert not bad, f"{node_of(p)}: {bad[:3]}"


def ask_who(client: NodeProc, entity: str, timeout: float = 20.0) -> list[Any]:
    """Ask until an answer comes (an entity may be moving)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        r = client.command(
            cmd="shard-ask", type="cart", entity=entity, message=["who"], ask_timeout=1.0
        )
        if r["ok"]:
            return r["reply"]  # type: ignore[no-any-return]
        last = r
        time.sleep(0.1)
    raise AssertionError(f"no answer from {entity}: {last}")


def test_entities_start_on_first_message_with_id_and_token_in_context(shards: Shards) -> None:
    a = shards.host()
    b = shards.host()
    c = shards.client()
    wait_members(c, 3)
    assert shards.records() == [], "no entity before its first message"
    ents = [f"user-{i}" for i in range(12)]
    replies = {e: ask_who(c, e) for e in ents}
    for e, (node, _pid, token, eid) in replies.items():
        assert eid == e
        assert isinstance(token, int) and token > 0
        assert node in (node_of(a), node_of(b))
    # Spread over both hosts, each where the allocation says.
    hosts = sorted([node_of(a), node_of(b)])
    owners = allocate("cart", SHARDS, hosts)
    for e, reply in replies.items():
        assert reply[0] == owners[shard_of(e, SHARDS)]
    assert {r[0] for r in replies.values()} == set(hosts)
    # A second message reaches the same incarnation: one start per entity.
    for e in ents:
        assert ask_who(c, e) == replies[e]
    starts = [r for r in shards.records() if r["ev"] == "start"]
    assert sorted(r["entity"] for r in starts) == sorted(ents)
    # From a host too (its own region routes to the owner).
    r = a.command(cmd="shard-ask", type="cart", entity=ents[0], message=["who"])
    assert r["reply"] == replies[ents[0]]


def test_custom_extract_entity_id(shards: Shards) -> None:
    shards.host(extract=True)
    c = shards.client(extract=True)
    wait_members(c, 2)
    msgs = [[f"e{i % 3}", ["rec", i]] for i in range(9)]
    assert c.command(cmd="shard-tell", type="cart", extract=True, messages=msgs)["ok"]
    wait_until(lambda: len([r for r in shards.records() if r["ev"] == "msg"]) == 9, 15, "9 msgs")
    for k in range(3):
        assert shards.msgs(f"e{k}") == [i for i in range(9) if i % 3 == k]


def test_passivation_after_idle_and_restart_by_the_next_message(shards: Shards) -> None:
    shards.host(passivate=0.5)
    c = shards.client()
    wait_members(c, 2)
    first = ask_who(c, "idle")
    stopped = wait_until(
        lambda: [r for r in shards.records() if r["ev"] == "stop" and r["entity"] == "idle"],
        10,
        "passivation",
    )
    recs = shards.records()
    assert [r["ev"] for r in recs if r["entity"] == "idle"][:3] == ["start", "stop-message", "stop"]
    start = next(r for r in recs if r["ev"] == "start")
    assert stopped[0]["t"] - start["t"] >= 0.5 * 0.8
    again = ask_who(c, "idle")
    assert again[3] == "idle" and again[2] == first[2]
    assert len([r for r in shards.records() if r["ev"] == "start"]) == 2


def test_rebalance_on_join_moves_only_the_shards_the_new_node_wins(shards: Shards) -> None:
    a = shards.host()
    b = shards.host()
    c = shards.client()
    wait_members(c, 3)
    ents = [f"u{i}" for i in range(90)]
    before = {e: ask_who(c, e)[0] for e in ents}
    d = shards.host()
    wait_members(c, 4)
    time.sleep(1.0)  # the hand-offs
    after = {e: ask_who(c, e)[0] for e in ents}
    moved_entities = [e for e in ents if before[e] != after[e]]
    assert all(after[e] == node_of(d) for e in moved_entities), "only moves to the new node"
    moved_shards = {shard_of(e, SHARDS) for e in moved_entities}
    # Every shard of these entities that the new node wins did move.
    hosts3 = sorted(node_of(p) for p in (a, b, d))
    owners = allocate("cart", SHARDS, hosts3)
    used = {shard_of(e, SHARDS) for e in ents}
    assert moved_shards == {s for s in used if owners[s] == node_of(d)}
    all_moved = sum(1 for s in range(SHARDS) if owners[s] == node_of(d))
    ideal = SHARDS / 3
    _log.warning(
        "rebalance on join: %d of %d shards moved, ideal %.1f, ratio %.2f",
        all_moved,
        SHARDS,
        ideal,
        all_moved / ideal,
    )
    assert_no_overlap(shards.records())


def test_rebalance_on_leave_delivers_buffered_messages_in_order(shards: Shards) -> None:
    a = shards.host()
    b = shards.host()
    c = shards.client()
    wait_members(c, 3)
    # Four entities on each host, by the allocation every region computes (eight
    # fixed names could all land on b: a chance of about 1 in 128, seen once).
    owners = allocate("cart", SHARDS, sorted([node_of(a), node_of(b)]))
    names = (f"o{i}" for i in range(10_000))
    ents = [e for e in names if owners[shard_of(e, SHARDS)] == node_of(a)][:4]
    names = (f"o{i}" for i in range(10_000))
    ents += [e for e in names if owners[shard_of(e, SHARDS)] == node_of(b)][:4]
    on_a = [e for e in ents if ask_who(c, e)[0] == node_of(a)]
    assert len(on_a) == 4, "four entities run on the node that leaves"
    assert c.command(cmd="shard-stream", type="cart", entities=ents, interval=0.01)["ok"]
    time.sleep(0.5)
    assert a.command(cmd="leave")["ok"]
    assert a.wait_for("terminated", 20) is not None
    time.sleep(1.0)
    sent = c.command(cmd="shard-stream-stop")["sent"]
    deliver_all(shards, ents, sent)
    for e in on_a:
        assert ask_who(c, e)[0] == node_of(b)
    assert_no_overlap(shards.records())


def test_order_per_sender_and_entity_under_rebalance_on_join(shards: Shards) -> None:
    shards.host()
    shards.host()
    c = shards.client()
    wait_members(c, 3)
    ents = [f"j{i}" for i in range(10)]
    assert c.command(cmd="shard-stream", type="cart", entities=ents, interval=0.01)["ok"]
    time.sleep(0.5)
    shards.host()
    wait_members(c, 4)
    time.sleep(1.5)
    sent = c.command(cmd="shard-stream-stop")["sent"]
    deliver_all(shards, ents, sent)
    assert_no_overlap(shards.records())
    assert_no_misroute(shards)


def test_failover_after_a_crash_once_the_leases_expired(shards: Shards) -> None:
    a = shards.host()
    b = shards.host()
    c = shards.client()
    wait_members(c, 3)
    ents = [f"k{i}" for i in range(12)]
    placed = {e: ask_who(c, e) for e in ents}
    on_a = [e for e in ents if placed[e][0] == node_of(a)]
    assert on_a
    killed = time.monotonic()
    a.signal(signal.SIGKILL)
    for e in on_a:
        node, _, token, eid = ask_who(c, e, timeout=30)
        assert node == node_of(b) and eid == e
        assert token > placed[e][2], "a new lease: a greater fencing token"
    took = time.monotonic() - killed
    bound = FAST["down_after"] + FAST["lease_ttl"] + 1.0
    _log.warning("sharding failover after SIGKILL: %.2f s (bound %.1f s)", took, bound)
    assert took <= bound + SLACK
    assert_no_overlap([r for r in shards.records() if r["pid"] != a.pid or r["ev"] != "start"])


def test_a_paused_host_stops_its_entities_when_it_resumes_past_its_lease(shards: Shards) -> None:
    slow = {"down_after": 8.0}
    a = shards.host(**slow)
    c = shards.client(**slow)
    wait_members(c, 2)
    first = ask_who(c, "p1")
    a.signal(signal.SIGSTOP)
    time.sleep(FAST["lease_ttl"] * 1.5)
    a.signal(signal.SIGCONT)
    stop = wait_until(
        lambda: [r for r in shards.records() if r["ev"] == "stop" and r["entity"] == "p1"],
        10,
        "the entity to stop after the lease was lost",
    )
    again = ask_who(c, "p1")
    assert again[2] > first[2], "restarted under a new lease with a greater token"
    starts = [r for r in shards.records() if r["ev"] == "start" and r["entity"] == "p1"]
    assert len(starts) == 2 and starts[1]["t"] >= stop[0]["t"]
    assert_no_overlap(shards.records())
    assert incarnations(shards.records())


def test_buffers_are_bounded_overflow_is_dead_letters_then_delivered_in_order(
    shards: Shards,
) -> None:
    from gactors.cluster._sharding import BUFFER_LIMIT

    c = shards.client()  # no host yet: the region buffers per shard
    n = BUFFER_LIMIT + 3
    msgs = [["b1", ["rec", i]] for i in range(n)]
    assert c.command(cmd="shard-tell", type="cart", messages=msgs, timeout=60)["ok"]
    dl = wait_until(
        lambda: [d for d in c.command(cmd="dead-letters")["dead_letters"] if "rec" in d],
        10,
        "dead letters of the overflow",
    )
    assert dl == [f"('rec', {i})" for i in range(BUFFER_LIMIT, n)]
    shards.host()
    wait_until(lambda: len(shards.msgs("b1")) >= BUFFER_LIMIT, 60, "the buffered messages")
    assert shards.msgs("b1") == list(range(BUFFER_LIMIT))


def test_three_hosts_leaving_at_once_lose_no_message(shards: Shards) -> None:
    # Three of four hosts leave at the same moment (a gunicorn HUP stops its workers
    # together) while a client streams to entities on all of them: every message still
    # arrives exactly once and in order, every entity ends on the host that stays, and
    # no entity ever runs twice (the allocation table decides every move in one place).
    hosts = [shards.host() for _ in range(4)]
    c = shards.client()
    wait_members(c, 5)
    ents = [f"t{i}" for i in range(16)]
    placed = {e: ask_who(c, e)[0] for e in ents}
    stays = hosts[3]
    leaving = hosts[:3]
    assert {placed[e] for e in ents} - {node_of(stays)}, "entities run on the leaving hosts"
    assert c.command(cmd="shard-stream", type="cart", entities=ents, interval=0.01)["ok"]
    time.sleep(0.5)
    for p in leaving:  # within milliseconds of each other: before any gossip round
        assert p.command(cmd="leave")["ok"]
    for p in leaving:
        assert p.wait_for("terminated", 30) is not None, f"{node_of(p)} did not leave"
    time.sleep(1.0)
    sent = c.command(cmd="shard-stream-stop")["sent"]
    assert sent > 100
    deliver_all(shards, ents, sent)
    assert_no_misroute(shards)
    for e in ents:
        assert ask_who(c, e)[0] == node_of(stays)
    assert_no_overlap(shards.records())

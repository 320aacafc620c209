"""The Redis engine of the cluster seam against a real Redis-protocol server.

Every test uses its own cluster name, so tests sharing the session's server never
see each other's keys; fault tests (stop, restart, FLUSHALL) get a private server.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
import redis
from gevent import monkey

from gactors._threads import allocate_lock, start_new_thread
from gactors.cluster._redis import RedisBackend, mask_url
from gactors.cluster._seam import (
    FULL,
    GONE,
    REFUSED,
    SENT,
    Backend,
    BackendUnavailable,
    InboxReader,
    LeaseStore,
    MembershipStore,
    Outbox,
)
from gactors.testkit._redis_server import RedisServer, free_port

_real_sleep: Callable[[float], None] = monkey.get_original("time", "sleep")


def _name() -> str:
    return f"c{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_backend() -> Iterator[Callable[..., RedisBackend]]:
    made: list[RedisBackend] = []

    def make(url: str, cluster: str | None = None, **kwargs: Any) -> RedisBackend:
        backend = RedisBackend(url, cluster or _name(), **kwargs)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def backend(redis_url: str, make_backend: Callable[..., RedisBackend]) -> RedisBackend:
    backend = make_backend(redis_url)
    # Inboxes exist once their node joined (senders never create one): these stand
    # for nodes that joined.
    for node in ("n0", "n1", "n2"):
        backend.open_inbox(node)
    return backend


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    yield client
    client.close()


def _run_in_threads(fns: list[Callable[[], Any]], timeout: float = 20.0) -> list[Any]:
    """Run each fn on its own real OS thread (not a greenlet), all released at once;
    return their results (or exceptions) in order."""
    results: list[Any] = [None] * len(fns)
    go = allocate_lock()
    go.acquire()
    done = [allocate_lock() for _ in fns]
    for lock in done:
        lock.acquire()

    def runner(i: int) -> None:
        try:
            go.acquire()
            go.release()
            results[i] = fns[i]()
        except BaseException as exc:
            results[i] = exc
        finally:
            done[i].release()

    for i in range(len(fns)):
        start_new_thread(runner, (i,))
    go.release()
    deadline = time.monotonic() + timeout
    for lock in done:
        # An original lock: waiting on it blocks this OS thread, which is fine here.
        assert lock.acquire(True, max(deadline - time.monotonic(), 0.01)), "thread hung"
    return results


# --- the seam -------------------------------------------------------------------------


def test_the_objects_implement_the_seam(backend: RedisBackend) -> None:
    assert isinstance(backend, Backend)
    assert isinstance(backend.outbox(), Outbox)
    assert isinstance(backend.inbox_reader("n1"), InboxReader)
    assert isinstance(backend.membership(), MembershipStore)
    assert isinstance(backend.leases(), LeaseStore)


def test_bad_arguments_are_refused_with_a_clear_error(redis_url: str) -> None:
    with pytest.raises(
        ValueError, match=r"redis://, rediss://, unix://, redis\+sentinel:// or redis\+cluster://"
    ):
        RedisBackend("http://u:hunter2@h/0", "shop")
    with pytest.raises(ValueError, match="hash tag") as info:
        RedisBackend(redis_url, "sh{op}")
    assert "sh{op}" in str(info.value)
    with pytest.raises(ValueError, match="key prefix"):
        RedisBackend(redis_url, "shop", key_prefix="a b")
    backend = RedisBackend(redis_url, "shop")
    with pytest.raises(ValueError, match="node id"):
        backend.inbox_reader("a/b")
    with pytest.raises(ValueError, match="block_ms"):
        backend.inbox_reader("n1", max_block_ms=100).read(500, 10)
    with pytest.raises(ValueError, match="unreachable_after_ms < down_after_ms"):
        backend.membership().heartbeat("n1", 500, 500)
    with pytest.raises(ValueError, match="ttl_ms"):
        backend.leases().acquire("x", "me", 0)
    backend.close()


# --- outbox and inbox -----------------------------------------------------------------


def test_outbox_to_inbox_keeps_order_per_inbox(backend: RedisBackend) -> None:
    outbox = backend.outbox()
    r1, r2 = backend.inbox_reader("n1"), backend.inbox_reader("n2")
    outbox.send([("n1", b"a1"), ("n2", b"b1"), ("n1", b"a2")])
    outbox.send([("n1", b"a3")])
    outbox.send([])  # nothing, no error
    assert r1.read(1000, 100) == [b"a1", b"a2", b"a3"]
    assert r2.read(1000, 100) == [b"b1"]
    # each entry once: the reader remembers where it was
    assert r1.read(50, 100) == []
    outbox.send([("n1", b"a4")])
    assert r1.read(1000, 100) == [b"a4"]


def test_read_count_limits_and_the_rest_comes_next(backend: RedisBackend) -> None:
    outbox, reader = backend.outbox(), backend.inbox_reader("n1")
    outbox.send([("n1", bytes([i])) for i in range(10)])
    assert reader.read(1000, 4) == [bytes([i]) for i in range(4)]
    assert reader.read(1000, 100) == [bytes([i]) for i in range(4, 10)]


def test_a_new_reader_starts_at_the_beginning_of_its_inbox(backend: RedisBackend) -> None:
    # Sent after the join but before the node's reader first read: still for it.
    backend.outbox().send([("n1", b"early")])
    assert backend.inbox_reader("n1").read(1000, 10) == [b"early"]


def test_read_blocks_bounded_and_returns_empty_on_timeout(backend: RedisBackend) -> None:
    reader = backend.inbox_reader("n1")
    start = time.monotonic()
    assert reader.read(300, 10) == []
    elapsed = time.monotonic() - start
    assert 0.25 <= elapsed < 5.0


def test_a_blocked_read_yields_to_other_greenlets(backend: RedisBackend) -> None:
    reader = backend.inbox_reader("n1")
    outbox = backend.outbox()
    reading = gevent.spawn(reader.read, 5000, 10)
    gevent.sleep(0.1)
    assert not reading.ready()
    outbox.send([("n1", b"wake")])  # runs while the read blocks
    assert reading.get(timeout=5) == [b"wake"]


def test_a_read_killed_midway_leaves_no_stale_reply(backend: RedisBackend) -> None:
    reader = backend.inbox_reader("n1")
    reading = gevent.spawn(reader.read, 3000, 10)
    gevent.sleep(0.1)
    reading.kill(block=True, timeout=5)
    backend.outbox().send([("n1", b"after")])
    # The interrupted XREAD's reply must never be taken for this one.
    assert reader.read(1000, 10) == [b"after"]
    assert reader.read(50, 10) == []


def test_an_entry_without_a_batch_comes_back_empty(backend: RedisBackend, raw: redis.Redis) -> None:
    raw.xadd(backend.inbox_key("n1"), {"junk": "x"})
    backend.outbox().send([("n1", b"good")])
    assert backend.inbox_reader("n1").read(1000, 10) == [b"", b"good"]


def _commands(raw: redis.Redis) -> int:
    return int(raw.info("stats")["total_commands_processed"])


def _cmdstat(raw: redis.Redis, name: str) -> int:
    stats = raw.info("commandstats")
    return int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))


def _count_round_trips(client_owner: Any) -> list[int]:
    """Count the writes to the socket of the (only) connection an object uses: one
    write of a request and then reading its replies is one round trip."""
    counter = [0]
    conn = client_owner._conn.held_connection()
    assert conn is not None, "the object has not used its connection yet"
    original = conn.send_packed_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return original(*args, **kwargs)

    conn.send_packed_command = counting
    return counter


def test_send_is_one_round_trip_of_one_script_per_batch(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    outbox = backend.outbox()
    outbox.send([("n1", b"warm-up")])  # connect first: connecting is not a send
    writes = _count_round_trips(outbox)
    before = _cmdstat(raw, "evalsha"), _cmdstat(raw, "xadd"), _commands(raw)
    assert outbox.send([(f"n{i % 3}", b"x" * 10) for i in range(100)]) == [SENT] * 100
    # One EVALSHA per batch, each one EXISTS + XLEN + XADD inside the script, and
    # the INFO that read the first counter: no MULTI/EXEC, PING or SCRIPT EXISTS.
    assert _cmdstat(raw, "evalsha") - before[0] == 100
    assert _cmdstat(raw, "xadd") - before[1] == 100
    assert writes[0] == 1
    outbox.send([("n1", b"x")] * 10)
    assert writes[0] == 2


def test_a_send_to_an_inbox_that_does_not_exist_creates_nothing(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    # A node that never joined, or whose inbox was drained after its removal: the
    # sender learns it (GONE) and the key never comes back (SPEC §17: no key outlives
    # its node).
    assert backend.outbox().send([("n1", b"a"), ("ghost", b"b"), ("n1", b"c")]) == [
        SENT,
        GONE,
        SENT,
    ]
    assert not raw.exists(backend.inbox_key("ghost"))
    assert backend.inbox_reader("n1").read(1000, 10) == [b"a", b"c"]


def test_a_full_inbox_refuses_new_batches_and_drops_nothing_unread(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    outbox, reader = backend.outbox(), backend.inbox_reader("n1")
    got = outbox.send([("n1", b"%d" % i) for i in range(8)], max_unread=5)
    assert got == [SENT] * 5 + [FULL] * 3
    assert raw.xlen(backend.inbox_key("n1")) == 5  # never trimmed by a sender
    assert reader.read(1000, 3) == [b"0", b"1", b"2"]
    assert reader.read(1000, 10) == [b"3", b"4"]
    # What was read is trimmed with a later read (every 64 entries, or once a read
    # found the inbox empty), which makes room again.
    assert raw.xlen(backend.inbox_key("n1")) == 5
    assert reader.read(50, 10) == []
    assert reader.read(50, 10) == []  # carries the trim
    assert raw.xlen(backend.inbox_key("n1")) == 0
    assert outbox.send([("n1", b"x")] * 6, max_unread=5) == [SENT] * 5 + [FULL]
    assert reader.read(1000, 10) == [b"x"] * 5


def test_the_reader_trims_what_it_read_every_64_entries(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    outbox, reader = backend.outbox(), backend.inbox_reader("n1")
    outbox.send([("n1", b"%d" % i) for i in range(100)])
    for i in range(64):
        assert reader.read(1000, 1) == [b"%d" % i]
    assert raw.xlen(backend.inbox_key("n1")) == 100  # nothing trimmed yet
    assert reader.read(1000, 1) == [b"64"]  # this read trimmed the first 64
    assert raw.xlen(backend.inbox_key("n1")) == 36


def test_an_error_reply_midway_leaves_the_connection_clean(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    raw.set(backend.inbox_key("bad"), "not a stream")  # XLEN on it: WRONGTYPE
    outbox, reader = backend.outbox(), backend.inbox_reader("n1")
    assert outbox.send([("n1", b"1"), ("bad", b"2"), ("n1", b"3")]) == [SENT, REFUSED, SENT]
    # every reply was read: the next send does not see a stale one
    assert outbox.send([("n1", b"4")]) == [SENT]
    assert reader.read(1000, 10) == [b"1", b"3", b"4"]


def test_a_flushed_script_is_loaded_and_the_batches_sent_in_order(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    outbox, reader = backend.outbox(), backend.inbox_reader("n1")
    outbox.send([("n1", b"0")])
    raw.script_flush()  # as after a restart: the server forgot the script
    assert outbox.send([("n1", b"%d" % i) for i in range(1, 4)]) == [SENT] * 3
    assert reader.read(1000, 10) == [b"0", b"1", b"2", b"3"]


def test_large_and_binary_batches_arrive_intact(backend: RedisBackend) -> None:
    big = bytes(range(256)) * 20_000  # 5 MB with every byte value, CR LF included
    backend.outbox().send([("n1", b""), ("n1", big), ("n1", b"\r\n$3\r\n")])
    assert backend.inbox_reader("n1").read(2000, 10) == [b"", big, b"\r\n$3\r\n"]


# --- membership ---------------------------------------------------------------------


def test_join_heartbeat_view(backend: RedisBackend, raw: redis.Redis) -> None:
    store = backend.membership()
    v1 = store.join("n1", ["web", "api"])
    assert v1.version == 1 and v1.epoch
    assert [(m.node, m.roles, m.status) for m in v1.members] == [("n1", ("web", "api"), "up")]
    v2 = store.join("n2", [])
    assert v2.version == 2 and v2.epoch == v1.epoch
    assert [m.node for m in v2.members] == ["n1", "n2"]  # oldest first
    # server time: the view's clock is the server's, not ours
    server_seconds, micros = raw.time()
    assert abs(v2.server_time_ms - (server_seconds * 1000 + micros // 1000)) < 5000
    gevent.sleep(0.2)
    beat = store.heartbeat("n1", 1000, 2000)
    assert not beat.self_removed and beat.reaped == ()
    ages = {m.node: m.last_heartbeat_age_ms for m in beat.view.members}
    assert ages["n1"] == 0
    assert 150 <= ages["n2"] < 5000
    assert beat.view.version == 2  # a beat is not a membership change
    assert store.view().version == 2
    with pytest.raises(ValueError, match="already a member"):
        store.join("n1", [])


def test_heartbeat_reaps_after_down_after_on_server_time(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    store = backend.membership()
    store.join("n1", [])
    store.join("n2", [])
    backend.outbox().send([("n2", b"for the dead")])
    assert raw.exists(backend.inbox_key("n2"))
    reader = backend.inbox_reader("n2")
    assert reader.read(1000, 10) == [b"for the dead"]
    backend.outbox().send([("n2", b"unread 1"), ("n2", b"unread 2")])
    assert store.heartbeat("n1", 100, 300).reaped == ()
    gevent.sleep(0.5)
    beat = store.heartbeat("n1", 100, 300)
    assert beat.reaped == ("n2",)
    assert [m.node for m in beat.view.members] == ["n1"]
    assert "n2" in beat.view.removed
    assert beat.view.version == 3
    # The reaper leaves the inbox for a drain, which takes exactly what was never
    # read, once, and deletes it; senders then find no inbox.
    assert raw.exists(backend.inbox_key("n2"))
    drains = [backend.membership().drain_inbox("n2") for _ in range(3)]
    assert drains == [[b"unread 1", b"unread 2"], None, None]
    assert not raw.exists(backend.inbox_key("n2"))
    assert backend.outbox().send([("n2", b"late")]) == [GONE]
    assert not raw.exists(backend.inbox_key("n2"))
    reasons = raw.hgetall(backend.membership_keys()[5])
    assert b"no heartbeat for" in reasons[b"n2"] and b"downed by n1" in reasons[b"n2"]
    # the reaped node learns it on its next beat, and nothing is written for it
    late = store.heartbeat("n2", 100, 300)
    assert late.self_removed and late.reaped == ()
    assert [m.node for m in store.view().members] == ["n1"]
    with pytest.raises(ValueError, match="never reused"):
        store.join("n2", [])


def test_heartbeat_keeps_the_own_inbox_expiring(backend: RedisBackend, raw: redis.Redis) -> None:
    store = backend.membership()
    raw.delete(backend.inbox_key("n1"))
    store.join("n1", [], inbox_ttl_ms=3000)
    backend.outbox().send([("n1", b"x")])
    assert 0 < raw.pttl(backend.inbox_key("n1")) <= 3000  # the join gave it an expiry
    store.heartbeat("n1", 1000, 5000)
    assert 9000 < raw.pttl(backend.inbox_key("n1")) <= 10000


def test_heartbeat_reports_the_inbox_backlog_when_asked(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    # Issue 28: the unread entries of the node's inbox, in the heartbeat's round trip.
    store = backend.membership()
    raw.delete(backend.inbox_key("n1"))
    store.join("n1", [])
    assert store.heartbeat("n1", 1000, 5000, backlog=True).inbox_backlog == 0
    backend.outbox().send([("n1", b"a"), ("n1", b"b"), ("n1", b"c")])
    assert store.heartbeat("n1", 1000, 5000).inbox_backlog is None  # not asked
    assert store.heartbeat("n1", 1000, 5000, backlog=True).inbox_backlog == 3
    reader = backend.inbox_reader("n1", max_block_ms=100)
    try:
        # A full read (count 2): the next one is sent without BLOCK, and timed.
        assert reader.read(100, 2) == [b"a", b"b"] and reader.last_round_trip is None
        assert store.heartbeat("n1", 1000, 5000, backlog=True).inbox_backlog == 1
        assert reader.read(100, 2) == [b"c"]
        assert reader.last_round_trip is not None and 0 < reader.last_round_trip < 5
        assert reader.read(100, 2) == [] and reader.last_round_trip is None  # blocked
    finally:
        reader.close()
    assert store.heartbeat("n1", 1000, 5000, backlog=True).inbox_backlog == 0
    # Removed, its inbox gone: the beat still says so (the backlog is unknown).
    store.remove("n1", "down")
    raw.delete(backend.inbox_key("n1"))
    beat = store.heartbeat("n1", 1000, 5000, backlog=True)
    assert beat.self_removed and beat.inbox_backlog is None


def test_concurrent_beats_reap_each_dead_node_exactly_once(
    redis_url: str, make_backend: Callable[..., RedisBackend]
) -> None:
    backend = make_backend(redis_url)
    setup = backend.membership()
    beaters = [f"live{i}" for i in range(6)]
    dead = [f"dead{i}" for i in range(5)]
    for node in beaters + dead:
        setup.join(node, [])
    stores = [backend.membership() for _ in beaters]
    for node, store in zip(beaters, stores, strict=True):
        store.heartbeat(node, 100, 2000)  # connect every store before the race
    gevent.sleep(1.2)
    for node, store in zip(beaters, stores, strict=True):
        store.heartbeat(node, 100, 2000)  # the live ones stay fresh...
    gevent.sleep(1.0)  # ... the dead ones are now > 2000 ms old, the live ones ~1000
    results = _run_in_threads(
        [lambda n=n, s=s: s.heartbeat(n, 100, 2000) for n, s in zip(beaters, stores, strict=True)]
    )
    for result in results:
        assert not isinstance(result, BaseException), result
    reaped = [node for result in results for node in result.reaped]
    assert sorted(reaped) == sorted(dead)  # each one reaped, by exactly one beat
    view = setup.view()
    assert sorted(m.node for m in view.members) == sorted(beaters)
    assert view.version == len(beaters) + 2 * len(dead)


def test_remove_and_tombstone_make_the_node_self_removed(backend: RedisBackend) -> None:
    store = backend.membership()
    store.join("n1", [])
    store.join("n2", [])
    assert store.remove("n2", "manual down") is True
    assert store.remove("n2", "again") is False  # someone (here: we) removed it first
    assert store.remove("nobody", "x") is False
    view = store.view()
    assert [m.node for m in view.members] == ["n1"] and view.removed == ("n2",)
    beat = store.heartbeat("n2", 1000, 2000)
    assert beat.self_removed
    assert store.view().version == view.version  # nothing written


def test_set_leaving_then_remove(backend: RedisBackend) -> None:
    store = backend.membership()
    store.join("n1", ["r"])
    version = store.view().version
    store.set_leaving("n1")
    view = store.view()
    assert view.members[0].status == "leaving" and view.members[0].roles == ("r",)
    assert view.version == version + 1
    store.set_leaving("n1")  # idempotent
    assert store.view().version == version + 1
    store.set_leaving("unknown")  # no-op
    # a leaving member still beats normally until it is removed
    assert not store.heartbeat("n1", 1000, 2000).self_removed
    assert store.remove("n1", "left") is True
    assert store.view().members == ()


def test_epoch_loss_after_flushall_means_self_removed(
    redis_server: RedisServer, make_backend: Callable[..., RedisBackend]
) -> None:
    backend = make_backend(redis_server.url)
    store = backend.membership()
    old = store.join("n1", []).epoch
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    assert store.heartbeat("n1", 1000, 2000).self_removed
    new = store.join("n3", []).epoch
    assert new and new != old


def test_scripts_are_reloaded_after_the_server_forgot_them(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    store, leases = backend.membership(), backend.leases()
    store.join("n1", [])
    raw.script_flush()  # as after a restart or a failover
    assert not store.heartbeat("n1", 1000, 2000).self_removed
    raw.script_flush()
    assert [m.node for m in store.view().members] == ["n1"]
    raw.script_flush()
    assert leases.acquire("l", "me", 1000) is not None


def test_tombstones_are_trimmed_by_count(
    redis_url: str, make_backend: Callable[..., RedisBackend]
) -> None:
    backend = make_backend(redis_url, tombstone_max=3, view_removed=10)
    store = backend.membership()
    for i in range(6):
        store.join(f"n{i}", [])
    for i in range(6):
        assert store.remove(f"n{i}", "test")
    assert store.view().removed == ("n3", "n4", "n5")


def test_two_clusters_on_one_server_never_meet(
    redis_url: str, make_backend: Callable[..., RedisBackend]
) -> None:
    name = _name()
    a = make_backend(redis_url, name)
    b = make_backend(redis_url, name + "-b")
    c = make_backend(redis_url, name, key_prefix="other")
    sa, sb, sc = a.membership(), b.membership(), c.membership()
    sa.join("n1", [])
    sb.join("n1", [])  # the same node id in another cluster is another member
    assert [m.node for m in sb.view().members] == ["n1"]
    assert sc.view().members == ()
    sa.remove("n1", "x")
    assert [m.node for m in sb.view().members] == ["n1"]
    assert not sb.heartbeat("n1", 1000, 2000).self_removed
    c.open_inbox("n1")
    a.outbox().send([("n1", b"for a")])
    assert b.inbox_reader("n1").read(50, 10) == []
    assert c.inbox_reader("n1").read(50, 10) == []
    assert a.inbox_reader("n1").read(1000, 10) == [b"for a"]
    la, lb = a.leases(), b.leases()
    assert la.acquire("single", "x", 5000) is not None
    assert lb.acquire("single", "y", 5000) is not None


# --- leases ---------------------------------------------------------------------------


def test_lease_acquire_renew_release_expire(backend: RedisBackend) -> None:
    leases = backend.leases()
    t1 = leases.acquire("singleton", "a", 2000)
    assert t1 is not None
    assert leases.acquire("singleton", "b", 2000) is None
    assert leases.acquire("singleton", "a", 2000) == t1  # the holder again: a renewal
    holder = leases.holder("singleton")
    assert holder is not None and holder[:2] == ("a", t1) and 0 < holder[2] <= 2000
    assert leases.renew("singleton", "a", t1, 3000)
    holder = leases.holder("singleton")
    assert holder is not None and 2000 < holder[2] <= 3000
    assert not leases.renew("singleton", "b", t1, 3000)  # not the owner
    assert not leases.renew("singleton", "a", t1 + 1, 3000)  # not its token
    assert not leases.release("singleton", "b", t1)
    assert leases.release("singleton", "a", t1)
    assert leases.holder("singleton") is None
    assert not leases.release("singleton", "a", t1)  # released already
    t2 = leases.acquire("singleton", "b", 150)
    assert t2 is not None and t2 > t1
    gevent.sleep(0.4)
    assert leases.holder("singleton") is None  # expired
    assert not leases.renew("singleton", "b", t2, 1000)  # too late: stop working
    t3 = leases.acquire("singleton", "a", 1000)
    assert t3 is not None and t3 > t2
    assert leases.holder("other") is None


def test_fencing_tokens_increase_strictly(backend: RedisBackend) -> None:
    leases = backend.leases()
    tokens = []
    for i in range(20):
        token = leases.acquire("x", f"owner{i % 3}", 1000)
        assert token is not None
        tokens.append(token)
        assert leases.release("x", f"owner{i % 3}", token)
    assert tokens == sorted(set(tokens))


def test_fencing_tokens_keep_increasing_after_the_store_lost_its_data(
    redis_server: RedisServer, make_backend: Callable[..., RedisBackend]
) -> None:
    backend = make_backend(redis_server.url)
    leases = backend.leases()
    before = leases.acquire("x", "a", 60000)
    assert before is not None
    redis_server.restart()  # no persistence: everything is gone
    after = None
    for _ in range(50):  # the next call after a failure reconnects
        try:
            after = leases.acquire("x", "b", 60000)
            break
        except BackendUnavailable:
            gevent.sleep(0.05)
    assert after is not None and after > before


def test_two_owners_race_for_one_lease_one_wins(
    redis_url: str, make_backend: Callable[..., RedisBackend]
) -> None:
    backend = make_backend(redis_url)
    stores = [backend.leases() for _ in range(8)]
    for store in stores:
        store.holder("warm-up")  # connect first so that the race is on the grant
    results = _run_in_threads(
        [lambda i=i, s=s: s.acquire("the-one", f"owner{i}", 5000) for i, s in enumerate(stores)]
    )
    winners = [i for i, r in enumerate(results) if r is not None]
    for result in results:
        assert not isinstance(result, BaseException), result
    assert len(winners) == 1
    holder = stores[0].holder("the-one")
    assert holder is not None and holder[0] == f"owner{winners[0]}"


def test_a_lease_store_is_shared_by_greenlets(backend: RedisBackend) -> None:
    leases = backend.leases(max_connections=2)
    jobs = [gevent.spawn(leases.acquire, f"l{i}", "me", 5000) for i in range(20)]
    gevent.joinall(jobs, timeout=10, raise_error=True)
    assert all(job.value is not None for job in jobs)


# --- faults -------------------------------------------------------------------------


def _all_calls(backend: RedisBackend) -> dict[str, Callable[[], Any]]:
    outbox, reader = backend.outbox(), backend.inbox_reader("n1", max_block_ms=1000)
    store, leases = backend.membership(), backend.leases()
    return {
        "ping": backend.ping,
        "send": lambda: outbox.send([("n1", b"x")]),
        "read": lambda: reader.read(100, 10),
        "heartbeat": lambda: store.heartbeat("n1", 1000, 2000),
        "view": store.view,
        "acquire": lambda: leases.acquire("l", "me", 1000),
    }


def test_stopped_server_raises_backend_unavailable_fast_then_recovers(
    redis_server: RedisServer, make_backend: Callable[..., RedisBackend]
) -> None:
    backend = make_backend(redis_server.url)
    backend.membership().join("n1", [])
    calls = _all_calls(backend)
    for call in calls.values():
        call()  # every object connected
    redis_server.stop()
    for what, call in calls.items():
        start = time.monotonic()
        with pytest.raises(BackendUnavailable) as info:
            call()
        assert time.monotonic() - start < 3.0, what
        assert info.value.url == redis_server.url
        assert redis_server.url in str(info.value) and what in str(info.value)
    redis_server.start()  # same port, empty (no persistence)
    assert calls["heartbeat"]().self_removed  # the store lost the membership
    assert calls["send"]() == [GONE]  # and the inbox: nothing is appended to nothing
    backend.membership().join("n1", [])  # (a new node would join; the test reuses n1)
    for what, call in calls.items():
        if what != "heartbeat":
            call()  # the next call works again: no reset needed


def test_a_crashed_and_restarted_persistent_server_keeps_the_membership(
    make_backend: Callable[..., RedisBackend],
) -> None:
    with RedisServer(persistent=True) as server:
        backend = make_backend(server.url)
        store = backend.membership()
        epoch = store.join("n1", []).epoch
        server.restart(crash=True)
        with contextlib.suppress(BackendUnavailable):
            store.view()  # the old connection is dead: this one may fail
        beat = store.heartbeat("n1", 1000, 10000)
        assert not beat.self_removed and beat.view.epoch == epoch


def test_a_stalled_server_is_noticed_within_the_socket_timeout(
    redis_server: RedisServer, make_backend: Callable[..., RedisBackend]
) -> None:
    """A server that stops answering (SIGSTOP: like a half-open connection or a
    stalled Redis) costs a bounded wait, never a hang; afterwards calls work again."""
    backend = make_backend(redis_server.url, socket_timeout=0.5)
    store = backend.membership()
    store.join("n1", [])
    reader = backend.inbox_reader("n1", max_block_ms=300)  # socket timeout 0.8 s
    outbox = backend.outbox()
    reader.read(50, 10)
    outbox.send([("n1", b"x")])
    pid = redis_server.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        for what, call in (
            ("heartbeat", lambda: store.heartbeat("n1", 1000, 60000)),
            ("read", lambda: reader.read(300, 10)),
            ("send", lambda: outbox.send([("n1", b"y")])),
        ):
            start = time.monotonic()
            with pytest.raises(BackendUnavailable, match=what):
                call()
            assert time.monotonic() - start < 5.0, what
    finally:
        os.kill(pid, signal.SIGCONT)
    # the stalled connections were dropped: the next calls use fresh ones
    assert not store.heartbeat("n1", 1000, 60000).self_removed
    outbox.send([("n1", b"z")])
    got: list[bytes] = []
    for _ in range(10):
        got += reader.read(300, 10)
        if b"z" in got:
            break
    assert got[-1] == b"z" and b"x" in got


def test_closing_the_backend_closes_every_connection(
    redis_url: str, make_backend: Callable[..., RedisBackend], raw: redis.Redis
) -> None:
    def clients() -> int:
        return int(raw.info("clients")["connected_clients"])

    before = clients()
    backend = make_backend(redis_url)
    backend.open_inbox("n1")
    calls = _all_calls(backend)
    for call in calls.values():
        call()
    assert clients() >= before + 5
    backend.close()
    deadline = time.monotonic() + 5
    while clients() > before and time.monotonic() < deadline:
        gevent.sleep(0.05)
    assert clients() == before
    with pytest.raises(RuntimeError, match="after close"):
        calls["send"]()


def test_unreachable_port_fails_within_the_connect_timeout(
    make_backend: Callable[..., RedisBackend],
) -> None:
    backend = make_backend(f"redis://127.0.0.1:{free_port()}/0")
    start = time.monotonic()
    with pytest.raises(BackendUnavailable, match="ping"):
        backend.ping()
    assert time.monotonic() - start < 3.0


# --- credentials and TLS ----------------------------------------------------------------

_SECRET = "s3cr3t-Pw-9f1c"


def test_mask_url() -> None:
    assert mask_url("redis://u:pw@h:1/0") == "redis://u:***@h:1/0"
    assert mask_url("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert mask_url("rediss://h:1/0?password=pw&ssl_cert_reqs=none") == (
        "rediss://h:1/0?password=***&ssl_cert_reqs=none"
    )
    assert mask_url("redis://h:1/0") == "redis://h:1/0"
    assert mask_url("redis://u@h/0") == "redis://u@h/0"


@pytest.fixture
def acl_url(redis_server: RedisServer) -> str:
    admin = redis.Redis.from_url(redis_server.url)
    admin.acl_setuser(
        "gact", enabled=True, passwords=[f"+{_SECRET}"], keys=["*"], commands=["+@all"]
    )
    admin.execute_command("ACL", "SETUSER", "gact", "resetchannels", "&*")
    # no anonymous access any more: only the ACL user gets in
    admin.acl_setuser("default", enabled=False)
    admin.close()
    return f"redis://gact:{_SECRET}@127.0.0.1:{redis_server.port}/0"


def test_acl_user_and_password_from_the_url(
    acl_url: str, make_backend: Callable[..., RedisBackend]
) -> None:
    backend = make_backend(acl_url)
    backend.ping()
    store = backend.membership()
    store.join("n1", ["r"])
    backend.outbox().send([("n1", b"hi")])
    assert backend.inbox_reader("n1").read(1000, 10) == [b"hi"]
    assert store.heartbeat("n1", 1000, 2000).view.members[0].node == "n1"
    assert backend.leases().acquire("l", "me", 1000) is not None


def test_credentials_never_show(
    acl_url: str,
    redis_server: RedisServer,
    make_backend: Callable[..., RedisBackend],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    backend = make_backend(acl_url)
    texts = [repr(backend), repr(backend.outbox()), repr(backend.membership())]
    texts += [repr(backend.inbox_reader("n1")), repr(backend.leases()), backend.safe_url]
    wrong = make_backend(acl_url.replace(_SECRET, _SECRET + "-wrong"))
    with pytest.raises(BackendUnavailable) as info:
        wrong.ping()  # refused by the server
    texts.append(str(info.value))
    assert "***" in str(info.value)
    backend.ping()
    redis_server.stop()
    for call in (backend.ping, backend.membership().view):
        with pytest.raises(BackendUnavailable) as info:
            call()
        texts.append(str(info.value))
        texts.append(repr(info.value))
        assert info.value.__cause__ is None or _SECRET not in str(info.value.__cause__)
    with pytest.raises(ValueError) as bad:
        RedisBackend(acl_url.replace("redis://", "redis+x://"), "shop")
    texts.append(str(bad.value))
    texts += [record.getMessage() for record in caplog.records]
    for text in texts:
        assert _SECRET not in text, text
    assert f"gact:***@127.0.0.1:{redis_server.port}" in str(info.value)


def _make_certs(directory: Path) -> dict[str, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 (openssl CLI)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make test certificates")
    ca_key, ca_crt = directory / "ca.key", directory / "ca.crt"
    key, csr, crt = directory / "server.key", directory / "server.csr", directory / "server.crt"
    ext = directory / "ext.cnf"
    # Python 3.13 verifies strictly (VERIFY_X509_STRICT): the CA needs its key usage,
    # the server certificate its usages and key identifiers.
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
        "-out", str(ca_crt), "-days", "2", "-subj", "/CN=gactors test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=127.0.0.1")  # fmt: skip
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(crt), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return {"ca": ca_crt, "key": key, "crt": crt}


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[RedisServer, int, Path]]:
    certs = _make_certs(tmp_path)
    tls_port = free_port()
    server = RedisServer(
        extra_args=[
            "--tls-port",
            str(tls_port),
            "--tls-cert-file",
            str(certs["crt"]),
            "--tls-key-file",
            str(certs["key"]),
            "--tls-ca-cert-file",
            str(certs["ca"]),
            "--tls-auth-clients",
            "no",
        ],
    )
    try:
        server.start()
    except Exception as exc:
        tls_lines = [line for line in server.log_tail().splitlines() if "tls" in line.lower()]
        server.close()
        said = " / ".join(line.split("#", 1)[-1].strip() for line in tls_lines[-2:])
        if tls_lines and any(w in said.lower() for w in ("not", "missing", "failed", "bad")):
            pytest.skip(f"{server.binary} was built without TLS support ({said})")
        raise AssertionError(f"the TLS server did not start: {exc}") from exc
    try:
        yield server, tls_port, certs["ca"]
    finally:
        server.close()


def test_tls_with_the_ca_certificate(
    tls_server: tuple[RedisServer, int, Path], make_backend: Callable[..., RedisBackend]
) -> None:
    _, port, ca = tls_server
    backend = make_backend(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}")
    backend.ping()
    store = backend.membership()
    store.join("n1", [])
    backend.outbox().send([("n1", b"secret stuff")])
    assert backend.inbox_reader("n1").read(1000, 10) == [b"secret stuff"]
    assert not store.heartbeat("n1", 1000, 2000).self_removed


def test_tls_without_verification_and_a_refused_plain_client(
    tls_server: tuple[RedisServer, int, Path], make_backend: Callable[..., RedisBackend]
) -> None:
    _, port, _ca = tls_server
    make_backend(f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none").ping()
    # verification on, but the server's CA unknown: refused, as BackendUnavailable
    with pytest.raises(BackendUnavailable):
        make_backend(f"rediss://127.0.0.1:{port}/0").ping()


# --- threads ------------------------------------------------------------------------


def test_membership_store_from_a_real_os_thread(backend: RedisBackend) -> None:
    """The heartbeat thread's use: a real OS thread of a monkey-patched process, the
    store joined from the hub first, and beating on while the hub is blocked."""
    store = backend.membership()
    store.join("n1", [])  # on the hub thread
    observer = backend.membership()
    observer.join("n2", [])

    def beat_a_while() -> list[bool]:
        flags = []
        for _ in range(8):
            flags.append(store.heartbeat("n1", 100, 5000).self_removed)
            _real_sleep(0.05)
        return flags

    results: list[Any] = []
    done = allocate_lock()
    done.acquire()

    def runner() -> None:
        try:
            results.append(beat_a_while())
        except BaseException as exc:
            results.append(exc)
        finally:
            done.release()

    start_new_thread(runner, ())
    # Block the hub with unpatched code: the thread must keep beating regardless.
    _real_sleep(0.6)
    ages = {m.node: m.last_heartbeat_age_ms for m in observer.view().members}
    assert done.acquire(True, 20), "the heartbeat thread hung"
    assert results == [[False] * 8], results
    # beaten while the hub slept (without the thread it would be >= 600 ms)
    assert ages["n1"] < 550, ages
    # and the same store still works on the hub thread afterwards
    assert not store.heartbeat("n1", 100, 5000).self_removed
    store.close()


# --- Sentinel -------------------------------------------------------------------------


def test_sentinel_urls_are_parsed_and_checked() -> None:
    from gactors.cluster._redis import _parse_sentinel_url

    target = _parse_sentinel_url(
        "redis+sentinel://u:p%40ss@10.0.0.1:26380,[::1]:26381,sent3/mymaster/2?sentinel_password=sp"
    )
    assert target.sentinels == (("10.0.0.1", 26380), ("::1", 26381), ("sent3", 26379))
    assert (target.service, target.db, target.username, target.password) == (
        "mymaster",
        2,
        "u",
        "p@ss",
    )
    assert target.sentinel_password == "sp"
    for bad, problem in (
        ("redis+sentinel:///mymaster", "at least one Sentinel"),
        ("redis+sentinel://h:x/mymaster", "port is not a number"),
        ("redis+sentinel://h:26379", "service_name"),
        ("redis+sentinel://h:26379/m/zero", "database number"),
        ("redis+sentinel://h:26379/m?ssl=true", "unknown option"),
    ):
        with pytest.raises(ValueError, match=problem):
            RedisBackend(bad, "shop")
    secret_url = "redis+sentinel://u:pw1@h:1,h:2/m?sentinel_password=pw2"
    with pytest.raises(ValueError) as info:
        RedisBackend(secret_url + "&x=1", "shop")
    assert "pw1" not in str(info.value) and "pw2" not in str(info.value)
    backend = RedisBackend(secret_url, "shop")
    assert "pw1" not in repr(backend) and "pw2" not in repr(backend)
    assert backend.safe_url == "redis+sentinel://u:***@h:1,h:2/m?sentinel_password=***"


@pytest.mark.slow
def test_sentinel_managed_server_and_a_failover(
    make_backend: Callable[..., RedisBackend],
) -> None:
    """Through Sentinel the engine finds the master, and after a failover the next
    call reaches the new one with the (replicated) membership intact."""
    from gactors.testkit._redis_server import SentinelServer

    with RedisServer() as master, RedisServer() as replica:
        replica_client = redis.Redis.from_url(replica.url, socket_timeout=10)
        replica_client.replicaof("127.0.0.1", master.port)
        with SentinelServer(master.port) as sentinel:
            watcher = redis.Redis.from_url(sentinel.url, socket_timeout=10)
            backend = make_backend(sentinel.sentinel_url)
            store = backend.membership()
            epoch = store.join("n1", ["r"]).epoch
            backend.outbox().send([("n1", b"before")])
            reader = backend.inbox_reader("n1", max_block_ms=1000)
            assert reader.read(1000, 10) == [b"before"]
            # wait until the replica is in sync and known to the Sentinel
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                info = replica_client.info("replication")
                if info.get("master_link_status") == "up" and watcher.sentinel_slaves("mymaster"):
                    break
                gevent.sleep(0.1)
            else:
                pytest.fail("the Sentinel never saw the replica in sync")
            gevent.sleep(0.5)  # the membership written above has replicated
            watcher.execute_command("SENTINEL", "FAILOVER", "mymaster")
            # until the failover is complete (what clients are told: SENTINEL MASTERS;
            # writes in between still reach the old master, and are lost)
            while time.monotonic() < deadline:
                state = watcher.sentinel_master("mymaster")
                if int(state["port"]) == replica.port and "failover" not in str(state.get("flags")):
                    break
                gevent.sleep(0.1)
            else:
                pytest.fail("the failover did not complete")
            beat = None
            for _ in range(100):  # a call may fail on the old master: the next works
                try:
                    beat = store.heartbeat("n1", 1000, 60000)
                    break
                except BackendUnavailable:
                    gevent.sleep(0.1)
            assert beat is not None, "the engine never reached the new master"
            assert not beat.self_removed and beat.view.epoch == epoch
            assert replica_client.info("replication")["role"] == "master"
            for _ in range(100):
                try:
                    backend.outbox().send([("n1", b"after")])
                    break
                except BackendUnavailable:
                    gevent.sleep(0.1)
            got: list[bytes] = []
            errors: list[str] = []
            # well before the ~10 s the Sentinel takes to demote the old master
            deadline = time.monotonic() + 4
            while not got and time.monotonic() < deadline:
                try:
                    got = reader.read(500, 10)
                except BackendUnavailable as exc:
                    errors.append(str(exc))
                    gevent.sleep(0.1)
            assert got == [b"after"], errors
            # and it went to the new master, not to the demoted one
            stream = replica_client.xrange(backend.inbox_key("n1"))
            assert [fields[b"d"] for _id, fields in stream] == [b"before", b"after"]
            watcher.close()
        replica_client.close()

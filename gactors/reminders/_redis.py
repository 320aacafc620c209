"""Reminders on the cluster's Redis server: one sorted set per shard.

Keys (``P`` = ``<key_prefix>:<cluster name>:rem``; ``S`` = ``{<type_name>|<shard>}`` for
an entity type's shard, ``{singleton|<name>}`` for a singleton; ``{#<sha1>}`` when the
text holds a brace, which would cut the hash tag):

==========  ===========================================================================
``P:S:z``   ZSET member -> next due time (epoch ms); member = ``<entity_id>\\0<name>``
            (the entity id empty for a singleton)
``P:S:d``   HASH member -> the encoded ``(message, period ms, misfire)``
==========  ===========================================================================

Both keys of a shard share its hash tag, so every script touches one slot. The tick
asks each shard it owns ``ZRANGEBYSCORE z -inf now LIMIT`` (all the shards in one round
trip): with nothing due that is the whole idle cost. Advancing after a firing is a
script that checks the due time and the record it read are still the stored ones, so
two nodes that both believed they own a shard after a rebalance advance it once.
"""

from __future__ import annotations

import hashlib
from typing import Any, cast

from gactors.cluster._redis import RedisBackend, _execute, _Script, open_connections
from gactors.reminders._model import Target

__all__ = ["RedisReminderStore"]

_REGISTER = _Script(
    """
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
"""
)

_UNREGISTER = _Script(
    """
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('HDEL', KEYS[2], ARGV[1])
"""
)

# ARGV: member, the due time read, sha1 of the record read, the next due time ('' = done).
_ADVANCE = _Script(
    """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not score) or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
local rec = redis.call('HGET', KEYS[2], ARGV[1])
if (not rec) or redis.sha1hex(rec) ~= ARGV[3] then return 0 end
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
end
return 1
"""
)


def _tag(text: str) -> str:
    if "{" in text or "}" in text:
        return "{#" + hashlib.sha1(text.encode()).hexdigest() + "}"
    return "{" + text + "}"


class RedisReminderStore:
    """The reminders of one cluster (``backend`` names its keyspace)."""

    def __init__(self, backend: RedisBackend) -> None:
        self._backend = backend
        self._base = f"{backend.key_prefix}:{backend.cluster_name}:rem:"
        self._conns = open_connections(backend, max_connections=4)

    # -- keys --------------------------------------------------------------------------------
    def keys(self, target: Target, shard: int | None) -> tuple[str, str]:
        """The (zset, hash) keys of ``target``'s shard (``shard`` for an entity)."""
        if target.kind == "singleton":
            tag = _tag(f"singleton|{target.name}")
        else:
            tag = _tag(f"{target.type_name}|{shard}")
        base = self._base + tag
        return base + ":z", base + ":d"

    def shard_keys(self, type_name: str, shard: int) -> tuple[str, str]:
        base = self._base + _tag(f"{type_name}|{shard}")
        return base + ":z", base + ":d"

    @staticmethod
    def member(target: Target, name: str) -> str:
        return f"{target.entity_id}\x00{name}"

    # -- commands ----------------------------------------------------------------------------
    def register(self, keys: tuple[str, str], member: str, due: int, record: bytes) -> None:
        self._conns.call(
            "register a reminder", lambda c: _REGISTER.run(c, keys, (member, due, record))
        )

    def unregister(self, keys: tuple[str, str], member: str) -> bool:
        n = self._conns.call("unregister a reminder", lambda c: _UNREGISTER.run(c, keys, (member,)))
        return bool(n)

    def names(self, keys: tuple[str, str], prefix: str) -> list[str]:
        members = self._conns.call("list reminders", lambda c: _execute(c, "HKEYS", keys[1]))
        out = []
        for m in members:
            text = m.decode() if isinstance(m, bytes) else str(m)
            if text.startswith(prefix):
                out.append(text[len(prefix) :])
        return sorted(out)

    def due(self, zkeys: list[str], now: int, limit: int) -> list[list[tuple[str, int]]]:
        """For each zset key, up to ``limit`` (member, due) with due <= now: one
        ``ZRANGEBYSCORE`` per key, all in one round trip."""
        if not zkeys:
            return []

        def run(c: Any) -> list[Any]:
            pipe = c.pipeline(transaction=False)
            for k in zkeys:
                _execute(pipe, "ZRANGEBYSCORE", k, "-inf", now, "WITHSCORES", "LIMIT", 0, limit)
            return cast("list[Any]", pipe.execute())  # one reply per command

        replies = self._conns.call("read due reminders", run)
        out: list[list[tuple[str, int]]] = []
        for flat in replies:
            items = []
            for i in range(0, len(flat), 2):
                m = flat[i]
                items.append(
                    (m.decode() if isinstance(m, bytes) else str(m), int(float(flat[i + 1])))
                )
            out.append(items)
        return out

    def records_many(self, reqs: list[tuple[str, list[str]]]) -> list[list[bytes | None]]:
        """``HMGET`` of each (hash key, members), all in one round trip."""

        def run(c: Any) -> list[Any]:
            pipe = c.pipeline(transaction=False)
            for hkey, members in reqs:
                _execute(pipe, "HMGET", hkey, *members)
            return cast("list[Any]", pipe.execute())  # one reply per command

        return self._conns.call("read due reminders", run) if reqs else []

    def advance_many(
        self, items: list[tuple[tuple[str, str], str, int, bytes, int | None]]
    ) -> list[bool]:
        """:meth:`advance` of each item, all in one round trip."""
        if not items:
            return []
        calls = []
        for keys, member, due, record, nxt in items:
            digest = hashlib.sha1(record).hexdigest()
            calls.append((keys, (member, due, digest, "" if nxt is None else nxt)))

        def send(c: Any) -> list[Any]:
            pipe = c.pipeline(transaction=False)
            for keys, args in calls:
                _execute(pipe, "EVALSHA", _ADVANCE.sha, 2, *keys, *args)
            return cast("list[Any]", pipe.execute())  # one reply per command

        def run(c: Any) -> list[bool]:
            try:
                replies = send(c)
            except Exception as e:
                # The server forgot the script (a restart, SCRIPT FLUSH): then no call
                # of the batch ran (the script cache is the server's), so load it and
                # send the batch again.
                if type(e).__name__ != "NoScriptError":
                    raise
                _execute(c, "SCRIPT", "LOAD", _ADVANCE.source)
                replies = send(c)
            return [bool(r) for r in replies]

        return self._conns.call("advance reminders", run)

    def records(self, hkey: str, members: list[str]) -> list[bytes | None]:
        return self._conns.call("read reminders", lambda c: _execute(c, "HMGET", hkey, *members))

    def advance(
        self, keys: tuple[str, str], member: str, due: int, record: bytes, nxt: int | None
    ) -> bool:
        digest = hashlib.sha1(record).hexdigest()
        args = (member, due, digest, "" if nxt is None else nxt)
        return bool(self._conns.call("advance a reminder", lambda c: _ADVANCE.run(c, keys, args)))

    def close(self) -> None:
        self._conns.close()

"""The Redis engine of the cluster seam (``_seam.py``): the only module that imports
``redis``.

Keys (``P`` = ``<key_prefix>:<cluster_name>``). The small control keyspace is
hash-tagged (``{P}``) so that every script touches one hash slot and also runs on
Redis Cluster; the inboxes are not, so that they spread over the slots:

==========================  ==========================================================
``{P}:members``             ZSET node -> server time (ms) of its last heartbeat
``{P}:info``                HASH node -> ``"<status>|<joined ms>|<roles json>"``
``{P}:version``             INT, incremented on every membership change
``{P}:epoch``               STR, created by the first join on an empty store
``{P}:tombstones``          ZSET node -> removal time (ms); trimmed by age and count
``{P}:reasons``             HASH node -> why it was removed (diagnostics)
``{P}:lease:<name>``        HASH owner, token; expires with the lease (PEXPIRE)
``{P}:fence:<name>``        INT, the last fencing token of the lease (never expires)
``P:inbox:<node>``          STREAM of batches (field ``d``) with one consumer group
                            (``g``) whose cursor records what the node read; created
                            by its node's join, expires ``2 * down_after`` after its
                            node's last heartbeat
==========================  ==========================================================

The inbox (SPEC §17 "Precisely"): senders append with a script that refuses an inbox
that does not exist (``GONE``: a removed node's inbox never comes back) or that holds
``max_unread`` entries (``FULL``: a reader that fell behind is never overrun); the
reader reads through the group with ``NOACK`` (the server moves the cursor atomically
with the read) and trims what it read with ``XTRIM MINID`` in the same round trip as
its next read. Whoever drains an inbox (the node that removed a dead node, or a
leaving node itself) takes exactly the entries after the cursor and deletes the inbox
in one script: an entry is read by its node or drained, never both, never neither.

Every decision about membership is taken inside one Lua script that reads the
server's ``TIME``: node clocks never matter, and when two nodes beat at the same
moment exactly one of them removes a dead member (scripts run atomically). Scripts
replicate by their effects, so ``TIME`` is safe on replicas too.

Connections: every object owns its connections; each OS thread that uses an object
gets its own ``redis.Redis`` (a gevent socket belongs to the hub of the thread that
made it). Each is a ``BlockingConnectionPool`` whose queue is gevent's ``LifoQueue``
(a standard-library queue misbehaves under ``gevent.Timeout``), with TCP keepalive
and bounded socket timeouts (the blocking read's timeout is above its longest
``BLOCK``, so a half-open connection is noticed). redis-py's own retries are off:
the node's loops own retry and backoff. A command interrupted by a greenlet kill
closes its connection (redis-py does this), so no reply is ever read by the wrong
caller. Every ``redis`` error becomes :class:`BackendUnavailable` naming the URL with
its password masked.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import gevent.monkey
import gevent.queue
import redis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

from gactors._threads import get_ident
from gactors.cluster._seam import (
    REFUSED,
    STATUS_LEAVING,
    STATUS_UP,
    Backend,
    BackendUnavailable,
    HeartbeatResult,
    InboxReader,
    LeaseStore,
    MemberRecord,
    MembershipStore,
    MembershipView,
    Outbox,
)

__all__ = ["RedisBackend", "mask_url"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: The stream field that carries a batch.
BATCH_FIELD = b"d"
#: The consumer group of an inbox (one per inbox: its node's reader).
GROUP = b"g"

_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")
_NODE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_SECRET_QUERY_KEYS = frozenset({"password", "pass", "ssl_password", "pwd", "sentinel_password"})


def mask_url(url: str) -> str:
    """``url`` with its password (user info and ``?password=``) replaced by ``***``.

    Never fails: an unparsable URL becomes ``"<unparsable url>"`` rather than risk
    showing a secret.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user, sep, _password = userinfo.partition(":")
            netloc = f"{user}:***@{hostport}" if sep else f"{user}@{hostport}"
            if not user and sep:
                netloc = f":***@{hostport}"
        query = parts.query
        if query:
            pairs = [
                (k, "***" if k.lower() in _SECRET_QUERY_KEYS else v)
                for k, v in parse_qsl(query, keep_blank_values=True)
            ]
            query = urlencode(pairs, safe="*/")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<unparsable url>"


def _secrets_of(url: str) -> list[str]:
    """The secret strings of ``url`` (to scrub them from any error text)."""
    secrets: list[str] = []
    try:
        parts = urlsplit(url)
        if parts.password:
            secrets.append(parts.password)
        for k, v in parse_qsl(parts.query, keep_blank_values=True):
            if k.lower() in _SECRET_QUERY_KEYS and v:
                secrets.append(v)
    except ValueError:
        pass
    # Longest first, so that a secret containing another is scrubbed whole.
    return sorted({s for s in secrets if s}, key=len, reverse=True)


SENTINEL_SCHEME = "redis+sentinel"
#: Seconds between two questions to the Sentinels about the master, per object.
SENTINEL_CHECK_INTERVAL = 1.0


@dataclass(frozen=True)
class _SentinelTarget:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None
    sentinel_username: str | None
    sentinel_password: str | None


def _parse_sentinel_url(url: str) -> _SentinelTarget:
    """Parse ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``
    with optional ``?sentinel_username=...&sentinel_password=...`` (credentials of the
    Sentinels themselves, when they have their own). Raises ``ValueError`` naming the
    problem (never the password)."""
    parts = urlsplit(url)
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    username = password = None
    if at:
        user, sep, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if sep else None
    sentinels: list[tuple[str, int]] = []
    for item in hostlist.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):  # [ipv6]:port
            host, _, rest = item[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "")
        try:
            port = int(port_text) if port_text else 26379
        except ValueError:
            raise ValueError(f"bad Sentinel address {item!r}: the port is not a number") from None
        if not host:
            raise ValueError(f"bad Sentinel address {item!r}: no host")
        sentinels.append((host, port))
    if not sentinels:
        raise ValueError("a redis+sentinel:// URL needs at least one Sentinel host:port")
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ValueError(
            "a redis+sentinel:// URL has the form redis+sentinel://host:port[,host:port]"
            f"/service_name[/db], not the path {parts.path!r}"
        )
    db = 0
    if len(path) == 2:
        try:
            db = int(path[1])
        except ValueError:
            raise ValueError(f"bad database number {path[1]!r} in the URL") from None
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(query) - {"sentinel_username", "sentinel_password", "db"}
    if unknown:
        raise ValueError(f"unknown option(s) in a redis+sentinel:// URL: {sorted(unknown)}")
    if "db" in query:
        try:
            db = int(query["db"])
        except ValueError:
            raise ValueError(f"bad database number {query['db']!r} in the URL") from None
    return _SentinelTarget(
        sentinels=tuple(sentinels),
        service=path[0],
        db=db,
        username=username,
        password=password,
        sentinel_username=query.get("sentinel_username") or None,
        sentinel_password=query.get("sentinel_password") or None,
    )


# --- Lua --------------------------------------------------------------------------
# Shared by the membership scripts. KEYS: 1 members, 2 info, 3 version, 4 epoch,
# 5 tombstones, 6 reasons. Numbers are formatted with %.0f: Lua's tostring() would
# write large integers in exponent notation.
_LUA_MEMBERSHIP = r"""
if redis.replicate_commands then redis.replicate_commands() end
local members, info, version, epoch, tomb, reasons =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local function num(x) return string.format('%.0f', x) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function view()
  return {
    tonumber(redis.call('GET', version) or '0'),
    redis.call('GET', epoch) or '',
    now,
    redis.call('ZRANGE', members, 0, -1, 'WITHSCORES'),
    redis.call('HGETALL', info),
    redis.call('ZRANGE', tomb, -tonumber(ARGV_VIEW_REMOVED), -1),
  }
end

-- keep_ms / max_count: how long and how many tombstones are kept
local function trim_tombstones(keep_ms, max_count)
  local old = redis.call('ZRANGEBYSCORE', tomb, '-inf', '(' .. num(now - keep_ms))
  local n = redis.call('ZCARD', tomb) - #old
  if n > max_count then
    local extra = redis.call('ZRANGE', tomb, #old, #old + n - max_count - 1)
    for _, x in ipairs(extra) do old[#old + 1] = x end
  end
  for _, x in ipairs(old) do
    redis.call('ZREM', tomb, x)
    redis.call('HDEL', reasons, x)
  end
end

local function remove(node, reason)
  redis.call('ZREM', members, node)
  redis.call('HDEL', info, node)
  redis.call('ZADD', tomb, num(now), node)
  redis.call('HSET', reasons, node, reason)
  redis.call('INCR', version)
end
"""

# ARGV: 1 node, 2 roles json, 3 epoch candidate, 4 removed-in-view count.
# Returns {code, view}: 0 joined, 2 has a tombstone, 3 already a member.
_LUA_JOIN = (
    _LUA_MEMBERSHIP.replace("ARGV_VIEW_REMOVED", "ARGV[4]")
    + r"""
local node = ARGV[1]
if redis.call('ZSCORE', tomb, node) then return {2, view()} end
if redis.call('ZSCORE', members, node) then return {3, view()} end
redis.call('SET', epoch, ARGV[3], 'NX')
redis.call('ZADD', members, num(now), node)
redis.call('HSET', info, node, 'up|' .. num(now) .. '|' .. ARGV[2])
redis.call('INCR', version)
return {0, view()}
"""
)

# ARGV: 1 node, 2 down_after_ms, 3 tombstone keep ms, 4 tombstone max count,
# 5 removed-in-view count. Returns {self_removed 0/1, reaped, view}.
_LUA_HEARTBEAT = (
    _LUA_MEMBERSHIP.replace("ARGV_VIEW_REMOVED", "ARGV[5]")
    + r"""
local node = ARGV[1]
local down_after = tonumber(ARGV[2])
if not redis.call('ZSCORE', members, node) then return {1, {}, view()} end
redis.call('ZADD', members, num(now), node)
local stale = redis.call('ZRANGEBYSCORE', members, '-inf', '(' .. num(now - down_after))
if #stale > 0 then
  for _, n in ipairs(stale) do
    local last = tonumber(redis.call('ZSCORE', members, n))
    remove(n, 'downed by ' .. node .. ': no heartbeat for ' .. num(now - last) .. ' ms')
  end
  trim_tombstones(tonumber(ARGV[3]), tonumber(ARGV[4]))
end
return {0, stale, view()}
"""
)

# ARGV: 1 removed-in-view count.
_LUA_VIEW = (
    _LUA_MEMBERSHIP.replace("ARGV_VIEW_REMOVED", "ARGV[1]")
    + r"""
return view()
"""
)

# ARGV: 1 node. Returns 1 if it was a member.
_LUA_SET_LEAVING = (
    _LUA_MEMBERSHIP.replace("ARGV_VIEW_REMOVED", "1")
    + r"""
local v = redis.call('HGET', info, ARGV[1])
if not v then return 0 end
local status, rest = string.match(v, '^([^|]*)|(.*)$')
if status == 'leaving' then return 1 end
redis.call('HSET', info, ARGV[1], 'leaving|' .. rest)
redis.call('INCR', version)
return 1
"""
)

# ARGV: 1 node, 2 reason, 3 tombstone keep ms, 4 tombstone max count.
# Returns 1 if this call removed it.
_LUA_REMOVE = (
    _LUA_MEMBERSHIP.replace("ARGV_VIEW_REMOVED", "1")
    + r"""
if not redis.call('ZSCORE', members, ARGV[1]) then return 0 end
remove(ARGV[1], ARGV[2])
trim_tombstones(tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1
"""
)

# Leases. KEYS: 1 lease, 2 fence. A missing fence counter (first grant, or the
# store lost its data) is seeded with the server time in microseconds, so tokens
# keep increasing across a data loss as long as the server clock does.
_LUA_ACQUIRE = r"""
if redis.replicate_commands then redis.replicate_commands() end
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] then
  if cur[1] == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(cur[2])
  end
  return false
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', string.format('%.0f', token))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return token
"""

_LUA_RENEW = r"""
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
"""

_LUA_RELEASE = r"""
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

_LUA_HOLDER = r"""
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if not cur[1] then return false end
return {cur[1], tonumber(cur[2]), redis.call('PTTL', KEYS[1])}
"""


# Inboxes. KEYS: 1 inbox. Each script touches that one key (one hash slot).
# ARGV: 1 ttl ms. Creates the stream with its group (the cursor starts before the
# first entry) unless it exists, and sets its expiry.
_LUA_INBOX_OPEN = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0', 'MKSTREAM')
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""

# ARGV: 1 max unread entries, 2 batch. Returns 1 sent, 0 gone, -1 full.
_LUA_SEND = r"""
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return -1 end
redis.call('XADD', KEYS[1], '*', 'd', ARGV[2])
return 1
"""

# Takes every entry after the group's cursor (never read) and deletes the inbox.
# Returns false if there is no inbox.
_LUA_INBOX_DRAIN = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local last = '0-0'
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  for i = 1, #g - 1, 2 do
    if g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
end
local entries = redis.call('XRANGE', KEYS[1], '(' .. last, '+')
redis.call('DEL', KEYS[1])
return entries
"""


def _no_client_setinfo() -> dict[str, Any]:
    """Connection options that skip the CLIENT SETINFO round trips on connect
    (``driver_info`` since redis-py 7; ``lib_name``/``lib_version`` before)."""
    params = inspect.signature(redis.connection.AbstractConnection.__init__).parameters
    if "driver_info" in params:
        return {"driver_info": None}
    if "lib_name" in params:
        return {"lib_name": None, "lib_version": None}
    return {}


_NO_CLIENT_SETINFO = _no_client_setinfo()


def _get_connection_args() -> tuple[str, ...]:
    """``pool.get_connection()`` takes no argument since redis-py 5.3 (and warns
    about one); before, it required a command name."""
    params = inspect.signature(redis.ConnectionPool.get_connection).parameters
    name = params.get("command_name")
    if name is not None and name.default is inspect.Parameter.empty:
        return ("XADD",)
    return ()


_GET_CONNECTION_ARGS = _get_connection_args()

#: ``select.select`` as it was before monkey-patching (a zero-timeout poll that must
#: not yield to other greenlets).
_poll_readable: Callable[..., Any] = gevent.monkey.get_original("select", "select")


class _Script:
    """A Lua script run with EVALSHA, loaded on the first NOSCRIPT (after a restart
    or a ``SCRIPT FLUSH`` the server forgets scripts)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def run(self, client: redis.Redis, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return _execute(client, "EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return _execute(client, "EVAL", self.source, len(keys), *keys, *args)


class _Connections:
    """The connections of one seam object: one ``redis.Redis`` per OS thread that
    uses it, created on first use in that thread; errors mapped to
    :class:`BackendUnavailable`."""

    def __init__(self, backend: RedisBackend, *, socket_timeout: float, max_connections: int):
        self._backend = backend
        self._socket_timeout = socket_timeout
        self._max_connections = max_connections
        self._clients: dict[int, redis.Redis] = {}
        self._master_checked: dict[int, float] = {}
        self._held: dict[int, Any] = {}
        self._master_seen: dict[int, Any] = {}
        self._dropped: set[int] = set()
        self._closed = False

    def client(self) -> redis.Redis:
        if self._closed:
            raise RuntimeError(f"{self._backend!r}: used after close()")
        ident = get_ident()
        client = self._clients.get(ident)
        if client is None:
            client = self._backend.new_client(self._socket_timeout, self._max_connections)
            self._clients[ident] = client
        return client

    def call(self, what: str, fn: Callable[[redis.Redis], _T]) -> _T:
        """``fn(client)``, with every redis error (and socket error) mapped."""
        try:
            client = self.client()
            if self._backend.sentinel_target is not None:
                self._check_master(client)
            return fn(client)
        except (RedisError, OSError) as exc:
            raise self._backend.unavailable(what, exc) from None

    def call_held(self, what: str, fn: Callable[[Any], _T]) -> _T:
        """``fn(connection)`` on a connection this object keeps checked out of its pool.

        The hot paths (the outbox's XADDs, the reader's XREAD) use this: redis-py's
        command path (pool check-out and check-in with a liveness probe, retries,
        observability hooks, reply callbacks) costs more CPU than the round trip
        itself (measured here: 118 vs 50 us per XADD, 140 vs 69 us per XREAD under
        gevent). The connection reconnects by itself on the next command after an
        error has dropped it. Errors are mapped like :meth:`call`.
        """
        ident = get_ident()
        conn = self._held.get(ident)
        try:
            try:
                if conn is None:
                    conn = self._held[ident] = self.client().connection_pool.get_connection(
                        *_GET_CONNECTION_ARGS
                    )
                if self._backend.sentinel_target is not None:
                    self._check_master_held(conn)
                if ident in self._dropped:
                    # Connect explicitly: a command on a dropped connection reconnects
                    # to the address it had, which under Sentinel may be the old
                    # master; connect() asks the Sentinels first.
                    conn.connect()
                    self._dropped.discard(ident)
            except (RedisError, OSError) as exc:
                # Nothing of fn's was written yet.
                raise _NotSent(f"{type(exc).__name__}: {exc}") from exc
            return fn(conn)
        except (RedisError, OSError) as exc:
            if conn is not None:
                # A reply may be half read: the next command starts on a new socket.
                self._drop(ident, conn)
            raise self._backend.unavailable(what, exc) from None
        except BaseException:
            # Interrupted (a Timeout, GreenletExit) between a command and its reply:
            # the connection is out of step with the server, so it starts anew.
            if conn is not None:
                self._drop(ident, conn)
            raise

    def _drop(self, ident: int, conn: Any) -> None:
        conn.disconnect()
        self._dropped.add(ident)

    def held_connection(self) -> Any:
        """The connection :meth:`call_held` keeps for this thread (None before its
        first use): for tests that count what goes over it."""
        return self._held.get(get_ident())

    def _check_master_held(self, conn: Any) -> None:
        """:meth:`_check_master` for a held connection: a pool only drops the idle
        connections when the master moved, so this one is dropped here."""
        now = monotonic()
        ident = get_ident()
        if now - self._master_checked.get(ident, -1e9) < SENTINEL_CHECK_INTERVAL:
            return
        self._master_checked[ident] = now
        master = self.client().connection_pool.get_master_address()  # type: ignore[attr-defined]
        seen = self._master_seen.get(ident)
        self._master_seen[ident] = master
        if seen is not None and seen != master:
            log.info("%r: the master moved; reconnecting", self._backend)
            self._drop(ident, conn)

    def _check_master(self, client: redis.Redis) -> None:
        """Under Sentinel, ask it where the master is, at most once a second.

        redis-py asks only when it opens a connection, and a master demoted by a
        planned failover keeps its clients (and serves reads, accepts writes) until
        the Sentinel reconfigures it, which can take ~10 s. If the master moved, this
        drops our idle connections so that the call reconnects to the new one.
        """
        now = monotonic()
        ident = get_ident()
        if now - self._master_checked.get(ident, -1e9) < SENTINEL_CHECK_INTERVAL:
            return
        self._master_checked[ident] = now
        pool: Any = client.connection_pool
        pool.get_master_address()  # disconnects idle connections when it changed

    def close(self) -> None:
        self._closed = True
        held, self._held = self._held, {}
        for conn in held.values():
            try:
                conn.disconnect()
            except Exception:  # best effort, like the clients below
                log.debug("closing a connection of %r failed", self._backend, exc_info=True)
        clients, self._clients = self._clients, {}
        for client in clients.values():
            try:
                client.close()
                client.connection_pool.disconnect()
            except Exception:  # closing is best effort: the sockets may be gone already
                log.debug("closing a connection of %r failed", self._backend, exc_info=True)


class _NotSent(RedisError):
    """A call that failed before anything was written (connecting failed)."""


class _SendFailed(RedisError):
    """A send that failed, with what is known of it (mapped to BackendUnavailable)."""

    def __init__(self, cause: BaseException, written: bool, outcomes: list[int]) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.written = written
        self.outcomes = outcomes


def _ensure_live(conn: Any) -> None:
    """Connect ``conn`` if it is not, and replace it if the server closed it while it
    was idle (restart, ``CLIENT KILL``, idle timeout): a poll of the socket, before
    anything is written. Errors here mean nothing was sent."""
    sock = conn._sock  # redis-py's own test of "connected"  # noqa: SLF001
    if sock is None:
        conn.connect()
        return
    try:
        # Readable while nothing was asked: EOF (closed by the server) or stray data.
        # The unpatched poll: one system call, never a switch to the hub (the
        # connection's own can_read costs five times as much under gevent).
        stale = bool(_poll_readable([sock], [], [], 0)[0])
    except (OSError, ValueError):
        stale = True
    if stale:
        log.debug("%r: an idle connection was closed by the server; reconnecting", conn)
        conn.disconnect()
        conn.connect()


class _RedisOutbox:
    """:class:`~gactors.cluster._seam.Outbox` on Redis streams (one script per batch:
    check the inbox exists and is not full, then append)."""

    def __init__(self, backend: RedisBackend) -> None:
        self._backend = backend
        self._prefixes: dict[str, bytes] = {}
        self._conn = _Connections(backend, socket_timeout=backend.socket_timeout, max_connections=1)

    def __repr__(self) -> str:
        return f"<RedisOutbox of {self._backend!r}>"

    def send(self, batches: Sequence[tuple[str, bytes]], max_unread: int = 10_000) -> list[int]:
        if not batches:
            return []
        limit = b"%d" % max_unread
        limit = b"$%d\r\n%s\r\n$" % (len(limit), limit)
        # The commands are packed here rather than through redis-py's pipeline: its
        # generic encoder costs more than the round trip (measured: 32k entries/s
        # through the pipeline, over twice that packed here). Everything goes out in
        # one write and the replies are read after it: one round trip.
        prefixes = self._prefixes
        parts: list[bytes] = []
        append = parts.append
        for node, batch in batches:
            prefix = prefixes.get(node)
            if prefix is None:
                prefix = self._prefix_of(node)
            append(prefix)
            append(limit)
            append(b"%d\r\n" % len(batch))
            append(batch)
            append(b"\r\n")
        packed = b"".join(parts)
        count = len(batches)

        def run(conn: Any) -> list[int]:
            outcomes: list[int] = []
            written = False
            try:
                _ensure_live(conn)
                written = True
                conn.send_packed_command([packed], check_health=False)
                missing: list[int] = []
                for i in range(count):
                    try:
                        outcomes.append(int(conn.read_response()))
                    except NoScriptError:
                        outcomes.append(REFUSED)
                        missing.append(i)
                    except ResponseError as e:
                        # Nothing was appended (the script fails before XADD); the
                        # replies after it are read all the same.
                        log.warning("%r: a batch for %s was refused: %s", self, batches[i][0], e)
                        outcomes.append(REFUSED)
                if missing:
                    # The server forgot the script (restart, SCRIPT FLUSH): none of
                    # these ran, so they are sent again, in order, once it is loaded.
                    conn.send_command("SCRIPT", "LOAD", _SEND.source)
                    conn.read_response()
                    again = b"".join(self._pack_one(batches[i], limit) for i in missing)
                    conn.send_packed_command([again], check_health=False)
                    for i in missing:
                        try:
                            outcomes[i] = int(conn.read_response())
                        except ResponseError as e:
                            log.warning(
                                "%r: a batch for %s was refused: %s", self, batches[i][0], e
                            )
            except (RedisError, OSError) as e:
                raise _SendFailed(e, written, outcomes) from e
            return outcomes

        return self._conn.call_held("send", run)

    def _pack_one(self, item: tuple[str, bytes], limit: bytes) -> bytes:
        node, batch = item
        prefix = self._prefixes.get(node) or self._prefix_of(node)
        return b"%s%s%d\r\n%s\r\n" % (prefix, limit, len(batch), batch)

    def _prefix_of(self, node: str) -> bytes:
        """The RESP bytes of ``EVALSHA <send> 1 <inbox>`` for ``node``: the same for
        every batch to it, so kept."""
        if len(self._prefixes) > 10_000:
            self._prefixes.clear()  # nodes come and go: keep the cache bounded
        key = self._backend.inbox_key(node).encode()
        prefix = b"*6\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n" % (
            _SEND.sha.encode(),
            len(key),
            key,
        )
        self._prefixes[node] = prefix
        return prefix

    def close(self) -> None:
        self._conn.close()


def _next_id(entry_id: bytes) -> bytes:
    """The smallest stream id after ``entry_id`` (``XTRIM MINID`` keeps ids >= it)."""
    ms, _, seq = entry_id.partition(b"-")
    return b"%s-%d" % (ms, int(seq or b"0") + 1)


def _id_key(entry_id: bytes) -> tuple[int, int]:
    ms, _, seq = entry_id.partition(b"-")
    return int(ms), int(seq or b"0")


def _batches_of(entries: Any) -> tuple[list[bytes], bytes | None]:
    """The batches of a list of stream entries ``[[id, [field, value, ...]], ...]`` and
    the id of the last one (None if there is none)."""
    batches: list[bytes] = []
    last: bytes | None = None
    for entry_id, fields in entries:
        last = entry_id
        data = _field(fields, BATCH_FIELD)
        if not isinstance(data, bytes):
            # Not written by an Outbox: hand on an empty batch, which no batch
            # decoder accepts, so the node reports it like any other garbage.
            log.debug("inbox entry %r has no %r field", entry_id, BATCH_FIELD)
            data = b""
        batches.append(data)
    return batches, last


#: The reader trims what it read once this many entries were read (or once a read
#: finds the inbox empty): a trim per read cost a command per message under ping-pong
#: traffic. So an inbox holds up to this many read entries besides the unread ones.
_TRIM_EVERY = 64


class _RedisInboxReader:
    """:class:`~gactors.cluster._seam.InboxReader` on a Redis stream: ``XREADGROUP
    ... NOACK`` (the group's cursor is what was read: no acknowledgement needed), with
    ``XTRIM MINID`` of what the previous read returned in the same round trip."""

    def __init__(self, backend: RedisBackend, node: str, max_block_ms: int) -> None:
        if max_block_ms <= 0:
            raise ValueError(f"max_block_ms must be > 0, not {max_block_ms!r}")
        self._backend = backend
        self._key = backend.inbox_key(_check_node(node))
        key = self._key.encode()
        self._key_bytes = key
        self._streams = b"$7\r\nSTREAMS\r\n$%d\r\n%s\r\n$1\r\n>\r\n" % (len(key), key)
        self._max_block_ms = max_block_ms
        #: The id of the last entry this reader returned.
        self._last_id = b"0-0"
        #: How many entries up to _last_id are still to be trimmed.
        self._untrimmed = 0
        #: Whether the last read returned nothing (the inbox was drained: trim now).
        self._last_empty = False
        #: Whether the last read failed: the next one first takes back what the
        #: server may have handed out on the lost connection.
        self._recover = False
        # The socket timeout must exceed the longest BLOCK (redis-py#2807): a read
        # that outlives it is a dead connection, not an empty inbox.
        self._conn = _Connections(
            backend,
            socket_timeout=max_block_ms / 1000.0 + backend.socket_timeout,
            max_connections=1,
        )

    def __repr__(self) -> str:
        return f"<RedisInboxReader {self._key!r} of {self._backend!r}>"

    def read(self, block_ms: int, count: int) -> list[bytes]:
        if not 0 < block_ms <= self._max_block_ms:
            raise ValueError(
                f"block_ms must be in 1..{self._max_block_ms} (the reader's max_block_ms), "
                f"not {block_ms!r}"
            )
        if count <= 0:
            raise ValueError(f"count must be > 0, not {count!r}")
        if self._recover:
            recovered = self._conn.call_held("read", self._take_back)
            self._recover = False
            if recovered:
                return recovered

        trim = b""
        if self._untrimmed >= _TRIM_EVERY or (self._untrimmed and self._last_empty):
            minid = _next_id(self._last_id)
            trim = b"*4\r\n$5\r\nXTRIM\r\n$%d\r\n%s\r\n$5\r\nMINID\r\n$%d\r\n%s\r\n" % (
                len(self._key_bytes),
                self._key_bytes,
                len(minid),
                minid,
            )
        packed = b"".join(
            (
                trim,
                b"*12\r\n$10\r\nXREADGROUP\r\n$5\r\nGROUP\r\n$1\r\ng\r\n$1\r\nc\r\n",
                b"$5\r\nCOUNT\r\n$%d\r\n%d\r\n" % (len(str(count)), count),
                b"$5\r\nBLOCK\r\n$%d\r\n%d\r\n" % (len(str(block_ms)), block_ms),
                b"$5\r\nNOACK\r\n",
                self._streams,
            )
        )

        def run(conn: Any) -> Any:
            conn.send_packed_command([packed])
            if trim:
                conn.read_response()
            return conn.read_response()

        # The raw RESP2 reply: nil, or [[key, [[id, [field, value, ...]], ...]]].
        try:
            reply = self._conn.call_held("read", run)
        except BackendUnavailable:
            self._recover = True
            raise
        if trim:
            self._untrimmed = 0
        if not reply:
            self._last_empty = True
            return []
        self._last_empty = False
        batches: list[bytes] = []
        for _stream, entries in reply:
            got, last = _batches_of(entries)
            if last is not None:
                self._last_id = last
                self._untrimmed += len(got)
            batches.extend(got)
        return batches

    def _take_back(self, conn: Any) -> list[bytes]:
        """The entries the server handed out after the last one returned here (a read
        whose reply was lost with its connection): the group's cursor is past them."""
        conn.send_command("XINFO", "GROUPS", self._key_bytes)
        last_delivered = None
        for group in conn.read_response() or ():
            fields = dict(zip(group[::2], group[1::2], strict=False))
            if fields.get(b"name") == GROUP:
                last_delivered = fields.get(b"last-delivered-id")
        if last_delivered is None or _id_key(last_delivered) <= _id_key(self._last_id):
            return []
        conn.send_command("XRANGE", self._key_bytes, b"(" + self._last_id, last_delivered)
        batches, last = _batches_of(conn.read_response() or ())
        if last is not None:
            log.info(
                "%r: took back %d batch(es) of a read lost with its connection", self, len(batches)
            )
            self._last_id = last
            self._untrimmed += len(batches)
        return batches

    def close(self) -> None:
        self._conn.close()


def _check_node(node: str) -> str:
    if not isinstance(node, str) or not _NODE_RE.match(node):
        raise ValueError(f"a node id must match [A-Za-z0-9_.-]+, not {node!r}")
    return node


class _RedisMembershipStore:
    """:class:`~gactors.cluster._seam.MembershipStore` on Redis (Lua scripts)."""

    def __init__(self, backend: RedisBackend) -> None:
        self._backend = backend
        self._keys = backend.membership_keys()
        self._conn = _Connections(backend, socket_timeout=backend.socket_timeout, max_connections=1)

    def __repr__(self) -> str:
        return f"<RedisMembershipStore of {self._backend!r}>"

    def join(self, node: str, roles: Sequence[str], inbox_ttl_ms: int = 60_000) -> MembershipView:
        _check_node(node)
        if isinstance(roles, str) or not all(isinstance(r, str) for r in roles):
            raise ValueError(f"roles must be a sequence of str, not {roles!r}")
        if not isinstance(inbox_ttl_ms, int) or inbox_ttl_ms <= 0:
            raise ValueError(f"inbox_ttl_ms must be a positive int, not {inbox_ttl_ms!r}")
        args = (
            node,
            json.dumps(list(roles)),
            uuid.uuid4().hex,
            self._backend.view_removed,
        )
        inbox = (self._backend.inbox_key(node),)

        def run(client: redis.Redis) -> Any:
            # The inbox first: a node that others see in the view has one. (Two
            # scripts, since the inbox is in its own hash slot.)
            _INBOX_OPEN.run(client, inbox, (inbox_ttl_ms,))
            return _JOIN.run(client, self._keys, args)

        code, raw = self._conn.call("join", run)
        if code == 2:
            raise ValueError(f"node {node!r} was removed from the cluster; ids are never reused")
        if code == 3:
            raise ValueError(f"node {node!r} is already a member of the cluster")
        return _parse_view(raw)

    def heartbeat(
        self, node: str, unreachable_after_ms: int, down_after_ms: int
    ) -> HeartbeatResult:
        if not 0 < unreachable_after_ms < down_after_ms:
            raise ValueError(
                "need 0 < unreachable_after_ms < down_after_ms, got "
                f"{unreachable_after_ms!r} and {down_after_ms!r}"
            )
        backend = self._backend
        args = (
            node,
            down_after_ms,
            backend.tombstone_keep_ms,
            backend.tombstone_max,
            backend.view_removed,
        )
        inbox = backend.inbox_key(node)

        def run(client: redis.Redis) -> list[Any]:
            # One round trip: the script and the expiry of our own inbox (it is
            # untagged, in another slot, so it cannot be touched by the script).
            for attempt in (0, 1):
                pipe = client.pipeline(transaction=False)
                script = "EVALSHA" if attempt == 0 else "EVAL"
                body = _HEARTBEAT.sha if attempt == 0 else _HEARTBEAT.source
                _execute(pipe, script, body, len(self._keys), *self._keys, *args)
                _execute(pipe, "PEXPIRE", inbox, 2 * down_after_ms)
                results: list[Any] = pipe.execute(raise_on_error=False)
                if isinstance(results[0], NoScriptError) and attempt == 0:
                    continue
                for result in results:
                    if isinstance(result, Exception):
                        raise result
                return results
            raise AssertionError("unreachable")  # pragma: no cover

        results = self._conn.call("heartbeat", run)
        removed, reaped, raw = results[0]
        reaped_nodes = tuple(_text(n) for n in reaped)
        if reaped_nodes:
            # Their inboxes stay until a node drains them (drain_inbox): what is
            # unread in them becomes dead letters there, not lost here.
            log.info("cluster %s: reaped %s", backend.cluster_name, ", ".join(reaped_nodes))
        return HeartbeatResult(
            view=_parse_view(raw), self_removed=bool(removed), reaped=reaped_nodes
        )

    def view(self) -> MembershipView:
        raw = self._conn.call(
            "view", lambda c: _VIEW.run(c, self._keys, (self._backend.view_removed,))
        )
        return _parse_view(raw)

    def set_leaving(self, node: str) -> None:
        self._conn.call("set_leaving", lambda c: _SET_LEAVING.run(c, self._keys, (node,)))

    def remove(self, node: str, reason: str) -> bool:
        backend = self._backend
        args = (node, reason, backend.tombstone_keep_ms, backend.tombstone_max)
        removed = self._conn.call("remove", lambda c: _REMOVE.run(c, self._keys, args))
        return bool(removed)

    def drain_inbox(self, node: str) -> list[bytes] | None:
        keys = (self._backend.inbox_key(_check_node(node)),)
        raw = self._conn.call("drain", lambda c: _INBOX_DRAIN.run(c, keys, ()))
        if raw is None:
            return None
        return _batches_of(raw)[0]

    def close(self) -> None:
        self._conn.close()


class _RedisLeaseStore:
    """:class:`~gactors.cluster._seam.LeaseStore` on Redis (Lua scripts; the token
    from ``INCR`` in the same script as the grant)."""

    def __init__(self, backend: RedisBackend, max_connections: int) -> None:
        self._backend = backend
        self._conn = _Connections(
            backend, socket_timeout=backend.socket_timeout, max_connections=max_connections
        )

    def __repr__(self) -> str:
        return f"<RedisLeaseStore of {self._backend!r}>"

    def _keys(self, name: str) -> tuple[str, str]:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a lease name must be a non-empty str, not {name!r}")
        return self._backend.lease_keys(name)

    @staticmethod
    def _check_ttl(ttl_ms: int) -> None:
        if not isinstance(ttl_ms, int) or ttl_ms <= 0:
            raise ValueError(f"ttl_ms must be a positive int, not {ttl_ms!r}")

    def acquire(self, name: str, owner: str, ttl_ms: int) -> int | None:
        self._check_ttl(ttl_ms)
        if not owner:
            raise ValueError("a lease owner must be a non-empty str")
        keys = self._keys(name)
        token = self._conn.call("acquire", lambda c: _ACQUIRE.run(c, keys, (owner, ttl_ms)))
        return None if token is None else int(token)

    def renew(self, name: str, owner: str, token: int, ttl_ms: int) -> bool:
        self._check_ttl(ttl_ms)
        keys = self._keys(name)
        ok = self._conn.call("renew", lambda c: _RENEW.run(c, keys, (owner, token, ttl_ms)))
        return bool(ok)

    def release(self, name: str, owner: str, token: int) -> bool:
        keys = self._keys(name)
        ok = self._conn.call("release", lambda c: _RELEASE.run(c, keys, (owner, token)))
        return bool(ok)

    def holder(self, name: str) -> tuple[str, int, int] | None:
        keys = self._keys(name)
        raw = self._conn.call("holder", lambda c: _HOLDER.run(c, keys[:1], ()))
        if not raw:
            return None
        owner, token, ttl = raw
        return _text(owner), int(token), max(int(ttl), 0)

    def close(self) -> None:
        self._conn.close()


# ``XREAD COUNT`` as RESP (the rest of the command is packed per read).
_XREAD_COUNT = b"*8\r\n$5\r\nXREAD\r\n$5\r\nCOUNT\r\n"


def _field(fields: Any, name: bytes) -> Any:
    """The value of ``name`` in a stream entry's flat ``[field, value, ...]`` list."""
    if not isinstance(fields, list):
        return None
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == name:
            return fields[i + 1]
    return None


def _execute(target: Any, *args: Any) -> Any:
    """``target.execute_command(*args)`` (a client or a pipeline)."""
    # redis-py leaves execute_command unannotated.
    return target.execute_command(*args)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _parse_view(raw: Sequence[Any]) -> MembershipView:
    version, epoch, now, scored, info_flat, removed = raw
    now = int(now)
    info: dict[str, bytes] = {}
    for i in range(0, len(info_flat), 2):
        info[_text(info_flat[i])] = info_flat[i + 1]
    members: list[MemberRecord] = []
    for i in range(0, len(scored), 2):
        node = _text(scored[i])
        last = int(float(scored[i + 1]))
        status, joined = STATUS_UP, 0
        roles_list: tuple[str, ...] = ()
        entry = info.get(node)
        if entry is not None:
            raw_status, raw_joined, raw_roles = _text(entry).split("|", 2)
            status = STATUS_LEAVING if raw_status == STATUS_LEAVING else STATUS_UP
            joined = int(raw_joined)
            roles_list = tuple(str(r) for r in json.loads(raw_roles))
        members.append(
            MemberRecord(
                node=node,
                roles=roles_list,
                status=status,
                last_heartbeat_age_ms=max(now - last, 0),
                joined_at_ms=joined,
            )
        )
    members.sort(key=lambda m: (m.joined_at_ms, m.node))
    return MembershipView(
        version=int(version),
        epoch=_text(epoch),
        server_time_ms=now,
        members=tuple(members),
        removed=tuple(_text(n) for n in removed),
    )


_JOIN = _Script(_LUA_JOIN)
_HEARTBEAT = _Script(_LUA_HEARTBEAT)
_VIEW = _Script(_LUA_VIEW)
_SET_LEAVING = _Script(_LUA_SET_LEAVING)
_REMOVE = _Script(_LUA_REMOVE)
_ACQUIRE = _Script(_LUA_ACQUIRE)
_RENEW = _Script(_LUA_RENEW)
_RELEASE = _Script(_LUA_RELEASE)
_HOLDER = _Script(_LUA_HOLDER)
_INBOX_OPEN = _Script(_LUA_INBOX_OPEN)
_SEND = _Script(_LUA_SEND)
_INBOX_DRAIN = _Script(_LUA_INBOX_DRAIN)


class RedisBackend:
    """The Redis engine for one cluster: a :class:`~gactors.cluster._seam.Backend`.

    ``url`` is a redis-py URL: ``redis://[user:password@]host:port/db``,
    ``rediss://...`` for TLS (``?ssl_cert_reqs=none`` or ``?ssl_ca_certs=/path``),
    ``unix:///path?db=0``, or for a Sentinel-managed server
    ``redis+sentinel://[user:password@]host:26379[,host:26379...]/service_name[/db]``
    (``?sentinel_password=...`` if the Sentinels have their own; TLS through Sentinel
    is not supported yet). ``cluster_name`` (the system name) and ``key_prefix``
    name the keyspace: two clusters or prefixes never share a key. Creating it does
    not connect (:meth:`ping` does).

    ``socket_timeout`` bounds every command (the blocking read adds its block to
    it), ``connect_timeout`` every connect; tombstones are kept ``tombstone_keep_ms`` and
    at most ``tombstone_max``; a view lists the ``view_removed`` newest of them.
    """

    def __init__(
        self,
        url: str,
        cluster_name: str,
        key_prefix: str = "gactors",
        *,
        socket_timeout: float = 5.0,
        connect_timeout: float = 2.0,
        tombstone_keep_ms: int = 24 * 3600 * 1000,
        tombstone_max: int = 1000,
        view_removed: int = 100,
        client_name: str | None = None,
    ) -> None:
        schemes = ("redis://", "rediss://", "unix://", SENTINEL_SCHEME + "://")
        if not isinstance(url, str) or not url.startswith(schemes):
            shown = mask_url(str(url))
            raise ValueError(
                "cluster url must start with redis://, rediss://, unix:// or "
                f"redis+sentinel://, not {shown!r}"
            )
        for what, value in (("cluster name", cluster_name), ("key prefix", key_prefix)):
            if not isinstance(value, str) or not _NAME_RE.match(value):
                raise ValueError(
                    f"the {what} must match [A-Za-z0-9_.:-]+ (no braces: they would break "
                    f"the hash tag), not {value!r}"
                )
        for what, number in (
            ("socket_timeout", socket_timeout),
            ("connect_timeout", connect_timeout),
            ("tombstone_keep_ms", tombstone_keep_ms),
            ("tombstone_max", tombstone_max),
            ("view_removed", view_removed),
        ):
            if number <= 0:
                raise ValueError(f"{what} must be > 0, not {number!r}")
        self._url = url
        self._secrets = _secrets_of(url)
        #: The URL with the password masked.
        self.safe_url = mask_url(url)
        self.cluster_name = cluster_name
        self.key_prefix = key_prefix
        self.socket_timeout = float(socket_timeout)
        self.connect_timeout = float(connect_timeout)
        self.tombstone_keep_ms = int(tombstone_keep_ms)
        self.tombstone_max = int(tombstone_max)
        self.view_removed = int(view_removed)
        # Every connection introduces itself (CLIENT SETNAME): `CLIENT LIST` on the
        # server then tells which node holds which connection.
        self.client_name = client_name
        base = f"{key_prefix}:{cluster_name}"
        self._inbox_prefix = f"{base}:inbox:"
        self._tag = "{" + base + "}"
        # Weak: an object the node dropped closes with its garbage collection.
        self._children: weakref.WeakSet[Any] = weakref.WeakSet()
        self._own = _Connections(self, socket_timeout=self.socket_timeout, max_connections=1)
        # Parse once now, so that a malformed URL fails here, not in the first call.
        # (None: a plain URL; read by the connection helpers to check the master.)
        self.sentinel_target: _SentinelTarget | None = None
        try:
            if url.startswith(SENTINEL_SCHEME + "://"):
                self.sentinel_target = _parse_sentinel_url(url)
            else:
                redis.connection.parse_url(url)  # type: ignore[no-untyped-call]  # unannotated
        except (ValueError, RedisError) as exc:
            detail = self._scrub(str(exc))
            raise ValueError(f"bad cluster url {self.safe_url}: {detail}") from None

    def __repr__(self) -> str:
        return (
            f"<RedisBackend {self.safe_url} cluster={self.cluster_name!r} "
            f"prefix={self.key_prefix!r}>"
        )

    # -- keys --------------------------------------------------------------------
    def inbox_key(self, node: str) -> str:
        """The stream key of ``node``'s inbox."""
        return self._inbox_prefix + node

    def membership_keys(self) -> tuple[str, ...]:
        """The keys of the membership tables (members, info, version, epoch,
        tombstones, reasons), in the order the membership scripts take them."""
        tag = self._tag
        return tuple(
            f"{tag}:{name}"
            for name in ("members", "info", "version", "epoch", "tombstones", "reasons")
        )

    def lease_keys(self, name: str) -> tuple[str, str]:
        """The keys of lease ``name``: the lease and its fencing counter."""
        return f"{self._tag}:lease:{name}", f"{self._tag}:fence:{name}"

    # -- connections -------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def unavailable(self, what: str, exc: BaseException) -> BackendUnavailable:
        """The error for a failed call (secrets scrubbed from the text)."""
        cause = exc.__cause__ or exc if isinstance(exc, (_SendFailed, _NotSent)) else exc
        detail = self._scrub(f"{what}: {type(cause).__name__}: {cause}")
        if isinstance(exc, _SendFailed):
            return BackendUnavailable(
                self.safe_url, detail, maybe_sent=exc.written, outcomes=exc.outcomes
            )
        return BackendUnavailable(self.safe_url, detail, maybe_sent=not isinstance(exc, _NotSent))

    def new_client(self, socket_timeout: float, max_connections: int) -> redis.Redis:
        """A new client with a pool of its own (plain URL or through the Sentinels)."""
        if self.sentinel_target is not None:
            return self._new_sentinel_client(self.sentinel_target, socket_timeout, max_connections)
        pool = redis.BlockingConnectionPool.from_url(
            self._url,
            max_connections=max_connections,
            # How long a caller waits for a free connection of the pool.
            timeout=socket_timeout,
            queue_class=gevent.queue.LifoQueue,
            socket_timeout=socket_timeout,
            socket_connect_timeout=self.connect_timeout,
            socket_keepalive=True,
            # No retries here: the node's loops own retry and backoff.
            retry=Retry(NoBackoff(), 0),
            # RESP2: stable reply shapes across redis-py versions and servers.
            protocol=2,
            client_name=self.client_name,
            **_NO_CLIENT_SETINFO,
        )
        return redis.Redis(connection_pool=pool)

    def _new_sentinel_client(
        self, target: _SentinelTarget, socket_timeout: float, max_connections: int
    ) -> redis.Redis:
        """A client of the current master of ``target.service``: every new connection
        asks the Sentinels where the master is, a connection to a master that was
        demoted fails (``READONLY`` -> ConnectionError -> BackendUnavailable), and
        ``_Connections`` asks again once a second, so the calls after a failover
        reach the new master."""
        common: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": self.connect_timeout,
            "socket_keepalive": True,
            "retry": Retry(NoBackoff(), 0),
            "protocol": 2,
            **_NO_CLIENT_SETINFO,
        }
        sentinel_kwargs = dict(common)
        common["client_name"] = self.client_name
        if target.sentinel_password is not None:
            sentinel_kwargs["password"] = target.sentinel_password
        if target.sentinel_username is not None:
            sentinel_kwargs["username"] = target.sentinel_username
        manager = Sentinel(  # type: ignore[no-untyped-call]  # unannotated in redis-py
            list(target.sentinels), sentinel_kwargs=sentinel_kwargs
        )
        # redis-py has no blocking pool for Sentinel: this one opens connections up to
        # the limit and refuses more (an error, not a hang).
        pool = SentinelConnectionPool(  # type: ignore[no-untyped-call]  # unannotated
            target.service,
            manager,
            db=target.db,
            username=target.username,
            password=target.password,
            max_connections=max_connections,
            **common,
        )
        return redis.Redis(connection_pool=pool)

    # -- the Backend protocol ------------------------------------------------------
    def ping(self) -> None:
        """Check that the server answers (and that the credentials are accepted)."""
        self._own.call("ping", lambda c: c.ping())

    def outbox(self) -> Outbox:
        """A new outbox (one connection)."""
        return self._adopt(_RedisOutbox(self))

    def open_inbox(self, node: str, ttl_ms: int = 60_000) -> None:
        """Create ``node``'s inbox (with its read cursor) unless it exists, expiring in
        ``ttl_ms``: what :meth:`MembershipStore.join` does first (for tests and tools)."""
        key = (self.inbox_key(_check_node(node)),)
        self._own.call("open inbox", lambda c: _INBOX_OPEN.run(c, key, (ttl_ms,)))

    def inbox_reader(self, node: str, max_block_ms: int = 5000) -> InboxReader:
        """A new reader of ``node``'s inbox (one connection; blocks up to
        ``max_block_ms`` per read)."""
        return self._adopt(_RedisInboxReader(self, node, max_block_ms))

    def membership(self) -> MembershipStore:
        """A new membership store (one connection per thread that uses it)."""
        return self._adopt(_RedisMembershipStore(self))

    def leases(self, max_connections: int = 4) -> LeaseStore:
        """A new lease store; its pool may be shared by up to ``max_connections``
        greenlets of one thread."""
        return self._adopt(_RedisLeaseStore(self, max_connections))

    def _adopt(self, child: _T) -> _T:
        self._children.add(child)
        return child

    def close(self) -> None:
        """Close this backend's connection and those of every object it made."""
        children = list(self._children)
        self._children.clear()
        for child in children:
            child.close()
        self._own.close()


if TYPE_CHECKING:
    # mypy checks here that the engine has the seam's shape.
    def _conforms(backend: RedisBackend) -> Backend:
        return backend


# -- for the layers built on the cluster (gactors.persistence) -------------------------
# They may not import redis (import-linter), so they reach Redis through these few
# names: a connection set of their own (`open_connections`, whose `call` takes a
# client, whose `call_held` a held connection), `_Script` for single script calls, and
# `exchange` for many pre-packed commands in one round trip.


class ReplyError(Exception):
    """The error reply of one command sent by :func:`exchange` (returned in its place;
    the replies of the other commands are kept). ``noscript``: the server did not
    know the script (restart, ``SCRIPT FLUSH``): that command did not run."""

    def __init__(self, message: str, noscript: bool) -> None:
        super().__init__(message)
        self.noscript = noscript


def open_connections(
    backend: RedisBackend, *, max_connections: int = 1, socket_timeout: float | None = None
) -> _Connections:
    """A new :class:`_Connections` of ``backend`` (closed with the backend)."""
    timeout = backend.socket_timeout if socket_timeout is None else socket_timeout
    conns = _Connections(backend, socket_timeout=timeout, max_connections=max_connections)
    return backend._adopt(conns)  # noqa: SLF001


def exchange(conns: _Connections, what: str, packed: bytes, count: int) -> list[Any]:
    """Send ``packed`` (``count`` RESP-encoded commands) in one write on the held
    connection of ``conns`` and read the ``count`` replies: one round trip. An error
    reply is returned as a :class:`ReplyError` in its place; a connection error raises
    :class:`BackendUnavailable` (which of the commands ran is then unknown). One caller
    at a time per thread (the connection is shared by them)."""

    def run(conn: Any) -> list[Any]:
        _ensure_live(conn)
        conn.send_packed_command([packed], check_health=False)
        out: list[Any] = []
        for _ in range(count):
            try:
                out.append(conn.read_response())
            except NoScriptError as e:
                out.append(ReplyError(str(e), True))
            except ResponseError as e:
                out.append(ReplyError(str(e), False))
        return out

    return conns.call_held(what, run)

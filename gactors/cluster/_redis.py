"""The Redis engine of the cluster seam (``_seam.py``).

The engine is five modules, the Redis seam modules (the only ones that import
``redis``): this one (the backend, the membership and lease stores),
``_redis_inbox.py`` (the outbox and the inbox reader: the hot path),
``_redis_conn.py`` (URLs, Sentinel, the per-thread connections),
``_redis_scripts.py`` (the Lua scripts, package data in ``lua/*.lua``) and
``_redis_alloc.py`` (sharding's allocation tables). The names
the layers built on the cluster use are re-exported here.

Keys (``P`` = ``<key_prefix>:<cluster_name>``). The small control keyspace is
hash-tagged (``{P}``) so that every script touches one hash slot and also runs on
Redis Cluster (``redis+cluster://``, ``_redis_cluster.py``); the inboxes are not (each
is one key, touched alone), so that they spread over the slots:

==========================  ==========================================================
``{P}:members``             ZSET node -> server time (ms) of its last heartbeat
``{P}:info``                HASH node -> ``"<status>|<joined ms>|<roles json>"``
``{P}:version``             INT, incremented on every membership change
``{P}:epoch``               STR, created by the first join on an empty store
``{P}:tombstones``          ZSET node -> removal time (ms); trimmed by age and count
``{P}:reasons``             HASH node -> why it was removed (diagnostics)
``{P}:lease:<name>``        HASH owner, token; expires with the lease (PEXPIRE)
``{P}:fence:<name>``        INT, the last fencing token of the lease (never expires)
                            (on a Redis Cluster: ``{P:lease:<name>}:lease`` and
                            ``:fence``, a tag per lease, so leases spread over the
                            masters; see :meth:`RedisBackend.lease_keys`)
``{P}:alloc:<type>...``     sharding's allocation table of ``<type>``, its registered
                            regions and its shards' hand-over streams (see
                            ``_redis_alloc.py``)
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
its password masked. On a Redis Cluster (``redis+cluster://``) the client is
redis-py's ``RedisCluster`` and the hot paths hold one connection per master, each
command sent to the master of its key's slot (``_redis_cluster.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import gevent.queue
import redis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

from gactors.cluster._redis_cluster import (
    CLUSTER_SCHEME,
    _ClusterTarget,
    _parse_cluster_url,
    new_cluster_client,
)
from gactors.cluster._redis_conn import (
    _NO_CLIENT_SETINFO,
    SENTINEL_SCHEME,
    ReplyError,
    _Connections,
    _NotSent,
    _parse_sentinel_url,
    _secrets_of,
    _SendFailed,
    _SentinelTarget,
    exchange,
    mask_url,
    open_connections,
)
from gactors.cluster._redis_inbox import (
    GROUP,
    _batches_of,
    _check_node,
    _RedisInboxReader,
    _RedisOutbox,
)
from gactors.cluster._redis_scripts import (
    _ACQUIRE,
    _HEARTBEAT,
    _HOLDER,
    _INBOX_DRAIN,
    _INBOX_OPEN,
    _JOIN,
    _RELEASE,
    _REMOVE,
    _RENEW,
    _SET_LEAVING,
    _VIEW,
    _execute,
    _Script,
)
from gactors.cluster._seam import (
    STATUS_LEAVING,
    STATUS_UP,
    AllocationStore,
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

# The names the layers built on the cluster (gactors.persistence) and the tests
# import from here (they live in the modules above).
__all__ = [
    "RedisBackend",
    "ReplyError",
    "_Script",
    "_execute",
    "_parse_cluster_url",
    "_parse_sentinel_url",
    "exchange",
    "mask_url",
    "open_connections",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")


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
        self,
        node: str,
        unreachable_after_ms: int,
        down_after_ms: int,
        *,
        backlog: bool = False,
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
                if backlog:
                    # The group's lag: entries not handed to the reader yet (a
                    # single-key command on the inbox, so routable on a Redis Cluster).
                    _execute(pipe, "XINFO", "GROUPS", inbox)
                results: list[Any] = pipe.execute(raise_on_error=False)
                if isinstance(results[0], NoScriptError) and attempt == 0:
                    continue
                # The backlog's error (no inbox: this node was downed and its inbox
                # deleted) must not hide what the script says: it is no backlog.
                for result in results[:2]:
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
            view=_parse_view(raw),
            self_removed=bool(removed),
            reaped=reaped_nodes,
            inbox_backlog=_group_lag(results[2]) if backlog else None,
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


def _group_lag(reply: Any) -> int | None:
    """The ``lag`` of the inbox's consumer group in an ``XINFO GROUPS`` reply (a list
    of flat ``[field, value, ...]`` lists, or of dicts once a client parsed it); None
    if the server does not report one (Redis before 7, or a lag it cannot compute)."""
    if isinstance(reply, Exception):
        return None
    for group in reply or ():
        fields = (
            group if isinstance(group, dict) else dict(zip(group[::2], group[1::2], strict=False))
        )
        fields = {_text(k): v for k, v in fields.items()}
        if _text(fields.get("name", b"")) == GROUP.decode():
            lag = fields.get("lag")
            return None if lag is None else int(lag)
    return None


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


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


class RedisBackend:
    """The Redis engine for one cluster: a :class:`~gactors.cluster._seam.Backend`.

    ``url`` is a redis-py URL: ``redis://[user:password@]host:port/db``,
    ``rediss://...`` for TLS (``?ssl_cert_reqs=none`` or ``?ssl_ca_certs=/path``),
    ``unix:///path?db=0``, or for a Sentinel-managed server
    ``redis+sentinel://[user:password@]host:26379[,host:26379...]/service_name[/db]``
    (``?sentinel_password=...`` if the Sentinels have their own; TLS through Sentinel
    is not supported yet), or for a Redis Cluster
    ``redis+cluster://[user:password@]host:port[,host:port...]`` (some of its nodes;
    the others are discovered; no TLS yet). ``cluster_name`` (the system name) and ``key_prefix``
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
        schemes = (
            "redis://",
            "rediss://",
            "unix://",
            SENTINEL_SCHEME + "://",
            CLUSTER_SCHEME + "://",
        )
        if not isinstance(url, str) or not url.startswith(schemes):
            shown = mask_url(str(url))
            raise ValueError(
                "cluster url must start with redis://, rediss://, unix://, "
                f"redis+sentinel:// or redis+cluster://, not {shown!r}"
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
        #: What a ``redis+cluster://`` URL names (None otherwise).
        self.cluster_target: _ClusterTarget | None = None
        try:
            if url.startswith(SENTINEL_SCHEME + "://"):
                self.sentinel_target = _parse_sentinel_url(url)
            elif url.startswith(CLUSTER_SCHEME + "://"):
                self.cluster_target = _parse_cluster_url(url)
            else:
                redis.connection.parse_url(url)
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

    def alloc_key(self, type_name: str) -> str:
        """The key of sharding's allocation table of ``type_name`` (its other keys
        extend it), under the membership tag: its scripts read the membership."""
        return f"{self._tag}:alloc:{type_name}"

    def lease_keys(self, name: str) -> tuple[str, str]:
        """The keys of lease ``name``: the lease and its fencing counter.

        On one server (and Sentinel) they share the control keys' tag, as they always
        did (a rolling upgrade must find its leases where the old nodes keep them). On
        a Redis Cluster each lease has a tag of its own, so that the renewals of many
        shards spread over the masters instead of loading the control slot's."""
        if self.cluster_target is None:
            return f"{self._tag}:lease:{name}", f"{self._tag}:fence:{name}"
        inner = name if "{" not in name and "}" not in name else "#" + _sha1(name)
        tag = "{" + f"{self.key_prefix}:{self.cluster_name}:lease:{inner}" + "}"
        return f"{tag}:lease", f"{tag}:fence"

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
        """A new client with a pool of its own (plain URL, through the Sentinels, or a
        ``RedisCluster`` client with a pool per master)."""
        if self.cluster_target is not None:
            client: Any = new_cluster_client(
                self, self.cluster_target, socket_timeout, max_connections, _NO_CLIENT_SETINFO
            )
            # a RedisCluster answers every command the engine sends a redis.Redis
            return cast("redis.Redis", client)
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
        manager = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)
        # redis-py has no blocking pool for Sentinel: this one opens connections up to
        # the limit and refuses more (an error, not a hang).
        pool = SentinelConnectionPool(
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

    def allocations(self) -> AllocationStore:
        """A new allocation store of sharding (one connection per thread using it)."""
        from gactors.cluster._redis_alloc import _RedisAllocationStore

        return self._adopt(_RedisAllocationStore(self))

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

"""Connections to the Redis server of the cluster seam (a Redis seam module: one of
the few that import ``redis``).

URLs (:func:`mask_url` hides their secrets; ``redis+sentinel://`` parsed here), the
per-thread connection sets of the seam objects (:class:`_Connections`: one
``redis.Redis`` per OS thread, a held connection for the hot paths, the Sentinel
master check), the errors a send maps to :class:`BackendUnavailable`, and the two
helpers the layers built on the cluster use (:func:`open_connections`,
:func:`exchange`). How connections behave is described in ``_redis.py``'s docstring.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import gevent.monkey
import redis
from redis.exceptions import NoScriptError, RedisError, ResponseError

from gactors._threads import get_ident
from gactors.cluster._redis_cluster import (
    ERRORS,
    LOST,
    NOT_SENT,
    _ClusterRoutes,
    routed_send,
    split_commands,
    split_hosts,
)

if TYPE_CHECKING:
    from redis.cluster import RedisCluster

    from gactors.cluster._redis import RedisBackend

__all__ = ["ReplyError", "exchange", "mask_url", "open_connections"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

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
    username, password, sentinels = split_hosts(parts.netloc, 26379, "Sentinel")
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
        self._routes: dict[int, _ClusterRoutes] = {}
        self._closed = False

    def client(self) -> redis.Redis:
        if self._closed:
            raise RuntimeError(f"{self._backend!r}: used after close()")
        ident = get_ident()
        client = self._clients.get(ident)
        if client is None:
            client = self._backend.new_client(self._socket_timeout, self._max_connections)
            # A Redis Cluster client connects while it is made (it reads the slot map),
            # so another greenlet of this thread may have made one meanwhile: one
            # client per thread (its pool is the bound), the other one closed.
            made = self._clients.get(ident)
            if made is not None:
                client.close()
                return made
            self._clients[ident] = client
        return client

    def call(self, what: str, fn: Callable[[redis.Redis], _T]) -> _T:
        """``fn(client)``, with every redis error (and socket error) mapped."""
        try:
            client = self.client()
            if self._backend.sentinel_target is not None:
                self._check_master(client)
            return fn(client)
        except ERRORS as exc:
            raise self._backend.unavailable(what, exc) from None

    def call_held(self, what: str, fn: Callable[[Any], _T], key: bytes | None = None) -> _T:
        """``fn(connection)`` on a connection this object keeps checked out of its pool.

        The hot paths (the outbox's XADDs, the reader's XREAD) use this: redis-py's
        command path (pool check-out and check-in with a liveness probe, retries,
        observability hooks, reply callbacks) costs more CPU than the round trip
        itself (measured here: 118 vs 50 us per XADD, 140 vs 69 us per XREAD under
        gevent). The connection reconnects by itself on the next command after an
        error has dropped it. Errors are mapped like :meth:`call`.

        On a Redis Cluster the connection is the one to the master of ``key``'s slot
        (required there).
        """
        if self._backend.cluster_target is not None:
            return self._call_routed(what, fn, key)
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
            except ERRORS as exc:
                # Nothing of fn's was written yet.
                raise _NotSent(f"{type(exc).__name__}: {exc}") from exc
            return fn(conn)
        except ERRORS as exc:
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

    def routes(self) -> _ClusterRoutes:
        """On a Redis Cluster: this thread's held connections, one per master."""
        ident = get_ident()
        routes = self._routes.get(ident)
        if routes is None:
            # on a Redis Cluster, client() made a RedisCluster (new_client)
            routes = self._routes[ident] = _ClusterRoutes(cast("RedisCluster", self.client()))
        return routes

    def _call_routed(self, what: str, fn: Callable[[Any], _T], key: bytes | None) -> _T:
        if key is None:
            raise TypeError(f"{what}: a held connection on a Redis Cluster needs a key")
        name = None
        try:
            try:
                routes = self.routes()
                name = routes.node_of(key)
                conn = routes.connection(name)
            except ERRORS as exc:
                if name is not None:
                    routes.drop(name)
                raise _NotSent(f"{type(exc).__name__}: {exc}") from exc
            return fn(conn)
        except ERRORS as exc:
            if name is not None:
                self.routes().drop(name)
            raise self._backend.unavailable(what, exc) from None
        except BaseException:
            if name is not None:
                self.routes().drop(name)
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
        pool = cast("redis.sentinel.SentinelConnectionPool", self.client().connection_pool)
        master = pool.get_master_address()  # (a Sentinel URL: see _check_master)
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
        routes, self._routes = self._routes, {}
        for route in routes.values():
            route.close()
        clients, self._clients = self._clients, {}
        for client in clients.values():
            try:
                client.close()
                if isinstance(client, redis.Redis):
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


# -- for the layers built on the cluster (gactors.persistence) -------------------------
# They may not import redis (import-linter), so they reach Redis through these few
# names (re-exported by ``_redis.py``): a connection set of their own
# (`open_connections`, whose `call` takes a client, whose `call_held` a held
# connection), `_Script` (``_redis_scripts.py``) for single script calls, and
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
    return backend._adopt(conns)  # noqa: SLF001  the backend closes what it made


def exchange(conns: _Connections, what: str, packed: bytes, count: int) -> list[Any]:
    """Send ``packed`` (``count`` RESP-encoded commands) in one write on the held
    connection of ``conns`` and read the ``count`` replies: one round trip. An error
    reply is returned as a :class:`ReplyError` in its place; a connection error raises
    :class:`BackendUnavailable` (which of the commands ran is then unknown). One caller
    at a time per thread (the connection is shared by them)."""

    if conns._backend.cluster_target is not None:  # noqa: SLF001
        return _routed_exchange(conns, what, packed, count)

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


def _routed_exchange(conns: _Connections, what: str, packed: bytes, count: int) -> list[Any]:
    """:func:`exchange` on a Redis Cluster: each command to the master of its slot."""
    commands = split_commands(packed)
    if len(commands) != count:
        raise ValueError(f"{what}: {len(commands)} commands packed, {count} replies expected")
    try:
        replies = routed_send(conns.routes(), commands, _ensure_live)
    except ERRORS as exc:
        raise conns._backend.unavailable(what, exc) from None  # noqa: SLF001
    lost = [r for r in replies if r is LOST or r is NOT_SENT]
    if lost:
        # As on one server: some commands' outcome is unknown (or they did not run).
        cause: RedisError = _SendFailed(
            ConnectionError("a Redis Cluster master is unreachable"), True, []
        )
        if all(r is NOT_SENT for r in lost) and len(lost) == len(replies):
            cause = _NotSent("no Redis Cluster master of these keys is reachable")
        raise conns._backend.unavailable(what, cause)  # noqa: SLF001
    out: list[Any] = []
    for r in replies:
        if isinstance(r, NoScriptError):
            out.append(ReplyError(str(r), True))
        elif isinstance(r, ResponseError):
            out.append(ReplyError(str(r), False))
        else:
            out.append(r)
    return out

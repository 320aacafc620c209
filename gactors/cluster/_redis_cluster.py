"""Redis Cluster for the cluster seam (a Redis seam module: one of the few that import
``redis``).

``redis+cluster://[user:password@]host:port[,host:port...]`` names a Redis Cluster by
some of its nodes (the others are discovered). Calls through a client
(``_Connections.call``) use redis-py's ``RedisCluster``, which routes each command by
its key's slot and follows ``MOVED`` redirections. The hot paths write pre-encoded
commands on held connections (``_Connections.call_held``, :func:`exchange`, the
outbox); on a cluster they hold one connection per master, per thread
(:class:`_ClusterRoutes`), and :func:`routed_send` sends each command to the master
of its key's slot: every master's share in one write, then every reply read, so a
batch for many slots still costs one round trip (to each master, concurrently).

Every script and multi-key command of the cluster touches one slot (the key layout in
``_redis.py``), so routing by the first key is routing by the only slot.

A command answered ``MOVED``, ``ASK``, ``TRYAGAIN`` or ``CLUSTERDOWN`` did not run
(the server refuses before executing): :func:`routed_send` sends it again, in order, a
few times: after ``MOVED`` to the slot's new master (the slot map refreshed), after
``ASK`` (a slot being migrated whose key moved already) to the node named, preceded
by ``ASKING``. A master that cannot be reached makes its
commands :data:`NOT_SENT` (connecting failed: nothing written) or :data:`LOST`
(written, no reply: they may have run); the slot map is refreshed (at most every
:data:`REFRESH_INTERVAL`) so that once a replica took over, the next call reaches it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

import gevent
import gevent.queue
from redis import BlockingConnectionPool
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.retry import Retry

if TYPE_CHECKING:
    from gactors.cluster._redis import RedisBackend

__all__ = ["CLUSTER_SCHEME", "ERRORS", "LOST", "NOT_SENT", "routed_send", "split_commands"]

log = logging.getLogger(__name__)

CLUSTER_SCHEME = "redis+cluster"
#: What a failed call raises: redis-py's cluster client raises RedisClusterException,
#: which is no RedisError, when no node can be reached or a slot has no master.
ERRORS = (RedisError, OSError, RedisClusterException)
#: Seconds between two refreshes of the slot map after errors, per connection set.
REFRESH_INTERVAL = 0.25
#: How many times a command refused by a redirection or ``TRYAGAIN`` is sent again.
REDIRECT_ATTEMPTS = 4


_ASKING = b"*1\r\n$6\r\nASKING\r\n"


class _Outcome:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: A command that was not written (its master could not be reached): it did not run.
NOT_SENT = _Outcome("NOT_SENT")
#: A command that was written and whose reply was lost: it may or may not have run.
LOST = _Outcome("LOST")


@dataclass(frozen=True)
class _ClusterTarget:
    """What a ``redis+cluster://`` URL names."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None


def split_hosts(
    netloc: str, default_port: int, what: str
) -> tuple[str | None, str | None, list[tuple[str, int]]]:
    """``[user:password@]host:port[,host:port...]`` (``[ipv6]:port`` too) of a
    ``redis+cluster://`` or ``redis+sentinel://`` URL: the user, the password and the
    addresses. Raises ``ValueError`` naming the bad address as a ``what`` address (never
    the password)."""
    userinfo, at, hostlist = netloc.rpartition("@")
    username = password = None
    if at:
        user, sep, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if sep else None
    hosts: list[tuple[str, int]] = []
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
            port = int(port_text) if port_text else default_port
        except ValueError:
            raise ValueError(f"bad {what} address {item!r}: the port is not a number") from None
        if not host:
            raise ValueError(f"bad {what} address {item!r}: no host")
        if not 0 < port < 65536:
            raise ValueError(f"bad {what} address {item!r}: port out of range")
        hosts.append((host, port))
    return username, password, hosts


def _parse_cluster_url(url: str) -> _ClusterTarget:
    """Parse ``redis+cluster://[user:password@]host:port[,host:port...][/0]``. Raises
    ``ValueError`` naming the problem (never the password)."""
    parts = urlsplit(url)
    username, password, nodes = split_hosts(parts.netloc, 6379, "Redis Cluster node")
    if not nodes:
        raise ValueError("a redis+cluster:// URL needs at least one node host:port")
    path = [p for p in parts.path.split("/") if p]
    if path not in ([], ["0"]):
        raise ValueError(
            "a Redis Cluster has only database 0: a redis+cluster:// URL has the form "
            f"redis+cluster://host:port[,host:port...], not the path {parts.path!r}"
        )
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if query:
        raise ValueError(f"unknown option(s) in a redis+cluster:// URL: {sorted(query)}")
    return _ClusterTarget(nodes=tuple(nodes), username=username, password=password)


def new_cluster_client(
    backend: RedisBackend,
    target: _ClusterTarget,
    socket_timeout: float,
    max_connections: int,
    extra: dict[str, Any],
) -> RedisCluster:
    """A ``RedisCluster`` client of ``target`` (it connects on its first command).

    No retries (the node's loops own retry and backoff; a script retried after a lost
    reply could run twice), but redirections are followed (a redirected command did
    not run). ``max_connections`` is per master."""
    first, *others = target.nodes
    host = f"[{first[0]}]" if ":" in first[0] else first[0]
    return RedisCluster(
        # Through a URL (the first node; the others as startup nodes) because only
        # then does redis-py build each master's pool from connection_pool_class: a
        # blocking pool, as on one server, so that greenlets beyond max_connections
        # wait for a connection (bounded by socket_timeout) instead of failing.
        url=f"redis://{host}:{first[1]}/0",
        startup_nodes=[ClusterNode(h, p) for h, p in others],
        connection_pool_class=BlockingConnectionPool,
        queue_class=gevent.queue.LifoQueue,
        timeout=socket_timeout,
        username=target.username,
        password=target.password,
        socket_timeout=socket_timeout,
        socket_connect_timeout=backend.connect_timeout,
        socket_keepalive=True,
        retry=Retry(NoBackoff(), 0),
        # A cluster with a master down still serves the other slots.
        require_full_coverage=False,
        max_connections=max_connections,
        protocol=2,
        client_name=backend.client_name,
        **extra,
    )


class _ClusterRoutes:
    """The held connections of one connection set in one thread: one per master."""

    def __init__(self, client: RedisCluster) -> None:
        self.client = client
        self.held: dict[str, Any] = {}
        self._stale = False
        self._refreshed = -1e9

    def node_of(self, key: bytes | str) -> str:
        """The name (``host:port``) of the master serving ``key``'s slot."""
        if self._stale:
            self.refresh()
        try:
            node = self.client.nodes_manager.get_node_from_slot(key_slot(_bytes(key)))
        except SlotNotCoveredError:
            self.refresh(force=True)
            node = self.client.nodes_manager.get_node_from_slot(key_slot(_bytes(key)))
        return str(node.name)

    def connection(self, name: str) -> Any:
        """The held connection to master ``name`` (made on first use; it connects on
        its first command)."""
        conn = self.held.get(name)
        if conn is None:
            node = self.client.get_node(node_name=name)
            if node is None:
                # A node named by an ASK redirection that the slot map does not know.
                self.refresh(force=True)
                node = self.client.get_node(node_name=name)
                if node is None:
                    raise SlotNotCoveredError(f"no node {name} in the Redis Cluster's map")
            # A connection of its own, made like the master's pool makes them but not
            # taken from it: a held connection never returns, and the client's own
            # commands (the slot map's refresh among them) need the pool.
            pool = self.client.get_redis_connection(node).connection_pool
            conn = self.held[name] = pool.connection_class(**pool.connection_kwargs)
        return conn

    def load_script(self, source: str) -> None:
        """``SCRIPT LOAD`` on every master that can be reached (the script cache is
        per server, and a promoted replica or an importing master may lack it)."""
        for node in self.client.get_primaries():
            try:
                conn = self.connection(node.name)
                conn.send_command("SCRIPT", "LOAD", source)
                conn.read_response()
            except ERRORS as e:
                log.debug("cannot load a script on %s: %s", node.name, e)
                self.drop(node.name)

    def drop(self, name: str) -> None:
        """Forget (and close) the connection to ``name``; refresh the map soon."""
        conn = self.held.pop(name, None)
        if conn is not None:
            try:
                conn.disconnect()
            except Exception:  # best effort: the socket may be gone already
                log.debug("closing a connection to %s failed", name, exc_info=True)
        self._stale = True

    def refresh(self, force: bool = False) -> None:
        """Ask the cluster for its slot map again (at most every REFRESH_INTERVAL
        unless ``force``)."""
        now = monotonic()
        if not force and now - self._refreshed < REFRESH_INTERVAL:
            return
        self._refreshed = now
        self._stale = False
        try:
            self.client.nodes_manager.initialize()
        except ERRORS as e:
            # Every node known is unreachable: the next error refreshes again.
            log.debug("refreshing the Redis Cluster slot map failed: %s", e)
            self._stale = True

    def close(self) -> None:
        for name in list(self.held):
            self.drop(name)


def _bytes(key: bytes | str) -> bytes:
    return key if isinstance(key, bytes) else key.encode()


def _redirected(exc: ResponseError) -> bool:
    """True for the refusals that mean "not run here, ask again elsewhere or later"."""
    if isinstance(exc, (MovedError, AskError, TryAgainError, ClusterDownError)):
        return True
    text = str(exc)
    return text.startswith(("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"))


def split_commands(packed: bytes) -> list[tuple[bytes, bytes | None]]:
    """Split RESP-encoded commands into ``(command, routing key)``. The routing key is
    the first key: ``EVAL``/``EVALSHA``'s first of ``KEYS``, else the first argument;
    None for ``WAIT`` and ``SCRIPT`` (sent to every master the others go to, in their
    place)."""
    out: list[tuple[bytes, bytes | None]] = []
    pos, end = 0, len(packed)
    while pos < end:
        start = pos
        if packed[pos : pos + 1] != b"*":
            raise ValueError(f"not a RESP command at byte {pos}")
        eol = packed.index(b"\r\n", pos)
        n = int(packed[pos + 1 : eol])
        pos = eol + 2
        args: list[bytes] = []
        for i in range(n):
            eol = packed.index(b"\r\n", pos)
            size = int(packed[pos + 1 : eol])
            pos = eol + 2
            if i < 4:
                args.append(packed[pos : pos + size])
            pos += size + 2
        name = args[0].upper() if args else b""
        key: bytes | None
        if name in (b"EVAL", b"EVALSHA"):
            key = args[3] if len(args) > 3 and int(args[2]) > 0 else b""
        elif name in (b"WAIT", b"SCRIPT"):
            key = None
        else:
            key = args[1] if len(args) > 1 else b""
        out.append((packed[start:pos], key))
    return out


def routed_send(
    routes: _ClusterRoutes,
    commands: Sequence[tuple[bytes, bytes | None]],
    ensure_live: Callable[[Any], None],
) -> list[Any]:
    """Send each ``(command, key)`` to the master of its key's slot and return the
    replies in order: a value, the ``ResponseError`` of an error reply, or
    :data:`NOT_SENT` / :data:`LOST` for a master that could not be reached. A
    command without a key (``WAIT``, ``SCRIPT``) goes to every master that the other
    commands go to, in its place among them; its reply is the smallest of theirs (a
    ``WAIT``'s count) or the first (``SCRIPT LOAD``'s digest, the same everywhere).
    The commands of one slot keep their order."""
    results: list[Any] = [LOST] * len(commands)
    pending = list(range(len(commands)))
    waits = [i for i, (_, k) in enumerate(commands) if k is None]
    wait_replies: dict[int, list[Any]] = {i: [] for i in waits}
    # Commands answered ASK (their slot is being migrated and their key moved
    # already): sent next to the node named, after ASKING.
    asking: dict[int, str] = {}

    def settle(members: list[int], outcome: Any) -> None:
        # A master that could not be reached (NOT_SENT) or written to (LOST): the
        # outcome of each of its commands (a WAIT's replies are gathered apart).
        for i in members:
            if i in wait_replies:
                wait_replies[i].append(outcome)
            else:
                results[i] = outcome

    for attempt in range(REDIRECT_ATTEMPTS + 1):
        groups: dict[str, list[int]] = {}
        for i in pending:
            key = commands[i][1]
            if key is None:
                continue
            name = asking.get(i)
            if name is None:
                try:
                    name = routes.node_of(key)
                except ERRORS:
                    results[i] = NOT_SENT
                    continue
            groups.setdefault(name, []).append(i)
        if waits and groups:
            # Each broadcast command in its place among the others of every group
            # (a SCRIPT LOAD before the calls it serves, a WAIT after the writes).
            order = sorted(set(pending) | set(waits))
            routed = {i: name for name, members in groups.items() for i in members}
            groups = {name: [] for name in groups}
            for i in order:
                if i in wait_replies:
                    for members in groups.values():
                        members.append(i)
                elif i in routed:
                    groups[routed[i]].append(i)
        again: list[int] = []
        slow = False
        written: dict[str, Any] = {}

        for name, members in groups.items():
            try:
                conn = routes.connection(name)
                ensure_live(conn)
            except ERRORS as e:
                log.debug("cannot reach Redis Cluster master %s: %s", name, e)
                routes.drop(name)
                settle(members, NOT_SENT)
                continue
            payload = b"".join(
                (_ASKING + commands[i][0]) if i in asking else commands[i][0] for i in members
            )
            try:
                conn.send_packed_command([payload], check_health=False)
            except ERRORS as e:
                log.debug("writing to Redis Cluster master %s failed: %s", name, e)
                routes.drop(name)
                settle(members, LOST)
                continue
            written[name] = conn
        asked = asking
        asking = {}
        for name, conn in written.items():
            members = groups[name]
            for j, i in enumerate(members):
                try:
                    if i in asked:
                        conn.read_response()  # ASKING's +OK
                    reply: Any = conn.read_response()
                except ResponseError as e:
                    if _redirected(e) and i not in wait_replies:
                        again.append(i)
                        if isinstance(e, AskError) and not isinstance(e, MovedError):
                            asking[i] = f"{e.host}:{e.port}"
                        slow = slow or not isinstance(e, AskError)
                        continue
                    reply = e
                except ERRORS as e:
                    log.debug("reading from Redis Cluster master %s failed: %s", name, e)
                    routes.drop(name)
                    for k in members[j:]:
                        if k in wait_replies:
                            wait_replies[k].append(LOST)
                        else:
                            results[k] = LOST
                    break
                if i in wait_replies:
                    wait_replies[i].append(reply)
                else:
                    results[i] = reply
        if not again:
            break
        if attempt == REDIRECT_ATTEMPTS:
            for i in again:
                results[i] = ResponseError("the Redis Cluster kept redirecting the command")
            break
        if len(asking) < len(again):
            routes.refresh(force=True)  # a MOVED: the slot map changed
        if slow:
            # TRYAGAIN / CLUSTERDOWN: a slot is moving or a failover is under way.
            gevent.sleep(0.05 * (attempt + 1))
        again.sort()
        pending = again
    for i, replies in wait_replies.items():
        if not replies:
            results[i] = 0
        elif any(r is LOST for r in replies):
            results[i] = LOST
        elif any(r is NOT_SENT for r in replies):
            results[i] = NOT_SENT
        else:
            errors = [r for r in replies if isinstance(r, Exception)]
            if errors:
                results[i] = errors[0]
            elif all(isinstance(r, int) for r in replies):
                results[i] = min(replies)
            else:
                results[i] = replies[0]
    return results

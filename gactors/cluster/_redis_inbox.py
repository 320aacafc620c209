"""The inboxes on Redis streams (a Redis seam module: one of the few that import
``redis``): the :class:`~gactors.cluster._seam.Outbox` that appends batches and the
:class:`~gactors.cluster._seam.InboxReader` that reads them, the cluster's hot path.

How an inbox works (a stream with one consumer group, the ``send`` script's
``GONE``/``FULL`` refusals, reading with ``NOACK`` and trimming in the next read's
round trip) is described in ``_redis.py``'s docstring; the scripts are in
``lua/`` (``send.lua``, ``inbox_open.lua``, ``inbox_drain.lua``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any

from redis.exceptions import NoScriptError, RedisError, ResponseError

from gactors.cluster._redis_cluster import ERRORS, LOST, NOT_SENT, routed_send
from gactors.cluster._redis_conn import _Connections, _ensure_live, _NotSent, _SendFailed
from gactors.cluster._redis_scripts import _SEND
from gactors.cluster._seam import REFUSED, BackendUnavailable

if TYPE_CHECKING:
    from gactors.cluster._redis import RedisBackend

log = logging.getLogger(__name__)

#: The stream field that carries a batch.
BATCH_FIELD = b"d"
#: The consumer group of an inbox (one per inbox: its node's reader).
GROUP = b"g"

_NODE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _check_node(node: str) -> str:
    if not isinstance(node, str) or not _NODE_RE.match(node):
        raise ValueError(f"a node id must match [A-Za-z0-9_.-]+, not {node!r}")
    return node


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
        if self._backend.cluster_target is not None:
            return self._send_routed(batches, limit)
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

    def _send_routed(self, batches: Sequence[tuple[str, bytes]], limit: bytes) -> list[int]:
        """:meth:`send` on a Redis Cluster: each batch to the master of its inbox's
        slot (every master's share in one write). The outcomes known are reported up
        to the first batch whose outcome is not (the seam's contract: a prefix)."""
        commands = [
            (self._pack_one(item, limit), self._backend.inbox_key(item[0]).encode())
            for item in batches
        ]

        def run(routes: Any) -> list[int]:
            replies = routed_send(routes, commands, _ensure_live)
            missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
            if missing:
                # A master that forgot the script (restart, SCRIPT FLUSH, a promoted
                # replica, an importing master): none of these ran there, so they
                # are sent again, in order, once it is loaded on every master.
                routes.load_script(_SEND.source)
                again = routed_send(routes, [commands[i] for i in missing], _ensure_live)
                for i, reply in zip(missing, again, strict=True):
                    replies[i] = reply
            outcomes: list[int] = []
            for i, reply in enumerate(replies):
                if reply is LOST or reply is NOT_SENT:
                    # The seam reports a prefix of outcomes: the rest is unknown
                    # unless none of it was written.
                    written = any(r is not NOT_SENT for r in replies[i:])
                    raise _SendFailed(
                        ConnectionError("a Redis Cluster master is unreachable"),
                        written,
                        outcomes,
                    )
                if isinstance(reply, ResponseError):
                    log.warning("%r: a batch for %s was refused: %s", self, batches[i][0], reply)
                    reply = REFUSED
                outcomes.append(int(reply))
            return outcomes

        try:
            routes = self._conn.routes()
        except ERRORS as exc:
            # The client could not be made (no node reachable): nothing was sent.
            cause = _NotSent(f"{type(exc).__name__}: {exc}")
            raise self._backend.unavailable("send", cause) from None
        try:
            return run(routes)
        except ERRORS as exc:
            raise self._backend.unavailable("send", exc) from None

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
        #: Whether the last read returned ``count`` entries: entries are likely left,
        #: so the next read is sent without BLOCK (it cannot wait) and timed.
        self._backlog = False
        #: The round trip of the last read if it was sent without BLOCK (seam doc).
        self.last_round_trip: float | None = None
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
        self.last_round_trip = None
        if self._recover:
            recovered = self._conn.call_held("read", self._take_back, self._key_bytes)
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
        backlog = self._backlog
        packed = b"".join(
            (
                trim,
                b"*10\r\n" if backlog else b"*12\r\n",
                b"$10\r\nXREADGROUP\r\n$5\r\nGROUP\r\n$1\r\ng\r\n$1\r\nc\r\n",
                b"$5\r\nCOUNT\r\n$%d\r\n%d\r\n" % (len(str(count)), count),
                b""
                if backlog
                else b"$5\r\nBLOCK\r\n$%d\r\n%d\r\n" % (len(str(block_ms)), block_ms),
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
        t0 = perf_counter() if backlog else 0.0  # no clock read for a blocking read
        try:
            reply = self._conn.call_held("read", run, self._key_bytes)
        except BackendUnavailable:
            self._recover = True
            self._backlog = False
            raise
        if backlog:
            # Sent without BLOCK: the round trip of a read, never time spent waiting.
            self.last_round_trip = perf_counter() - t0
        self._backlog = False
        if trim:
            self._untrimmed = 0
        if not reply:
            self._last_empty = True
            return []
        self._last_empty = False
        batches: list[bytes] = []
        for _stream, entries in reply:
            if entries and _id_key(entries[0][0]) <= _id_key(self._last_id):
                # Entries this reader returned already: the group's cursor went back,
                # which a failover to a replica that had not yet seen the last reads
                # does (Redis Cluster, Sentinel). Never hand a batch on twice.
                entries = [e for e in entries if _id_key(e[0]) > _id_key(self._last_id)]
                log.warning("%r: the inbox's read cursor went back (a failover?)", self)
            got, last = _batches_of(entries)
            if last is not None:
                self._last_id = last
                self._untrimmed += len(got)
            batches.extend(got)
        self._backlog = len(batches) >= count
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


def _field(fields: Any, name: bytes) -> Any:
    """The value of ``name`` in a stream entry's flat ``[field, value, ...]`` list."""
    if not isinstance(fields, list):
        return None
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == name:
            return fields[i + 1]
    return None

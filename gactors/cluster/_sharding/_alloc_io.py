"""A region's I/O with its type's allocation table: one greenlet, one ordered queue.

The state machine's I/O commands (register, read, plan, ack, hand-over stream
writes) are carried out here in the order they were given, so that an ack never
overtakes the stream write before it, and a drain confirmation that depends on a
stream write (``after``) is sent only once the write is done. Every script returns
the table; it is reported to the region (a message), never acted on here. A failed
call is retried with backoff (a read is not: the next heartbeat reads again).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import gevent
from gevent.queue import Queue

from gactors.cluster._seam import (
    AllocationStore,
    AllocationTable,
    BackendUnavailable,
    ShardCountMismatch,
)

_log = logging.getLogger("gactors.cluster.sharding")

_SYNC, _REGISTER, _PLAN, _ACK, _STREAM, _AFTER = range(6)


class AllocIO:
    """The ordered I/O of the region of ``type_name`` on ``node`` (``report`` gets
    each table a call returned, ``failed`` a :class:`ShardCountMismatch`; neither may
    block: they send a message)."""

    def __init__(
        self,
        store: AllocationStore,
        type_name: str,
        node: str,
        hosting: bool,
        number_of_shards: int,
        report: Callable[[AllocationTable], Any],
        max_delay: float,
        dropped: Callable[[Sequence[tuple[Any, Any]]], Any] | None = None,
        failed: Callable[[ShardCountMismatch], Any] | None = None,
    ) -> None:
        self._store = store
        self._type = type_name
        self._node = node
        self._hosting = hosting
        self._n = number_of_shards
        self._report = report
        self._failed = failed
        # (epoch, version) of the last table a call returned: a read while both are
        # current gets a short "unchanged" reply (nothing to report).
        self._seen: tuple[int, int] | None = None
        self._max_delay = max_delay
        # Told the (message, sender) pairs of a stream append that never ran (closed
        # first): they are dead letters, not lost silently.
        self._dropped = dropped
        self._queue: Queue[tuple[int, Any] | None] = Queue()
        self._pending = 0
        # The hand-over stream appends' tokens: this incarnation's prefix and a count.
        self._token_prefix = f"{node}/{uuid.uuid4().hex[:12]}/"
        self._appends = 0
        self._sync_queued = False
        self._closed = False
        self._greenlet = gevent.spawn(self._loop)
        self._put(_REGISTER, None)

    @property
    def pending(self) -> bool:
        """True while calls are queued or running (a confirmation then waits)."""
        return self._pending > 0

    def sync(self) -> None:
        """Read the table (at most one read queued at a time)."""
        if not self._sync_queued:
            self._sync_queued = True
            self._put(_SYNC, None)

    def plan(self, version: int, epoch: int, desired: Sequence[str]) -> None:
        self._put(_PLAN, (version, epoch, list(desired)))

    def ack(self, moves: list[tuple[int, str]]) -> None:
        self._put(_ACK, moves)

    def stream(
        self,
        shard: int,
        items: list[tuple[int, bytes]],
        messages: Sequence[tuple[Any, Any]] = (),
        from_node: str = "",
    ) -> None:
        """Append ``items`` to ``shard``'s hand-over stream, for its move away from
        ``from_node``; ``messages``: the (message, sender) pairs they carry, dead
        letters if it is closed first or the move is over."""
        # A token per append, kept across its retries (a retry after a lost reply is
        # then not appended twice).
        self._appends += 1
        token = f"{self._token_prefix}{self._appends}"
        self._put(_STREAM, (shard, items, token, messages, from_node))

    def after(self, fn: Callable[[], Any]) -> None:
        """Call ``fn`` once every call queued before it is done."""
        self._put(_AFTER, fn)

    def close(self, unregister: bool) -> None:
        """Stop (what is queued is dropped); ``unregister``: tell the table this
        region stops, best effort, in a greenlet of its own."""
        self._closed = True
        # What was queued and never ran: a stream append's messages are dead letters.
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if job is not None and job[0] == _STREAM:
                self._drop(job[1][3], maybe_sent=False)
        self._queue.put(None)
        if unregister:
            store, type_name, node = self._store, self._type, self._node

            def bye() -> None:
                try:
                    with gevent.Timeout(5.0, False):
                        store.unregister(type_name, node)
                except BackendUnavailable as e:
                    # Its node's removal from the membership releases the moves then.
                    _log.warning("sharding region %r: cannot unregister: %s", type_name, e)
                except RuntimeError as e:
                    # The node's backend closed first (the system terminated): the same.
                    _log.debug("sharding region %r: not unregistered: %s", type_name, e)
                finally:
                    store.close()

            gevent.spawn(bye)
        else:
            self._store.close()

    def _put(self, kind: int, arg: Any) -> None:
        if self._closed:
            return
        self._pending += 1
        self._queue.put((kind, arg))

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None or self._closed:
                return
            kind, arg = job
            if kind == _SYNC:
                self._sync_queued = False
            delay = 0.05
            table: AllocationTable | None = None
            done = maybe_sent = False
            while not self._closed:
                try:
                    table = self._call(kind, arg)
                    done = True
                    break
                except ShardCountMismatch as e:
                    _log.error("%s; this region stops", e)
                    if self._failed is not None:
                        self._failed(e)
                    break
                except BackendUnavailable as e:
                    maybe_sent = maybe_sent or e.maybe_sent
                    if kind == _SYNC:
                        _log.debug("sharding region %r: cannot read its table: %s", self._type, e)
                        break
                    _log.warning(
                        "sharding region %r: allocation table call failed (retried): %s",
                        self._type,
                        e,
                    )
                    gevent.sleep(delay)
                    delay = min(delay * 2, self._max_delay)
                except Exception:
                    _log.exception("sharding region %r: allocation table call failed", self._type)
                    break
            if kind == _STREAM and not done:
                self._drop(arg[3], maybe_sent)
            self._pending -= 1
            if table is not None and not self._closed:
                # The calls run one at a time: the last reply is the newest state.
                self._seen = (table.epoch, table.version)
                self._report(table)

    def _drop(self, messages: Sequence[tuple[Any, Any]], maybe_sent: bool) -> None:
        if not messages:
            return
        if maybe_sent:
            # An attempt may have run (its reply was lost): they may be in the stream,
            # so they are not dead letters as well (never both).
            _log.error(
                "sharding region %r: %d hand-over message(s) may not have reached the "
                "stream (closed during a call whose reply was lost)",
                self._type,
                len(messages),
            )
        elif self._dropped is not None:
            self._dropped(messages)

    def _call(self, kind: int, arg: Any) -> AllocationTable | None:
        store, t = self._store, self._type
        if kind == _SYNC:
            return store.sync(t, self._seen)
        if kind == _REGISTER:
            return store.register(t, self._node, self._hosting, self._n)
        if kind == _PLAN:
            return store.plan(t, *arg)
        if kind == _ACK:
            return store.ack(t, self._node, arg)
        if kind == _STREAM:
            if not store.stream_append(t, arg[0], arg[1], arg[2], arg[4]):
                # Over before the append (see alloc_stream_add.lua): the messages,
                # from a node removed meanwhile, are dead letters.
                _log.warning(
                    "sharding region %r: the move of shard %d was over before its hand-over "
                    "append; %d message(s) of removed nodes are dead letters",
                    t,
                    arg[0],
                    len(arg[3]),
                )
                self._drop(arg[3], maybe_sent=False)
            return None
        arg()  # _AFTER
        return None

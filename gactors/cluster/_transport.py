"""The transport of a cluster node (:class:`_Transport`, a part of
:class:`~gactors.cluster._node.ClusterNode`; docs/internals.md, "The life of a remote
message").

* **Sending.** ``RemoteActorRef.tell`` -> :meth:`_Transport.send_user` encodes the
  message at once and :meth:`_Transport._enqueue` appends the record to the
  destination's pending list; the first record after a flush wakes the *flusher*
  (:meth:`_Transport._flush_loop`), one greenlet with its own connection, which sends
  everything pending in one round trip (one entry per destination, split at
  ``max_message_size``), and :meth:`_Transport._settle` accounts for each entry by its
  outcome. While a round trip is in flight new records accumulate for the next one,
  so the number of round trips follows the load, never the number of messages. A
  failed flush logs one warning (:meth:`_Transport._flush_failed`); the flusher
  retries with a backoff of 0.05 s doubling to 2 s.
* **Receiving.** The reader (:meth:`_Transport._read_loop`), one greenlet, reads its
  inbox (bounded block) and :meth:`_Transport._deliver_batch` decodes each batch and
  tells each message to its local recipient in a tight loop (no greenlet switch per
  message). An unknown recipient is a dead letter here; an undecodable entry or
  record is a warning and a dead letter, and the reader keeps going.
* **Draining its own inbox** when leaving (:meth:`_Transport._drain_own_inbox`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from time import monotonic, perf_counter
from typing import Any

import gevent
from gevent import GreenletExit, sleep

from gactors import _sysmsg as sm
from gactors._messages import Status
from gactors._ref import ActorRef
from gactors._threads import get_ident
from gactors.cluster._node_base import (
    _BACKOFF_FIRST,
    _BACKOFF_MAX,
    _LEAVE_BUDGET,
    _Meta,
    _NodeBase,
)
from gactors.cluster._remote import RemoteActorRef
from gactors.cluster._seam import FULL, GONE, SENT, BackendUnavailable
from gactors.cluster._serialization import (
    KIND_SYSTEM,
    KIND_USER,
    Record,
    WireError,
    describe_payload,
)
from gactors.cluster._wire_refs import _QUARANTINED
from gactors.exceptions import SerializationError

_log = logging.getLogger("gactors.cluster")

# How long one XREAD blocks: bounded so that a half-open connection is noticed and
# close() never waits long; the socket timeout of the reader is above it.
_READ_BLOCK_MS = 1000
_READ_COUNT = 256
# A large entry is delivered in slices of this many records, with a yield between two
# slices (_Transport._deliver_batch). Delivered whole, an entry of ~10,000 messages was
# processed whole before anything its recipients told went out: their acknowledgements
# travelled as one clump per entry, so sender and receiver took turns instead of
# working at once (docs/performance.md, "Where the remote tell waited").
_DELIVER_SLICE = 4096
# At most one warning per destination node this often when its inbox is full.
_FULL_WARNING_INTERVAL = 10.0


class UndecodableMessage:
    """The message of a ``DeadLetter`` for an inbox entry or record that could not be
    decoded (garbage, unknown tag, too large): ``summary`` describes it."""

    __slots__ = ("summary",)

    def __init__(self, summary: str) -> None:
        self.summary = summary

    def __repr__(self) -> str:
        return f"UndecodableMessage({self.summary})"


class _Transport(_NodeBase):
    """Sending, receiving and settling (see the module docstring)."""

    def send_user(self, ref: RemoteActorRef, message: Any, sender: ActorRef | None) -> None:
        """Encode ``message`` (SerializationError to the caller) and queue it."""
        rec = self.codec.user_record_to(ref.wire, message, sender)
        if get_ident() != self._tid:
            self.system.run_in_hub_async(self._enqueue, ref.dest, rec, message, sender, ref)
            return
        # _enqueue's common case inlined (a destination with messages pending already:
        # every message but the first of a flush under load).
        p = self._pending.get(ref.dest)
        if p is None or not self._wake_set or self.downed or ref.dest not in self._members:
            self._enqueue(ref.dest, rec, message, sender, ref)
            return
        p[0].append(rec)
        p[1].append(_Meta(message, sender, ref))

    def send_failure(self, ref: RemoteActorRef, exc: BaseException) -> None:
        """Reply ``Status.Failure(exc)`` to a remote promise (the asked actor failed)."""
        try:
            self.send_user(ref, Status.Failure(exc), None)
        except SerializationError as e:  # pragma: no cover - exceptions always encode
            _log.warning("cannot send the failure %r to %s: %s", exc, ref, e)

    def _enqueue(
        self,
        dest: str,
        rec: Record,
        message: Any,
        sender: ActorRef | None,
        ref: ActorRef,
    ) -> None:
        held = self._held.get(dest)
        if held is not None and not self.downed:
            # Messages to this node wait for a fresh view already: this one waits
            # behind them, even if a heartbeat's view has shown the node meanwhile (it
            # would overtake them: found by the sharding batch test, a new owner getting
            # a region's later batch before its earlier one).
            held[0].append(rec)
            held[1].append(_Meta(message, sender, ref))
            return
        if dest not in self._members or self.downed:
            if self.downed or dest in self._removed or self._closing:
                # A downed node stops sending at once (SPEC §17 "Precisely").
                self._undeliverable(message, sender, ref)
                return
            # A node this one has not seen yet (it joined after our last view): the
            # message waits for a fresh view, then goes or is a dead letter.
            held = self._held.get(dest)
            if held is None:
                held = self._held[dest] = ([], [])
            held[0].append(rec)
            held[1].append(_Meta(message, sender, ref))
            if not self._refreshing:
                self._refreshing = True
                gevent.spawn(self._refresh_view)
            return
        p = self._pending.get(dest)
        if p is None:
            p = self._pending[dest] = ([], [])
        p[0].append(rec)
        p[1].append(_Meta(message, sender, ref))
        if not self._wake_set:
            self._wake_set = True
            self._wake.set()

    def _refresh_view(self) -> None:
        try:
            with self._store_lock:
                view = self._store.view()
        except BackendUnavailable as e:
            _log.warning("cluster node %s cannot read the membership: %s", self.address_str, e)
            view = None
        finally:
            self._refreshing = False
        if view is not None and not self._closed:
            self._apply_view(view, publish=True)
        held = self._held
        self._held = {}
        for dest, (recs, metas) in held.items():
            if dest in self._members and not self._closing:
                p = self._pending.get(dest)
                if p is None:
                    p = self._pending[dest] = ([], [])
                p[0].extend(recs)
                p[1].extend(metas)
            else:
                self._dead_letter_all(metas)
        if self._pending and not self._wake_set:
            self._wake_set = True
            self._wake.set()

    def _undeliverable(self, message: Any, sender: ActorRef | None, ref: ActorRef) -> None:
        if isinstance(message, sm.SystemMessage):
            self._watch_undeliverable(message, ref)
            return
        self.system.publish_dead_letter(message, sender, ref)

    def _dead_letter_all(self, metas: list[_Meta]) -> None:
        for m in metas:
            self._undeliverable(m.message, m.sender, m.ref)

    def _flush_loop(self) -> None:
        outbox = self.backend.outbox()
        delay = _BACKOFF_FIRST
        split = self.codec.split_batches
        max_unread = self.settings.inbox_max_unread
        flush_seconds = self.flush_seconds
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                self._wake_set = False
                pending = self._pending
                if not pending:
                    if self._closing:
                        return
                    continue
                self._pending = {}
                if self.downed:
                    for _, metas in pending.values():
                        self._dead_letter_all(metas)
                    continue
                entries: list[tuple[str, bytes]] = []
                # The messages of each entry, in step with ``entries``.
                spans: list[list[_Meta]] = []
                members = self._members
                for dest, (recs, metas) in pending.items():
                    if dest not in members:
                        self._dead_letter_all(metas)
                        continue
                    try:
                        parts = split(recs)
                    except Exception:
                        _log.exception("cannot encode a batch for %s", dest)
                        self._dead_letter_all(metas)
                        continue
                    if len(parts) == 1:
                        entries.append((dest, parts[0][0]))
                        spans.append(metas)
                        continue
                    start = 0
                    for data, n in parts:
                        entries.append((dest, data))
                        spans.append(metas[start : start + n])
                        start += n
                if not entries:
                    continue
                t0 = perf_counter()
                try:
                    outcomes = outbox.send(entries, max_unread)
                except BackendUnavailable as e:
                    self._settle(entries, spans, e.outcomes)
                    self._flush_failed(entries, spans[len(e.outcomes) :], e, delay)
                    if self._closing:
                        return
                    gevent.sleep(delay)
                    delay = min(delay * 2, _BACKOFF_MAX)
                    # What accumulated meanwhile is tried now.
                    if self._pending:
                        self._wake_set = True
                        self._wake.set()
                    continue
                flush_seconds.add(perf_counter() - t0)
                delay = _BACKOFF_FIRST
                self._settle(entries, spans, outcomes)
        finally:
            outbox.close()

    def _settle(
        self,
        entries: list[tuple[str, bytes]],
        spans: list[list[_Meta]],
        outcomes: Sequence[int],
    ) -> None:
        """Account for each entry by its outcome: sent, or dead letters here."""
        stats = self.stats
        for i, outcome in enumerate(outcomes):
            metas = spans[i]
            if outcome == SENT:
                stats["sent"] += len(metas)
                continue
            stats["dead_letters"] += len(metas)
            if outcome == FULL:
                stats["full"] += len(metas)
                self._warn_full(entries[i][0], len(metas))
            elif outcome != GONE:
                _log.warning(
                    "cluster node %s: %d message(s) to %s refused by Redis: dead letters",
                    self.address_str,
                    len(metas),
                    entries[i][0],
                )
            # GONE: the node left or was removed (our view is behind): as for a
            # node that is not a member, the messages are dead letters here.
            self._dead_letter_all(metas)

    def _flush_failed(
        self,
        entries: list[tuple[str, bytes]],
        spans: list[list[_Meta]],
        error: BackendUnavailable,
        delay: float,
    ) -> None:
        n = sum(len(m) for m in spans)
        if not n:
            return
        if not error.maybe_sent:
            # Nothing was written: they certainly did not arrive.
            self.stats["dead_letters"] += n
            _log.warning(
                "cluster node %s: %d message(s) not sent, dead letters: %s; retrying in %.2f s",
                self.address_str,
                n,
                error,
                delay,
            )
            for metas in spans:
                self._dead_letter_all(metas)
            return
        # Written, with no answer (a timeout, a connection lost mid-way): they may
        # have arrived (Redis may execute a command it read before a pause), so they
        # are never reported as dead letters, which a user might retry (SPEC §17).
        self.stats["unknown"] += n
        _log.warning(
            "cluster node %s: the outcome of %d message(s) to %s is unknown (%s): they may "
            "or may not have arrived, and are not reported as dead letters; retrying in "
            "%.2f s",
            self.address_str,
            n,
            ", ".join(sorted({dest for dest, _ in entries[-len(spans) :]})),
            error,
            delay,
        )

    def _warn_full(self, dest: str, n: int) -> None:
        now = monotonic()
        if now - self._full_warned.get(dest, -1e9) < _FULL_WARNING_INTERVAL:
            return
        if len(self._full_warned) > 1000:
            self._full_warned.clear()
        self._full_warned[dest] = now
        _log.warning(
            "cluster node %s: the inbox of %s holds %d unread entries or more (its reader "
            "is behind): %d message(s) to it are dead letters (cluster.inbox_max_unread; "
            "this warning repeats at most every %.0f s per node)",
            self.address_str,
            dest,
            self.settings.inbox_max_unread,
            n,
            _FULL_WARNING_INTERVAL,
        )

    def _read_loop(self) -> None:
        reader = self.backend.inbox_reader(self.node_id, max_block_ms=_READ_BLOCK_MS)
        delay = _BACKOFF_FIRST
        failing = False
        deliver = self._deliver_batch
        read_seconds = self.read_seconds
        try:
            while not self._closed and not self._draining:
                try:
                    batches = reader.read(_READ_BLOCK_MS, _READ_COUNT)
                except BackendUnavailable as e:
                    if self._draining:
                        break  # this node closed its inbox (graceful leave)
                    if not failing:
                        _log.warning(
                            "cluster node %s cannot read its inbox: %s; retrying with backoff",
                            self.address_str,
                            e,
                        )
                        failing = True
                    gevent.sleep(delay)
                    delay = min(delay * 2, _BACKOFF_MAX)
                    continue
                if failing:
                    _log.info("cluster node %s reads its inbox again", self.address_str)
                    failing = False
                    delay = _BACKOFF_FIRST
                rt = reader.last_round_trip
                if rt is not None:
                    read_seconds.add(rt)
                if not batches:
                    continue
                for data in batches:
                    deliver(data)
                # Before the next read goes out, let what these batches woke run (an
                # asker, the workers of the recipients) and the flusher send what they
                # told: the read's packing and system calls are then off the path of a
                # reply (a question answered here, an answer handed to its asker),
                # which they lengthened by their whole cost. The first yield queues this
                # greenlet behind the woken ones; if they queued messages, the second
                # queues it behind the flusher they woke.
                sleep(0)
                if self._wake_set:
                    sleep(0)
        finally:
            reader.close()

    def _deliver_batch(self, data: bytes) -> None:
        codec = self.codec
        try:
            heads, kinds, heads_of, sids, payloads = codec.decode_columns(data)
        except WireError as e:
            self._undecodable(str(e), describe_payload(data), None)
            return
        self.stats["received"] += len(kinds)
        # The user messages in one go when they allow it (else each below, so that a
        # bad one is a dead letter of its own).
        # (Not for one record: decoding it alone is one call less.)
        messages = (
            codec.decode_payloads(sids, payloads)
            if len(kinds) > 1 and KIND_SYSTEM not in kinds
            else None
        )
        decode = codec.decode_message
        # Each head (recipient, sender) is resolved once per batch, for all its
        # records: [recipient, sender] or the WireError resolving it raised.
        resolved: list[Any] = [None] * len(heads)
        n = len(heads_of)
        start = 0
        killed: BaseException | None = None
        while start < n:
            stop = min(n, start + _DELIVER_SLICE)
            for i in range(start, stop):
                h = heads_of[i]
                try:
                    target = resolved[h]
                    if target is None:
                        target = resolved[h] = self._resolve_head(heads[h])
                    if isinstance(target, WireError):
                        raise target
                    recipient, sender = target
                    if sender is _QUARANTINED:
                        self._quarantined(
                            Record(kinds[i], heads[h][0], heads[h][1], sids[i], payloads[i]),
                            heads[h][1],
                        )
                        continue
                    kind = kinds[i]
                    if kind == KIND_USER:
                        message = (
                            messages[i] if messages is not None else decode(sids[i], payloads[i])
                        )
                        if recipient is None:
                            recipient = self._recipient(heads[h][0])
                            # Cached only for user records (as before: the recipient of a
                            # system record is resolved by its handler).
                            target[0] = recipient
                        recipient.tell(message, sender)
                    elif kind == KIND_SYSTEM:
                        self._system_record(
                            Record(kind, heads[h][0], heads[h][1], sids[i], payloads[i])
                        )
                    else:
                        raise WireError(f"a record of unknown kind {kind!r}")
                except WireError as e:
                    self._undecodable(str(e), describe_payload(payloads[i]), heads[h][0][0])
                except Exception:
                    _log.exception("cluster node %s: cannot deliver a record", self.address_str)
            start = stop
            if start < n and killed is None:
                try:
                    self._between_slices()
                except GreenletExit as e:
                    # Killed while yielding (a leave that outlasted its budget): the
                    # rest of this entry was read already and is in no inbox any
                    # more, so it is delivered now, without yielding, and the kill
                    # takes effect after it.
                    killed = e
        if killed is not None:
            raise killed

    def _between_slices(self) -> None:
        # The recipients of the slice just delivered run now, and the flusher sends
        # what they told (acknowledgements, answers) before the next slice: see
        # _DELIVER_SLICE.
        # Through a zero-length timer, not sleep(0): gevent runs callbacks (and sleep(0)
        # is one) without polling I/O, so the reply to a flush in flight, which the
        # flusher needs before it can send again, would not be seen before the next
        # slice (measured: a flush in 1 of 18 yields with sleep(0), 1 of 2 this way).
        hub = gevent.get_hub()
        if gevent.getcurrent() is hub:  # pragma: no cover - deliveries run in greenlets
            return
        timer = hub.loop.timer(0.0)
        try:
            hub.wait(timer)
        finally:
            timer.close()
        if self._wake_set:
            sleep(0)

    def _resolve_head(self, head: tuple[tuple[str, int], Any]) -> Any:
        """``[recipient or None (resolved at the first user record), sender ref]`` of a
        batch's head, or the WireError that resolving the sender raised."""
        recipient, snd = head
        try:
            if snd is None:
                sender: Any = None
            else:
                sender = self._remote_refs.get(snd)
                if sender is None:
                    sender = self._sender_ref(snd)
        except WireError as e:
            return e
        return [self._local_refs.get(recipient), sender]

    def _quarantined(self, r: Record, snd: tuple[str, str, int]) -> None:
        try:
            message: Any = self.codec.decode_record(r)
        except WireError:
            message = UndecodableMessage(describe_payload(r.payload))
        if isinstance(message, sm.SystemMessage):
            return
        self.system.publish_dead_letter(message, None, self._resolve_local(*r.recipient))
        _log.debug("dropped a message from removed node %s (quarantined)", snd[0])

    def _undecodable(self, error: str, summary: str, path: str | None) -> None:
        _log.warning(
            "cluster node %s dropped an undecodable %s: %s",
            self.address_str,
            "entry" if path is None else f"message for {path}",
            error,
        )
        recipient: ActorRef = self.system.dead_letters
        if path is not None:
            try:
                recipient = self._resolve_local(path, 0)
            except WireError:
                pass
        self.system.publish_dead_letter(UndecodableMessage(summary), None, recipient)

    def _drain_own_inbox(self) -> None:
        """Graceful leave, after the hand-overs and before the user actors stop: close
        the inbox (senders dead-letter what they send from now on) and deliver what
        was still unread in it, after everything the reader already had (SPEC §17
        "Precisely": a leaving node processes or dead-letters its whole inbox)."""
        if self.downed or self._closed or self._draining:
            return
        self._draining = True
        batches: list[bytes] | None = None
        try:
            with gevent.Timeout(_LEAVE_BUDGET, False), self._store_lock:
                batches = self._store.drain_inbox(self.node_id)
        except BackendUnavailable as e:
            _log.warning(
                "cluster node %s cannot close its inbox: %s; what is unread in it becomes "
                "dead letters on the node that removes this one",
                self.address_str,
                e,
            )
        reader = self._reader
        if reader is not None and not reader.dead:
            # Deleting the inbox ends a blocked read at once; a read that returned
            # before it is delivered first (the order per sender is kept).
            reader.join(_LEAVE_BUDGET)
            if not reader.dead:
                reader.kill(block=False)
        if batches:
            _log.info(
                "cluster node %s: %d unread entr%s of its inbox delivered before leaving",
                self.address_str,
                len(batches),
                "y" if len(batches) == 1 else "ies",
            )
            for data in batches:
                self._deliver_batch(data)

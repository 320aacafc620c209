"""``ClusterNode``: one actor system as a node of a cluster on Redis (docs/cluster/concepts.md).

Created by :class:`~gactors.ActorSystem` when its settings have a ``cluster`` table,
never imported otherwise. It owns:

* **the outbound batcher.** ``RemoteActorRef.tell`` encodes the message at once and
  appends the record to the destination's pending list; the first record after a
  flush wakes the *flusher*, one greenlet with its own connection, which sends
  everything pending in one pipeline (one entry per destination, split at
  ``max_message_size``). While a pipeline is in flight new records accumulate for the
  next one, so the number of round trips follows the load, never the number of
  messages. One flusher and one inbox stream per node keep the order of the messages
  from one sender to one receiver. A failed flush (Redis gone) turns each of its
  messages into a ``DeadLetter`` and logs one warning; the flusher retries with a
  backoff of 0.05 s doubling to 2 s.
* **the inbound reader**: one greenlet, ``XREAD BLOCK`` (bounded) on its own
  connection, that decodes each batch and tells each message to its local recipient
  in a tight loop (no greenlet switch per message). An unknown recipient is a dead
  letter here; an undecodable entry or record is a warning and a dead letter, and the
  reader keeps going. Messages whose sender belongs to a removed node are dropped as
  dead letters (quarantine: a removed node never comes back).
* **the heartbeat thread**: a real OS thread with its own membership connection, so
  a hub blocked for a while by unpatched code does not stop the beats (no false
  downs). It beats only while the hub shows progress: a hub timer stamps
  ``hub_alive_at`` every ``heartbeat_interval / 2``, and the thread skips its beats
  while that stamp is older than ``unreachable_after``. A hub deadlocked or blocked
  longer than that stops beating, so the other nodes mark it unreachable and then
  down it (no zombie that beats for a dead hub); a hub blocked for less keeps the node
  up. Every beat's result (the membership view) is handed to the hub, where it is
  diffed into the events ``MemberUp``, ``UnreachableMember``, ``ReachableMember`` and
  ``MemberRemoved``. Downing is decided once, inside the server-side heartbeat script.
* **remote DeathWatch**: which local actors watch which actor of which node, and which
  remote nodes watch local actors; a removed node yields ``Terminated(ref, True,
  True)`` for every watched actor of it, and the watchers it had here are dropped.
* **self-downing**: a node that finds it was removed (paused past ``down_after``, or
  the store lost the membership) logs an ERROR and terminates its actor system; it
  never comes back under the same address (under the gunicorn hooks the worker exits
  and gunicorn starts a fresh one, a new node).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import weakref
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import Event
from gevent.lock import BoundedSemaphore
from greenlet import getcurrent

from gactors import _sysmsg as sm
from gactors._messages import Status
from gactors._path import ActorPath, Address
from gactors._ref import ActorRef, EmptyLocalActorRef, LocalActorRef, PromiseRef
from gactors._threads import allocate_lock, get_ident, start_new_thread
from gactors.cluster._events import (
    ClusterEvent,
    CurrentClusterState,
    Member,
    MemberRemoved,
    MemberUp,
    ReachableMember,
    UnreachableMember,
)
from gactors.cluster._redis import RedisBackend
from gactors.cluster._remote import RemoteActorRef
from gactors.cluster._seam import (
    STATUS_LEAVING,
    BackendUnavailable,
    HeartbeatResult,
    MembershipView,
)
from gactors.cluster._serialization import (
    KIND_SYSTEM,
    KIND_USER,
    Record,
    WireCodec,
    WireError,
    describe_payload,
)
from gactors.exceptions import ClusterError, SerializationError

if TYPE_CHECKING:
    from gactors._system import ActorSystem
    from gactors.cluster._settings import ClusterSettings

__all__ = ["ClusterNode", "UndecodableMessage", "make_node_id"]

_log = logging.getLogger("gactors.cluster")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
# How long one XREAD blocks: bounded so that a half-open connection is noticed and
# close() never waits long; the socket timeout of the reader is above it.
_READ_BLOCK_MS = 1000
_READ_COUNT = 256
_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 2.0
# Bounds of the decode caches (cleared when full: they only save work).
_CACHE_MAX = 20_000
# How long the graceful leave and the final flush may take at termination.
_LEAVE_BUDGET = 3.0


def make_node_id() -> str:
    """A node id unique per process incarnation, URL-safe and readable:
    ``<host>-<pid>-<6 random hex>``."""
    host = _UNSAFE.sub("-", socket.gethostname().split(".")[0])[:40] or "host"
    return f"{host}-{os.getpid()}-{os.urandom(3).hex()}"


class UndecodableMessage:
    """The message of a ``DeadLetter`` for an inbox entry or record that could not be
    decoded (garbage, unknown tag, too large): ``summary`` describes it."""

    __slots__ = ("summary",)

    def __init__(self, summary: str) -> None:
        self.summary = summary

    def __repr__(self) -> str:
        return f"UndecodableMessage({self.summary})"


class _Quarantined:
    __slots__ = ()


_QUARANTINED = _Quarantined()


class ClusterNode:
    """The cluster side of one actor system (internal; see the module docstring)."""

    def __init__(self, system: ActorSystem, settings: ClusterSettings) -> None:
        self.system = system
        self.settings = settings
        self.node_id = make_node_id()
        self.address = Address(system.name, self.node_id)
        self.address_str = str(self.address)
        self._tid = get_ident()
        self._ua_ms = int(settings.unreachable_after * 1000)
        self._down_ms = int(settings.down_after * 1000)
        try:
            self.backend = RedisBackend(
                settings.url,
                system.name,
                settings.key_prefix,
                client_name=f"gactors:{system.name}@{self.node_id}",
            )
        except ValueError as e:
            raise ClusterError(str(e)) from None
        try:
            self.codec = WireCodec.create(settings.serializer, self, settings.max_message_size)
        except Exception as e:
            raise ClusterError(f"cluster serializer {settings.serializer!r}: {e}") from e
        try:
            self.backend.ping()
        except BackendUnavailable as e:
            self.backend.close()
            raise ClusterError(
                f"cannot join the cluster of {system.name!r}: Redis at {self.backend.safe_url} "
                f"is unreachable ({e.detail})"
            ) from None
        # -- membership (hub thread) --
        self._members: dict[str, Member] = {}
        self._unreachable: set[str] = set()
        #: The members whose stored status is "leaving", also while they are unreachable
        #: (a member's status then shows "unreachable": a leaving node whose heartbeats
        #: are late is still leaving, and sharding must not send it shards).
        self.leaving_nodes: frozenset[str] = frozenset()
        self._removed: set[str] = set()
        self._epoch = ""
        self._subscribers: dict[ActorRef, tuple[type, ...]] = {}
        # -- outbound --
        self._pending: dict[str, tuple[list[Record], list[tuple[Any, Any, ActorRef]]]] = {}
        self._wake = Event()
        # ref_to_wire's cache of one: the last local ref it turned into a triple.
        self._last_wired: ActorRef | None = None
        self._last_wire: tuple[str, str, int] = ("", "", 0)
        self._wake_set = False
        self._flusher: Any = None
        self._held: dict[str, tuple[list[Record], list[tuple[Any, Any, ActorRef]]]] = {}
        self._refreshing = False
        # -- inbound --
        self._reader: Any = None
        self._exported: weakref.WeakValueDictionary[int, PromiseRef] = weakref.WeakValueDictionary()
        self._remote_refs: dict[tuple[str, str, int], Any] = {}
        self._local_refs: dict[tuple[str, int], ActorRef] = {}
        self._nodes_of: dict[str, str] = {}  # address text -> node id
        # -- remote DeathWatch --
        # node -> watched remote ref -> local watchers
        self._watching: dict[str, dict[ActorRef, set[ActorRef]]] = {}
        # node -> (local watchee, remote watcher)
        self._watched_by: dict[str, set[tuple[ActorRef, ActorRef]]] = {}
        # -- heartbeat --
        self._hub_alive_at = monotonic()
        self._hub_timer: Any = None
        self._hb_stop = allocate_lock()
        self._hb_stop.acquire()
        self._hb_done = allocate_lock()
        self._hb_running = False
        self._store: Any = None  # the hub side's membership store (join, leave, down)
        self._store_lock = BoundedSemaphore(1)  # one user at a time (the seam's rule)
        #: Called (in the hub thread) when this node starts a graceful leave, before any
        #: user actor stops: the singleton and sharding hand-overs. Each returns None or
        #: something with ``wait(timeout)`` (a gevent Event) set once its hand-over is done.
        self.leave_hooks: list[Callable[[], Any]] = []
        # -- lifecycle --
        self._leaving = False
        self._closing = False
        self._closed = False
        self.downed = False
        #: Why the node stopped on its own (None while it runs or after a normal leave).
        self.termination_reason: str | None = None

    def __repr__(self) -> str:
        return f"<ClusterNode {self.address_str} {self.backend.safe_url}>"

    # == lifecycle ==============================================================================
    def start(self) -> None:
        """Join (blocking until the store answered), then start the loops."""
        store = self._store = self.backend.membership()
        try:
            view = store.join(self.node_id, list(self.settings.roles))
        except BackendUnavailable as e:
            raise ClusterError(
                f"cannot join the cluster of {self.system.name!r} at {self.backend.safe_url}: "
                f"{e.detail}"
            ) from None
        self._apply_view(view, publish=False)
        hub = self.system._hub
        self._flusher = gevent.spawn(self._flush_loop)
        self._reader = gevent.spawn(self._read_loop)
        half = self.settings.heartbeat_interval / 2
        timer = self._hub_timer = hub.loop.timer(half, half)
        timer.start(self._stamp_hub_alive)
        self._hb_running = True
        self._hb_done.acquire()
        start_new_thread(self._heartbeat_thread, (self.backend.membership(),))
        self.system.termination_hooks.append(self._on_system_terminated)
        # /system/inspector: what the dashboards of the other nodes ask for this node's
        # tree and placement (read-only; idle until asked).
        from gactors.cluster._inspect import start_inspector

        start_inspector(self.system)
        _log.info(
            "cluster node %s joined %s (%d member(s))",
            self.address_str,
            self.backend.safe_url,
            len(self._members),
        )

    def begin_leave(self) -> None:
        """Graceful leave, first step (``terminate()``): mark this node leaving."""
        if self._leaving or self.downed or self._closed:
            return
        self._leaving = True
        gevent.spawn(self._set_leaving)

    def hand_over(self, then: Callable[[], Any]) -> None:
        """Run the leave hooks (singleton/shard hand-overs), wait for them within a
        bounded budget, then call ``then`` (stop the user actors). In the hub thread."""
        hooks = list(self.leave_hooks)
        self.leave_hooks.clear()
        if not hooks:
            then()
            return

        def run() -> None:
            deadline = monotonic() + max(_LEAVE_BUDGET, self.settings.lease_ttl)
            waits: list[Any] = []
            for hook in hooks:
                try:
                    w = hook()
                except Exception:
                    _log.exception("cluster node %s: leave hook %r failed", self.address_str, hook)
                    continue
                if w is not None:
                    waits.append(w)
            for w in waits:
                if not w.wait(max(0.0, deadline - monotonic())):
                    _log.warning(
                        "cluster node %s: a hand-over did not finish in time; stopping anyway "
                        "(what it protects stops with the system, its lease is released then)",
                        self.address_str,
                    )
                    break
            then()

        gevent.spawn(run)

    def _set_leaving(self) -> None:
        try:
            with gevent.Timeout(_LEAVE_BUDGET, False), self._store_lock:
                self._store.set_leaving(self.node_id)
        except BackendUnavailable as e:
            _log.warning("cluster node %s: cannot mark itself leaving: %s", self.address_str, e)

    def _on_system_terminated(self) -> None:
        # Every actor has stopped: what they sent last (death-watch notifications to
        # remote watchers) is pending; flush it, leave the membership, close.
        if getcurrent() is self.system._hub:
            # Blocking I/O is not allowed in the hub greenlet itself.
            gevent.spawn(self._finish)
        else:
            self._finish()

    def _finish(self) -> None:
        if self._closed:
            return
        self._closing = True
        self._stop_heartbeat()
        flusher = self._flusher
        if flusher is not None and not flusher.dead:
            self._wake.set()
            flusher.join(_LEAVE_BUDGET)
        if not self.downed:
            try:
                with gevent.Timeout(_LEAVE_BUDGET, False), self._store_lock:
                    self._store.remove(self.node_id, "left")
                    _log.info("cluster node %s left the cluster", self.address_str)
            except BackendUnavailable as e:
                _log.warning(
                    "cluster node %s could not leave gracefully (%s): the others will down "
                    "it after down_after",
                    self.address_str,
                    e,
                )
        self.close()

    def close(self) -> None:
        """Stop the loops and close every connection (idempotent, no blocking I/O)."""
        if self._closed:
            return
        self._closed = self._closing = True
        self._stop_heartbeat()
        timer = self._hub_timer
        if timer is not None:
            self._hub_timer = None
            timer.close()
        for g in (self._reader, self._flusher):
            if g is not None and not g.dead:
                g.kill(block=False)
        pending = self._pending
        self._pending = {}
        for _, metas in pending.values():
            self._dead_letter_all(metas)
        # Killed greenlets unwind (closing their objects) before the backend closes.
        gevent.spawn(self._close_backend)

    def _close_backend(self) -> None:
        for g in (self._reader, self._flusher):
            if g is not None:
                g.join(1.0)
        self.backend.close()

    def _stop_heartbeat(self) -> None:
        if self._hb_running:
            self._hb_running = False
            self._hb_stop.release()
            # Bounded: the thread may be inside one heartbeat call; it closes its own
            # store when it leaves, and a late result is ignored (closed).
            self._hb_done.acquire(True, 1.0)

    # == outbound ===============================================================================
    def send_user(self, ref: RemoteActorRef, message: Any, sender: ActorRef | None) -> None:
        """Encode ``message`` (SerializationError to the caller) and queue it."""
        rec = self.codec.user_record(ref.rpath, ref._uid, message, sender)
        if get_ident() != self._tid:
            self.system.run_in_hub_async(self._enqueue, ref.dest, rec, message, sender, ref)
        else:
            self._enqueue(ref.dest, rec, message, sender, ref)

    def send_failure(self, ref: RemoteActorRef, exc: BaseException) -> None:
        """Reply ``Status.Failure(exc)`` to a remote promise (the asked actor failed)."""
        try:
            self.send_user(ref, Status.Failure(exc), None)
        except SerializationError as e:  # pragma: no cover - exceptions always encode
            _log.warning("cannot send the failure %r to %s: %s", exc, ref, e)

    def send_system(self, ref: RemoteActorRef, message: sm.SystemMessage) -> None:
        """A system message for a remote actor (watch, unwatch, death-watch notification)."""
        if get_ident() != self._tid:
            self.system.run_in_hub_async(self.send_system, ref, message)
            return
        dest = ref.dest
        # type(message) each time, not a local: mypy narrows the message by it
        if type(message) is sm.Watch:
            watcher = message.watcher
            if dest in self._removed:
                # A node that is gone: its actors are terminated.
                watcher._send_system(sm.DeathWatchNotification(ref, False, True))
                return
            self._watching.setdefault(dest, {}).setdefault(ref, set()).add(watcher)
        elif type(message) is sm.Unwatch:
            watchers = self._watching.get(dest, {}).get(ref)
            if watchers is not None:
                watchers.discard(message.watcher)
                if not watchers:
                    del self._watching[dest][ref]
        elif type(message) is sm.DeathWatchNotification:
            # A local actor died; ``ref`` watched it from another node.
            s = self._watched_by.get(dest)
            if s is not None:
                s.discard((message.actor, ref))
        else:
            _log.debug("system message %r to remote %s not sent", message, ref)
            return
        try:
            rec = self.codec.system_record(ref.rpath, ref._uid, message)
        except SerializationError as e:
            _log.warning("cannot send %r to %s: %s", message, ref, e)
            return
        self._enqueue(dest, rec, message, None, ref)

    def _enqueue(
        self, dest: str, rec: Record, message: Any, sender: ActorRef | None, ref: ActorRef
    ) -> None:
        if dest not in self._members:
            if dest in self._removed or self._closing:
                self._undeliverable(message, sender, ref)
                return
            # A node this one has not seen yet (it joined after our last view): the
            # message waits for a fresh view, then goes or is a dead letter.
            held = self._held.get(dest)
            if held is None:
                held = self._held[dest] = ([], [])
            held[0].append(rec)
            held[1].append((message, sender, ref))
            if not self._refreshing:
                self._refreshing = True
                gevent.spawn(self._refresh_view)
            return
        p = self._pending.get(dest)
        if p is None:
            p = self._pending[dest] = ([], [])
        p[0].append(rec)
        p[1].append((message, sender, ref))
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
            if type(message) is sm.Watch:
                watcher = message.watcher
                watchers = self._watching.get(ref.dest, {}).get(ref)  # type: ignore[attr-defined]
                if watchers is not None:
                    watchers.discard(watcher)
                watcher._send_system(sm.DeathWatchNotification(ref, False, True))
            return
        self.system.publish_dead_letter(message, sender, ref)

    def _dead_letter_all(self, metas: list[tuple[Any, Any, ActorRef]]) -> None:
        for message, sender, ref in metas:
            self._undeliverable(message, sender, ref)

    def _flush_loop(self) -> None:
        outbox = self.backend.outbox()
        delay = _BACKOFF_FIRST
        encode_batches = self.codec.encode_batches
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
                entries: list[tuple[str, bytes]] = []
                sent: list[list[tuple[Any, Any, ActorRef]]] = []
                members = self._members
                for dest, (recs, metas) in pending.items():
                    if dest not in members:
                        self._dead_letter_all(metas)
                        continue
                    try:
                        for data in encode_batches(recs):
                            entries.append((dest, data))
                    except Exception:
                        _log.exception("cannot encode a batch for %s", dest)
                        self._dead_letter_all(metas)
                        continue
                    sent.append(metas)
                if not entries:
                    continue
                try:
                    outbox.send(entries)
                except BackendUnavailable as e:
                    n = sum(len(m) for m in sent)
                    _log.warning(
                        "cluster node %s: %d message(s) to %d node(s) dropped as dead letters: "
                        "%s; retrying in %.2f s",
                        self.address_str,
                        n,
                        len(sent),
                        e,
                        delay,
                    )
                    for metas in sent:
                        self._dead_letter_all(metas)
                    if self._closing:
                        return
                    gevent.sleep(delay)
                    delay = min(delay * 2, _BACKOFF_MAX)
                    # What accumulated meanwhile is tried now.
                    if self._pending:
                        self._wake_set = True
                        self._wake.set()
                    continue
                delay = _BACKOFF_FIRST
        finally:
            outbox.close()

    # == inbound ================================================================================
    def _read_loop(self) -> None:
        reader = self.backend.inbox_reader(self.node_id, max_block_ms=_READ_BLOCK_MS)
        delay = _BACKOFF_FIRST
        failing = False
        deliver = self._deliver_batch
        try:
            while not self._closed:
                try:
                    batches = reader.read(_READ_BLOCK_MS, _READ_COUNT)
                except BackendUnavailable as e:
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
                for data in batches:
                    deliver(data)
        finally:
            reader.close()

    def _deliver_batch(self, data: bytes) -> None:
        codec = self.codec
        try:
            records = codec.decode_batch(data)
        except WireError as e:
            self._undecodable(str(e), describe_payload(data), None)
            return
        remote_refs = self._remote_refs
        local_refs = self._local_refs
        decode = codec.decode_message
        for r in records:
            try:
                snd = r.sender
                if snd is None:
                    sender: Any = None
                else:
                    sender = remote_refs.get(snd)
                    if sender is None:
                        sender = self._sender_ref(snd)
                    if sender is _QUARANTINED:
                        self._quarantined(r, snd)
                        continue
                if r.kind == KIND_USER:
                    message = decode(r.serializer_id, r.payload)
                    recipient = local_refs.get(r.recipient)
                    if recipient is None:
                        recipient = self._recipient(r.recipient)
                    recipient.tell(message, sender)
                elif r.kind == KIND_SYSTEM:
                    self._system_record(r)
                else:
                    raise WireError(f"a record of unknown kind {r.kind!r}")
            except WireError as e:
                self._undecodable(str(e), describe_payload(r.payload), r.recipient[0])
            except Exception:
                _log.exception("cluster node %s: cannot deliver a record", self.address_str)

    def _sender_ref(self, snd: tuple[str, str, int]) -> Any:
        address, path, uid = snd
        if address != self.address_str:
            node = address.partition("@")[2]
            if node in self._removed:
                return _QUARANTINED
        try:
            ref = self.ref_from_wire(address, path, uid)
        except WireError:
            raise
        except Exception as e:
            raise WireError(f"an unusable sender {snd!r}: {e}") from e
        if path.startswith("/temp/"):
            return ref  # an ask's promise: used once, not worth a cache entry
        if len(self._remote_refs) >= _CACHE_MAX:
            self._remote_refs.clear()
        self._remote_refs[snd] = ref
        return ref

    def _recipient(self, recipient: tuple[str, int]) -> ActorRef:
        path, uid = recipient
        ref = self._resolve_local(path, uid)
        if uid and type(ref) is LocalActorRef:
            # Only exact incarnations are cached: uid 0 is "whatever lives there now".
            if len(self._local_refs) >= _CACHE_MAX:
                self._local_refs.clear()
            self._local_refs[recipient] = ref
        return ref

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

    def _system_record(self, r: Record) -> None:
        message = self.codec.decode_system(r.payload)
        if type(message) is sm.Watch:
            watchee, watcher = message.watchee, message.watcher
            if type(watcher) is RemoteActorRef:
                self._watched_by.setdefault(watcher.dest, set()).add((watchee, watcher))
            watchee._send_system(message)
        elif type(message) is sm.Unwatch:
            watchee, watcher = message.watchee, message.watcher
            if type(watcher) is RemoteActorRef:
                s = self._watched_by.get(watcher.dest)
                if s is not None:
                    s.discard((watchee, watcher))
            watchee._send_system(message)
        else:  # DeathWatchNotification for a local watcher
            actor = message.actor  # type: ignore[attr-defined]
            watcher = self._resolve_local(*r.recipient)
            if type(actor) is RemoteActorRef:
                watchers = self._watching.get(actor.dest, {}).get(actor)
                if watchers is not None:
                    watchers.discard(watcher)
                    if not watchers:
                        del self._watching[actor.dest][actor]
            watcher._send_system(message)

    # == refs (the RefCodec of the wire format) =================================================
    def ref_to_wire(self, ref: ActorRef) -> tuple[str, str, int]:
        """``(address, path without address, uid)`` of ``ref``."""
        if ref is self._last_wired:
            # An actor telling many messages in a row: its triple once, not per message.
            return self._last_wire
        t = type(ref)
        if t is RemoteActorRef:
            return (ref.addr, ref.rpath, ref._uid)  # type: ignore[attr-defined]
        if t is PromiseRef:
            # Exported so that a reply to /temp/$uid finds it; weakly, so a forgotten
            # ask costs nothing (a late reply is a dead letter).
            uid = ref._uid
            self._exported[uid] = ref  # type: ignore[assignment]
            return (self.address_str, f"/temp/${uid}", uid)
        if ref._system is not self.system:
            raise SerializationError(
                f"a ref of another actor system ({ref._system.name!r}) cannot be sent: {ref!r}"
            )
        wire = (self.address_str, ref.path.path_str, ref._uid)
        if t is LocalActorRef:
            self._last_wired, self._last_wire = ref, wire
        return wire

    def ref_from_wire(self, address: str, path: str, uid: int) -> ActorRef:
        """The ref a wire triple stands for on this node."""
        if address == self.address_str:
            return self._resolve_local(path, uid)
        key = (address, path, uid)
        ref = self._remote_refs.get(key)
        if ref is not None and ref is not _QUARANTINED:
            return ref  # type: ignore[no-any-return]
        node = self._nodes_of.get(address)
        if node is None:
            try:
                addr = Address.parse(address)
            except ValueError as e:
                raise WireError(str(e)) from None
            if addr.system != self.system.name or addr.node is None:
                raise WireError(f"a ref of another cluster: {address}")
            node = addr.node
            if len(self._nodes_of) >= 1000:
                self._nodes_of.clear()
            self._nodes_of[address] = node
        return RemoteActorRef(
            self, ActorPath(self.system.name, _elements(path), None, node), uid, path
        )

    def remote_ref(self, path: ActorPath, uid: int) -> ActorRef:
        """A ref to ``path`` on another node (uid 0: whatever lives there)."""
        if path.node == self.node_id:
            return self._resolve_local(path.path_str, uid)
        return RemoteActorRef(self, path, uid, path.path_str)

    def _resolve_local(self, path: str, uid: int) -> ActorRef:
        if path.startswith("/temp/$"):
            # The reply to an ask of this node (the hot path of remote asks).
            # The uid names the promise: exported under it by ref_to_wire.
            promise = self._exported.get(uid)
            if promise is not None:
                return promise
        system = self.system
        elements = _elements(path)
        if len(elements) == 2 and elements[0] == "temp":
            promise = self._exported.get(uid)
            if promise is not None:
                return promise
        elif elements == ("deadLetters",):
            return system.dead_letters
        else:
            ref = system.resolve_local(elements, uid)
            if ref is not None:
                return ref
        return EmptyLocalActorRef(system, ActorPath(system.name, elements, None, self.node_id), uid)

    # == membership =============================================================================
    def _stamp_hub_alive(self) -> None:
        self._hub_alive_at = monotonic()

    def _heartbeat_thread(self, store: Any) -> None:
        # A real OS thread: no gevent primitive of the hub's thread is used here, and
        # everything for the hub goes through system.run_in_hub_async.
        interval = self.settings.heartbeat_interval
        limit = self.settings.unreachable_after
        run = self.system.run_in_hub_async
        skipping = failing = False
        try:
            while not self._hb_stop.acquire(True, interval):
                stalled = monotonic() - self._hub_alive_at
                if stalled > limit:
                    if not skipping:
                        skipping = True
                        run(
                            _log.warning,
                            "cluster node %s: the hub made no progress for %.1f s; "
                            "heartbeats stop until it does",
                            self.address_str,
                            stalled,
                        )
                    continue
                skipping = False
                try:
                    result = store.heartbeat(self.node_id, self._ua_ms, self._down_ms)
                except BackendUnavailable as e:
                    if not failing:
                        failing = True
                        run(
                            _log.warning,
                            "cluster node %s: heartbeat failed: %s",
                            self.address_str,
                            e,
                        )
                    continue
                except Exception as e:  # pragma: no cover - a bug, reported in the hub
                    run(_log.error, "cluster node %s: heartbeat error: %r", self.address_str, e)
                    continue
                if failing:
                    failing = False
                    run(_log.info, "cluster node %s: heartbeats go through again", self.address_str)
                run(self._on_heartbeat, result)
        finally:
            try:
                store.close()
            finally:
                self._hb_done.release()

    def _on_heartbeat(self, result: HeartbeatResult) -> None:
        if self._closed or self.downed:
            return
        if result.self_removed:
            self._self_downed()
            return
        self._apply_view(result.view, publish=True)

    def _self_downed(self) -> None:
        self.downed = True
        self.termination_reason = (
            f"cluster node {self.address_str} was removed from the cluster (it missed its "
            "heartbeats for longer than down_after, was downed, or the store lost the "
            "membership)"
        )
        _log.error(
            "%s: terminating actor system %r; it never rejoins under this address (under "
            "the gactors gunicorn hooks the worker exits and gunicorn starts a fresh one, "
            "a new node)",
            self.termination_reason,
            self.system.name,
        )
        self.system.terminate()

    def _member(self, node: str, roles: tuple[str, ...], status: str) -> Member:
        return Member(Address(self.system.name, node), roles, status)

    def _apply_view(self, view: MembershipView, *, publish: bool) -> None:
        self._epoch = view.epoch
        leaving = frozenset(r.node for r in view.members if r.status == STATUS_LEAVING)
        if leaving != self.leaving_nodes:
            self.leaving_nodes = leaving
        seen: dict[str, Any] = {}
        events: list[ClusterEvent] = []
        ua = self._ua_ms
        for rec in view.members:
            node = rec.node
            seen[node] = rec
            unreachable = node != self.node_id and rec.last_heartbeat_age_ms > ua
            member = self._member(node, rec.roles, "unreachable" if unreachable else rec.status)
            old = self._members.get(node)
            self._members[node] = member
            if old is None:
                events.append(MemberUp(self._member(node, rec.roles, rec.status)))
                if unreachable:
                    self._unreachable.add(node)
                    events.append(UnreachableMember(member))
            elif unreachable and node not in self._unreachable:
                self._unreachable.add(node)
                events.append(UnreachableMember(member))
            elif not unreachable and node in self._unreachable:
                self._unreachable.discard(node)
                events.append(ReachableMember(member))
        for node in list(self._members):
            if node not in seen:
                events.append(self._member_removed(node))
        self._removed.update(n for n in view.removed if n != self.node_id)
        if publish:
            for ev in events:
                self._publish(ev)

    def _member_removed(self, node: str) -> MemberRemoved:
        old = self._members.pop(node)
        self._unreachable.discard(node)
        self._removed.add(node)
        self._remote_refs.clear()  # senders of that node are quarantined from now on
        for watchee, watchers in self._watching.pop(node, {}).items():
            for w in list(watchers):
                w._send_system(sm.DeathWatchNotification(watchee, True, True))
        for watchee, watcher in self._watched_by.pop(node, ()):
            watchee._send_system(sm.Unwatch(watchee, watcher))
        return MemberRemoved(self._member(node, old.roles, "removed"))

    def _publish(self, event: ClusterEvent) -> None:
        _log.info("cluster node %s: %s", self.address_str, event)
        self.system.event_stream.publish(event)
        for ref, classes in list(self._subscribers.items()):
            if isinstance(event, classes):
                ref.tell(event, None)

    # == the Cluster API (hub thread) ===========================================================
    def members(self) -> tuple[Member, ...]:
        return tuple(self._members.values())

    def member(self, node_id: str) -> Member | None:
        """The member ``node_id`` as last seen (any thread: one dict read)."""
        return self._members.get(node_id)

    def state(self) -> CurrentClusterState:
        members = self.members()
        return CurrentClusterState(members, tuple(m for m in members if m.status == "unreachable"))

    def subscribe(self, subscriber: ActorRef, classes: tuple[type, ...]) -> None:
        self._subscribers[subscriber] = classes
        subscriber.tell(self.state(), None)

    def unsubscribe(self, subscriber: ActorRef) -> None:
        self._subscribers.pop(subscriber, None)

    def down(self, node: str) -> bool:
        """Remove ``node`` from the membership now (blocking I/O: not in the hub greenlet)."""
        removed = self._call_store(lambda s: s.remove(node, f"downed by {self.node_id}"))
        if node == self.node_id:
            if not self.downed:
                self._self_downed()
        elif node in self._members:
            self._publish(self._member_removed(node))
        else:
            # Not seen in a view yet: quarantined all the same.
            self._removed.add(node)
            self._remote_refs.clear()
        return bool(removed)

    def _call_store(self, fn: Callable[[Any], Any]) -> Any:
        try:
            with self._store_lock:
                return fn(self._store)
        except BackendUnavailable as e:
            raise ClusterError(str(e)) from None


def _elements(path: str) -> tuple[str, ...]:
    if not path.startswith("/"):
        raise WireError(f"a path must start with '/': {path[:100]!r}")
    return tuple(e for e in path[1:].split("/") if e)

"""``ClusterNode``: one actor system as a node of a cluster on Redis (docs/cluster/concepts.md).

Made by the cluster extension (``_extension.py``) when the system's settings have a
``cluster`` table, never imported otherwise. This module holds its lifecycle (join,
the graceful leave with its hand-overs, termination, close) and assembles the node
from one class per concern:

* ``_transport.py``: the outbound batcher and its flusher, the inbound reader and
  delivery (``send_user``, ``_enqueue``, ``_flush_loop``, ``_settle``,
  ``_read_loop``, ``_deliver_batch``) and the drain of its own inbox on leaving;
* ``_membership.py``: the heartbeat thread (a real OS thread that beats only while
  the hub makes progress), the membership view and its events, removals and the
  drain of a removed node's inbox, self-downing, the ``Cluster`` API;
* ``_deathwatch.py``: remote DeathWatch;
* ``_wire_refs.py``: the ref wire format (``ref_to_wire``, ``ref_from_wire``) and
  the resolution of local paths;
* ``_node_base.py``: the state they share, declared for the type checker.

The backend is made from the URL's scheme (:func:`make_backend`) and used only
through the :class:`~gactors.cluster._seam.Backend` protocol.
"""

from __future__ import annotations

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

from gactors._path import Address
from gactors._threads import allocate_lock, get_ident, start_new_thread
from gactors._timing import Histo
from gactors.cluster._deathwatch import _DeathWatch
from gactors.cluster._membership import _Membership
from gactors.cluster._node_base import _LEAVE_BUDGET, _log
from gactors.cluster._seam import Backend, BackendUnavailable
from gactors.cluster._serialization import WireCodec
from gactors.cluster._transport import UndecodableMessage, _Transport
from gactors.cluster._wire_refs import _WireRefs
from gactors.exceptions import ClusterError

if TYPE_CHECKING:
    from gactors._system import ActorSystem
    from gactors.cluster._settings import ClusterSettings

__all__ = ["ClusterNode", "UndecodableMessage", "make_backend", "make_node_id"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")

#: The URL schemes of the Redis engine (``_redis.py``), the one engine so far.
_REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel", "redis+cluster")


def make_node_id() -> str:
    """A node id unique per process incarnation, URL-safe and readable:
    ``<host>-<pid>-<6 random hex>``."""
    host = _UNSAFE.sub("-", socket.gethostname().split(".")[0])[:40] or "host"
    return f"{host}-{os.getpid()}-{os.urandom(3).hex()}"


def make_backend(url: str, cluster_name: str, key_prefix: str, client_name: str) -> Backend:
    """The backend engine for ``url``, chosen by its scheme; ``ValueError`` naming the
    problem (never the password) for a URL no engine takes. Only the Redis engine
    exists; it is imported here, on first use, and the node knows it only as a
    :class:`~gactors.cluster._seam.Backend`."""
    scheme = url.partition("://")[0].lower() if isinstance(url, str) and "://" in url else ""
    # The Redis engine checks the rest of the URL (and words its errors with the
    # password masked).
    from gactors.cluster._redis import RedisBackend, mask_url

    if scheme not in _REDIS_SCHEMES:
        raise ValueError(
            "cluster url must start with redis://, rediss://, unix://, redis+sentinel:// "
            f"or redis+cluster://, not {mask_url(str(url))!r}"
        )
    return RedisBackend(url, cluster_name, key_prefix, client_name=client_name)


class ClusterNode(_Transport, _Membership, _DeathWatch, _WireRefs):
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
            self.backend = make_backend(
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
        self._members = {}
        self._unreachable = set()
        #: The members whose stored status is "leaving", also while they are unreachable
        #: (a member's status then shows "unreachable": a leaving node whose heartbeats
        #: are late is still leaving, and sharding must not send it shards).
        self.leaving_nodes = frozenset()
        self._removed = set()
        self._epoch = ""
        self._subscribers = {}
        # -- outbound --
        self._pending = {}
        self._wake = Event()
        # ref_to_wire's cache of one: the last local ref it turned into a triple.
        self._last_wired = None
        self._last_wire = ("", "", 0)
        self._wake_set = False
        self._flusher = None
        self._held = {}
        self._refreshing = False
        # -- inbound --
        self._reader = None
        self._exported = weakref.WeakValueDictionary()
        self._remote_refs = {}
        self._local_refs = {}
        self._nodes_of = {}  # address text -> node id
        # -- remote DeathWatch --
        # node -> watched remote ref -> local watchers
        self._watching = {}
        # node -> (local watchee, remote watcher)
        self._watched_by = {}
        # -- heartbeat --
        self._hub_alive_at = monotonic()
        self._hub_timer = None
        self._hb_stop = allocate_lock()
        self._hb_stop.acquire()
        self._hb_done = allocate_lock()
        self._hb_running = False
        self._store = None  # the hub side's membership store (join, leave, down)
        self._store_lock = BoundedSemaphore(1)  # one user at a time (the seam's rule)
        #: Called (in the hub thread) when this node starts a graceful leave, before any
        #: user actor stops: the singleton and sharding hand-overs. Each returns None or
        #: something with ``wait(timeout)`` (a gevent Event) set once its hand-over is done.
        self.leave_hooks = []
        #: Messages by outcome (counted per flush and per batch, not per message):
        #: ``sent`` (appended to an inbox), ``dead_letters`` (dead letters published
        #: here for messages that certainly did not arrive: node gone, inbox full,
        #: Redis unreachable before anything was written), ``unknown`` (a flush whose
        #: outcome is unknown: they may have arrived, so they are no dead letters),
        #: ``full`` (of ``dead_letters``: refused by a full inbox), ``received`` (read
        #: from this node's inbox) and ``drained`` (unread in a removed node's inbox,
        #: dead letters here).
        self.stats = dict.fromkeys(
            ("sent", "dead_letters", "unknown", "full", "received", "drained"), 0
        )
        self._full_warned = {}
        #: Round trips of the flusher's sends (one per flush, whatever its size) and
        #: of the reader's reads that could not wait for entries (see
        #: ``InboxReader.last_round_trip``): buckets the metrics read, no lock.
        self.flush_seconds = Histo()
        self.read_seconds = Histo()
        #: Unread entries of this node's inbox, sampled by the heartbeat thread at most
        #: once a second (None until known, or if the server cannot tell).
        self.inbox_backlog = None
        # -- lifecycle --
        self._leaving = False
        #: Set when this node drains its own inbox (graceful leave): the reader stops.
        self._draining = False
        self._closing = False
        self._closed = False
        self.downed = False
        #: Why the node stopped on its own (None while it runs or after a normal leave).
        self.termination_reason = None

    def __repr__(self) -> str:
        return f"<ClusterNode {self.address_str} {self.backend.safe_url}>"

    def start(self) -> None:
        """Join (blocking until the store answered), then start the loops."""
        store = self._store = self.backend.membership()
        try:
            view = store.join(
                self.node_id, list(self.settings.roles), inbox_ttl_ms=2 * self._down_ms
            )
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
            self._drain_own_inbox()
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

"""Membership and heartbeat of a cluster node (:class:`_Membership`, a part of
:class:`~gactors.cluster._node.ClusterNode`).

* **The heartbeat thread** (:meth:`_Membership._heartbeat_thread`): a real OS thread
  with its own membership connection, so a hub blocked for a while by unpatched code
  does not stop the beats (no false downs). It beats only while the hub shows
  progress: a hub timer stamps ``_hub_alive_at`` every ``heartbeat_interval / 2``,
  and the thread skips its beats while that stamp is older than
  ``unreachable_after``. Every beat's result (the membership view) is handed to the
  hub (:meth:`_Membership._on_heartbeat`), where :meth:`_Membership._apply_view`
  diffs it into the events ``MemberUp``, ``UnreachableMember``, ``ReachableMember``
  and ``MemberRemoved``. Downing is decided once, inside the server-side heartbeat
  script.
* **Removal** (:meth:`_Membership._member_removed`): the removed node's senders are
  quarantined, its watches settled, and its inbox drained here
  (:meth:`_Membership._drain_removed`: what was unread becomes dead letters).
* **Self-downing** (:meth:`_Membership._self_downed`): a node that finds it was
  removed logs an ERROR and terminates its actor system.
* **The Cluster API** (``members``, ``member``, ``state``, ``subscribe``, ``down``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Any, cast

import gevent

from gactors._path import ActorPath, Address
from gactors._ref import ActorRef
from gactors.cluster._events import (
    ClusterEvent,
    CurrentClusterState,
    Member,
    MemberRemoved,
    MemberUp,
    ReachableMember,
    UnreachableMember,
)
from gactors.cluster._node_base import _BACKOFF_FIRST, _BACKOFF_MAX, _NodeBase
from gactors.cluster._remote import RemoteActorRef
from gactors.cluster._seam import (
    STATUS_LEAVING,
    BackendUnavailable,
    HeartbeatResult,
    MembershipView,
)
from gactors.cluster._serialization import KIND_USER, WireError, describe_payload
from gactors.cluster._transport import UndecodableMessage
from gactors.cluster._wire_refs import _elements
from gactors.exceptions import ClusterError

_log = logging.getLogger("gactors.cluster")

# Attempts (with backoff) to drain a removed node's inbox while Redis is unreachable.
_DRAIN_ATTEMPTS = 5

if TYPE_CHECKING:
    from gactors.cluster._node import ClusterNode


class _Membership(_NodeBase):
    """Heartbeat, membership view, removals and the Cluster API (see the module
    docstring)."""

    def _stamp_hub_alive(self) -> None:
        self._hub_alive_at = monotonic()

    def _heartbeat_thread(self, store: Any) -> None:
        # A real OS thread: no gevent primitive of the hub's thread is used here, and
        # everything for the hub goes through system.run_in_hub_async.
        interval = self.settings.heartbeat_interval
        limit = self.settings.unreachable_after
        run = self.system.run_in_hub_async
        skipping = failing = False
        sampled_at = -1e9  # the inbox backlog: asked at most once a second
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
                    now = monotonic()
                    backlog = now - sampled_at >= 1.0
                    result = store.heartbeat(
                        self.node_id, self._ua_ms, self._down_ms, backlog=backlog
                    )
                    if backlog:
                        sampled_at = now
                        self.inbox_backlog = result.inbox_backlog
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
        # Stop sending at once: what is pending or held becomes dead letters here now
        # (the flusher settles a flush already in flight by its outcome).
        pending, held = self._pending, self._held
        self._pending, self._held = {}, {}
        for group in (pending, held):
            for _, metas in group.values():
                self.stats["dead_letters"] += len(metas)
                self._dead_letter_all(metas)
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
        if publish:
            # A node removed before this one ever saw it up (it joined and died
            # between two views) may have an inbox with messages in it too.
            for node in view.removed:
                if node != self.node_id and node not in self._removed:
                    self._removed.add(node)
                    gevent.spawn(self._drain_removed, node)
        self._removed.update(n for n in view.removed if n != self.node_id)
        if publish:
            for ev in events:
                self._publish(ev)

    def _member_removed(self, node: str) -> MemberRemoved:
        old = self._members.pop(node)
        self._unreachable.discard(node)
        self._removed.add(node)
        # Every node that sees a removal tries; the drain is atomic, so exactly one
        # gets what was unread (or none, when the node drained it itself on leaving).
        gevent.spawn(self._drain_removed, node)
        self._remote_refs.clear()  # senders of that node are quarantined from now on
        self._node_gone_watches(node)
        return MemberRemoved(self._member(node, old.roles, "removed"))

    def _drain_removed(self, node: str) -> None:
        """Dead-letter here every entry still unread in the inbox of ``node``, which
        was removed, then delete that inbox (SPEC §17 "Precisely")."""
        delay = _BACKOFF_FIRST
        batches: list[bytes] | None = None
        for attempt in range(_DRAIN_ATTEMPTS):
            if self._closed:
                return
            try:
                with self._store_lock:
                    batches = self._store.drain_inbox(node)
                break
            except BackendUnavailable as e:
                if attempt == _DRAIN_ATTEMPTS - 1:
                    _log.warning(
                        "cluster node %s cannot drain the inbox of removed node %s: %s; "
                        "another node may, or it expires with what is unread in it",
                        self.address_str,
                        node,
                        e,
                    )
                    return
                gevent.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX)
        if not batches:
            return
        n = 0
        for data in batches:
            n += self._dead_letter_batch(data, node)
        self.stats["drained"] += n
        _log.warning(
            "cluster node %s: %d message(s) unread in the inbox of removed node %s are "
            "dead letters here",
            self.address_str,
            n,
            node,
        )

    def _dead_letter_batch(self, data: bytes, node: str) -> int:
        """Publish the user messages of one entry of ``node``'s inbox as dead letters
        for their intended recipients; how many."""
        codec = self.codec
        try:
            records = codec.decode_batch(data)
        except WireError as e:
            self._undecodable(str(e), describe_payload(data), None)
            return 1
        n = 0
        name = self.system.name
        for r in records:
            if r.kind != KIND_USER:
                continue  # watch/unwatch/death-watch: settled by the removal itself
            path, uid = r.recipient
            try:
                message: Any = codec.decode_message(r.serializer_id, r.payload)
            except WireError:
                message = UndecodableMessage(describe_payload(r.payload))
            sender: Any = None
            recipient: ActorRef = self.system.dead_letters
            try:
                if r.sender is not None:
                    sender = self.ref_from_wire(*r.sender)
                recipient = RemoteActorRef(
                    cast("ClusterNode", self),
                    ActorPath(name, _elements(path), None, node),
                    uid,
                    path,
                )
            except Exception:  # a malformed ref: the message is still reported
                _log.debug("a malformed ref in the inbox of %s", node, exc_info=True)
            n += 1
            self.system.publish_dead_letter(message, sender, recipient)
        return n

    def _publish(self, event: ClusterEvent) -> None:
        _log.info("cluster node %s: %s", self.address_str, event)
        self.system.event_stream.publish(event)
        for ref, classes in list(self._subscribers.items()):
            if isinstance(event, classes):
                ref.tell(event, None)

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

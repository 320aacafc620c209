"""The engine seam of the cluster: what a node needs from its backing store.

The node (``_node.py``) talks to the store only through these protocols, so another
engine can be added later without touching the node. Today there is one engine,
Redis (``_redis.py``); nothing here imports it.

Rules that every implementation follows (the node relies on them):

* **Synchronous.** Every method does its work in one round trip, or a few pipelined
  ones, and returns when the server answered. Nothing is done in the background.
* **No retries.** A method never retries by itself. When the server cannot be reached
  or answers with an error, it raises :class:`BackendUnavailable` and the caller (the
  node's loops) owns backoff and reconnection. The next call after a failure starts
  on a fresh connection, so a restarted server works again without any reset call.
* **One user each.** An object is used from one greenlet or one OS thread at a time
  and owns its own connection (a blocking read must never share a connection with
  anything else). Creating an object does not connect; the first call does.
* **Threads.** Objects hold no gevent-only state: a :class:`MembershipStore` works
  from a real OS thread of a monkey-patched process (the heartbeat thread), as long
  as no other thread uses the same object.
* **Server time.** Every time stamp and age comes from the server's clock, never from
  a node's: nodes on different machines may disagree about the time.
* **No secrets.** Error messages, logs and ``repr`` show the server URL with the
  password masked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "FULL",
    "GONE",
    "REFUSED",
    "SENT",
    "AllocationStore",
    "AllocationTable",
    "Backend",
    "BackendUnavailable",
    "HeartbeatResult",
    "InboxReader",
    "LeaseStore",
    "MemberRecord",
    "MembershipStore",
    "MembershipView",
    "Outbox",
    "ShardCountMismatch",
]

#: ``MemberRecord.status`` of a member that joined and has not started to leave.
STATUS_UP = "up"
#: ``MemberRecord.status`` of a member that announced a graceful leave.
STATUS_LEAVING = "leaving"

# The outcome of one batch of :meth:`Outbox.send` (SPEC §17 "Precisely": the sender
# must know which batches certainly did not arrive, to dead-letter exactly those).
#: Appended to the inbox.
SENT = 1
#: Not appended: the inbox does not exist (its node left, was removed, or never
#: joined). Senders never create an inbox, so a removed node's inbox cannot come back.
GONE = 0
#: Not appended: the inbox holds ``max_unread`` entries or more (its reader is behind).
FULL = -1
#: Not appended: the server refused the command (an error reply, e.g. WRONGTYPE).
REFUSED = -2


class ShardCountMismatch(ValueError):
    """A region registers (or plans) a sharded type with another number of shards than
    the type's allocation table has while other members' regions use it: the nodes
    would map entity ids to different shards."""

    def __init__(self, type_name: str, table: int, given: int) -> None:
        self.type_name = type_name
        self.table = table
        self.given = given
        super().__init__(
            f"sharding {type_name!r}: number_of_shards={given} here, but the cluster's "
            f"allocation table of the type has {table} (every node must start the type "
            "with the same number_of_shards; to change it, stop every node's region of "
            "the type first)"
        )


class BackendUnavailable(Exception):
    """The backing store cannot be reached or failed a command.

    The message names the store's URL with the password masked (never a credential)
    and what failed. The original error is chained as ``__cause__``. It is raised
    for transient faults (connection refused, reset, timeout, server loading or
    read-only after a failover); the caller retries later with backoff.
    """

    def __init__(
        self,
        url: str,
        detail: str,
        *,
        maybe_sent: bool = True,
        outcomes: Sequence[int] = (),
    ) -> None:
        super().__init__(f"cluster backend {url} unavailable: {detail}")
        #: The URL with the password masked.
        self.url = url
        #: What failed, in words (e.g. ``"heartbeat: Connection refused"``).
        self.detail = detail
        #: False only when the command certainly never reached the server (the
        #: connection could not be made): a write then had no effect. True when the
        #: outcome is unknown (it failed after something was written).
        self.maybe_sent = maybe_sent
        #: For :meth:`Outbox.send`: the outcomes of the first batches, whose replies
        #: were read before the failure (the others' outcome is unknown, unless
        #: ``maybe_sent`` is False).
        self.outcomes: tuple[int, ...] = tuple(outcomes)


@dataclass(frozen=True)
class MemberRecord:
    """One member as the store sees it.

    ``status`` is ``"up"`` or ``"leaving"``; *unreachable* is not stored, the node
    derives it from ``last_heartbeat_age_ms`` and its ``unreachable_after`` setting.
    """

    #: The node id (``Address.node``).
    node: str
    #: The roles the node joined with.
    roles: tuple[str, ...]
    #: ``"up"`` or ``"leaving"``.
    status: str
    #: Milliseconds between its last heartbeat and the view's ``server_time_ms``.
    last_heartbeat_age_ms: int
    #: Server time (ms since the epoch) when it joined.
    joined_at_ms: int


@dataclass(frozen=True)
class MembershipView:
    """A consistent snapshot of the membership, read in one step on the server."""

    #: Incremented on every membership change (join, leave, remove, reap); a node
    #: can skip diffing a view whose version and ages did not change.
    version: int
    #: The membership epoch: created by the first join on an empty store. It changes
    #: when the store lost its data (restart without persistence, failover to an
    #: empty replica): every member of the old epoch is then gone.
    epoch: str
    #: The server's clock when the view was read (ms since the Unix epoch).
    server_time_ms: int
    #: Current members sorted by ``(joined_at_ms, node)`` (oldest first: part 2
    #: places singletons on the oldest).
    members: tuple[MemberRecord, ...]
    #: Nodes removed recently (tombstones, kept a while so that a node that was
    #: downed cannot come back under the same id; newest last).
    removed: tuple[str, ...]


@dataclass(frozen=True)
class HeartbeatResult:
    """What one heartbeat found."""

    #: The membership after the beat (and after any reaping it did).
    view: MembershipView
    #: True when the beating node is not a member any more: it was downed (a
    #: tombstone exists) or the store lost the epoch it joined. Nothing was written;
    #: the node must terminate and never come back under this id.
    self_removed: bool
    #: Nodes this very call removed because their last beat was older than
    #: ``down_after_ms``. Each reaped node appears in the ``reaped`` of exactly one
    #: heartbeat call in the whole cluster (the decision is taken once, atomically).
    reaped: tuple[str, ...]
    #: Entries of the node's inbox not read yet (asked with ``backlog=True``; None
    #: when not asked, or when the server cannot tell, e.g. a Redis before 7).
    inbox_backlog: int | None = None


@runtime_checkable
class Outbox(Protocol):
    """Appends batches to other nodes' inboxes. Used by the node's single flusher."""

    def send(self, batches: Sequence[tuple[str, bytes]], max_unread: int = 10_000) -> list[int]:
        """Append each ``(node, batch)`` to that node's inbox, in order, and return
        one outcome per batch: :data:`SENT`, :data:`GONE` (no such inbox: senders
        never create one), :data:`FULL` (the inbox holds ``max_unread`` entries or
        more: a reader that fell behind is never overrun, and nothing is trimmed
        unread) or :data:`REFUSED` (an error reply). Each check-and-append is atomic.

        One round trip for the whole sequence. A connection that was dropped while
        idle (server restart, ``CLIENT KILL``, idle timeout) is noticed before
        anything is written and replaced. An empty sequence does nothing.

        Raises :class:`BackendUnavailable` if the server cannot be reached. Its
        ``maybe_sent`` is False when nothing was written (no batch arrived); when it
        is True, ``outcomes`` holds the outcomes read before the failure and the
        remaining batches may or may not have arrived.
        """
        ...

    def close(self) -> None:
        """Close the connection. Idempotent; the object is not used afterwards."""
        ...


@runtime_checkable
class InboxReader(Protocol):
    """Reads this node's inbox (created by :meth:`MembershipStore.join`). Used by the
    node's single reader greenlet.

    The server records what was handed out (a read cursor), atomically with each
    read, so that whoever drains the inbox later (:meth:`MembershipStore.drain_inbox`)
    takes exactly the entries that were never read. Each entry is returned at most
    once; an entry is deleted from the inbox once a later read shows the caller is
    done with it (the inbox is trimmed by what was read, never by length). A read
    whose reply was lost with its connection is recovered on the next read: the
    entries the server handed out after the last one this reader returned come first.
    """

    #: The round trip (seconds) of the last :meth:`read` when that read could not
    #: wait for entries (it was sent without blocking, because a backlog remained
    #: after the read before it); None when it may have waited, or failed.
    last_round_trip: float | None

    def read(self, block_ms: int, count: int) -> list[bytes]:
        """Return up to ``count`` new batches, oldest first.

        Blocks at most ``block_ms`` milliseconds (must be > 0) waiting for one; on
        timeout returns ``[]``. The connection's socket timeout is above the block, so
        a half-open connection is noticed as :class:`BackendUnavailable` instead of
        hanging. Under gevent the block yields to other greenlets. Draining the inbox
        ends a blocked read at once (with :class:`BackendUnavailable`).
        """
        ...

    def close(self) -> None:
        """Close the connection. Idempotent; the object is not used afterwards."""
        ...


@runtime_checkable
class MembershipStore(Protocol):
    """Membership and failure detection. Used by the heartbeat OS thread (and for
    ``join``/``leave`` by the node before/after it runs), with its own connection."""

    def join(self, node: str, roles: Sequence[str], inbox_ttl_ms: int = 60_000) -> MembershipView:
        """Create ``node``'s inbox (expiring after ``inbox_ttl_ms`` unless heartbeats
        renew it), then add ``node`` as an ``"up"`` member with a fresh heartbeat; one
        script each, one round trip.

        Creates the epoch if the store has none. Raises ``ValueError`` if ``node``
        was removed before (a tombstone: ids are never reused) or is already a member.
        """
        ...

    def heartbeat(
        self,
        node: str,
        unreachable_after_ms: int,
        down_after_ms: int,
        *,
        backlog: bool = False,
    ) -> HeartbeatResult:
        """Record a beat of ``node`` and reap members that are gone; one script.

        Reads the server's ``TIME``. If ``node`` has a tombstone or is not a member
        (the epoch was lost), returns ``self_removed=True`` and writes nothing.
        Otherwise stamps its beat, removes every other member whose last beat is
        older than ``down_after_ms`` (with a tombstone and a version bump; decided
        once inside the script, so concurrent beats never reap the same node twice),
        refreshes the expiry of the node's own inbox (``2 * down_after_ms``: the
        inbox of a dead node disappears by itself), and returns the view (the
        inboxes of the nodes it reaped are left for :meth:`drain_inbox`).
        ``unreachable_after_ms`` is validated
        (``0 < unreachable_after_ms < down_after_ms``) but not stored: the node derives
        unreachability from the ages in the view. With ``backlog`` it also counts the
        entries of the node's inbox not read yet (:attr:`HeartbeatResult.inbox_backlog`),
        in the same round trip (the caller asks at most once a second: a metric).
        """
        ...

    def view(self) -> MembershipView:
        """Read the current membership; one script, nothing written."""
        ...

    def set_leaving(self, node: str) -> None:
        """Mark ``node`` as ``"leaving"`` (graceful leave has started). No-op if it is
        not a member."""
        ...

    def remove(self, node: str, reason: str) -> bool:
        """Remove ``node`` now (graceful leave done, or a manual down): tombstone +
        version bump, in one script. True if this call removed it, False if it was not
        a member (someone else removed it first). ``reason`` is kept with the
        tombstone for diagnostics. Its inbox is left for :meth:`drain_inbox`."""
        ...

    def drain_inbox(self, node: str) -> list[bytes] | None:
        """Atomically take every entry of ``node``'s inbox that its reader never read
        and delete the inbox; None if it has no inbox (already drained, or expired).

        Of several concurrent callers exactly one gets the entries. Senders see the
        inbox gone from then on (:data:`GONE`). Used for a removed node (the caller
        dead-letters what it gets) and by a leaving node for its own inbox (it
        processes what it gets)."""
        ...

    def close(self) -> None:
        """Close the connection. Idempotent; the object is not used afterwards."""
        ...


@runtime_checkable
class LeaseStore(Protocol):
    """Named leases with fencing tokens (for part 2: singleton, sharding).

    A lease is *not* a lock: with asynchronous replication a failover can lose a
    grant. The token increases strictly on every new grant of a name, so whatever the
    holder writes to can refuse writes with an older token.
    """

    def acquire(self, name: str, owner: str, ttl_ms: int) -> int | None:
        """Grant ``name`` to ``owner`` for ``ttl_ms`` if nobody holds it; one script.

        Returns the new fencing token (strictly greater than every earlier token of
        ``name``), or None if another owner holds it. If ``owner`` already holds it,
        it is a renewal that returns the current token.
        """
        ...

    def renew(self, name: str, owner: str, token: int, ttl_ms: int) -> bool:
        """Extend the lease to ``ttl_ms`` from now if ``owner`` still holds it with
        ``token``; False if it expired or someone else holds it (stop working)."""
        ...

    def release(self, name: str, owner: str, token: int) -> bool:
        """Give the lease up if ``owner`` holds it with ``token``; False otherwise."""
        ...

    def holder(self, name: str) -> tuple[str, int, int] | None:
        """``(owner, token, ttl_ms_left)`` of the current holder, or None."""
        ...

    def close(self) -> None:
        """Close the connection. Idempotent; the object is not used afterwards."""
        ...


@dataclass(frozen=True)
class AllocationTable:
    """One snapshot of a sharded type's allocation table, read in one script together
    with the membership (see :class:`AllocationStore`)."""

    #: Grows with every change of the table.
    epoch: int
    #: The membership version the snapshot was read with.
    version: int
    #: shard -> its owner node (shards without an owner are absent).
    owners: dict[int, str]
    #: shard -> (from, to) for the shards that move.
    moving: dict[int, tuple[str, str]]
    #: The registered regions of the type: node -> True if it hosts (``start``),
    #: False for a proxy.
    registered: dict[str, bool]
    #: The cluster's members: node -> status (``"up"`` or ``"leaving"``).
    members: dict[str, str]
    #: The members' roles.
    roles: dict[str, tuple[str, ...]]
    #: The nodes whose region of the type stopped (unregistered) while the node stayed
    #: up: it hosts nothing and confirms no drain any more, like a removed node.
    stopped: frozenset[str] = frozenset()


@runtime_checkable
class AllocationStore(Protocol):
    """The allocation tables of sharding, one per entity type, changed only by atomic
    scripts on the store (the one place where a shard's owner is decided).

    A shard moves in two phases: :meth:`plan` marks it moving ``(from, to)``; every
    registered region of the type that is still a member acks it (:meth:`ack`);
    the script that sees the last ack *flips* it (owner = to). A region that is no
    member any more needs no ack; every method flips what can flip and returns the
    table. Each shard has a *hand-over stream*: the messages the old owner's side
    hands to the new owner, appended before the acks and taken once, by the new
    owner, after the flip.
    """

    def register(
        self, type_name: str, node: str, hosting: bool, number_of_shards: int
    ) -> AllocationTable:
        """``node``'s region of ``type_name`` starts (it counts as having acked the
        moves under way: it sent nothing yet). Raises :class:`ShardCountMismatch` if
        the table has another number of shards while a member's region uses it."""
        ...

    def unregister(self, type_name: str, node: str) -> AllocationTable:
        """``node``'s region of ``type_name`` stops; it acks nothing any more."""
        ...

    def sync(self, type_name: str, seen: tuple[int, int] | None = None) -> AllocationTable | None:
        """The table (after the flips a removed member no longer holds back); None if
        ``seen``, the ``(epoch, version)`` of the caller's last snapshot, is still
        current (nothing changed, nothing can flip)."""
        ...

    def plan(
        self, type_name: str, version: int, epoch: int, desired: Sequence[str]
    ) -> AllocationTable:
        """Move shards towards ``desired`` (an owner per shard, "" for none) if the
        membership ``version`` and the table ``epoch`` are still those it was computed
        from (else nothing). Only up members with a hosting region are valid owners.
        Raises :class:`ShardCountMismatch` if ``desired`` has another length than the
        table's number of shards."""
        ...

    def ack(self, type_name: str, node: str, moves: Sequence[tuple[int, str]]) -> AllocationTable:
        """``node`` acks the moves ``(shard, from)`` (an ack of a move that is over is
        ignored)."""
        ...

    def stream_append(
        self,
        type_name: str,
        shard: int,
        items: Sequence[tuple[int, bytes]],
        token: str,
        from_node: str,
    ) -> bool:
        """Append ``(serializer_id, payload)`` items to the shard's hand-over stream,
        for its move away from ``from_node``; ``token`` names this append (unique): a
        retry with the same token after a lost reply appends nothing twice. False (and
        nothing appended) if that move is over: its new owner may have read the stream
        already."""
        ...

    def stream_read(self, type_name: str, shard: int) -> list[tuple[str, int, bytes]]:
        """The shard's hand-over stream: ``(entry_id, serializer_id, payload)`` in
        order (nothing is deleted: repeat it freely)."""
        ...

    def stream_delete(self, type_name: str, shard: int, ids: Sequence[str]) -> None:
        """Delete the entries ``ids`` read by :meth:`stream_read` (idempotent)."""
        ...

    def close(self) -> None:
        """Close the connection. Idempotent; the object is not used afterwards."""
        ...


@runtime_checkable
class Backend(Protocol):
    """One engine bound to one cluster: the factory of the objects above.

    Creating it does not connect. Each factory call returns a new object with its
    own connection (or pool), for one user; the node creates one of each and closes
    them when it stops. Keys of two clusters (``cluster_name``) or two prefixes on one
    server never overlap.
    """

    #: The server URL with the password masked (for messages and logs).
    safe_url: str

    def ping(self) -> None:
        """Check that the server answers; :class:`BackendUnavailable` if not (used by
        the node's constructor to fail fast with a clear error)."""
        ...

    def outbox(self) -> Outbox:
        """A new :class:`Outbox` (for the flusher greenlet)."""
        ...

    def inbox_reader(self, node: str, max_block_ms: int = 5000) -> InboxReader:
        """A new :class:`InboxReader` of ``node``'s inbox (for the reader greenlet).

        Its reads may block up to ``max_block_ms``; its socket timeout is set above
        that, so a longer silence is a dead connection (``BackendUnavailable``)."""
        ...

    def membership(self) -> MembershipStore:
        """A new :class:`MembershipStore` (for the heartbeat thread; usable from a real
        OS thread in a monkey-patched process)."""
        ...

    def leases(self, max_connections: int = 4) -> LeaseStore:
        """A new :class:`LeaseStore`. Unlike the other objects it may be shared by
        up to ``max_connections`` greenlets of one thread (a singleton or shard
        manager renewing many leases); more wait for a free connection."""
        ...

    def allocations(self) -> AllocationStore:
        """A new :class:`AllocationStore` (for the sharding regions of one node)."""
        ...

    def close(self) -> None:
        """Close every connection this backend and the objects it made still hold."""
        ...

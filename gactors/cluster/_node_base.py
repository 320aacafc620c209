"""The state every part of :class:`~gactors.cluster._node.ClusterNode` shares, declared
once for the type checker, and the constants more than one part uses.

``ClusterNode`` is one object assembled from one class per concern (the attributes
are set by its ``__init__``, in ``_node.py``):

* ``_transport.py`` (:class:`_Transport`): sending (``send_user``, ``_enqueue``, the
  flusher and how a flush settles) and receiving (the reader, ``_deliver_batch``),
  and the drain of its own inbox when leaving;
* ``_membership.py`` (:class:`_Membership`): the heartbeat thread, the membership
  view and its events, removals and the drain of a removed node's inbox, the
  ``Cluster`` API;
* ``_deathwatch.py`` (:class:`_DeathWatch`): watching across nodes;
* ``_wire_refs.py`` (:class:`_WireRefs`): refs to and from the wire format (the
  ``RefCodec`` of ``_serialization.py``) and the resolution of local paths.

Each part is a plain class without state of its own: no extra indirection on the hot
paths (a method found through the class's MRO is as fast as one defined on it).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from gevent.event import Event
from gevent.lock import BoundedSemaphore

if TYPE_CHECKING:
    from gactors import _sysmsg as sm
    from gactors._path import Address
    from gactors._ref import ActorRef, PromiseRef
    from gactors._system import ActorSystem
    from gactors._timing import Histo
    from gactors.cluster._events import Member, MemberRemoved
    from gactors.cluster._seam import Backend, MembershipView
    from gactors.cluster._serialization import Record, WireCodec
    from gactors.cluster._settings import ClusterSettings

_log = logging.getLogger("gactors.cluster")

_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 2.0
# How long the graceful leave and the final flush may take at termination.
_LEAVE_BUDGET = 3.0


class _Meta(msgspec.Struct, gc=False):
    """What reports a message waiting to be sent as a dead letter if it is not sent.

    Not tracked by the cycle collector (``gc=False``; it never is in a cycle: only
    the pending lists hold it): under load tens of thousands wait for a flush, and
    as tuples they made the collector's passes cost more than a second per 400,000
    messages (measured with ``benchmarks/remote_breakdown.py``'s workload).
    """

    message: Any
    sender: Any
    ref: Any


#: The messages of one destination waiting to be sent: their records, and for each
#: its :class:`_Meta`.
_Pending = tuple[list["Record"], list[_Meta]]


class _NodeBase:
    """The attributes of a cluster node (set by ``ClusterNode.__init__``) and, for the
    type checker only, the methods one part calls on another."""

    system: ActorSystem
    settings: ClusterSettings
    node_id: str
    address: Address
    address_str: str
    _tid: int
    _ua_ms: int
    _down_ms: int
    backend: Backend
    codec: WireCodec
    # -- membership (hub thread) --
    _members: dict[str, Member]
    _unreachable: set[str]
    leaving_nodes: frozenset[str]
    _removed: set[str]
    _epoch: str
    _subscribers: dict[ActorRef, tuple[type, ...]]
    # -- outbound --
    _pending: dict[str, _Pending]
    _wake: Event
    _last_wired: ActorRef | None
    _last_wire: tuple[str, str, int]
    _wake_set: bool
    _flusher: Any
    _held: dict[str, _Pending]
    _refreshing: bool
    # -- inbound --
    _reader: Any
    _exported: weakref.WeakValueDictionary[int, PromiseRef]
    _remote_refs: dict[tuple[str, str, int], Any]
    _local_refs: dict[tuple[str, int], ActorRef]
    _nodes_of: dict[str, str]
    # -- remote DeathWatch --
    _watching: dict[str, dict[ActorRef, set[ActorRef]]]
    _watched_by: dict[str, set[tuple[ActorRef, ActorRef]]]
    # -- heartbeat --
    _hub_alive_at: float
    _hub_timer: Any
    _hb_stop: Any
    _hb_done: Any
    _hb_running: bool
    _store: Any
    _store_lock: BoundedSemaphore
    leave_hooks: list[Callable[[], Any]]
    stats: dict[str, int]
    flush_seconds: Histo
    read_seconds: Histo
    inbox_backlog: int | None
    _full_warned: dict[str, float]
    # -- lifecycle --
    _leaving: bool
    _draining: bool
    _closing: bool
    _closed: bool
    downed: bool
    termination_reason: str | None

    if TYPE_CHECKING:
        # _Transport
        def _enqueue(
            self,
            dest: str,
            rec: Record,
            message: Any,
            sender: ActorRef | None,
            ref: ActorRef,
        ) -> None: ...
        def _dead_letter_all(self, metas: list[_Meta]) -> None: ...
        def _undecodable(self, error: str, summary: str, path: str | None) -> None: ...
        def _deliver_batch(self, data: bytes) -> None: ...
        def _flush_loop(self) -> None: ...
        def _read_loop(self) -> None: ...
        def _drain_own_inbox(self) -> None: ...

        # _Membership
        def _apply_view(self, view: MembershipView, *, publish: bool) -> None: ...
        def _self_downed(self) -> None: ...
        def _stamp_hub_alive(self) -> None: ...
        def _heartbeat_thread(self, store: Any) -> None: ...
        def _member_removed(self, node: str) -> MemberRemoved: ...

        # _DeathWatch
        def _system_record(self, r: Record) -> None: ...
        def _watch_undeliverable(self, message: sm.SystemMessage, ref: ActorRef) -> None: ...
        def _node_gone_watches(self, node: str) -> None: ...

        # _WireRefs
        def ref_from_wire(self, address: str, path: str, uid: int) -> ActorRef: ...
        def _resolve_local(self, path: str, uid: int) -> ActorRef: ...
        def _sender_ref(self, snd: tuple[str, str, int]) -> Any: ...
        def _recipient(self, recipient: tuple[str, int]) -> ActorRef: ...

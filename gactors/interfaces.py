"""The plugin interfaces (zope.interface).

A plugin provides one of these interfaces; :mod:`gactors.plugins` verifies it with
``zope.interface.verify`` when it is registered (and whenever a setting or an option
names an object directly). Verification is strict: the class must *declare* the
interface with ``@zope.interface.implementer(...)`` and provide every attribute and
method below with a compatible signature. Every built-in class declares its interface.

* :class:`ISupervisorStrategy` -- how a supervisor handles its children's failures.
  The built-ins are :class:`gactors.OneForOneStrategy` and
  :class:`gactors.AllForOneStrategy`; subclassing :class:`gactors.SupervisorStrategy`
  (or one of those) is the easiest way to write a new one.
* :class:`ISupervisorStrategyConfigurator` -- creates the ``/user`` guardian's
  strategy (the ``guardian_supervisor_strategy`` setting).
* :class:`IBackoffPolicy` -- computes the restart delays of a
  :class:`gactors.backoff.BackoffSupervisor`. A backoff policy is registered as a
  *factory* ``(min_backoff, max_backoff, random_factor) -> IBackoffPolicy``, called once
  per backoff supervisor, so a policy may keep state (such as the previous delay).
* :class:`ISerializer` -- turns the messages sent to other cluster nodes into bytes
  and back (docs/cluster/concepts.md, "Serialization"). The built-ins are
  ``"msgpack"`` (the default) and ``"pickle"`` (trusted networks only).
* :class:`IJournal`, :class:`ISnapshotStore`, :class:`IDurableStateStore` -- where
  :mod:`gactors.persistence` keeps events, snapshots and durable states
  (docs/persistence.md). The built-ins are ``"sqlite"`` and ``"memory"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zope.interface import Attribute, Interface

__all__ = [
    "IBackoffPolicy",
    "IDurableStateStore",
    "IJournal",
    "ISerializer",
    "ISnapshotStore",
    "ISupervisorStrategy",
    "ISupervisorStrategyConfigurator",
]


# zope.interface describes methods without ``self``; the signatures are checked by
# ``zope.interface.verify`` against the implementation (which has ``self``), and mypy
# reads them through the mypy-zope plugin (setup.cfg).
class ISupervisorStrategy(Interface):
    """How a supervisor handles the failures of its children.

    Both methods run inside the supervising actor, while it processes the child's
    failure report or termination; the supervising actor's ``self.sender`` is the
    failing child while the strategy decides.
    """

    decider = Attribute(
        "The decider: a callable (exception) -> Directive | None, where None means escalate."
    )

    def handle_failure(
        context: Any, child: Any, cause: BaseException, stats: Any, children: Any
    ) -> bool:
        """Decide what to do with a failed child and do it.

        ``context`` is the supervising actor's :class:`~gactors.ActorContext`,
        ``child`` the failed child's ref, ``cause`` the exception, ``stats`` the
        child's :class:`~gactors.ChildRestartStats` (restart bookkeeping) and
        ``children`` the stats of every live child. Return ``True`` when the failure
        was handled (resumed, restarted or stopped) and ``False`` to escalate it: the
        supervisor then fails with the same exception.
        """

    def handle_child_terminated(context: Any, child: Any, children: Any) -> None:
        """Called after ``child`` terminated; ``children`` are the remaining children."""


class ISupervisorStrategyConfigurator(Interface):
    """Creates the ``/user`` guardian's strategy.

    Named by the ``guardian_supervisor_strategy`` setting; the configurator class is
    instantiated with no arguments and :meth:`create` is called once per actor system.
    """

    def create() -> Any:
        """Return the :class:`ISupervisorStrategy` of the ``/user`` guardian."""


class IBackoffPolicy(Interface):
    """Computes the restart delays of one backoff supervisor.

    Made by a factory ``(min_backoff, max_backoff, random_factor) -> IBackoffPolicy``
    (all three in seconds, ``random_factor`` in [0, 1]), once per backoff supervisor.
    """

    def next_delay(restart_count: int) -> float:
        """Seconds (a float >= 0) to wait before restart number ``restart_count``.

        ``restart_count`` is 0 for the first restart after a (re)start or a reset, 1 for
        the next one, and so on.
        """

    def reset() -> None:
        """Forget any state: called when the supervisor's restart count is reset."""


class ISerializer(Interface):
    """Turns the messages a node sends to other nodes into bytes and back.

    A cluster node uses the serializer named by its ``cluster.serializer`` setting for
    every user message it sends; one ``encode`` call per message at ``tell`` time, one
    ``decode`` call per message on arrival, so both should be fast. ``encode`` raises
    :class:`~gactors.SerializationError` (naming the type) for what it cannot carry;
    ``decode`` may raise anything on bad input: the node turns that into a warning and
    a dead letter.

    **Refs inside messages.** Refs are bound to an actor system: a ref decoded on a
    node must resolve against *that* node's system. A serializer is registered once per
    process, so it cannot hold one system's resolver. The decision: a serializer that
    carries refs defines an optional method ``bind(ref_codec) -> ISerializer`` (not part
    of this interface, so serializers without refs need nothing). The node calls it
    once with its ``RefCodec`` (``ref_to_wire(ref) -> (address, path, uid)`` and
    ``ref_from_wire(address, path, uid) -> ActorRef``, see
    ``gactors.cluster._serialization``) and uses the serializer it returns, which must
    provide this interface too. A serializer without ``bind`` is used as registered.

    **Trust.** A serializer whose ``decode`` can run arbitrary code (pickle and the
    like) sets a class attribute ``unsafe = True``: a node then decodes its payloads
    only when it is the node's configured serializer. Other registered serializers
    decode what a node with a different configuration sends, so nodes may migrate from
    one serializer to another one node at a time.

    **Identity on the wire.** A payload is tagged with a small number derived from the
    serializer's ``name`` (which must be the name it is registered under), so every
    node must register it under the same name.
    """

    name = Attribute("The name the serializer is registered under (a str).")

    def encode(obj: Any) -> bytes:
        """Return ``obj`` as bytes; raise :class:`~gactors.SerializationError` if it
        cannot be serialized."""

    def decode(data: bytes) -> Any:
        """Return the object encoded in ``data`` (bytes)."""


# -- persistence stores --------------------------------------------------------------------------
_STORE_CONTRACT = """
    A store is made by a factory ``(settings, system) -> store`` registered with
    :func:`gactors.plugins.register_journal` (``register_snapshot_store``,
    ``register_state_store``); ``settings`` is the system's
    :class:`gactors.persistence.PersistenceSettings`. One object may provide all three
    interfaces (the built-ins do).

    **Blocking.** Every method is called from a greenlet of the system's hub thread and
    may block *that greenlet* (gevent-friendly I/O, or a real thread through gevent's
    threadpool), never the hub: other actors run while a store waits for its disk or
    its server. Per kind, ``gactors.persistence`` makes one ``write_batch`` call at a
    time (the next batch gathers meanwhile). A store providing both
    :class:`IJournal` and :class:`IDurableStateStore` gets their batches in separate
    calls (all ``AtomicWrite``\\ s or all ``StateWrite``\\ s), which may overlap:
    one writer connection then needs a lock (the SQLite store has one); so may
    snapshot writes and deletions, which are not batched.
"""


class IJournal(Interface):
    __doc__ = (
        """Keeps the events of persistent actors (``PersistentActor``).
"""
        + _STORE_CONTRACT
        + """
    **Batching.** The writes that actors make during one turn of the hub reach the
    journal as one :meth:`write_batch` call (the next batch gathers while one is being
    written), so a store can do them in one transaction or one round trip: the SQLite
    store commits a batch as one transaction; a Redis store sends one Lua script call
    per write (the script checks the sequence number and the fence and appends, all
    atomically, the keys of one persistence id sharing one ``{hash tag}``), the whole
    batch pipelined in one round trip, and maps each script's error reply to the
    exception of that write.

    How a Redis journal fits, write by write: the keys of one persistence id share a
    hash tag (``{pid}``: events, highest sequence number, highest token), so one script
    may touch them all, also on Redis Cluster; the script compares the stored highest
    number with ``after_sequence_nr`` and the stored token with ``fencing_token``,
    returns an error reply (conflict or fenced, with the stored values) without
    writing anything, or appends the payloads and updates the number and the token.
    ``wait_replicas`` is one ``WAIT`` after the batch's pipeline, before the results are
    returned; :meth:`replay` reads in pages of bounded size.
"""
    )

    def write_batch(writes: Sequence[Any]) -> list[Any]:
        """Store each :class:`~gactors.persistence.AtomicWrite` of the sequence
        ``writes`` (any number of persistence ids; at most one write per id per batch)
        all-or-nothing, and return a list with one entry per write, in order: ``None``
        when it is stored, else the exception refusing it, nothing of it stored --
        :class:`~gactors.persistence.PersistenceConflict` when the id's highest stored
        sequence number is not ``after_sequence_nr``,
        :class:`~gactors.persistence.FencedError` when ``fencing_token`` is lower than
        the highest token stored for the id (a write with a token stores it as the new
        highest), :class:`~gactors.persistence.WriteRejected` for what the store will
        not hold. The checks and the write are one atomic step per write. Raising
        instead (the store is unreachable, the transaction failed) fails every write of
        the batch; whether any of them was stored is then unknown to the writer, which
        stops and recovers."""

    def replay(
        persistence_id: str, from_sequence_nr: int, to_sequence_nr: int, max_count: int
    ) -> list[Any]:
        """The stored events of ``persistence_id`` from ``from_sequence_nr`` up to
        ``to_sequence_nr`` (None: no bound), at most ``max_count`` of them (None: all),
        in order, as a list of :class:`~gactors.persistence.StoredEvent`."""

    def highest_sequence_nr(persistence_id: str) -> int:
        """The highest sequence number ever stored for ``persistence_id`` (0: none),
        also after its events were deleted."""

    def delete_to(persistence_id: str, to_sequence_nr: int, fencing_token: int | None) -> None:
        """Delete the events of ``persistence_id`` up to ``to_sequence_nr``; the highest
        sequence number is kept. Refused like a write when ``fencing_token`` is stale."""

    def persistence_ids() -> list[str]:
        """Every persistence id the journal has stored events for (a list of str)."""

    def close() -> None:
        """Release connections and files; called once per factory call when the actor
        system terminates."""


class ISnapshotStore(Interface):
    __doc__ = (
        """Keeps the snapshots of persistent actors.
"""
        + _STORE_CONTRACT
    )

    def save(
        persistence_id: str,
        sequence_nr: int,
        timestamp: float,
        payload: bytes,
        fencing_token: int | None,
    ) -> None:
        """Store ``payload`` (bytes) as the snapshot of ``persistence_id`` after event
        ``sequence_nr`` (replacing one at the same number). Raises
        :class:`~gactors.persistence.FencedError` when ``fencing_token`` is stale."""

    def load(persistence_id: str, max_sequence_nr: int | None) -> Any:
        """The latest :class:`~gactors.persistence.StoredSnapshot` of
        ``persistence_id`` at or before ``max_sequence_nr`` (None: any), or None."""

    def delete(persistence_id: str, max_sequence_nr: int) -> None:
        """Delete the snapshots of ``persistence_id`` at or before ``max_sequence_nr``."""

    def close() -> None:
        """As :meth:`IJournal.close`."""


class IDurableStateStore(Interface):
    __doc__ = (
        """Keeps the states of durable-state actors (``DurableStateActor``).
"""
        + _STORE_CONTRACT
        + """
    Writes are batched as for :class:`IJournal`.
"""
    )

    def write_batch(writes: Sequence[Any]) -> list[Any]:
        """Store each :class:`~gactors.persistence.StateWrite` of ``writes`` and return
        one entry per write as :meth:`IJournal.write_batch` does: refused with
        :class:`~gactors.persistence.PersistenceConflict` unless the stored revision is
        ``after_revision`` (0: nothing stored), with
        :class:`~gactors.persistence.FencedError` for a stale token."""

    def get(persistence_id: str) -> Any:
        """The :class:`~gactors.persistence.StoredState` of ``persistence_id`` or None."""

    def close() -> None:
        """As :meth:`IJournal.close`."""

"""``PersistentActor``: event sourcing (SPEC section 19, Akka Persistence classic).

How it runs. Everything happens in the actor's own turn: the store's answers come
back as internal messages (:class:`_Replayed`, :class:`_Written`, ...), so handlers run
like any message handler, one at a time. The persist calls of one command are gathered
and, when the command returns, sent as *one* :class:`AtomicWrite` (several commands'
``persist_async`` calls while a write is in flight go together into the next one): one
write in flight per actor, so sequence numbers never race and a refused write never
leaves a later one of the same actor half-numbered.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, cast

from gactors.exceptions import IllegalStateError, SerializationError
from gactors.persistence._base import PersistentBase, _observed
from gactors.persistence._codec import codec
from gactors.persistence._model import (
    AtomicWrite,
    DeleteMessagesFailure,
    DeleteMessagesSuccess,
    DeleteSnapshotsFailure,
    DeleteSnapshotsSuccess,
    PersistenceError,
    Recovery,
    RecoveryCompleted,
    SaveSnapshotFailure,
    SaveSnapshotSuccess,
    SnapshotMetadata,
    SnapshotOffer,
    WriteRejected,
)

__all__ = ["PersistentActor"]

_PERSIST, _ASYNC, _DEFER = 0, 1, 2


class _Invocation:
    """One persist / persist_all / persist_async / defer_async call."""

    __slots__ = ("events", "handler", "kind", "payloads", "rejected", "sender")

    def __init__(
        self, kind: int, events: list[Any], handler: Callable[[Any], Any], sender: Any
    ) -> None:
        self.kind = kind
        self.events = events
        self.handler = handler
        self.sender = sender
        self.payloads: tuple[bytes, ...] = ()
        self.rejected: BaseException | None = None


class _State:
    """The persistence bookkeeping of one instance (internal messages name it, so the
    answers meant for a previous incarnation are recognised and dropped)."""

    __slots__ = (
        "batch",
        "in_flight",
        "last",
        "pid",
        "queue",
        "recovering",
        "recovery_start",
        "snapshot_seq",
        "started",
        "stashing",
        "stored",
    )

    def __init__(self) -> None:
        self.pid = ""
        self.started = False
        self.recovering = True
        self.recovery_start = 0.0  # perf_counter() when recovery began
        self.last = 0  # last_sequence_nr
        self.stored = 0  # the highest sequence number the store confirmed
        self.snapshot_seq = 0
        self.batch: list[_Invocation] = []  # calls of the command running now
        self.queue: list[_Invocation] = []  # calls waiting for the write in flight
        self.in_flight: list[_Invocation] | None = None
        self.stashing = 0  # unresolved persist/persist_all calls: commands wait


class _Start:
    __slots__ = ("owner",)

    def __init__(self, owner: _State) -> None:
        self.owner = owner


class _Replayed:
    __slots__ = ("error", "owner", "result")

    def __init__(self, owner: _State, result: Any, error: BaseException | None) -> None:
        self.owner, self.result, self.error = owner, result, error


class _Written:
    __slots__ = ("owner", "result")

    def __init__(self, owner: _State, result: BaseException | None) -> None:
        self.owner, self.result = owner, result


class _SnapshotSaved:
    __slots__ = ("auto", "error", "metadata", "owner")

    def __init__(self, owner: _State, metadata: SnapshotMetadata, error: Any, auto: bool) -> None:
        self.owner, self.metadata, self.error, self.auto = owner, metadata, error, auto


_INTERNAL = (_Start, _Replayed, _Written, _SnapshotSaved)


class PersistentActor(PersistentBase):
    """An actor whose state is rebuilt from the events it stored (SPEC section 19).

    Define ``persistence_id`` (a non-empty str: an attribute set in ``__init__`` or a
    property; sharded entities and singletons have a default), :meth:`receive_recover`
    and :meth:`receive_command`. Do not override :meth:`receive`.
    """

    recovery: ClassVar[Recovery] = Recovery()
    """How to recover (:class:`Recovery`; ``Recovery.none()`` skips it)."""
    snapshot_every: ClassVar[int | None] = None
    """Save ``snapshot_state()`` after every N events (None: never by itself)."""
    keep_snapshots: ClassVar[int] = 2
    """With ``snapshot_every``: how many of those snapshots to keep."""
    delete_events_on_snapshot: ClassVar[bool] = False
    """With ``snapshot_every``: delete the events older than the oldest kept snapshot."""

    _gactors_p: _State

    def __new__(cls, *args: Any, **kwargs: Any) -> PersistentActor:
        self = cast("PersistentActor", super().__new__(cls, *args, **kwargs))
        p = self._gactors_p = _State()
        # Recovery starts with the first message: __init__ (which may set the
        # persistence id) has run by then; whatever arrives before it is stashed.
        self._gactors_cell.ref.tell(_Start(p), None)
        return self

    # -- to implement -------------------------------------------------------------------
    def receive_recover(self, event: Any) -> None:
        """A :class:`SnapshotOffer`, a stored event or ``RecoveryCompleted``, in that
        order, before the first command. Default: ignore."""

    def receive_command(self, message: Any) -> None:
        """A message after recovery. Default: :meth:`unhandled`."""
        self.unhandled(message)

    def snapshot_state(self) -> Any:
        """What ``snapshot_every`` saves. Define it when you set ``snapshot_every``."""
        raise NotImplementedError(
            f"{type(self).__qualname__} sets snapshot_every but defines no snapshot_state()"
        )

    # -- state --------------------------------------------------------------------------
    @property
    def last_sequence_nr(self) -> int:
        """The sequence number of the latest event recovered or persisted (0: none)."""
        return self._gactors_p.last

    @property
    def snapshot_sequence_nr(self) -> int:
        """The sequence number of the latest snapshot recovered or saved (0: none)."""
        return self._gactors_p.snapshot_seq

    @property
    def recovery_running(self) -> bool:
        """True until ``RecoveryCompleted`` is delivered."""
        return self._gactors_p.recovering

    def _gactors_observe(self) -> dict[str, Any]:
        # The dashboard's per-actor data (gactors._observer): read, never changed.
        p = self._gactors_p
        return _observed(p.pid, p.last, self.context.fencing_token, "sequence_nr")

    # -- persisting -----------------------------------------------------------------------
    def _call(self, kind: int, events: list[Any], handler: Callable[[Any], Any]) -> None:
        p = self._gactors_p
        if p.recovering:
            raise IllegalStateError(
                f"{self.ref.path}: cannot persist while recovering (persist from "
                "receive_command, or when RecoveryCompleted arrives)"
            )
        if not callable(handler):
            raise TypeError(f"the handler must be callable, not {handler!r}")
        inv = _Invocation(kind, events, handler, self.sender)
        if kind != _DEFER:
            # Encoded once, here; the error text is only made for an event refused.
            encode = codec().encode
            limit = self._persistence.settings.max_payload_size
            try:
                payloads = tuple([encode(e) for e in events])
                for x in payloads:
                    if len(x) > limit:
                        raise SerializationError("over the size limit")
                inv.payloads = payloads
            except SerializationError:
                enc = codec().encode_for_store
                try:  # again, for the message naming the event and the problem
                    for e in events:
                        enc(e, f"an event of persistence id {p.pid!r}", limit)
                except WriteRejected as e:
                    inv.rejected = e
                else:  # pragma: no cover - the encoder is deterministic
                    inv.rejected = WriteRejected(f"cannot store an event of {p.pid!r}")
        if kind == _PERSIST:
            p.stashing += 1
        p.batch.append(inv)

    def persist(self, event: Any, handler: Callable[[Any], Any]) -> None:
        """Store ``event``; once stored, ``handler(event)`` runs with ``self.sender``
        the command's sender. No command is delivered until then."""
        self._call(_PERSIST, [event], handler)

    def persist_all(self, events: Iterable[Any], handler: Callable[[Any], Any]) -> None:
        """Store ``events`` atomically (all or none), then ``handler(event)`` for each."""
        evs = list(events)
        if evs:
            self._call(_PERSIST, evs, handler)

    def persist_async(self, event: Any, handler: Callable[[Any], Any]) -> None:
        """Store ``event`` while commands keep flowing; handlers run in call order."""
        self._call(_ASYNC, [event], handler)

    def persist_all_async(self, events: Iterable[Any], handler: Callable[[Any], Any]) -> None:
        """:meth:`persist_all` without holding commands back."""
        evs = list(events)
        if evs:
            self._call(_ASYNC, evs, handler)

    def defer_async(self, value: Any, handler: Callable[[Any], Any]) -> None:
        """Run ``handler(value)`` after every handler of the persist calls made before
        this one (at once if there are none); stores nothing."""
        p = self._gactors_p
        if not (p.batch or p.queue or p.in_flight):
            if p.recovering:
                raise IllegalStateError(f"{self.ref.path}: cannot defer while recovering")
            handler(value)
            return
        self._call(_DEFER, [value], handler)

    # -- the message loop -----------------------------------------------------------------
    def receive(self, message: Any) -> None:
        """Dispatch: internal answers, then commands (stashed while recovering or while a
        ``persist`` waits for the store)."""
        if isinstance(message, _INTERNAL):
            self._internal(message)
            return
        p = self._gactors_p
        if p.recovering or p.stashing:
            self._stash_command()
            return
        try:
            self.receive_command(message)
        except BaseException:
            # The calls of a failed command are dropped with it (as in Akka).
            p.stashing -= sum(1 for inv in p.batch if inv.kind == _PERSIST)
            p.batch = []
            raise
        self._flush()

    def _internal(self, message: Any) -> None:
        p = self._gactors_p
        if message.owner is not p:
            return  # an answer to a previous incarnation
        if type(message) is _Written:
            self._written(message.result)
        elif type(message) is _Replayed:
            self._replayed(message.result, message.error)
        elif type(message) is _SnapshotSaved:
            self._snapshot_saved(message.metadata, message.error, message.auto)
        elif not p.started:
            p.started = True
            self._start_recovery()

    def _flush(self) -> None:
        p = self._gactors_p
        if p.batch:
            p.queue.extend(p.batch)
            p.batch = []
        while p.queue and p.in_flight is None:
            invs, p.queue = p.queue, []
            if len(invs) == 1:  # the common case: one persist call per command
                payloads = invs[0].payloads if invs[0].rejected is None else ()
            else:
                payloads = tuple(
                    [
                        pl
                        for inv in invs
                        if inv.kind != _DEFER and inv.rejected is None
                        for pl in inv.payloads
                    ]
                )
            if not payloads:
                # Nothing to store (defers, events the encoder refused): resolve now, in
                # order; their handlers may persist again, hence the loop.
                self._resolve(invs, None)
                if p.batch:
                    p.queue.extend(p.batch)
                    p.batch = []
                continue
            write = AtomicWrite(p.pid, p.stored, self.context.fencing_token, payloads, time.time())
            p.in_flight = invs

            def done(result: Any, _p: _State = p, ref: Any = self._gactors_cell.ref) -> None:
                ref.tell(_Written(_p, result), None)

            self._persistence.write_events(write, done)

    def _written(self, result: BaseException | None) -> None:
        p = self._gactors_p
        invs = p.in_flight
        p.in_flight = None
        if invs is None:  # pragma: no cover - one answer per write
            return
        if result is None or isinstance(result, WriteRejected):
            self._resolve(invs, result)
        else:
            self._failed(invs, result)
        self._flush()
        if not p.stashing:
            self._unstash_commands()

    def _resolve(self, invs: list[_Invocation], rejected: BaseException | None) -> None:
        """Run the handlers of ``invs`` in order (their events stored, unless the whole
        write was ``rejected``)."""
        p = self._gactors_p
        cell = self._gactors_cell
        for inv in invs:
            if inv.kind == _PERSIST:
                p.stashing -= 1
            cause = inv.rejected or (rejected if inv.kind != _DEFER else None)
            if cause is not None:
                if self._persistence.listeners:
                    self._persistence.notify("rejection", float(len(inv.events)))
                for i, event in enumerate(inv.events, start=p.stored + 1):
                    self.on_persist_rejected(cause, event, i)
                continue
            for event in inv.events:
                if inv.kind != _DEFER:
                    p.stored += 1
                    p.last = p.stored
                self.sender = inv.sender
                cell.sender = inv.sender
                inv.handler(event)
                if inv.kind != _DEFER:
                    self._maybe_snapshot()

    def _failed(self, invs: list[_Invocation], cause: BaseException) -> None:
        p = self._gactors_p
        first = next((inv for inv in invs if inv.kind != _DEFER and inv.rejected is None), invs[0])
        # Nothing after the failed write can be numbered reliably: drop it all. The
        # default hook stops the actor; recovery (under a backoff supervisor) brings
        # back what the store has.
        p.queue = []
        p.batch = []
        p.stashing = 0
        if self._persistence.listeners:
            self._persistence.notify(
                "failure", float(sum(len(i.events) for i in invs if i.kind != _DEFER))
            )
        self.on_persist_failure(cause, first.events[0], p.stored + 1)

    # -- recovery -------------------------------------------------------------------------
    def _start_recovery(self) -> None:
        p = self._gactors_p
        try:
            p.pid = self._resolve_persistence_id()
            recovery = type(self).recovery
            if not isinstance(recovery, Recovery):
                raise TypeError(f"recovery must be a Recovery, not {recovery!r}")
        except Exception as e:
            self._recovery_failed(e, None)
            return
        pers = self._persistence
        pid = p.pid
        p.recovery_start = time.perf_counter()
        token = self.context.fencing_token

        def load() -> Any:
            # An incarnation with a lease first records its token with the journal
            # (stores that can: ``fence``), so that from now on the store refuses the
            # writes of an older incarnation still running (a paused host waking up),
            # not only once this one has written.
            fence = getattr(pers.journal, "fence", None) if token is not None else None
            fenced = fence(pid, token) if fence is not None else None
            snap = None
            if recovery.enabled and recovery.from_snapshot:
                snap = pers.snapshot_store.load(pid, recovery.to_sequence_nr)
            highest = pers.journal.highest_sequence_nr(pid) if fenced is None else fenced
            events: list[Any] = []
            if recovery.enabled and recovery.replay_max != 0:
                start = snap.sequence_nr + 1 if snap is not None else 1
                events = pers.journal.replay(
                    pid, start, recovery.to_sequence_nr, recovery.replay_max
                )
            return snap, events, highest

        ref = self._gactors_cell.ref

        def done(result: Any, error: Any) -> None:
            ref.tell(_Replayed(p, result, error), None)

        pers.run(f"the recovery of persistence id {pid!r}", load, done)

    def _replayed(self, result: Any, error: BaseException | None) -> None:
        p = self._gactors_p
        if error is not None:
            self._recovery_failed(
                PersistenceError(f"cannot read persistence id {p.pid!r}: {error}"), None
            )
            return
        snap, events, highest = result
        dec = codec().decode
        event: Any = None
        try:
            if snap is not None:
                try:
                    value = dec(snap.payload)
                except Exception as e:
                    raise PersistenceError(
                        f"cannot decode the snapshot at sequence number {snap.sequence_nr} of "
                        f"persistence id {p.pid!r}: {e}"
                    ) from e
                p.snapshot_seq = p.last = snap.sequence_nr
                event = SnapshotOffer(
                    SnapshotMetadata(p.pid, snap.sequence_nr, snap.timestamp), value
                )
                self.receive_recover(event)
            for stored in events:
                try:
                    event = dec(stored.payload)
                except Exception as e:
                    raise PersistenceError(
                        f"cannot decode event {stored.sequence_nr} of persistence id {p.pid!r}: {e}"
                    ) from e
                p.last = stored.sequence_nr
                self.receive_recover(event)
        except Exception as e:
            self._recovery_failed(e, event)
            return
        p.stored = highest
        p.last = max(p.last, highest)
        p.recovering = False
        if self._persistence.listeners:
            self._persistence.notify("recovery_seconds", time.perf_counter() - p.recovery_start)
        self.receive_recover(RecoveryCompleted)
        self._flush()
        if not p.stashing:
            self._unstash_commands()

    def _recovery_failed(self, cause: BaseException, event: Any) -> None:
        try:
            self.on_recovery_failure(cause, event)
        finally:
            self.context.stop(self.ref)

    # -- snapshots and deletion -----------------------------------------------------------
    def save_snapshot(self, snapshot: Any) -> None:
        """Store ``snapshot`` as the state after ``last_sequence_nr``; replies
        :class:`SaveSnapshotSuccess` or :class:`SaveSnapshotFailure` to this actor."""
        self._save_snapshot(snapshot, auto=False)

    def _save_snapshot(self, snapshot: Any, auto: bool) -> None:
        p = self._gactors_p
        meta = SnapshotMetadata(p.pid, p.last, time.time())
        ref = self._gactors_cell.ref
        try:
            payload = codec().encode_for_store(
                snapshot,
                f"a snapshot of persistence id {p.pid!r}",
                self._persistence.settings.max_payload_size,
            )
        except WriteRejected as e:
            ref.tell(_SnapshotSaved(p, meta, e, auto), None)
            return
        pers = self._persistence
        token = self.context.fencing_token

        def done(_: Any, error: Any) -> None:
            ref.tell(_SnapshotSaved(p, meta, error, auto), None)

        pers.run(
            f"saving a snapshot of persistence id {p.pid!r}",
            lambda: pers.snapshot_store.save(
                meta.persistence_id, meta.sequence_nr, meta.timestamp, payload, token
            ),
            done,
        )

    def _maybe_snapshot(self) -> None:
        every = type(self).snapshot_every
        if every and self._gactors_p.last % every == 0:
            self._save_snapshot(self.snapshot_state(), auto=True)

    def _snapshot_saved(self, meta: SnapshotMetadata, error: Any, auto: bool) -> None:
        p = self._gactors_p
        if error is None:
            p.snapshot_seq = max(p.snapshot_seq, meta.sequence_nr)
        if not auto:
            reply = SaveSnapshotSuccess(meta) if error is None else SaveSnapshotFailure(meta, error)
            self._tell_self(reply)
            return
        if error is not None:
            self.log.warning(
                "saving a snapshot of %r at %d failed: %r", p.pid, meta.sequence_nr, error
            )
            return
        every = type(self).snapshot_every or 0
        keep = max(1, type(self).keep_snapshots)
        oldest_kept = meta.sequence_nr - (keep - 1) * every
        pers = self._persistence
        pid = p.pid
        token = self.context.fencing_token
        log = self.log

        def cleanup() -> None:
            if oldest_kept - 1 > 0:
                pers.snapshot_store.delete(pid, oldest_kept - 1)
            if type(self).delete_events_on_snapshot and oldest_kept > 0:
                pers.journal.delete_to(pid, oldest_kept, token)

        def done(_: Any, error: Any) -> None:
            if error is not None:
                log.warning("retention of %r after a snapshot failed: %r", pid, error)

        pers.run(f"the retention of persistence id {pid!r}", cleanup, done)

    def delete_snapshots(self, max_sequence_nr: int) -> None:
        """Delete the snapshots up to ``max_sequence_nr``; replies
        :class:`DeleteSnapshotsSuccess` or :class:`DeleteSnapshotsFailure`."""
        pers, pid, ref = self._persistence, self._gactors_p.pid, self._gactors_cell.ref

        def done(_: Any, error: Any) -> None:
            ref.tell(
                DeleteSnapshotsSuccess(max_sequence_nr)
                if error is None
                else DeleteSnapshotsFailure(error, max_sequence_nr),
                None,
            )

        pers.run(
            f"deleting snapshots of {pid!r}",
            lambda: pers.snapshot_store.delete(pid, max_sequence_nr),
            done,
        )

    def delete_messages(self, to_sequence_nr: int) -> None:
        """Delete the events up to ``to_sequence_nr`` (at most ``last_sequence_nr``);
        replies :class:`DeleteMessagesSuccess` or :class:`DeleteMessagesFailure`. New
        events still follow the highest sequence number."""
        p = self._gactors_p
        ref = self._gactors_cell.ref
        if to_sequence_nr > p.last:
            ref.tell(
                DeleteMessagesFailure(
                    ValueError(
                        f"cannot delete up to {to_sequence_nr}: the last sequence number "
                        f"is {p.last}"
                    ),
                    to_sequence_nr,
                ),
                None,
            )
            return
        pers, pid, token = self._persistence, p.pid, self.context.fencing_token

        def done(_: Any, error: Any) -> None:
            ref.tell(
                DeleteMessagesSuccess(to_sequence_nr)
                if error is None
                else DeleteMessagesFailure(error, to_sequence_nr),
                None,
            )

        pers.run(
            f"deleting events of {pid!r}",
            lambda: pers.journal.delete_to(pid, to_sequence_nr, token),
            done,
        )

    # -- failure hooks --------------------------------------------------------------------
    def on_persist_failure(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        """A write failed (store unreachable, timed out, a conflict, a stale fencing
        token): whether it is stored is unknown. Default: log and stop; restart it under a
        backoff supervisor to recover what the store has."""
        self.log.error(
            "persisting event %d of persistence id %r failed, stopping: %r (%s)",
            sequence_nr,
            self._gactors_p.pid,
            cause,
            type(event).__name__,
        )
        self.context.stop(self.ref)

    def on_persist_rejected(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        """The store refused the write (or the event cannot be encoded); nothing of it is
        stored. Default: log; the actor goes on with the next command."""
        self.log.warning(
            "event %d of persistence id %r was rejected: %s (%s)",
            sequence_nr,
            self._gactors_p.pid,
            cause,
            type(event).__name__,
        )

    def on_recovery_failure(self, cause: BaseException, event: Any) -> None:
        """Recovery failed (``event``: the one being replayed, or None). Default: log;
        the actor is stopped after this hook."""
        self.log.error(
            "recovery of persistence id %r failed, stopping: %s", self._gactors_p.pid, cause
        )

"""``DurableStateActor``: the whole state stored as one value (SPEC section 19)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from gactors.exceptions import IllegalStateError
from gactors.persistence._base import PersistentBase, _observed
from gactors.persistence._codec import codec
from gactors.persistence._model import PersistenceError, StateWrite, WriteRejected

__all__ = ["DurableStateActor"]

_MISSING: Any = object()


class _DState:
    __slots__ = ("busy", "pid", "recovering", "recovery_start", "revision", "started")

    def __init__(self) -> None:
        self.pid = ""
        self.started = False
        self.recovering = True
        self.recovery_start = 0.0  # perf_counter() when loading began
        self.revision = 0
        self.busy = False  # a write waits for the store: commands are stashed


class _Start:
    __slots__ = ("owner",)

    def __init__(self, owner: _DState) -> None:
        self.owner = owner


class _Loaded:
    __slots__ = ("error", "owner", "result")

    def __init__(self, owner: _DState, result: Any, error: Any) -> None:
        self.owner, self.result, self.error = owner, result, error


class _Stored:
    __slots__ = ("handler", "owner", "result", "sender", "value")

    def __init__(self, owner: _DState, value: Any, handler: Any, sender: Any, result: Any) -> None:
        self.owner, self.value, self.handler, self.sender = owner, value, handler, sender
        self.result = result


_INTERNAL = (_Start, _Loaded, _Stored)


class DurableStateActor(PersistentBase):
    """An actor whose ``state`` is stored whole, with a revision per write.

    ``self.state`` is recovered before the first command (:meth:`initial_state` when
    nothing is stored); :meth:`persist_state` stores a new value (commands wait until
    the store confirmed it); :meth:`delete_state` removes it. Define
    ``persistence_id`` as for :class:`PersistentActor` and handle commands in
    :meth:`receive_command`.
    """

    state: Any
    """The current state (valid from the first command on)."""

    _gactors_d: _DState

    def __new__(cls, *args: Any, **kwargs: Any) -> DurableStateActor:
        self = cast("DurableStateActor", super().__new__(cls, *args, **kwargs))
        d = self._gactors_d = _DState()
        self._gactors_cell.ref.tell(_Start(d), None)
        return self

    def initial_state(self) -> Any:
        """The state when nothing is stored (or after :meth:`delete_state`). Default: None."""
        return None

    def receive_command(self, message: Any) -> None:
        """A message after recovery. Default: :meth:`unhandled`."""
        self.unhandled(message)

    @property
    def revision(self) -> int:
        """How many writes the stored state has seen (0: none); one more per write."""
        return self._gactors_d.revision

    @property
    def recovery_running(self) -> bool:
        """True until the state is loaded."""
        return self._gactors_d.recovering

    def persist_state(self, new_state: Any, handler: Callable[[], Any] | None = None) -> None:
        """Store ``new_state``; once confirmed, ``self.state`` is ``new_state`` and
        ``handler()`` runs (``self.sender``: the command's sender). Commands wait."""
        self._write(new_state, handler, delete=False)

    def delete_state(self, handler: Callable[[], Any] | None = None) -> None:
        """Delete the stored state (the revision still counts on); once confirmed,
        ``self.state`` is ``initial_state()`` and ``handler()`` runs."""
        self._write(_MISSING, handler, delete=True)

    def _write(self, value: Any, handler: Callable[[], Any] | None, delete: bool) -> None:
        d = self._gactors_d
        if d.recovering:
            raise IllegalStateError(f"{self.ref.path}: cannot persist state while recovering")
        if d.busy:
            raise IllegalStateError(
                f"{self.ref.path}: one persist_state/delete_state per command "
                "(a write is in flight)"
            )
        ref = self._gactors_cell.ref
        sender = self.sender
        payload: bytes | None = None
        if not delete:
            try:
                payload = codec().encode_for_store(
                    value,
                    f"the state of persistence id {d.pid!r}",
                    self._persistence.settings.max_payload_size,
                )
            except WriteRejected as e:
                self._persistence.notify("rejection", 1.0)
                self.on_persist_rejected(e, value, d.revision + 1)
                return
        d.busy = True
        write = StateWrite(d.pid, d.revision, self.context.fencing_token, payload, time.time())

        def done(result: Any) -> None:
            ref.tell(_Stored(d, value, handler, sender, result), None)

        self._persistence.write_state(write, done)

    def _gactors_observe(self) -> dict[str, Any]:
        # The dashboard's per-actor data (gactors._observer): read, never changed.
        d = self._gactors_d
        return _observed(d.pid, d.revision, self.context.fencing_token, "revision")

    def receive(self, message: Any) -> None:
        """Dispatch: internal answers, then commands (stashed while loading or writing)."""
        if isinstance(message, _INTERNAL):
            if message.owner is self._gactors_d:
                self._internal(message)
            return
        d = self._gactors_d
        if d.recovering or d.busy:
            self._stash_command()
            return
        self.receive_command(message)

    def _internal(self, message: Any) -> None:
        d = self._gactors_d
        if type(message) is _Stored:
            d.busy = False
            result = message.result
            if result is None:
                d.revision += 1
                self.state = self.initial_state() if message.value is _MISSING else message.value
                if message.handler is not None:
                    self.sender = message.sender
                    self._gactors_cell.sender = message.sender
                    message.handler()
            elif isinstance(result, WriteRejected):
                self._persistence.notify("rejection", 1.0)
                self.on_persist_rejected(result, message.value, d.revision + 1)
            else:
                self._persistence.notify("failure", 1.0)
                self.on_persist_failure(result, message.value, d.revision + 1)
            if not d.busy:
                self._unstash_commands()
        elif type(message) is _Loaded:
            self._loaded(message.result, message.error)
        elif not d.started:
            d.started = True
            try:
                d.pid = self._resolve_persistence_id()
            except Exception as e:
                self._recovery_failed(e)
                return
            pers, pid, ref = self._persistence, d.pid, self._gactors_cell.ref
            d.recovery_start = time.perf_counter()

            def done(result: Any, error: Any) -> None:
                ref.tell(_Loaded(d, result, error), None)

            pers.run(f"loading the state of {pid!r}", lambda: pers.state_store.get(pid), done)

    def _loaded(self, stored: Any, error: Any) -> None:
        d = self._gactors_d
        if error is not None:
            self._recovery_failed(PersistenceError(f"cannot read the state of {d.pid!r}: {error}"))
            return
        try:
            if stored is None or stored.payload is None:
                self.state = self.initial_state()
            else:
                try:
                    self.state = codec().decode(stored.payload)
                except Exception as e:
                    raise PersistenceError(
                        f"cannot decode the state at revision {stored.revision} of "
                        f"persistence id {d.pid!r}: {e}"
                    ) from e
        except Exception as e:
            self._recovery_failed(e)
            return
        d.revision = stored.revision if stored is not None else 0
        d.recovering = False
        if self._persistence.listeners:
            self._persistence.notify("recovery_seconds", time.perf_counter() - d.recovery_start)
        self._unstash_commands()

    def _recovery_failed(self, cause: BaseException) -> None:
        try:
            self.on_recovery_failure(cause, None)
        finally:
            self.context.stop(self.ref)

    # -- failure hooks (as PersistentActor's) ------------------------------------------------
    def on_persist_failure(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        """A write failed (unreachable, timed out, conflict, fenced); ``event`` is the
        state, ``sequence_nr`` the revision it would have had. Default: log and stop."""
        self.log.error(
            "persisting revision %d of persistence id %r failed, stopping: %r",
            sequence_nr,
            self._gactors_d.pid,
            cause,
        )
        self.context.stop(self.ref)

    def on_persist_rejected(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        """The state could not be stored (cannot be encoded, too large). Default: log and
        go on with the state as it was."""
        self.log.warning(
            "revision %d of persistence id %r was rejected: %s",
            sequence_nr,
            self._gactors_d.pid,
            cause,
        )

    def on_recovery_failure(self, cause: BaseException, event: Any) -> None:
        """Loading the state failed. Default: log; the actor is stopped after this hook."""
        self.log.error(
            "recovery of persistence id %r failed, stopping: %s", self._gactors_d.pid, cause
        )

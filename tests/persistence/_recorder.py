"""A persistent actor that records everything it gets, for the persistence tests."""

from __future__ import annotations

from typing import Any

from gactors import ActorRef
from gactors.persistence import (
    DeleteMessagesFailure,
    DeleteMessagesSuccess,
    DeleteSnapshotsFailure,
    DeleteSnapshotsSuccess,
    PersistentActor,
    RecoveryCompleted,
    SaveSnapshotFailure,
    SaveSnapshotSuccess,
    SnapshotOffer,
)

REPLIES = (
    SaveSnapshotSuccess,
    SaveSnapshotFailure,
    DeleteMessagesSuccess,
    DeleteMessagesFailure,
    DeleteSnapshotsSuccess,
    DeleteSnapshotsFailure,
)


class Recorder(PersistentActor):
    """Commands: ``("persist", e)``, ``("persist_all", [e...])``, ``("async", e)``,
    ``("defer", v)``, ``("snap",)``, ``("delete", n)``, ``("delete_snaps", n)``,
    ``"get"``; anything else is recorded only. ``trace`` gets every step; ``probe`` (if
    given) the replies of snapshot and delete operations and the failure hooks."""

    def __init__(self, pid: Any, trace: list[Any], probe: ActorRef | None = None) -> None:
        self.persistence_id = pid
        self.trace = trace
        self.probe = probe
        self.state: list[Any] = []

    def receive_recover(self, event: Any) -> None:
        if isinstance(event, SnapshotOffer):
            self.trace.append(("snapshot", event.metadata.sequence_nr, event.snapshot))
            self.state = list(event.snapshot)
        elif event is RecoveryCompleted:
            self.trace.append(("completed", self.last_sequence_nr, self.recovery_running))
        else:
            self.trace.append(("recover", event, self.last_sequence_nr, self.recovery_running))
            self.state.append(event)

    def receive_command(self, message: Any) -> None:
        self.trace.append(("cmd", message))
        if isinstance(message, REPLIES):
            if self.probe is not None:
                self.probe.tell(message)
            return
        if message == "get":
            self.sender.tell((list(self.state), self.last_sequence_nr, self.snapshot_sequence_nr))
            return
        if not isinstance(message, tuple):
            return
        op = message[0]
        if op == "persist":
            self.persist(message[1], self.handled)
        elif op == "persist_all":
            self.persist_all(message[1], self.handled)
        elif op == "async":
            self.persist_async(message[1], self.handled)
        elif op == "defer":
            self.defer_async(message[1], self.deferred)
        elif op == "snap":
            self.save_snapshot(list(self.state))
        elif op == "delete":
            self.delete_messages(message[1])
        elif op == "delete_snaps":
            self.delete_snapshots(message[1])

    def handled(self, event: Any) -> None:
        self.state.append(event)
        self.trace.append(("handler", event, self.last_sequence_nr))
        self.sender.tell(("done", event, self.last_sequence_nr))

    def deferred(self, value: Any) -> None:
        self.trace.append(("deferred", value))
        self.sender.tell(("deferred", value))

    def snapshot_state(self) -> Any:
        return list(self.state)

    def on_persist_failure(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        self.trace.append(("failure", type(cause).__name__, event, sequence_nr))
        if self.probe is not None:
            self.probe.tell(("failure", cause, event, sequence_nr))
        super().on_persist_failure(cause, event, sequence_nr)

    def on_persist_rejected(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        self.trace.append(("rejected", type(cause).__name__, sequence_nr))
        if self.probe is not None:
            self.probe.tell(("rejected", cause, event, sequence_nr))
        super().on_persist_rejected(cause, event, sequence_nr)

    def on_recovery_failure(self, cause: BaseException, event: Any) -> None:
        self.trace.append(("recovery_failure", type(cause).__name__))
        if self.probe is not None:
            self.probe.tell(("recovery_failure", cause, event))
        super().on_recovery_failure(cause, event)

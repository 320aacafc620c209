"""DurableStateActor (gactors/persistence/_durable.py) on the memory store."""

from __future__ import annotations

from typing import Any

import pytest

from gactors import ActorSystem, Props
from gactors.cluster._lease import LeasedProps
from gactors.persistence import DurableStateActor, FencedError, PersistenceConflict, WriteRejected
from gactors.testkit import TestProbe
from gactors.testkit.persistence import MemoryPersistence

T = 5.0


class Account(DurableStateActor):
    def __init__(self, pid: Any, probe: Any = None) -> None:
        self.persistence_id = pid
        self.probe = probe
        self.seen: list[Any] = []

    def initial_state(self) -> Any:
        return {"balance": 0}

    def receive_command(self, message: Any) -> None:
        self.seen.append(message)
        if message == "get":
            self.sender.tell((self.state, self.revision, list(self.seen)))
        elif message == "delete":
            self.delete_state(lambda: self.sender.tell(("deleted", self.state, self.revision)))
        elif isinstance(message, tuple) and message[0] == "add":
            new = {"balance": self.state["balance"] + message[1]}
            self.persist_state(new, lambda: self.sender.tell(("ok", self.state, self.revision)))
        elif isinstance(message, tuple) and message[0] == "set":
            self.persist_state(
                message[1], lambda: self.sender.tell(("ok", self.state, self.revision))
            )

    def on_persist_failure(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        if self.probe is not None:
            self.probe.tell(("failure", cause, sequence_nr))
        super().on_persist_failure(cause, event, sequence_nr)

    def on_persist_rejected(self, cause: BaseException, event: Any, sequence_nr: int) -> None:
        if self.probe is not None:
            self.probe.tell(("rejected", cause, sequence_nr))
        super().on_persist_rejected(cause, event, sequence_nr)


def stopped(system: ActorSystem, ref: Any) -> None:
    w = TestProbe(system)
    w.watch(ref)
    w.expect_terminated(ref, T)


def test_state_is_recovered_and_commands_wait_for_writes(psys: ActorSystem) -> None:
    probe = TestProbe(psys)
    a = psys.actor_of(Props(Account, "acc"))
    probe.send(a, "get")
    assert probe.receive_one(T) == ({"balance": 0}, 0, ["get"])
    probe.send(a, ("add", 5))
    probe.send(a, "get")  # held until the write is confirmed
    assert probe.receive_one(T) == ("ok", {"balance": 5}, 1)
    assert probe.receive_one(T)[:2] == ({"balance": 5}, 1)
    probe.send(a, ("add", 2))
    assert probe.receive_one(T) == ("ok", {"balance": 7}, 2)
    psys.stop(a)
    stopped(psys, a)
    b = psys.actor_of(Props(Account, "acc"))
    probe.send(b, "get")
    assert probe.receive_one(T) == ({"balance": 7}, 2, ["get"])
    probe.send(b, "delete")
    assert probe.receive_one(T) == ("deleted", {"balance": 0}, 3)
    psys.stop(b)
    stopped(psys, b)
    c = psys.actor_of(Props(Account, "acc"))
    probe.send(c, "get")
    assert probe.receive_one(T) == ({"balance": 0}, 3, ["get"])


def test_two_writers_and_a_stale_token_are_refused(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a = psys.actor_of(Props(Account, "dup", probe.ref))
    b = psys.actor_of(Props(Account, "dup", probe.ref))
    for ref in (a, b):
        probe.send(ref, "get")
        probe.receive_one(T)
    probe.send(a, ("add", 1))
    assert probe.receive_one(T) == ("ok", {"balance": 1}, 1)
    probe.send(b, ("add", 100))
    failure = probe.receive_one(T)
    assert failure[0] == "failure" and isinstance(failure[1], PersistenceConflict)
    stopped(psys, b)

    new = psys.actor_of(LeasedProps.of(Props(Account, "lease", probe.ref), None, 3))
    probe.send(new, ("add", 1))
    assert probe.receive_one(T)[0] == "ok"
    old = psys.actor_of(LeasedProps.of(Props(Account, "lease", probe.ref), None, 2))
    probe.send(old, ("add", 50))
    failure = probe.receive_one(T)
    assert failure[0] == "failure" and isinstance(failure[1], FencedError)
    stopped(psys, old)
    assert mem.store.get("lease").revision == 1


def test_failure_and_rejection_hooks(psys: ActorSystem, mem: MemoryPersistence) -> None:
    probe = TestProbe(psys)
    a = psys.actor_of(Props(Account, "hooks", probe.ref))
    probe.send(a, ("set", {"balance": object()}))  # cannot be encoded
    rejected = probe.receive_one(T)
    assert rejected[0] == "rejected" and isinstance(rejected[1], WriteRejected) and rejected[2] == 1
    mem.reject_next_write()
    probe.send(a, ("add", 1))
    assert probe.receive_one(T)[0] == "rejected"
    probe.send(a, ("add", 2))
    assert probe.receive_one(T) == ("ok", {"balance": 2}, 1)
    mem.fail_next_write()
    probe.send(a, ("add", 3))
    assert probe.receive_one(T)[0] == "failure"
    stopped(psys, a)
    assert mem.store.get("hooks").revision == 1


@pytest.mark.gactors_config(persistence={"journal": "memory", "state_store": "memory"})
def test_the_fixtures_of_the_pytest_plugin(
    actor_system: ActorSystem, memory_persistence: MemoryPersistence
) -> None:
    probe = TestProbe(actor_system)
    a = actor_system.actor_of(Props(Account, "fixture", probe.ref))
    memory_persistence.reject_next_write()
    probe.send(a, ("add", 1))
    assert probe.receive_one(T)[0] == "rejected"
    probe.send(a, ("add", 2))
    assert probe.receive_one(T) == ("ok", {"balance": 2}, 1)
    assert memory_persistence.store.get("fixture").revision == 1

"""gactors.persistence.query: reading what was stored."""

from __future__ import annotations

import pytest

from gactors import ActorSystem, Props
from gactors.persistence import AtomicWrite, EventEnvelope, PersistenceError
from gactors.persistence._codec import codec
from gactors.persistence.query import events_by_persistence_id, persistence_ids
from gactors.testkit import TestProbe
from gactors.testkit.persistence import MemoryPersistence

from ._recorder import Recorder


def test_events_by_persistence_id_and_persistence_ids(
    psys: ActorSystem, mem: MemoryPersistence
) -> None:
    probe = TestProbe(psys)
    a = psys.actor_of(Props(Recorder, "q1", []))
    b = psys.actor_of(Props(Recorder, "q2", []))
    probe.send(a, ("persist_all", list(range(2500))))
    probe.send(b, ("persist", "only"))
    probe.receive_n(2501, 10)
    got = list(events_by_persistence_id(psys, "q1"))  # three pages
    assert [e.event for e in got] == list(range(2500))
    assert [e.sequence_nr for e in got] == list(range(1, 2501))
    assert all(
        isinstance(e, EventEnvelope) and e.persistence_id == "q1" and e.timestamp > 0 for e in got
    )
    assert [e.event for e in events_by_persistence_id(psys, "q1", 10, 12)] == [9, 10, 11]
    assert sorted(persistence_ids(psys)) == ["q1", "q2"]


def test_bad_input(psys: ActorSystem, mem: MemoryPersistence) -> None:
    with pytest.raises(ValueError, match="non-empty str"):
        list(events_by_persistence_id(psys, ""))
    with pytest.raises(TypeError, match="non-empty str, not int"):
        list(events_by_persistence_id(psys, 5))  # type: ignore[arg-type]
    mem.store.write_batch([AtomicWrite("junk", 0, None, (codec().encode(1), b"\xc1"), 0.0)])
    it = events_by_persistence_id(psys, "junk")
    assert next(it).event == 1
    with pytest.raises(PersistenceError, match="event 2 of persistence id 'junk'"):
        next(it)

"""The encoding of events (gactors/persistence/_codec.py): the cluster's msgpack rules,
and schema evolution: a registered class that gained fields with defaults still decodes
what was stored before."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from gactors import ActorSystem, Props
from gactors.cluster import _serialization as wire
from gactors.persistence import PersistenceError, WriteRejected
from gactors.persistence._codec import codec
from gactors.serialization import register_message
from gactors.testkit import TestProbe
from gactors.testkit.persistence import MemoryPersistence

from ._recorder import Recorder

TAG = "tests.persistence.Evolving"


@dataclasses.dataclass
class ItemV1:
    sku: str
    qty: int


@dataclasses.dataclass
class ItemV2:
    sku: str
    qty: int
    note: str = "none"
    gift: bool = False


@dataclasses.dataclass
class ItemV3:
    sku: str
    qty: int
    required: str  # added without a default: old events cannot be rebuilt


@dataclasses.dataclass
class Gone:
    name: str


class PointV1(NamedTuple):
    x: int


class PointV2(NamedTuple):
    x: int
    y: int = 0


@pytest.fixture
def registered() -> Iterator[Any]:
    """Register a class under TAG, replacing any earlier one (what a new release of the
    code does); the registry is left as it was."""
    added: list[type] = []

    def register(cls: type, tag: str = TAG) -> None:
        old = wire._by_tag.pop(tag, None)
        if old is not None:
            wire._by_class.pop(old.cls, None)
        register_message(cls, tag)
        added.append(cls)

    yield register
    for cls in added:
        entry = wire._by_class.pop(cls, None)
        if entry is not None and wire._by_tag.get(entry.tag) is entry:
            del wire._by_tag[entry.tag]


def test_register_message_is_the_clusters() -> None:
    assert register_message is wire.register_message


def test_values_keep_their_types() -> None:
    c = codec()
    value = {"t": (1, "a"), "s": {1, 2}, "l": [1, [2]], "big": 1 << 70, "nested": ({"k": (3,)},)}
    assert c.decode(c.encode(value)) == value
    assert type(c.decode(c.encode(("a", 1)))) is tuple


def test_an_added_field_with_a_default_decodes_old_events(registered: Any) -> None:
    registered(ItemV1)
    old = codec().encode(ItemV1("apple", 3))
    nested_old = codec().encode((ItemV1("pear", 1), [ItemV1("fig", 2)]))
    registered(ItemV2)
    assert codec().decode(old) == ItemV2("apple", 3, "none", False)
    assert codec().decode(nested_old) == (ItemV2("pear", 1), [ItemV2("fig", 2)])
    # New events carry the new field.
    assert codec().decode(codec().encode(ItemV2("kiwi", 1, "x", True))) == ItemV2(
        "kiwi", 1, "x", True
    )


def test_a_named_tuple_that_gained_a_field_decodes_old_values(registered: Any) -> None:
    registered(PointV1, "tests.persistence.Point")
    old = codec().encode(PointV1(4))
    registered(PointV2, "tests.persistence.Point")
    assert codec().decode(old) == PointV2(4, 0)


def test_an_added_field_without_a_default_is_an_error_naming_the_tag(registered: Any) -> None:
    registered(ItemV1)
    old = codec().encode(ItemV1("apple", 3))
    registered(ItemV3)
    with pytest.raises(
        wire.WireError, match=r"tests\.persistence\.Evolving.*2 fields stored, 3 now"
    ):
        codec().decode(old)


def test_refs_and_unknown_types_are_refused_naming_the_type() -> None:
    with pytest.raises(WriteRejected, match=r"cannot store an event: .*object"):
        codec().encode_for_store([object()], "an event")
    with pytest.raises(WriteRejected, match="over the limit of 10 bytes"):
        codec().encode_for_store("x" * 100, "an event", 10)


def test_recovery_decodes_events_stored_before_the_class_changed(
    registered: Any, mem: MemoryPersistence
) -> None:
    from .conftest import memory_config

    registered(ItemV1)
    with ActorSystem("evolve1", config=memory_config()) as system:
        probe = TestProbe(system)
        a = system.actor_of(Props(Recorder, "cart", []))
        probe.send(a, ("persist", ItemV1("apple", 3)))
        assert probe.receive_one(5)[:2] == ("done", ItemV1("apple", 3))
    registered(ItemV2)
    with ActorSystem("evolve2", config=memory_config()) as system:
        probe = TestProbe(system)
        a = system.actor_of(Props(Recorder, "cart", []))
        probe.send(a, "get")
        state, last, _ = probe.receive_one(5)
        assert state == [ItemV2("apple", 3)] and last == 1


def test_an_unregistered_tag_on_replay_is_a_recovery_failure(
    registered: Any, mem: MemoryPersistence
) -> None:
    from .conftest import memory_config

    # (A class of its own: the process's encoder remembers how it encoded a class.)
    registered(Gone, "tests.persistence.Gone")
    with ActorSystem("gone1", config=memory_config()) as system:
        probe = TestProbe(system)
        a = system.actor_of(Props(Recorder, "gone", []))
        probe.send(a, ("persist", Gone("a")))
        probe.receive_one(5)
    entry = wire._by_tag.pop("tests.persistence.Gone")
    wire._by_class.pop(entry.cls)
    with ActorSystem("gone2", config=memory_config()) as system:
        probe = TestProbe(system)
        system.actor_of(Props(Recorder, "gone", [], probe.ref))
        failure = probe.receive_one(5)
        assert failure[0] == "recovery_failure" and isinstance(failure[1], PersistenceError)
        assert "event 1 of persistence id 'gone'" in str(failure[1])
        assert "tests.persistence.Gone" in str(failure[1])

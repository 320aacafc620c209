"""The compact batch layout and the delivery's fast paths (issue 27, docs/performance.md
"The remote path, stage by stage")."""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from typing import Any

import gevent
import msgspec
import pytest

from gactors import Actor, ActorSystem, DeadLetter, Props
from gactors.cluster._node_base import _Meta
from gactors.cluster._serialization import (
    KIND_USER,
    MsgpackSerializer,
    Record,
    WireCodec,
    WireError,
)
from gactors.cluster._transport import UndecodableMessage

pytest.importorskip("redis")

MAX = 64 * 1024
A = ("gactors://w@n1", "/user/a", 7)
B = ("gactors://w@n1", "/user/b", 8)


class _Refs:
    def ref_to_wire(self, ref: Any) -> tuple[str, str, int]:
        raise AssertionError("not used")

    def ref_from_wire(self, address: str, path: str, uid: int) -> Any:
        raise AssertionError("not used")


@pytest.fixture
def codec() -> WireCodec:
    return WireCodec(MsgpackSerializer(), _Refs(), MAX)


def _records(codec: WireCodec) -> list[Record]:
    sid = codec.serializer_id
    out = []
    for i in range(300):
        snd = A if i % 3 else B
        rcpt = ("/user/sink", 5) if i % 2 else ("/user/other", 6)
        out.append(Record(KIND_USER, rcpt, snd, sid, msgspec.msgpack.encode(i)))
    out.append(Record(KIND_USER, ("/temp/$9", 9), None, sid, msgspec.msgpack.encode("r")))
    return out


def test_a_batch_carries_each_recipient_and_sender_pair_once(codec: WireCodec) -> None:
    records = _records(codec)
    data = codec.encode_batch(records)
    raw = msgspec.msgpack.decode(data)
    assert raw[0] == 2 and len(raw[1]) == 5  # 2 recipients x 2 senders, and the reply
    first_layout = msgspec.msgpack.encode(records)
    assert len(data) * 4 < len(first_layout)
    assert codec.decode_batch(data) == records
    # The first layout (an array of records) is still read.
    assert codec.decode_batch(first_layout) == records
    heads, kinds, heads_of, sids, payloads = codec.decode_columns(data)
    assert [
        (*heads[h], k, s, p) for h, k, s, p in zip(heads_of, kinds, sids, payloads, strict=True)
    ] == [(r.recipient, r.sender, r.kind, r.serializer_id, r.payload) for r in records]


@pytest.mark.parametrize(
    "batch, match",
    [
        ([2, [[["/user/a", 1], None]], [0, 0], [0], [1], [b"\x01"]], "differ in length"),
        ([2, [[["/user/a", 1], None]], [0], [1], [1], [b"\x01"]], "a head it does not have"),
        ([2, [[["/user/a", 1], None]], [0], [-1], [1], [b"\x01"]], "a head it does not have"),
        ([2, [["/user/a", None]], [0], [0], [1], [b"\x01"]], "undecodable entry"),
    ],
)
def test_a_bad_compact_batch_is_a_wire_error_naming_it(
    codec: WireCodec, batch: list[Any], match: str
) -> None:
    with pytest.raises(WireError, match=match):
        codec.decode_batch(msgspec.msgpack.encode(batch))


def test_payloads_decode_in_one_go_unless_one_needs_a_closer_look(codec: WireCodec) -> None:
    serializer = codec.serializer
    messages: list[Any] = [1, ("t", 2), ["l", 3], {"k": (1, 2)}, "s", b"b", None]
    payloads = [serializer.encode(m) for m in messages]
    sids = [codec.serializer_id] * len(payloads)
    decoded = codec.decode_payloads(sids, payloads)
    assert decoded == messages
    assert decoded is not None and [type(m) for m in decoded] == [type(m) for m in messages]
    # A bad payload, another serializer's or one too large: each one by one instead
    # (decode_message then names the problem of that one only).
    assert codec.decode_payloads(sids, [*payloads, b"\xc1"]) is None
    assert codec.decode_payloads([*sids[:-1], 2], payloads) is None
    big = serializer.encode(b"x" * (MAX + 10))
    assert codec.decode_payloads([*sids, codec.serializer_id], [*payloads, big]) is None


def test_nothing_the_cycle_collector_tracks_is_made_per_queued_message(
    codec: WireCodec,
) -> None:
    # Tens of thousands wait for a flush under load: as tracked tuples they cost the
    # sender 1.3 us per message in the collector's passes.
    recipient = ("/user/sink", 5)
    record = codec.user_record_to(recipient, 42, None)
    assert record.recipient is recipient  # the remote ref's own tuple, not a new one
    assert not gc.is_tracked(record)
    assert not gc.is_tracked(_Meta(("a", 1), None, object()))


# -- delivery ---------------------------------------------------------------------------


class Probe(Actor):
    def __init__(self, got: list[Any]) -> None:
        self.got = got

    def receive(self, message: Any) -> None:
        self.got.append((message, self.sender))


@pytest.fixture
def node_system(redis_url: str) -> Iterator[ActorSystem]:
    system = ActorSystem(f"cw-{uuid.uuid4().hex[:8]}", config={"cluster": {"url": redis_url}})
    yield system
    system.terminate().get(timeout=30)


def test_a_bad_payload_in_a_batch_is_a_dead_letter_of_its_own(node_system: ActorSystem) -> None:
    from gactors.cluster._access import cluster_node

    node: Any = cluster_node(node_system)
    got: list[Any] = []
    probe = node_system.actor_of(Props(Probe, got), "probe")
    dead: list[DeadLetter] = []
    node_system.event_stream.subscribe(dead.append, DeadLetter)
    codec: WireCodec = node.codec
    rcpt = ("/user/probe", probe._uid)
    payloads = [codec.serializer.encode(("m", i)) for i in range(5)]
    payloads[2] = b"\xc1"  # never valid msgpack
    records = [Record(KIND_USER, rcpt, None, codec.serializer_id, p) for p in payloads]
    node._deliver_batch(codec.encode_batch(records))
    for _ in range(100):
        if len(got) == 4 and dead:
            break
        gevent.sleep(0.02)
    assert [m for m, _ in got] == [("m", 0), ("m", 1), ("m", 3), ("m", 4)]
    assert len(dead) == 1 and type(dead[0].message) is UndecodableMessage
    assert dead[0].recipient == probe

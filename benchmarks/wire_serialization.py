"""Micro-benchmark of the cluster wire format: encode + decode per message (µs).

Run: ``python benchmarks/wire_serialization.py`` (needs the ``cluster`` extra). Prints,
for the msgpack and the pickle serializer: one small tuple message, one str message and
a tuple carrying a ref (encode_message + decode_message), and a batch of 1000 records
with a sender ref (records built at tell time, one batch encode, one batch decode, 1000
message and sender decodes), per message. Refs go through a dict-backed RefCodec (the
node's own costs a path lookup more).
"""

from __future__ import annotations

import timeit
from typing import Any

from gactors import Actor, ActorRef, ActorSystem, Props
from gactors.cluster._serialization import (
    MsgpackSerializer,
    PickleSerializer,
    WireCodec,
)


class DictRefs:
    """Refs to and from triples through two dicts."""

    def __init__(self) -> None:
        self.out: dict[ActorRef, tuple[str, str, int]] = {}
        self.back: dict[tuple[str, str, int], ActorRef] = {}

    def ref_to_wire(self, ref: ActorRef) -> tuple[str, str, int]:
        triple = self.out.get(ref)
        if triple is None:
            triple = ("gactors://bench@node-1", "/" + "/".join(ref.path.elements), 1)
            self.out[ref] = triple
            self.back[triple] = ref
        return triple

    def ref_from_wire(self, address: str, path: str, uid: int) -> ActorRef:
        return self.back[(address, path, uid)]


class Idle(Actor):
    def receive(self, message: Any) -> None:
        pass


def per_message(fn: Any, n: int) -> float:
    best = min(timeit.repeat(fn, number=n, repeat=5))
    return best / n * 1e6


def measure(codec: WireCodec, label: str, msg: Any, sender: ActorRef) -> None:
    name = codec.name
    sid, payload = codec.encode_message(msg)
    assert codec.decode_message(sid, payload) == msg

    def one() -> None:
        s, p = codec.encode_message(msg)
        codec.decode_message(s, p)

    def enc() -> None:
        codec.encode_message(msg)

    def dec() -> None:
        codec.decode_message(sid, payload)

    def batch() -> None:
        records = [codec.user_record("/user/a", 7, msg, sender) for _ in range(1000)]
        for data in codec.encode_batches(records):
            for r in codec.decode_batch(data):
                codec.decode_record(r)
                codec.sender_from_wire(r.sender)

    print(f"{name:<10} {label + ' encode':<26} {per_message(enc, 20000):>10.2f}")
    print(f"{name:<10} {label + ' decode':<26} {per_message(dec, 20000):>10.2f}")
    print(f"{name:<10} {label + ' encode+decode':<26} {per_message(one, 20000):>10.2f}")
    print(f"{name:<10} {label + ' batch of 1000':<26} {per_message(batch, 20) / 1000:>10.2f}")


def main() -> None:
    with ActorSystem("bench") as system:
        ref = system.actor_of(Props(Idle), "a")
        messages = {
            "tuple": ("seq", 12345, 1.5),
            "str": "hello world, this is a message",
            "tuple+ref": ("reply-to", ref, 3),
        }
        print(f"{'serializer':<10} {'case':<26} {'µs/message':>10}")
        for ser in (MsgpackSerializer(), PickleSerializer()):
            codec = WireCodec(ser, DictRefs(), 4 * 1024 * 1024)
            for label, msg in messages.items():
                measure(codec, label, msg, ref)


if __name__ == "__main__":
    main()

"""Micro-benchmark of the cluster wire format: encode + decode per message (µs).

Run: ``python benchmarks/wire_serialization.py`` (needs the ``cluster`` extra). Prints,
for the msgpack and the pickle serializer: one small tuple message, one str message
(encode_message + decode_message), and a batch of 1000 records (records built at tell
time, one batch encode, one batch decode and 1000 message decodes), per message.
"""

from __future__ import annotations

import timeit
from typing import Any

from gactors import ActorRef
from gactors.cluster._serialization import (
    MsgpackSerializer,
    PickleSerializer,
    WireCodec,
)


class NoRefs:
    """These messages carry no refs."""

    def ref_to_wire(self, ref: ActorRef) -> tuple[str, str, int]:
        raise AssertionError("no refs here")

    def ref_from_wire(self, address: str, path: str, uid: int) -> ActorRef:
        raise AssertionError("no refs here")


def per_message(fn: Any, n: int) -> float:
    best = min(timeit.repeat(fn, number=n, repeat=5))
    return best / n * 1e6


def measure(codec: WireCodec, label: str, msg: Any) -> None:
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
        records = [codec.user_record("/user/a", 7, msg, None) for _ in range(1000)]
        for data in codec.encode_batches(records):
            for r in codec.decode_batch(data):
                codec.decode_record(r)

    print(f"{name:<10} {label + ' encode':<26} {per_message(enc, 20000):>10.2f}")
    print(f"{name:<10} {label + ' decode':<26} {per_message(dec, 20000):>10.2f}")
    print(f"{name:<10} {label + ' encode+decode':<26} {per_message(one, 20000):>10.2f}")
    print(f"{name:<10} {label + ' batch of 1000':<26} {per_message(batch, 20) / 1000:>10.2f}")


def main() -> None:
    messages = {"tuple": ("seq", 12345, 1.5), "str": "hello world, this is a message"}
    print(f"{'serializer':<10} {'case':<26} {'µs/message':>10}")
    for ser in (MsgpackSerializer(), PickleSerializer()):
        codec = WireCodec(ser, NoRefs(), 4 * 1024 * 1024)
        for label, msg in messages.items():
            measure(codec, label, msg)


if __name__ == "__main__":
    main()

"""Where the time of one remote message goes, stage by stage (issue 27).

Run from the repository root: ``python -m benchmarks.remote_breakdown [--url URL]
[--n N] [--batch B]`` (without ``--url`` a throwaway server is started with the
testkit launcher). One node (this process) and a second node process
(``remote_node.py``) join a cluster; the stages of the remote path are then timed one
at a time, in CPU time of this process (``time.process_time``: less sensitive to a
loaded machine than wall time), per message, with batches of B messages as the
flusher sends them under load:

sending side
  ``tell``      ``RemoteActorRef.tell`` of an int to the peer's sink, with a sender:
                encode the message, build the record, queue it (no network);
  ``encode``    the flusher's ``split_batches`` of B records into one entry;
  ``send``      ``Outbox.send`` of that entry (one EVALSHA round trip; wall time, so
                Redis and the loopback are in it);
receiving side
  ``read``      ``InboxReader.read`` of entries written beforehand (one XREADGROUP
                round trip and its reply's parsing; wall time);
  ``decode``    ``decode_batch`` of the entry (the records);
  ``deliver``   ``_deliver_batch``: decode each payload, find sender and recipient,
                ``tell`` the local actor (the mailbox enqueue);
  ``process``   the actor processing those messages (the mailbox run);
floors
  ``floor_decode``  msgspec decoding the same B payloads as one array in one call:
                    what one Python process cannot beat for decoding;
  ``floor_encode``  msgspec encoding B (recipient, sender, int) tuples in one call.

Prints one JSON object: µs per message for each stage. Figures, not assertions.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402
import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import gevent
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from remote_gactors import Peer

from gactors import Actor, ActorSystem, Props
from gactors.cluster._access import cluster_node
from gactors.testkit._redis_server import RedisServer


class Counter(Actor):
    """Counts what it receives."""

    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> None:
        self.count += 1


def _cpu(fn: Any, repeat: int) -> float:
    """Best CPU seconds of ``repeat`` calls of ``fn`` (the least disturbed)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _wall(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def breakdown(url: str, n: int, batch: int) -> dict[str, float]:
    """µs per message of each stage (see the module docstring)."""
    name = f"bd-{uuid.uuid4().hex[:8]}"
    peer = Peer(url, name, {})
    system = ActorSystem(name, config={"cluster": {"url": url}})
    try:
        node: Any = cluster_node(system)
        counter = system.actor_of(Props(Counter), "counter")
        sink = system.actor_selection(f"{peer.address}/user/sink").resolve_one(timeout=10)
        out: dict[str, float] = {}
        rounds = max(1, n // batch)

        # -- tell: nothing yields in the loop, so the flusher does not run.
        def tells() -> None:
            tell = sink.tell
            for i in range(batch):
                tell(i, counter)
            node._pending.clear()

        out["tell"] = _cpu(tells, rounds)
        for i in range(batch):
            sink.tell(i, counter)
        recs, _metas = node._pending.pop(sink.dest)
        node._pending.clear()
        codec = node.codec
        out["encode"] = _cpu(lambda: codec.split_batches(recs), rounds)
        data = codec.split_batches(recs)[0][0]
        out["entry_bytes_per_message"] = len(data) / batch * 1e6  # (divided below)

        # -- send and read on a stream of this test's own (our own inbox: the peer
        # never reads it, our reader is stopped first).
        own = node.node_id
        node._reader.kill()
        backend = node.backend
        outbox = backend.outbox()
        reader = backend.inbox_reader(own, max_block_ms=1000)
        reader.read(1, 1)  # connect
        out["send"] = _wall(lambda: outbox.send([(own, data)]), rounds)
        for _ in range(rounds * 2):
            outbox.send([(own, data)])
        out["read"] = _wall(lambda: reader.read(1, 1), rounds)
        outbox.close()
        reader.close()

        columns = getattr(codec, "decode_columns", codec.decode_batch)
        out["decode"] = _cpu(lambda: columns(data), rounds)
        records = codec.decode_batch(data)
        # Deliver to our own counter: the recipient of the records is the peer's sink,
        # so they are re-addressed to the counter here.
        path = counter.path.path_str
        mine = [
            type(r)(r.kind, (path, counter._uid), r.sender, r.serializer_id, r.payload)
            for r in records
        ]
        data_mine = codec.encode_batch(mine)
        cell: Any = counter._cell

        def deliver_and_process() -> None:
            target = cell.actor.count + batch
            node._deliver_batch(data_mine)
            while cell.actor.count < target:
                gevent.sleep(0)

        def process_only() -> None:
            target = cell.actor.count + batch
            tell = counter.tell
            for i in range(batch):
                tell(i, None)
            while cell.actor.count < target:
                gevent.sleep(0)

        # A local tell of the same messages and their processing, to split the two.
        local = _cpu(process_only, rounds)
        out["deliver+process"] = _cpu(deliver_and_process, rounds)
        out["local_tell+process"] = local
        sids = [r.serializer_id for r in records]
        pls = [r.payload for r in records]
        many = getattr(codec, "decode_payloads", None)
        if many is None:  # an older checkout: one call per payload
            out["decode_payloads"] = _cpu(
                lambda: [codec.decode_message(r.serializer_id, r.payload) for r in records],
                rounds,
            )
        else:
            out["decode_payloads"] = _cpu(lambda: many(sids, pls), rounds)

        payloads = b"\xdd" + len(records).to_bytes(4, "big") + b"".join(r.payload for r in records)
        dec = msgspec.msgpack.Decoder().decode
        out["floor_decode"] = _cpu(lambda: dec(payloads), rounds)
        items = [(r.recipient, r.sender, i) for i, r in enumerate(records)]
        enc = msgspec.msgpack.Encoder().encode
        out["floor_encode"] = _cpu(lambda: enc(items), rounds)
        result = {k: v / batch * 1e6 for k, v in out.items()}
        result["entry_bytes_per_message"] = out["entry_bytes_per_message"] / 1e6
        return result
    finally:
        system.terminate().get(timeout=60)
        peer.stop()


def main() -> int:
    """Print the breakdown as one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="")
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    if args.url:
        print(json.dumps(breakdown(args.url, args.n, args.batch)))
        return 0
    with RedisServer() as server:
        print(json.dumps(breakdown(server.url, args.n, args.batch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where the remote-tell pipeline waits: ``python -m benchmarks.remote_tell_stalls URL N``.

Runs the ``remote_tell`` workload (a ``Sender`` telling N ints to a ``Sink`` on a
second node, CHUNK per acknowledgement, WINDOW chunks in flight) with probes on both
nodes and prints one JSON line: the rate; the CPU of the sender, the receiver and the
Redis server over the phase divided by its wall time (utilisation); and counters of
each node's transport over the phase: flushes, entries and bytes per flush, the wall time
the flusher spent in ``Outbox.send`` (its wait for Redis), reads, entries per read,
reads that came back empty, reads that returned a full COUNT, the time spent in
reads, and on the sender how often (and how long) the ``Sender`` had its whole window
out and waited for an acknowledgement. Each process's wall time is split with
``/proc/PID/schedstat`` into running, runnable but waiting for a CPU (other load) and
stalled (asleep: waiting for the other side). ``GACTORS_BENCH_DELIVER_SLICE=N`` runs
both nodes with another delivery slice (a huge one turns slicing off), and
``GACTORS_BENCH_TIMELINE=PATH`` writes each process's probe events (``PATH.PID``, JSON, one
clock for both) for a timeline. The probes wrap methods at class level, so
they add a little CPU of their own: read the shares, not the absolutes. Figures for
docs/performance.md ("The remote path, stage by stage"), not assertions. The second
node is this script again with ``--node`` (same interpreter, same checkout).
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from typing import Any

import redis

from gactors import Actor, ActorSystem, Props

CHUNK = 1_000
WINDOW = 20

_counts: Counter[str] = Counter()
_times: Counter[str] = Counter()
_in_send: list[int] = []
_events: list[tuple[float, str, int]] = []


def _install_probes() -> None:
    """Count and time the outbox's sends, the reader's reads and the deliveries."""
    from gactors.cluster import _redis_inbox, _transport

    perf = time.perf_counter
    if os.environ.get("GACTORS_BENCH_DELIVER_SLICE") and hasattr(_transport, "_DELIVER_SLICE"):
        # An experiment: another slice size (a huge one turns slicing off).
        _transport._DELIVER_SLICE = int(os.environ["GACTORS_BENCH_DELIVER_SLICE"])
    send = _redis_inbox._RedisOutbox.send
    read = _redis_inbox._RedisInboxReader.read
    deliver = _transport._Transport._deliver_batch

    def probed_send(self: Any, batches: Any, max_unread: int = 10_000) -> Any:
        t0 = perf()
        _events.append((t0, "send>", sum(len(b) for _, b in batches)))
        _in_send.append(1)
        try:
            return send(self, batches, max_unread)
        finally:
            _in_send.clear()
            _events.append((perf(), "send<", 0))
            _times["send"] += perf() - t0
            _counts["flushes"] += 1
            _counts["entries_sent"] += len(batches)
            _counts["bytes_sent"] += sum(len(b) for _, b in batches)

    def probed_read(self: Any, block_ms: int, count: int) -> Any:
        t0 = perf()
        _events.append((t0, "read>", 0))
        got = read(self, block_ms, count)
        _events.append((perf(), "read<", len(got)))
        _times["read"] += perf() - t0
        _counts["reads"] += 1
        _counts["entries_read"] += len(got)
        if not got:
            _counts["reads_empty"] += 1
        if len(got) >= count:
            _counts["reads_full_count"] += 1
        return got

    def probed_deliver(self: Any, data: bytes) -> None:
        t0 = perf()
        received = self.stats["received"]
        _events.append((t0, "deliver>", len(data)))
        deliver(self, data)
        _events.append((perf(), "deliver<", 0))
        _times["deliver"] += perf() - t0
        _counts["messages_delivered"] += self.stats["received"] - received

    between = getattr(_transport._Transport, "_between_slices", None)
    if between is not None:

        def probed_between(self: Any) -> None:
            flushes = _counts["flushes"]
            if _in_send:
                _counts["slice_yields_send_in_flight"] += 1
            pending0 = sum(len(p[0]) for p in self._pending.values())
            between(self)
            pending1 = sum(len(p[0]) for p in self._pending.values())
            if pending1 > pending0:
                _counts["slice_yields_told"] += 1
            _counts["slice_yields"] += 1
            if _counts["flushes"] != flushes:
                _counts["slice_yields_with_flush"] += 1

        _transport._Transport._between_slices = probed_between  # type: ignore[attr-defined]
    _redis_inbox._RedisOutbox.send = probed_send  # type: ignore[method-assign]
    _redis_inbox._RedisInboxReader.read = probed_read  # type: ignore[method-assign]
    _transport._Transport._deliver_batch = probed_deliver  # type: ignore[method-assign]


def _snapshot() -> dict[str, Any]:
    path = os.environ.get("GACTORS_BENCH_TIMELINE")
    if path:
        with open(f"{path}.{os.getpid()}", "w") as f:
            json.dump(_events, f)
    _events.clear()
    return {"counts": dict(_counts), "times": dict(_times)}


def _delta(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("counts", "times"):
        for k, v in b[kind].items():
            out[k] = round(v - a[kind].get(k, 0), 4)
    f = out.get("flushes", 0)
    r = out.get("reads", 0)
    if f:
        out["entries_per_flush"] = round(out.get("entries_sent", 0) / f, 2)
        out["send_ms_per_flush"] = round(out.get("send", 0) / f * 1e3, 3)
    if r:
        out["entries_per_read"] = round(out.get("entries_read", 0) / r, 2)
    return out


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sched(pid: int) -> tuple[float, float]:
    """CPU seconds and seconds spent runnable but waiting for a CPU (the run queue:
    other processes' load) of process ``pid`` so far (``/proc/PID/schedstat``)."""
    with open(f"/proc/{pid}/schedstat") as f:
        cpu, wait, _ = f.read().split()
    return int(cpu) / 1e9, int(wait) / 1e9


class Sink(Actor):
    """Counts; acknowledges every CHUNK; answers "stats" with its node's counters."""

    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> None:
        if message == "stats":
            # Between runs: the next run counts (and acknowledges) from zero.
            self.count = 0
            self.sender.tell(_snapshot())
            return
        self.count += 1
        if self.count % CHUNK == 0:
            self.sender.tell(("ack", self.count))


class Sender(Actor):
    """The workload's sender, recording how long its window stood full."""

    def __init__(self) -> None:
        self.sink: Any = None
        self.requester: Any = None
        self.n = self.sent = 0
        self.full_since = 0.0

    def _chunk(self) -> None:
        tell, me = self.sink.tell, self.context.self
        k = min(CHUNK, self.n - self.sent)
        for i in range(self.sent, self.sent + k):
            tell(i, sender=me)
        self.sent += k

    def receive(self, message: Any) -> None:
        if message[0] == "go":
            _, self.sink, self.n = message
            self.requester = self.sender
            for _ in range(WINDOW):
                if self.sent < self.n:
                    self._chunk()
            self.full_since = time.perf_counter()
        elif message[0] == "ack":
            if message[1] >= self.n:
                self.requester.tell("done")
                return
            if self.sent - (message[1] - CHUNK) >= WINDOW * CHUNK:
                # The whole window was out: the sender had nothing to do until now.
                _counts["credit_waits"] += 1
                _times["credit_wait"] += time.perf_counter() - self.full_since
            if self.sent < self.n:
                self._chunk()
                self.full_since = time.perf_counter()
            _counts["acks"] += 1


def node(url: str, name: str) -> int:
    """The second node: a probed Sink at /user/sink until SIGTERM."""
    import signal

    import gevent

    from gactors.cluster import Cluster

    _install_probes()
    system = ActorSystem(name, config={"cluster": {"url": url}})
    system.actor_of(Props(Sink), "sink")
    gevent.signal_handler(signal.SIGTERM, system.terminate)
    sys.stdout.write(
        json.dumps({"address": str(Cluster(system).self_address), "pid": os.getpid()}) + "\n"
    )
    sys.stdout.flush()
    system.when_terminated.get()
    return 0


def main(url: str, n: int) -> dict[str, Any]:
    """Run the workload once, after a warm-up of 20,000 messages; the figures."""
    _install_probes()
    name = f"stalls-{uuid.uuid4().hex[:8]}"
    peer = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.remote_tell_stalls", "--node", url, name],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert peer.stdout is not None
    info = json.loads(peer.stdout.readline())
    redis_pid = int(redis.Redis.from_url(url).info("server")["process_id"])
    system = ActorSystem(name, config={"cluster": {"url": url}})
    try:
        sink = system.actor_selection(f"{info['address']}/user/sink").resolve_one(timeout=10)
        system.actor_of(Props(Sender)).ask(("go", sink, 20 * CHUNK), timeout=60)
        sink_stats0 = sink.ask("stats", timeout=10)
        mine0 = _snapshot()
        pids = (os.getpid(), info["pid"], redis_pid)
        sched0 = [_sched(p) for p in pids]
        cpu0 = (time.process_time(), _proc_cpu(info["pid"]), _proc_cpu(redis_pid))
        t0 = time.perf_counter()
        sender = system.actor_of(Props(Sender))
        answer = sender.ask(("go", sink, n), timeout=300)
        wall = time.perf_counter() - t0
        cpu1 = (time.process_time(), _proc_cpu(info["pid"]), _proc_cpu(redis_pid))
        sched1 = [_sched(p) for p in pids]
        mine1 = _snapshot()
        sink_stats1 = sink.ask("stats", timeout=10)
        if answer != "done":
            raise RuntimeError(f"no completion: {answer!r}")
    finally:
        system.terminate().get(timeout=30)
        peer.terminate()
        peer.wait()
    names = ("sender", "receiver", "redis")
    return {
        "rate": round(n / wall),
        "wall_s": round(wall, 3),
        "utilisation": {
            k: round((b - a) / wall, 3) for k, a, b in zip(names, cpu0, cpu1, strict=True)
        },
        "cpu_us_per_msg": {
            k: round((b - a) / n * 1e6, 3) for k, a, b in zip(names, cpu0, cpu1, strict=True)
        },
        # Of the wall time: running, runnable but waiting for a CPU (the machine's
        # load), and the rest: sleeping, i.e. waiting for the pipeline (the stall).
        "running": {
            k: round((b[0] - a[0]) / wall, 3) for k, a, b in zip(names, sched0, sched1, strict=True)
        },
        "run_queue": {
            k: round((b[1] - a[1]) / wall, 3) for k, a, b in zip(names, sched0, sched1, strict=True)
        },
        "stalled": {
            k: round(1 - (b[0] - a[0] + b[1] - a[1]) / wall, 3)
            for k, a, b in zip(names, sched0, sched1, strict=True)
        },
        "sender": _delta(mine0, mine1),
        "receiver": _delta(sink_stats0, sink_stats1),
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--node":
        sys.exit(node(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m benchmarks.remote_tell_stalls URL N")
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))

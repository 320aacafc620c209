"""Cluster sharding under faults, end to end with real processes (issue #24).

Hosts and clients are node processes (``_shfault_node.py``) that use the public
sharding API only (``ClusterSharding.start`` / ``start_proxy`` / ``entity_ref``,
dead letters through the event stream). Two client processes each run three sender
actors (in the leave case each host runs one more) that tell numbered messages
``("m", sender, seq)`` to 36 entities; every entity books what it processes (one
``os.write`` per line, stamped with the machine's monotonic clock, so a SIGKILLed
host's book still says what it did). Then one fault
per test -- a host joins, hosts leave, a host is SIGKILLed, a host is paused past its
lease, Redis is paused during a move -- and from the books of every process:

* **order**: for every (sender, entity) the seqs processed, in processing order
  across all processes, strictly increase (no duplicate, no later message before an
  earlier one, also when the entity moved);
* **one live instance**: the messages of one entity are never processed by two
  incarnations interleaved;
* **accounting**: every message sent is processed exactly once or is a dead letter
  (never both), except -- after a SIGKILL only -- what the killed host had taken and
  not processed, which must have been sent to it in the last seconds before the kill.

Each line ``[sharding-faults] ...`` gives a run's counts (``-s`` shows them). Each
case runs ``GACTORS_FAULT_RUNS`` times (once in the ordinary suite; the ``faults``
tox env runs them ten times).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
import pytest

from cluster.test_delivery import LineNode
from gactors.testkit import dilated
from gactors.testkit._redis_server import RedisServer

pytest.importorskip("redis")
pytest.importorskip("msgspec")

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.timeout(300)]

NODE_SCRIPT = str(Path(__file__).resolve().parent / "_shfault_node.py")
RUNS = int(os.environ.get("GACTORS_FAULT_RUNS", "1"))
#: The short settings of the other sharding tests: a crashed host's shards restart
#: elsewhere within down_after + lease_ttl (~3.5 s).
FAST: dict[str, Any] = {
    "heartbeat_interval": 0.2,
    "unreachable_after": 1.0,
    "down_after": 2.0,
    "lease_ttl": 1.5,
}
SHARDS = 30
ENTITIES = [f"acct-{i}" for i in range(36)]
#: Messages a second of each sender (two clients with three senders each: ~240/s).
RATE = 40.0
#: A SIGKILLed host may have taken messages from Redis it had not processed yet: they
#: must have been sent to it at most this long before the kill.
CRASH_WINDOW = 3.0

runs = pytest.mark.parametrize("run", range(RUNS))


class Node(LineNode):
    """A node process of ``_shfault_node.py`` (a host or a client) and its book."""

    def __init__(self, url: str, name: str, tmp: Path, kind: str, **cluster: Any) -> None:
        self.kind = kind
        self.book = tmp / f"{kind}-{uuid.uuid4().hex[:8]}.book"
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in close()
            prefix="gactors-shfault-", suffix=".log", delete=False
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                NODE_SCRIPT,
                url,
                name,
                json.dumps(cluster),
                str(self.book),
                kind,
                str(SHARDS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.kept: list[dict[str, Any]] = []
        first = self.read(dilated(30.0))
        if first is None or "address" not in first:
            log = self.log()
            self.close()
            raise AssertionError(f"node process did not join: {first!r}\n{log}")
        self.address: str = first["address"]
        self.pid: int = first["pid"]
        self.killed_at: float | None = None
        self.streamed = False

    def command(self, key: str, timeout: float = 15.0, **cmd: Any) -> Any:
        self.streamed |= cmd["cmd"] == "stream"
        self.send(**cmd)
        return self.wait_for(key, timeout)[key]

    def signal(self, sig: int) -> None:
        if sig == signal.SIGKILL:
            self.killed_at = time.monotonic()
        os.kill(self.pid, sig)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class Cluster:
    """The processes of one case: hosts, two sending clients."""

    def __init__(self, url: str, tmp: Path, **cluster: Any) -> None:
        self.url = url
        self.tmp = tmp
        self.name = f"shf{uuid.uuid4().hex[:8]}"
        self.settings = dict(FAST, **cluster)
        self.nodes: list[Node] = []

    def start(self, kind: str) -> Node:
        node = Node(self.url, self.name, self.tmp, kind, **self.settings)
        self.nodes.append(node)
        return node

    def wait_members(self, n: int, timeout: float = 20.0) -> None:
        probe = next(p for p in self.nodes if p.alive and p.kind == "client")
        deadline = time.monotonic() + dilated(timeout)
        seen = -1
        while time.monotonic() < deadline:
            seen = probe.command("members", cmd="members")
            if seen == n:
                return
            gevent.sleep(0.1)
        raise AssertionError(f"{n} members up expected within {timeout} s, saw {seen}")

    @property
    def clients(self) -> list[Node]:
        return [p for p in self.nodes if p.kind == "client"]

    def stream(self, hosts: bool = False) -> None:
        """Three senders on each client; with ``hosts``, one on each host too."""
        for i, p in enumerate(self.nodes):
            if p.kind == "client" or hosts:
                sids = [f"n{i}s{k}" for k in range(3 if p.kind == "client" else 1)]
                assert p.command(
                    "streaming", cmd="stream", senders=sids, entities=ENTITIES, rate=RATE
                )
        gevent.sleep(1.0)  # every entity started and processing

    def stop(self) -> dict[str, int]:
        """Stops the senders; what each sent, from its node's book (also for nodes
        that left: their senders stopped with them)."""
        answered: dict[str, int] = {}
        for p in self.nodes:
            if p.alive and (p.kind == "client" or p.streamed):
                answered.update(p.command("sent", cmd="stop"))
        sent: dict[str, int] = {}
        for p in self.nodes:
            with contextlib.suppress(FileNotFoundError):
                for line in p.book.read_text().splitlines():
                    parts = line.split(" ")
                    if parts[0] == "E":
                        sent[parts[2]] = max(sent.get(parts[2], 0), int(parts[3]))
        for sid, n in answered.items():
            assert sent.get(sid, 0) == n, f"{sid} sent {n}, its book says {sent.get(sid)}"
        return sent

    def close(self) -> None:
        for p in self.nodes:
            p.close()


@contextlib.contextmanager
def cluster_of(url: str, tmp: Path, hosts: int, **cluster: Any) -> Iterator[Cluster]:
    c = Cluster(url, tmp, **cluster)
    try:
        for _ in range(hosts):
            c.start("host")
        c.start("client")
        c.start("client")
        c.wait_members(hosts + 2)
        yield c
    finally:
        c.close()


# -- the books ----------------------------------------------------------------------------


@dataclass
class Books:
    """Everything every process booked, merged in processing order."""

    #: (t, node index, entity, incarnation, sid, seq), sorted by t.
    processed: list[tuple[float, int, str, str, str, int]] = field(default_factory=list)
    dead: Counter[tuple[str, int]] = field(default_factory=Counter)
    #: sid -> [(t, first seq of the tick)] in order.
    ticks: dict[str, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    other_dead: list[str] = field(default_factory=list)


def read_books(c: Cluster) -> Books:
    b = Books()
    for i, node in enumerate(c.nodes):
        with contextlib.suppress(FileNotFoundError):
            for line in node.book.read_text().splitlines():
                parts = line.split(" ")
                kind, t = parts[0], float(parts[1])
                if kind == "M":
                    b.processed.append((t, i, parts[2], parts[3], parts[4], int(parts[5])))
                elif kind == "D":
                    b.dead[(parts[2], int(parts[3]))] += 1
                elif kind == "K":
                    b.ticks[parts[2]].append((t, int(parts[3])))
                elif kind == "X":
                    b.other_dead.append(line)
    b.processed.sort(key=lambda r: r[0])
    return b


def settle(c: Cluster, sent: dict[str, int], quiet: float = 3.0, limit: float = 40.0) -> Books:
    """The books once every message is accounted for, or once they did not change for
    ``quiet`` seconds (bounded by ``limit``)."""
    total = sum(sent.values())
    deadline = time.monotonic() + dilated(limit)
    last, since = (-1, -1), time.monotonic()
    while True:
        b = read_books(c)
        key = (len(b.processed), sum(b.dead.values()))
        now = time.monotonic()
        done = len({(r[4], r[5]) for r in b.processed} | set(b.dead)) >= total
        if done or now > deadline:
            return b
        if key != last:
            last, since = key, now
        elif now - since > quiet:
            return b
        gevent.sleep(0.2)


def sent_at(b: Books, sid: str, seq: int) -> float:
    """When sender ``sid`` told message ``seq`` (the start of its tick)."""
    best = 0.0
    for t, first in b.ticks[sid]:
        if first > seq:
            break
        best = t
    return best


def check(case: str, c: Cluster, sent: dict[str, int], b: Books) -> dict[str, Any]:
    """Order, one live instance, accounting; ``lost`` is allowed only for a SIGKILLed
    host, bounded. Prints the counts; returns them."""
    all_sent = {(sid, seq) for sid, n in sent.items() for seq in range(n)}
    processed = Counter((r[4], r[5]) for r in b.processed)
    killed = [(i, n) for i, n in enumerate(c.nodes) if n.killed_at is not None]
    missing = sorted(all_sent - set(processed) - set(b.dead))
    counts = {
        "sent": len(all_sent),
        "processed": len(processed),
        "dead_letters": len(b.dead),
        "lost": len(missing),
        "hosts": len([n for n in c.nodes if n.kind == "host"]),
    }
    line = f"[sharding-faults] {case}: " + " ".join(f"{k}={v}" for k, v in counts.items())
    print("\n" + line)  # noqa: T201 - seen with -s
    path = os.environ.get("GACTORS_FAULT_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    assert counts["sent"] > 500, f"{case}: too few messages to mean anything: {counts}"

    # Exactly once or a dead letter, never both, nothing invented.
    twice = [m for m, k in processed.items() if k > 1]
    assert not twice, f"{case}: processed twice: {twice[:20]} ({counts})"
    dead_twice = [m for m, k in b.dead.items() if k > 1]
    assert not dead_twice, f"{case}: dead-lettered twice: {dead_twice[:20]} ({counts})"
    both = sorted(set(processed) & set(b.dead))
    assert not both, f"{case}: {len(both)} both processed and dead letters: {both[:20]} ({counts})"
    invented = (set(processed) | set(b.dead)) - all_sent
    assert not invented, f"{case}: never sent: {sorted(invented)[:20]}"

    # Order per (sender, entity), across every process, in processing order.
    last: dict[tuple[str, str], tuple[int, int]] = {}
    bad: list[str] = []
    for t, i, entity, _inc, sid, seq in b.processed:
        prev = last.get((sid, entity))
        if prev is not None and seq <= prev[0]:
            bad.append(f"{sid}->{entity}: {seq} (node {i}) after {prev[0]} (node {prev[1]}) t={t}")
        last[(sid, entity)] = (seq, i)
    assert not bad, f"{case}: {len(bad)} out of order, e.g. {bad[:10]} ({counts})"

    # One live instance: an entity's incarnations never process interleaved.
    runs_of: dict[str, list[str]] = defaultdict(list)
    where: dict[str, int] = {}
    for _t, i, entity, inc, _sid, _seq in b.processed:
        where[inc] = i
        if not runs_of[entity] or runs_of[entity][-1] != inc:
            runs_of[entity].append(inc)
    twice_live = {
        e: [(inc, where[inc]) for inc in incs]
        for e, incs in runs_of.items()
        if len(set(incs)) < len(incs)
    }
    assert not twice_live, (
        f"{case}: {len(twice_live)} entities processed by two incarnations interleaved "
        f"(incarnation, node): {dict(list(twice_live.items())[:5])} ({counts})"
    )

    if not killed:
        assert not missing, (
            f"{case}: {len(missing)} message(s) neither processed nor dead letters, e.g. "
            f"{missing[:20]} ({counts}); other dead letters: {b.other_dead[:5]}"
        )
        return counts
    # After a SIGKILL: only what the killed host had taken, sent shortly before.
    ((ki, knode),) = killed
    assert knode.killed_at is not None
    kill_t = knode.killed_at
    last_host = {}
    for t, i, entity, _inc, _sid, _seq in b.processed:
        if t <= kill_t:
            last_host[entity] = i
    target = {(sid, seq): ENTITIES[(seq + int(sid[-1])) % len(ENTITIES)] for sid, seq in missing}
    stray = [
        (m, round(sent_at(b, *m) - kill_t, 2), target[m])
        for m in missing
        if not (kill_t - CRASH_WINDOW <= sent_at(b, *m) <= kill_t + 0.1)
        or last_host.get(target[m], ki) != ki
    ]
    assert not stray, (
        f"{case}: {len(stray)} of {len(missing)} lost message(s) were not sent to the killed "
        f"host in the {CRASH_WINDOW} s before the kill: (message, sent - kill s, entity) "
        f"{stray[:10]} ({counts})"
    )
    return counts


def processed_on(b: Books, i: int) -> set[str]:
    return {r[2] for r in b.processed if r[1] == i}


# -- 1. a host joins ----------------------------------------------------------------------


@runs
def test_a_host_joining_during_the_stream(redis_url: str, tmp_path: Path, run: int) -> None:
    with cluster_of(redis_url, tmp_path, hosts=2) as c:
        c.stream()
        new = c.start("host")
        c.wait_members(5)
        gevent.sleep(3.0)
        sent = c.stop()
        b = settle(c, sent)
        check("a host joins", c, sent, b)
        moved = processed_on(b, c.nodes.index(new))
        assert moved, "shards moved to the new host (else the case tests nothing)"


# -- 2. hosts leave -----------------------------------------------------------------------


@runs
def test_one_host_then_two_at_once_leaving_during_the_stream(
    redis_url: str, tmp_path: Path, run: int
) -> None:
    with cluster_of(redis_url, tmp_path, hosts=4) as c:
        a, b1, b2, stays = c.nodes[:4]
        c.stream(hosts=True)  # a leaving host's own messages are in its region too
        a.send(cmd="leave")
        a.wait_for("terminated", 30)
        gevent.sleep(2.0)
        b1.send(cmd="leave")  # a rolling restart: both within milliseconds
        b2.send(cmd="leave")
        b1.wait_for("terminated", 30)
        b2.wait_for("terminated", 30)
        gevent.sleep(2.0)
        sent = c.stop()
        b = settle(c, sent)
        check("one host, then two at once, leave", c, sent, b)
        last: dict[str, int] = {}
        for r in b.processed:
            last[r[2]] = r[1]
        assert set(last.values()) == {c.nodes.index(stays)}, "every entity ends on the host left"
        assert processed_on(b, 0) and processed_on(b, 1) | processed_on(b, 2), (
            "entities ran on the hosts that left (else the case tests nothing)"
        )


@runs
def test_a_rolling_restart_three_hosts_leave_while_two_join(
    redis_url: str, tmp_path: Path, run: int
) -> None:
    # A gunicorn HUP: the old workers leave together while new ones start, so the
    # regions' views disagree for a while about who hosts what.
    with cluster_of(redis_url, tmp_path, hosts=4) as c:
        old = c.nodes[:3]
        c.stream(hosts=True)
        joining = [gevent.spawn(c.start, "host") for _ in range(2)]
        for p in old:
            p.send(cmd="leave")
        for p in old:
            p.wait_for("terminated", 30)
        new = gevent.joinall(joining, timeout=dilated(60), raise_error=True)
        assert len(new) == 2, "the new hosts joined"
        gevent.sleep(3.0)
        sent = c.stop()
        b = settle(c, sent)
        check("a rolling restart: three hosts leave while two join", c, sent, b)
        stay = {c.nodes.index(p) for p in c.nodes if p.kind == "host" and p.alive}
        last: dict[str, int] = {}
        for r in b.processed:
            last[r[2]] = r[1]
        assert set(last.values()) <= stay, "every entity ends on a host still up"


# -- 3. a host is SIGKILLed ---------------------------------------------------------------


@runs
@pytest.mark.parametrize("moving", [False, True], ids=["steady", "during-a-move"])
def test_a_host_killed_during_the_stream(
    redis_url: str, tmp_path: Path, run: int, moving: bool
) -> None:
    # "during-a-move": a host joins and an old one is killed at once, in the middle of
    # handing its shards over.
    with cluster_of(redis_url, tmp_path, hosts=2) as c:
        a = c.nodes[0]
        c.stream()
        if moving:
            c.start("host")
        a.signal(signal.SIGKILL)
        # Its shards restart elsewhere after down_after + lease_ttl; then some more.
        gevent.sleep(FAST["down_after"] + FAST["lease_ttl"] + 3.0)
        sent = c.stop()
        b = settle(c, sent)
        check(f"a host is SIGKILLed{' during a move' if moving else ''}", c, sent, b)
        assert a.killed_at is not None
        before = {r[2] for r in b.processed if r[1] == 0 and r[0] <= a.killed_at}
        after = {r[2] for r in b.processed if r[1] != 0 and r[0] > a.killed_at + 1.0}
        assert before, "entities ran on the killed host (else the case tests nothing)"
        assert before <= after, (
            f"the killed host's entities continue elsewhere; not: {sorted(before - after)}"
        )


# -- 4. a host paused past its lease ------------------------------------------------------


@runs
@pytest.mark.parametrize("down_after", [10.0, 2.0], ids=["stays-member", "downed"])
def test_a_host_paused_past_its_lease_during_a_move(
    redis_url: str, tmp_path: Path, run: int, down_after: float
) -> None:
    # A host joins and, at once, an old host is paused (SIGSTOP) past its lease: its
    # entities stay alive in its memory meanwhile. "stays-member": down_after is longer
    # than the pause (2.5 leases), so it stays a member and, resuming, must find its
    # leases expired and stop those entities before they act on anything more.
    # "downed": the pause (down_after + lease_ttl + 1 s) is long enough for the others
    # to down it and restart its shards; resuming, it learns it was downed and must not
    # process anything more. Either way: no entity's incarnations interleave.
    pause = FAST["lease_ttl"] * 2.5 if down_after > 5 else down_after + FAST["lease_ttl"] + 1.0
    with cluster_of(redis_url, tmp_path, hosts=2, down_after=down_after) as c:
        a = c.nodes[0]
        c.stream()
        new = c.start("host")
        a.signal(signal.SIGSTOP)
        stopped = time.monotonic()
        gevent.sleep(pause)
        a.signal(signal.SIGCONT)
        resumed = time.monotonic()
        gevent.sleep(4.0)
        sent = c.stop()
        b = settle(c, sent)
        case = (
            f"a host paused {pause:.2f} s (past its lease) during a move, down_after {down_after}"
        )
        counts = check(case, c, sent, b)
        on_a = {r[2] for r in b.processed if r[1] == 0 and r[0] < stopped}
        taken = {r[2] for r in b.processed if r[1] != 0 and stopped < r[0] < resumed} & on_a
        print(  # noqa: T201 - seen with -s
            f"[sharding-faults]   {len(taken)} of the paused host's {len(on_a)} entities "
            f"processed elsewhere while it was paused"
        )
        assert on_a, f"entities ran on the paused host (else nothing is tested): {counts}"
        assert processed_on(b, c.nodes.index(new)), "shards moved to the new host"


# -- 5. Redis paused during a move --------------------------------------------------------


@runs
def test_redis_paused_during_a_move(tmp_path: Path, run: int) -> None:
    with RedisServer() as server:
        settings = {"down_after": 5.0}
        with cluster_of(server.url, tmp_path, hosts=2, **settings) as c:
            c.stream()
            new = c.start("host")  # shards start moving to it ...
            c.wait_members(5)
            assert server.pid is not None
            os.kill(server.pid, signal.SIGSTOP)  # ... and Redis stops answering
            try:
                gevent.sleep(2.0)
            finally:
                os.kill(server.pid, signal.SIGCONT)
            gevent.sleep(4.0)
            sent = c.stop()
            b = settle(c, sent)
            check("Redis paused during a move", c, sent, b)
            assert processed_on(b, c.nodes.index(new)), "shards moved to the new host"

"""Faults of persistent sharded entities on the redis store, with real node processes
(``_persist_node.py``) and a real server (SPEC §19, issue 25):

* SIGKILL of a host while its entities persist: every event whose handler ran is in
  the journal after failover, the entities go on on another host with a greater
  fencing token, and no write is half-stored (each command's two events are stored
  together or not at all).
* A host paused (SIGSTOP) past its lease while it holds commands: after SIGCONT its
  writes are refused (FencedError or PersistenceConflict) and store nothing; the
  journal of each entity holds exactly the events whose handlers ran, with fencing
  tokens that never go down.
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
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gevent
import pytest

from gactors.persistence import PersistenceSettings
from gactors.persistence._codec import codec
from gactors.persistence._redis_store import redis_store

from ._report import report

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.timeout(240)]

NODE_SCRIPT = str(Path(__file__).resolve().parent / "_persist_node.py")
FAST = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0, "lease_ttl": 2.0}
ENTITIES = 30


class PersistNode:
    """A node process of ``_persist_node.py`` and its books."""

    def __init__(self, url: str, name: str, books_dir: str) -> None:
        self.books = os.path.join(books_dir, f"{uuid.uuid4().hex[:8]}.books")
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in close()
            prefix="gactors-persist-", suffix=".log", delete=False
        )
        self.proc = subprocess.Popen(
            [sys.executable, NODE_SCRIPT, url, name, json.dumps(FAST), self.books],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        first = self.read(30.0)
        if first is None or "address" not in first:
            log = self.log()
            self.close()
            raise AssertionError(f"node process did not join: {first!r}\n{log}")
        self.pid: int = first["pid"]

    def read(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        with gevent.Timeout(timeout, False):
            line = self.proc.stdout.readline()
            return json.loads(line) if line else None
        return None

    def wait_for(self, key: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.read(max(0.1, deadline - time.monotonic()))
            if line is None:
                break
            if key in line:
                return line
        raise AssertionError(f"no {key!r} line within {timeout} s\n{self.log()[-4000:]}")

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def lines(self) -> list[list[str]]:
        if not os.path.exists(self.books):
            return []
        return [ln.split() for ln in Path(self.books).read_text().splitlines() if ln]

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()
        self._log.close()
        with contextlib.suppress(OSError):
            os.unlink(self._log.name)


@dataclass
class Books:
    """Every host's books and the journal of every entity."""

    handled: dict[str, dict[int, tuple[int, int, int]]] = field(
        default_factory=lambda: defaultdict(dict)
    )  # entity -> seq -> (value, token, host index)
    failures: list[tuple[int, str, str]] = field(default_factory=list)  # host, entity, error
    journal: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)
    writes: list[tuple[str, int, int, str]] = field(default_factory=list)  # W lines
    recovered: dict[str, int] = field(default_factory=dict)  # entity -> highest R seq
    foreign: int = 0  # writes stored whose handler never ran (check_journal counts them)

    def summary(self) -> str:
        kinds: dict[str, int] = defaultdict(int)
        for _, _, kind in self.failures:
            kinds[kind] += 1
        handled = sum(len(h) for h in self.handled.values())
        missing = sum(
            1
            for entity, seqs in self.handled.items()
            for seq in seqs
            if seq not in {s for s, _ in self.journal.get(entity, [])}
        )
        return (
            f"{handled} commands handled ({2 * handled} events whose handler ran), "
            f"{sum(len(j) for j in self.journal.values())} events found in the journals, "
            f"{missing} handled missing, on_persist_failure {dict(kinds)}"
        )


def collect(url: str, name: str, hosts: list[PersistNode]) -> Books:
    books = Books()
    for index, host in enumerate(hosts):
        for line in host.lines():
            if line[0] == "H":
                entity, seq, value, token = line[1], int(line[2]), int(line[3]), int(line[4])
                assert seq not in books.handled[entity], (entity, seq, line)
                books.handled[entity][seq] = (value, token, index)
            elif line[0] == "W":
                books.writes.append((line[1], int(line[2]), int(line[3]), line[4]))
            elif line[0] == "F":
                books.failures.append((index, line[1], line[3]))
            elif line[0] == "R":
                entity, seq = line[1], int(line[2])
                books.recovered[entity] = max(books.recovered.get(entity, 0), seq)
    cluster = SimpleNamespace(url=url, key_prefix="gactors")
    system = SimpleNamespace(
        name=name, settings=SimpleNamespace(extension_tables={"cluster": cluster})
    )
    store = redis_store(PersistenceSettings(), system)
    try:
        for k in range(ENTITIES):
            events = store.replay(f"Acc|a{k}", 1, None, None)
            books.journal[f"a{k}"] = [(e.sequence_nr, codec().decode(e.payload)) for e in events]
    finally:
        store.close()
    return books


def check_journal(books: Books) -> None:
    """Every handled command is stored at its sequence number, whole; the journal has
    no gap; an event without a handled command (a write in flight when its incarnation
    was stopped or killed) was recovered by a later incarnation; tokens never go down
    along the journal."""
    for entity, events in books.journal.items():
        handled = books.handled.get(entity, {})
        assert [s for s, _ in events] == list(range(1, len(events) + 1)), entity
        # Whole writes: events come in pairs (value, 0), (value, 1).
        assert len(events) % 2 == 0, (entity, events[-3:])
        for i in range(0, len(events), 2):
            (_, e0), (s1, e1) = events[i], events[i + 1]
            assert e0[1] == e1[1] and e0[2] == 0 and e1[2] == 1, (entity, events[i : i + 2])
            if s1 in handled:
                assert handled[s1][0] == e1[1], (entity, s1, handled[s1], e1)
        stored = {s for s, _ in events}
        for seq in handled:
            assert seq in stored, f"{entity}: handled event {seq} is not in the journal"
        foreign = [s for s, _ in events[1::2] if s not in handled]
        # A write stored whose handler never ran: its incarnation was stopped (a shard
        # handed off as hosts join, or failed over) or killed while the write was in
        # flight. Allowed only if a later incarnation recovered it: it is then part of
        # the entity's state, not a foreign write into a newer incarnation's journal.
        unrecovered = [s for s in foreign if s > books.recovered.get(entity, 0)]
        assert not unrecovered, f"{entity}: stored without a handler: {unrecovered}"
        books.foreign += len(foreign)
        tokens = [handled[s][1] for s in sorted(handled)]
        assert tokens == sorted(tokens), f"{entity}: fencing tokens went down: {tokens}"


@contextlib.contextmanager
def three_hosts(url: str, books_dir: str) -> Iterator[tuple[str, list[PersistNode]]]:
    name = f"prs-{uuid.uuid4().hex[:8]}"
    hosts: list[PersistNode] = []
    try:
        for _ in range(3):
            hosts.append(PersistNode(url, name, books_dir))
        yield name, hosts
    finally:
        for host in hosts:
            host.close()


def settle(hosts: list[PersistNode], quiet: float = 3.0, limit: float = 60.0) -> None:
    """Wait until no book grows for ``quiet`` seconds."""
    deadline = time.monotonic() + limit
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        size = sum(os.path.getsize(h.books) for h in hosts if os.path.exists(h.books))
        if size != last:
            last, since = size, time.monotonic()
        elif time.monotonic() - since > quiet:
            return
        gevent.sleep(0.2)


def test_sigkill_of_a_host_loses_no_handled_event_and_fails_over_with_a_greater_token(
    redis_url: str, tmp_path: Path
) -> None:
    with three_hosts(redis_url, str(tmp_path)) as (name, hosts):
        sender, victim = hosts[0], hosts[2]
        n = 3000
        sender.send(cmd="send", n=n, rate=300, entities=ENTITIES, base=0)
        gevent.sleep(4.0)
        victim.signal(signal.SIGKILL)
        assert sender.wait_for("sent", 90)["sent"] == n
        settle(hosts)
        books = collect(redis_url, name, hosts)
        report(f"SIGKILL of one of three hosts: {books.summary()}")
        check_journal(books)
        report(f"SIGKILL: writes stored whose handler never ran (recovered later): {books.foreign}")
        # The victim's entities went on elsewhere, with a greater token.
        moved = 0
        for entity, handled in books.handled.items():
            on_victim = [t for (_, t, host) in handled.values() if host == 2]
            if not on_victim:
                continue
            later = [t for (_, t, host) in handled.values() if host != 2 and t > max(on_victim)]
            assert later, f"{entity}: no write on another host after the crash"
            moved += 1
        assert moved > 0, "the victim hosted no entity: the test proved nothing"
        total = sum(len(h) for h in books.handled.values())
        # Commands sent to the dead host while its shards were failing over are lost
        # (sharding is at-most-once; 113-223 of 3,000 in the runs so far): not a
        # matter of persistence. The load went on through the failover all the same.
        assert total >= n // 2, books.summary()


def test_a_host_paused_past_its_lease_has_its_writes_refused(
    redis_url: str, tmp_path: Path
) -> None:
    with three_hosts(redis_url, str(tmp_path)) as (name, hosts):
        n = 1500
        for i, host in enumerate(hosts):
            # Every host sends, the victim too: when it wakes, its send loop catches up
            # in a burst to the entities its region still believes it hosts.
            host.send(cmd="send", n=n, rate=100, entities=ENTITIES, base=i * 100_000)
        victim = hosts[2]
        gevent.sleep(4.0)
        # The victim's writes take 1.5 s to reach the server: when it is paused, some
        # are always in flight, and they go out when it wakes.
        victim.send(cmd="slow-store", delay=1.5)
        victim.wait_for("slow", 10)
        gevent.sleep(2.0)
        victim.signal(signal.SIGSTOP)
        gevent.sleep(FAST["lease_ttl"] + FAST["down_after"] + 3.0)
        victim.signal(signal.SIGCONT)
        for host in hosts[:2]:
            host.wait_for("sent", 90)
        settle(hosts)
        books = collect(redis_url, name, hosts)
        refused = [f for f in books.failures if f[0] == 2]
        report(
            f"SIGSTOP of one of three hosts past its lease: {books.summary()}, "
            f"on_persist_failure on the paused host: {len(refused)}"
        )
        check_journal(books)
        report(f"SIGSTOP: writes stored whose handler never ran (recovered later): {books.foreign}")
        kinds = {kind for _, _, kind in refused}
        assert kinds <= {"FencedError", "PersistenceConflict"}, kinds
        writes = books.writes
        woke = [w for w in writes if w[3] != "ok"]
        report(f"the paused host's late writes: {len(writes)}, refused {len(woke)}: {writes}")
        assert woke, "no write of the paused host was refused: the test proved nothing"
        assert {w[3] for w in woke} <= {"FencedError", "PersistenceConflict"}, woke
        # A write of the paused host that was stored was stored in order: its token is
        # no lower than any token stored before it for the same id.
        for pid, after, token, outcome in writes:
            if outcome != "ok":
                continue
            entity = pid.partition("|")[2]
            earlier = [t for s, (_, t, _) in books.handled[entity].items() if s <= after]
            assert all(t <= token for t in earlier), (pid, after, token, earlier)

"""Reminders across process faults, with real processes (SPEC section 20): a single
process on SQLite restarted, the host of entities SIGKILLed, every node stopped for
several periods (misfire policies). Bounds are generous (a shared machine); what is
measured is printed (``-s``)."""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("msgspec")

from ._proc import Proc, firings, read_book, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.timeout(180)]

TICK = 0.2
FAST: dict[str, Any] = {
    "heartbeat_interval": 0.2,
    "unreachable_after": 1.0,
    "down_after": 2.0,
    "lease_ttl": 1.5,
    "roles": ["host"],
}
SLACK = 1.5


def report(line: str) -> None:
    """One line in the test log (``-s``) and in ``$GACTORS_FAULT_REPORT`` if set."""
    print("\n[reminders] " + line)  # noqa: T201 - seen with -s
    path = os.environ.get("GACTORS_FAULT_REPORT")
    if path:
        with open(path, "a") as f:
            f.write("[reminders] " + line + "\n")


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    made: list[Proc] = []
    try:
        yield made
    finally:
        for p in made:
            p.close()


def test_sqlite_reminders_survive_a_sigkill_and_restart(tmp_path: Path, procs: list[Proc]) -> None:
    book = tmp_path / "book.jsonl"
    spec = {"book": str(book), "tick": TICK, "sqlite": str(tmp_path / "p.sqlite3")}
    a = Proc(spec)
    procs.append(a)
    now = time.time()
    one_shot_due = now + 3.0
    a.command(cmd="register", name="later", path="/user/rec", due=one_shot_due)
    a.command(cmd="register", name="beat", path="/user/rec", due=now + 0.5, period=1.0)
    wait_until(lambda: len(firings(read_book(book), "/user/rec")) >= 1, 10, "a first beat")
    a.kill()  # the one-shot is still in the future, stored by the killed process only
    time.sleep(3.5)  # past its due time while no process runs
    b = Proc(spec)
    procs.append(b)
    wait_until(
        lambda: [r for r in read_book(book) if r["m"] == "later"], 10, "the one-shot after restart"
    )
    time.sleep(2.5)
    fired = firings(read_book(book), "/user/rec")
    later = [r for r in fired if r["m"] == "later"]
    assert len(later) == 1, fired
    assert later[0]["pid"] == b.pid
    assert later[0]["t"] >= one_shot_due
    assert later[0]["t"] <= b.ready + TICK + SLACK, (later[0]["t"] - b.ready, b.log())
    beats_b = [r for r in fired if r["m"] == "beat" and r["pid"] == b.pid]
    assert len(beats_b) >= 2, fired  # the periodic one goes on in the new process
    report(f"sqlite restart: one-shot fired {later[0]['t'] - b.ready:.2f} s after restart")


def test_the_host_of_entities_sigkilled_their_reminders_go_on_elsewhere(
    redis_url: str, tmp_path: Path, procs: list[Proc]
) -> None:
    book = tmp_path / "book.jsonl"
    name = f"rk{uuid.uuid4().hex[:8]}"
    spec = {
        "book": str(book),
        "tick": TICK,
        "url": redis_url,
        "name": name,
        "cluster": FAST,
        "shards": 12,
    }
    a, b = Proc(spec), Proc(spec)
    procs += [a, b]
    entities = [f"e{i}" for i in range(12)]
    period = 1.0
    due0 = time.time() + 3.0
    for e in entities:
        a.command(cmd="register", name="beat", entity=e, due=due0, period=period, misfire="all")

    def all_fired(n: int) -> bool:
        book_now = read_book(book)
        return all(len(firings(book_now, e)) >= n for e in entities)

    wait_until(lambda: all_fired(2), 30, "every entity fired twice")
    last_host = {e: firings(read_book(book), e)[-1]["pid"] for e in entities}
    on_a = sum(1 for pid in last_host.values() if pid == a.pid)
    victim, survivor = (a, b) if on_a >= len(entities) / 2 else (b, a)
    moved = [e for e, pid in last_host.items() if pid == victim.pid]
    assert moved, last_host
    t_kill = time.time()
    victim.kill()
    time.sleep(12.0)
    t_end = time.time()
    book_now = read_book(book)
    failover = FAST["down_after"] + FAST["lease_ttl"]
    bound = failover + TICK + SLACK
    worst = 0.0
    for e in entities:
        got = firings(book_now, e)
        dues = [due0 + k * period for k in range(math.floor((t_end - due0) / period) + 1)]
        must = [d for d in dues if d <= t_end - bound]
        assert len(got) >= len(must), f"{e}: {len(got)} firings for {len(must)} due times"
        for k, r in enumerate(got[: len(dues)]):
            assert r["t"] >= dues[k] - 0.01, f"{e}: firing {k} {dues[k] - r['t']:.3f} s early"
            worst = max(worst, r["t"] - dues[k])
        if e in moved:
            after = [r for r in got if r["t"] > t_kill]
            assert after and all(r["pid"] == survivor.pid for r in after), got
    assert worst <= bound, f"lateness {worst:.2f} s over failover {failover} + tick + slack"
    report(
        f"host SIGKILL: {len(moved)} of {len(entities)} entities moved; worst lateness "
        f"{worst:.2f} s (failover {failover} s + tick {TICK} s); none lost"
    )


def test_every_node_stopped_for_several_periods_misfire_policies(
    redis_url: str, tmp_path: Path, procs: list[Proc]
) -> None:
    book = tmp_path / "book.jsonl"
    name = f"rm{uuid.uuid4().hex[:8]}"
    spec = {
        "book": str(book),
        "tick": TICK,
        "url": redis_url,
        "name": name,
        "cluster": FAST,
        "shards": 4,
    }
    a = Proc(spec)
    procs.append(a)
    period = 1.0
    due0 = time.time() + 1.5
    for policy in ("once", "all", "skip"):
        a.command(cmd="register", name="r", entity=policy, due=due0, period=period, misfire=policy)
    wait_until(
        lambda: all(len(firings(read_book(book), p)) >= 2 for p in ("once", "all", "skip")),
        20,
        "two firings each",
    )
    a.leave()
    time.sleep(5.5)  # five or six periods without any node
    b = Proc(spec)
    procs.append(b)
    time.sleep(4.0)
    book_now = read_book(book)
    outcome = {}
    for policy in ("once", "all", "skip"):
        got = firings(book_now, policy)
        before = [r for r in got if r["pid"] == a.pid]
        after = [r for r in got if r["pid"] == b.pid]
        assert after, (policy, got, b.log())
        first = after[0]["t"]
        burst = [r for r in after if r["t"] - first < 0.15]
        # Due times between the last one a fired and b's first tick.
        missed = math.floor((first - due0) / period) + 1 - len(before)
        outcome[policy] = (missed, len(burst))
        assert missed >= 4, (policy, missed)
        if policy == "once":
            assert len(burst) == 1, (policy, missed, after)
        elif policy == "all":
            assert missed - 1 <= len(burst) <= missed, (policy, missed, after)
        else:
            # None of the missed times: the first firing is an on-time one (within
            # the tick after a due time), not a catch-up, and alone.
            late = (first - due0) % period
            assert len(burst) == 1 and late <= TICK + 0.5, (policy, late, after)
            assert first - b.ready >= 0, after
    report(f"misfire after {missed} missed periods: (missed, fired at once) {outcome}")

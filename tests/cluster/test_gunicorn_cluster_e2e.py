"""End to end: the cluster shop (examples/cluster-shop) under real ``gunicorn -k gevent -w 3``.

Every worker is a node of one cluster on a real local Redis-protocol server (the
``redis_url`` fixture). A cart per user is a sharded entity, the order-number allocator a
cluster singleton; both append start/stop lines (pid, entity id, fencing token,
monotonic and wall time) and every allocation to a lifecycle log.

Concurrent HTTP clients (greenlets of this monkey-patched process, urllib, loopback only,
bounded in number and time) add items to carts and check out. Mid-load, either one worker
is killed with SIGKILL (gunicorn starts a new one, which joins as a new node) or gunicorn
is sent SIGHUP (every worker is replaced gracefully). Then, from the responses and the
lifecycle log:

* no cart (and no allocator) was ever live in two workers at the same time: its
  intervals, per entity id, never overlap across pids (a killed worker's open intervals
  end when it was killed);
* every order number was allocated exactly once: the allocator's SQLite orders table
  holds 1..last, each once, every answered order with its number; each number has its
  alloc line, but the one a killed allocator had committed and not yet logged;
* the fencing token of each cart (and of the allocator) only grew, strictly when it moved;
* every request succeeds in the end; attempts fail only inside the failover window (sent
  at most IN_FLIGHT before the kill/HUP, or before the cluster settled after it): those
  are retried (bounded), counted and reported; requests started after the window
  succeed at the first attempt.

The counts are logged at INFO (``pytest -o log_cli=true --log-cli-level=INFO``).
"""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _gunicorn import gunicorn_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.timeout(115)]

pytest.importorskip("redis")
pytest.importorskip("msgspec")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster-shop"
WORKERS = 3
USERS = 24
CLIENTS = 8
# Fast cluster timings, so a failover fits the test: a killed node is downed after
# DOWN_AFTER, its leases expire at most LEASE_TTL after its last renewal.
# (A lease_ttl well above a hub stall of a loaded worker: a lease that cannot be renewed
# in time is given up by design, which would show as failures outside the window.)
HEARTBEAT, UNREACHABLE_AFTER, DOWN_AFTER, LEASE_TTL = 0.2, 1.0, 2.0, 6.0
SLACK = 5.0  # on top of the failover bound: a new worker boots and joins, shards move to it
RETRY_FOR = 25.0  # a client retries a failed request this long at most
HTTP_TIMEOUT = 12.0
ASK_TIMEOUT = 6.0  # the app's asks (SHOP_ASK_TIMEOUT)
# An attempt sent this long before the kill/HUP may still be in flight then, and fail
# because of it (a reset connection, an ask that never gets its reply).
IN_FLIGHT = ASK_TIMEOUT + 1.0

log = logging.getLogger(__name__)


# -- gunicorn ---------------------------------------------------------------------------------


def _matches(path: Path, pattern: str) -> list[re.Match[str]]:
    text = path.read_text(errors="replace") if path.exists() else ""
    return list(re.finditer(pattern, text))


def _wait_for(path: Path, pattern: str, timeout: float, count: int = 1) -> list[re.Match[str]]:
    """Poll a log file written by other processes until ``pattern`` matched ``count`` times."""
    deadline = time.monotonic() + timeout
    while True:
        found = _matches(path, pattern)
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            text = path.read_text(errors="replace") if path.exists() else "(no log)"
            raise AssertionError(f"{pattern!r} not seen {count} time(s) in {path}:\n{text}")
        time.sleep(0.1)  # other processes write it: nothing to wait on but the file


STARTED = r"gactors: actor system 'shop' started in worker (\d+)"
EXITED = r"Worker exiting \(pid: (\d+)\)"


class Shop:
    """gunicorn serving the cluster shop, in its own session, killed on failure."""

    def __init__(self, tmp_path: Path, redis_url: str, key_prefix: str) -> None:
        gunicorn_config = gunicorn_or_skip()
        self.data = tmp_path / "data"
        self.data.mkdir()
        self.log_path = tmp_path / "gunicorn.log"
        self.lifecycle = self.data / "lifecycle.log"
        cluster = {
            "heartbeat_interval": HEARTBEAT,
            "unreachable_after": UNREACHABLE_AFTER,
            "down_after": DOWN_AFTER,
            "lease_ttl": LEASE_TTL,
            "key_prefix": key_prefix,
        }
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "SHOP_REDIS_URL": redis_url,
            "SHOP_DATA_DIR": str(self.data),
            "SHOP_CLUSTER": json.dumps(cluster),
            "SHOP_ASK_TIMEOUT": str(ASK_TIMEOUT),
        }
        env.pop("GACTORS_CONFIG", None)
        cmd = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"]
        cmd += ["-k", "gevent", "-w", str(WORKERS), "-b", "127.0.0.1:0"]
        if "control_socket" in gunicorn_config.Config().settings:
            cmd.append("--no-control-socket")  # gunicorn >= 27: no shared socket file
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [*cmd, "app:app"],
                cwd=EXAMPLE,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        (m,) = _wait_for(self.log_path, r"Listening at: http://127\.0\.0\.1:(\d+)", 30)
        self.port = int(m.group(1))

    def started_workers(self) -> list[int]:
        return [int(m.group(1)) for m in _matches(self.log_path, STARTED)]

    def exited_workers(self) -> set[int]:
        return {int(m.group(1)) for m in _matches(self.log_path, EXITED)}

    def wait_until_up(self, expected_started: int, timeout: float = 40.0) -> None:
        """``expected_started`` systems started in total, and a worker sees WORKERS members up."""
        _wait_for(self.log_path, STARTED, timeout, expected_started)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok, _status, data = request(self.port, "GET", "/health")
            if ok and data.get("up") == WORKERS:
                return
            time.sleep(0.2)
        raise AssertionError(f"the cluster never had {WORKERS} members up:\n{self.log_text()}")

    def warm_up(self, timeout: float = 40.0) -> None:
        """Every user's cart answers once (read-only), retried until it does: the load
        that follows measures a settled cluster. While the workers' views of the
        membership still converge after the start, shards move between them and a
        first request may wait out its ask (CI saw one in 1 run of 3, seconds before
        the HUP); that is the start of a cluster, not what these tests look at."""
        deadline = time.monotonic() + timeout
        pending = [f"user-{u}" for u in range(USERS)]
        while pending:
            assert time.monotonic() < deadline, f"carts never answered: {pending}"
            pending = [u for u in pending if not request(self.port, "GET", f"/cart/{u}")[0]]
            if pending:
                time.sleep(0.2)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM: every worker leaves the cluster gracefully (carts write stop lines)."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=45) == 0, self.log_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # our own session: master and workers
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)


# -- the clients ------------------------------------------------------------------------------


def request(port: int, method: str, path: str) -> tuple[bool, int, dict[str, Any]]:
    """One HTTP request on loopback: (succeeded, status, JSON body or an error text)."""
    body = b"" if method == "POST" else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as response:
            return True, response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")
        return False, e.code, {"error": body[:300]}
    except (OSError, ValueError, http.client.HTTPException) as e:  # reset, cut short, timeout
        return False, 0, {"error": f"{type(e).__name__}: {e}"}


@dataclass
class Outcome:
    """A logical request: its attempts until it succeeded (or the retry time ran out)."""

    method: str
    path: str
    user: str
    started: float  # monotonic time of the first attempt
    attempts: int = 0
    ok: bool = False
    data: dict[str, Any] = field(default_factory=dict)
    failures: list[tuple[float, int, str]] = field(default_factory=list)  # (sent, status, why)


def perform(port: int, method: str, path: str, user: str) -> Outcome:
    outcome = Outcome(method, path, user, time.monotonic())
    while True:
        outcome.attempts += 1
        attempt = time.monotonic()
        ok, status, data = request(port, method, path)
        if ok:
            outcome.ok, outcome.data = True, data
            return outcome
        # When the attempt was sent: an ask that timed out failed because of the moment it
        # was sent, not the moment its timeout expired.
        outcome.failures.append((attempt, status, str(data.get("error"))[:200]))
        if time.monotonic() - outcome.started > RETRY_FOR:
            return outcome
        time.sleep(0.25)  # retrying during a failover: give the cluster a moment


class Load:
    """CLIENTS clients in the background until :meth:`finish`. Each owns USERS / CLIENTS
    users (so a user's requests come one at a time, as from one browser), adds items
    and checks out every fifth request."""

    def __init__(self, port: int, tag: str) -> None:
        self.port, self.tag = port, tag
        self.stop = threading.Event()
        self.outcomes: list[Outcome] = []
        self.lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self.client, args=(n,)) for n in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def client(self, n: int) -> None:
        try:
            self.requests(n)
        except BaseException as e:  # a bug of the test: fail it in finish()
            self.errors.append(e)
            raise

    def requests(self, n: int) -> None:
        users = [f"user-{u}" for u in range(n, USERS, CLIENTS)]
        i = 0
        while not self.stop.is_set():
            user = users[i % len(users)]
            if i % 5 == 4:
                result = perform(self.port, "POST", f"/cart/{user}/checkout", user)
            else:
                result = perform(self.port, "POST", f"/cart/{user}/add/{self.tag}-{i}", user)
            with self.lock:
                self.outcomes.append(result)
            i += 1

    def finish(self) -> list[Outcome]:
        self.stop.set()
        for t in self.threads:
            t.join(RETRY_FOR + 2 * HTTP_TIMEOUT)
            assert not t.is_alive(), "a client did not finish"
        assert not self.errors, f"a client failed: {self.errors!r}"
        return list(self.outcomes)


# -- the lifecycle log ------------------------------------------------------------------------


@dataclass
class Interval:
    kind: str
    id: str
    pid: int
    token: int
    start: float
    end: float = math.inf


def parse_lifecycle(path: Path) -> tuple[list[Interval], list[dict[str, str]]]:
    """The live intervals of carts and allocators, and the allocation lines."""
    intervals: list[Interval] = []
    open_: dict[tuple[str, str, int], Interval] = {}
    allocations: list[dict[str, str]] = []
    text = path.read_text()
    # Workers may be appending: a last line without its newline is left for later.
    for line in text[: text.rfind("\n") + 1].splitlines():
        event, *pairs = line.split()
        f = dict(p.split("=", 1) for p in pairs)
        if event == "alloc":
            allocations.append(f)
            continue
        key = (f["kind"], f["id"], int(f["pid"]))
        if event == "start":
            assert key not in open_, f"started twice without a stop: {line}"
            assert f["token"].isdigit(), f"no fencing token: {line}"
            interval = Interval(
                f["kind"], f["id"], int(f["pid"]), int(f["token"]), float(f["mono"])
            )
            open_[key] = interval
            intervals.append(interval)
        elif event == "stop":
            interval = open_.pop(key)
            assert int(f["token"]) == interval.token, line
            interval.end = float(f["mono"])
        else:
            raise AssertionError(f"unknown lifecycle line: {line}")
    return intervals, allocations


@dataclass
class Report:
    requests: int = 0
    attempts: int = 0
    failed_attempts: int = 0
    failed_in_window: int = 0
    carts: int = 0
    items_kept: int = 0  # confirmed items checked in the carts at the final sweep
    cart_incarnations: int = 0
    cart_moves: int = 0
    allocator_incarnations: int = 0
    orders: int = 0
    unlogged_orders: int = 0  # allocated by a killed allocator that had not logged it yet
    max_order: int = 0
    max_token: int = 0
    failure_kinds: dict[str, int] = field(default_factory=dict)


def check_lifecycle(
    shop: Shop, killed: dict[int, float], outcomes: list[Outcome], report: Report
) -> None:
    lifecycle, orders_db = shop.lifecycle, shop.data / "orders.sqlite"
    intervals, allocations = parse_lifecycle(lifecycle)
    for interval in intervals:
        if interval.pid in killed:
            assert interval.start < killed[interval.pid], interval
            if interval.end == math.inf:
                interval.end = killed[interval.pid]  # it died with its worker
        # Everything else was stopped: by a hand-over or by the final graceful shutdown.
        assert interval.end != math.inf, f"never stopped, its worker was not killed: {interval}"

    by_entity: dict[tuple[str, str], list[Interval]] = defaultdict(list)
    for interval in intervals:
        by_entity[(interval.kind, interval.id)].append(interval)
    for (kind, entity), runs in by_entity.items():
        runs.sort(key=lambda r: r.start)
        for i, later in enumerate(runs):
            for earlier in runs[:i]:
                if earlier.pid != later.pid:
                    # Never live in two workers at once.
                    assert earlier.end <= later.start, (
                        f"{kind} {entity} was live in workers {earlier.pid} and {later.pid} "
                        f"at once: {earlier} / {later}"
                    )
            if i:
                previous = runs[i - 1]
                # The fencing token only grows; a move to another worker means a new lease.
                if previous.pid != later.pid:
                    assert later.token > previous.token, (kind, entity, previous, later)
                else:
                    assert later.token >= previous.token, (kind, entity, previous, later)
        report.max_token = max(report.max_token, *(r.token for r in runs))
    carts = [r for r in intervals if r.kind == "cart"]
    report.carts = len({r.id for r in carts})
    report.cart_incarnations = len(carts)
    report.cart_moves = sum(
        1
        for runs in by_entity.values()
        for a, b in itertools.pairwise(runs)
        if a.kind == "cart" and a.pid != b.pid
    )
    report.allocator_incarnations = sum(1 for r in intervals if r.kind == "allocator")

    # Every order number allocated exactly once, by a live allocator, with its token.
    numbers = Counter(int(a["number"]) for a in allocations)
    twice = [n for n, c in numbers.items() if c > 1]
    assert not twice, f"order numbers allocated more than once: {twice}"
    allocators = [r for r in intervals if r.kind == "allocator"]
    for a in allocations:
        pid, token, at = int(a["pid"]), int(a["token"]), float(a["mono"])
        assert any(
            r.pid == pid and r.token == token and r.start <= at <= r.end for r in allocators
        ), a

    # The record of the orders is the allocator's SQLite table: the checkout view answers
    # the number it reads there, and the alloc line is written after the commit. A worker
    # killed between the two took that one line with it: its order is in the table
    # only, and its number is the next after the last one logged before the kill.
    orders, last = read_orders(orders_db)
    in_table = sorted(number for number, _user in orders.values())
    assert in_table == list(range(1, last + 1)), (
        f"the orders table does not hold each number 1..{last} once: {in_table}"
    )
    user_of = {number: user for number, user in orders.values()}
    for a in allocations:
        assert user_of.get(int(a["number"])) == a["user"], ("logged, not so in the table", a)
    cut_short = set()  # per allocator killed while live: the number it may not have logged
    for r in allocators:
        if r.pid in killed and r.end == killed[r.pid]:
            logged_before = [int(a["number"]) for a in allocations if float(a["mono"]) <= r.end]
            cut_short.add(max(logged_before, default=0) + 1)
    unlogged = set(in_table) - set(numbers)
    assert unlogged <= cut_short, (
        f"order numbers in the table without an alloc line: {sorted(unlogged)} (only an "
        f"order a killed allocator had just committed may lack one: {sorted(cut_short)})"
    )
    answered = [o.data for o in outcomes if o.ok and "order" in o.data]
    assert len({d["order"] for d in answered}) == len(answered), "an order number answered twice"
    for d in answered:
        assert orders.get(d["order_id"]) == (d["order"], d["user"]), ("not so in the table", d)
    report.orders = last
    report.unlogged_orders = len(unlogged)
    report.max_order = last


def read_orders(path: Path) -> tuple[dict[str, tuple[int, str]], int]:
    """The allocator's orders table (order id -> (number, user)) and its counter's last
    number, read after the workers stopped."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT order_id, number, user FROM orders").fetchall()
        (last,) = db.execute("SELECT last FROM counter WHERE id = 1").fetchone()
    finally:
        db.close()
    return {order_id: (int(number), user) for order_id, number, user in rows}, int(last)


def check_outcomes(outcomes: list[Outcome], window: tuple[float, float], report: Report) -> None:
    """Every request succeeded in the end; those started after the window at once."""
    lo, hi = window
    report.requests += len(outcomes)
    report.attempts += sum(o.attempts for o in outcomes)
    report.failed_attempts += sum(len(o.failures) for o in outcomes)
    report.failed_in_window += sum(1 for o in outcomes for t, _, _ in o.failures if lo <= t <= hi)
    kinds = Counter(
        re.sub(r"gactors://\S+|\d+(\.\d+)?", "#", why)[:80]
        for o in outcomes
        for _, _, why in o.failures
    )
    report.failure_kinds = dict(kinds)
    for o in outcomes:
        for sent, status, why in o.failures:
            log.info(
                "failed attempt %+.2f s into the window: %s %s -> %s %s",
                sent - lo,
                o.method,
                o.path,
                status,
                why,
            )
    lost = [o for o in outcomes if not o.ok]
    assert not lost, f"{len(lost)} request(s) failed for {RETRY_FOR} s: {lost[:3]}"
    late = [o for o in outcomes if o.started > hi and o.failures]
    assert not late, f"{len(late)} request(s) after the failover window failed: {late[:3]}"
    outside = [f for o in outcomes for f in o.failures if not lo <= f[0] <= hi]
    assert not outside, f"failures outside the failover window: {outside[:5]}"
    for o in outcomes:
        if "/add/" in o.path:
            assert o.data["user"] == o.user and o.path.rsplit("/", 1)[1] in o.data["items"], o
            assert isinstance(o.data["token"], int) and o.data["token"] > 0, o
        else:
            assert isinstance(o.data["order"], int) and o.data["user"] == o.user, o


def final_sweep(shop: Shop, outcomes: list[Outcome]) -> set[int]:
    """After everything settled, every user's cart answers at the first attempt; returns
    the pids of the workers the carts live in."""
    pids = set()
    for u in range(USERS):
        ok, status, data = request(shop.port, "GET", f"/cart/user-{u}")
        assert ok and data["user"] == f"user-{u}", (status, data)
        outcomes.append(Outcome("GET", f"/cart/user-{u}", f"user-{u}", 0.0, 1, True, data))
        pids.add(data["pid"])
    return pids


def check_no_item_lost(outcomes: list[Outcome]) -> int:
    """Every item whose add was confirmed is in the cart until the user checks out: each
    checkout's reply lists every item confirmed since the one before, and the final
    sweep every item confirmed since the last (carts are persistent: a crash or a reload
    moves them with their items). A checkout that needed retries is not checked (an
    attempt that failed may still have emptied the cart). Returns how many items were
    checked."""
    final = {o.user: o.data["items"] for o in outcomes if o.method == "GET"}
    expected: dict[str, list[str]] = {}
    checked = 0
    lost: list[tuple[str, str, list[str]]] = []
    # A user's requests come one at a time: their start times order them.
    for o in sorted((o for o in outcomes if o.method == "POST"), key=lambda o: o.started):
        items = expected.setdefault(o.user, [])
        if o.path.endswith("/checkout"):
            if not o.failures:
                missing = [item for item in items if item not in o.data["items"]]
                if missing:
                    lost.append((o.user, "checkout", missing))
                checked += len(items)
            expected[o.user] = []
        else:
            items.append(o.path.rsplit("/", 1)[1])
    for user, items in expected.items():
        missing = [item for item in items if item not in final[user]]
        if missing:
            lost.append((user, "final", missing))
        checked += len(items)
    assert not lost, f"confirmed items missing from carts: {lost}"
    return checked


# -- the tests --------------------------------------------------------------------------------


def _holder_of_the_allocator(lifecycle: Path) -> int | None:
    intervals, _ = parse_lifecycle(lifecycle)
    live = [r for r in intervals if r.kind == "allocator" and r.end == math.inf]
    return live[-1].pid if live else None


def test_sigkill_one_worker_under_load(
    tmp_path: Path, redis_url: str, redis_key_prefix: str
) -> None:
    shop = Shop(tmp_path, redis_url, redis_key_prefix)
    report = Report()
    try:
        shop.wait_until_up(WORKERS)
        shop.warm_up()
        first = shop.started_workers()
        load = Load(shop.port, "k")
        # Under way: carts live on every worker, orders allocated, and the attempts of the
        # first seconds (before IN_FLIGHT of the kill) must all succeed.
        time.sleep(IN_FLIGHT + 2.0)
        # Kill the allocator's worker (the singleton moves too), else any worker.
        victim = _holder_of_the_allocator(shop.lifecycle) or first[0]
        assert victim in first, (victim, first)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        # gunicorn replaces it; the new worker joins as a new node.
        shop.wait_until_up(WORKERS + 1, timeout=30)
        window_end = killed_at + DOWN_AFTER + LEASE_TTL + SLACK
        time.sleep(max(0.0, window_end - time.monotonic()) + 5.0)  # then load after the window
        outcomes = load.finish()
        check_outcomes(outcomes, (killed_at - IN_FLIGHT, window_end), report)
        homes = final_sweep(shop, outcomes)
        report.items_kept = check_no_item_lost(outcomes)
        new = set(shop.started_workers()) - set(first)
        assert len(new) == 1, shop.log_text()
        # The carts live on the survivors and the new worker (shards moved to it too).
        assert homes <= (set(first) - {victim}) | new and homes & new, (homes, first, new)
        shop.stop()
        check_lifecycle(shop, {victim: killed_at}, outcomes, report)
        intervals, _ = parse_lifecycle(shop.lifecycle)
        moved = [r for r in intervals if r.kind == "allocator" and r.start > killed_at]
        assert moved and all(r.pid != victim for r in moved), "the allocator did not fail over"
        # The carts live in the killed worker when it died (never stopped) started again.
        died = {
            r.id for r in intervals if r.kind == "cart" and r.pid == victim and r.end == math.inf
        }
        restarted = {r.id for r in intervals if r.kind == "cart" and r.start > killed_at}
        assert died and died <= restarted, (died, restarted)
        log.info("SIGKILL of worker %d: %s", victim, report)
    finally:
        shop.kill()


def test_hup_reload_of_all_workers_under_load(
    tmp_path: Path, redis_url: str, redis_key_prefix: str
) -> None:
    shop = Shop(tmp_path, redis_url, redis_key_prefix)
    report = Report()
    try:
        shop.wait_until_up(WORKERS)
        shop.warm_up()
        first = shop.started_workers()
        load = Load(shop.port, "h")
        time.sleep(IN_FLIGHT + 2.0)
        shop.proc.send_signal(signal.SIGHUP)
        hup_at = time.monotonic()
        # Three new workers join, the three old ones hand over and leave.
        _wait_for(shop.log_path, STARTED, 40, 2 * WORKERS)
        deadline = time.monotonic() + 40
        while not set(first) <= shop.exited_workers():
            assert time.monotonic() < deadline, shop.log_text()
            time.sleep(0.2)
        window_end = time.monotonic() + SLACK
        shop.wait_until_up(2 * WORKERS)
        time.sleep(max(0.0, window_end - time.monotonic()) + 5.0)
        outcomes = load.finish()
        check_outcomes(outcomes, (hup_at - IN_FLIGHT, window_end), report)
        homes = final_sweep(shop, outcomes)
        report.items_kept = check_no_item_lost(outcomes)
        # Every cart moved to the new workers; the old ones stopped theirs (stop lines,
        # checked below: an old worker's cart never stopped would fail check_lifecycle).
        assert homes and not homes & set(first), (homes, first)
        shop.stop()
        check_lifecycle(shop, {}, outcomes, report)
        intervals, _ = parse_lifecycle(shop.lifecycle)
        assert {r.pid for r in intervals if r.kind == "allocator"} - set(first)
        log.info("HUP reload of workers %s: %s", first, report)
    finally:
        shop.kill()

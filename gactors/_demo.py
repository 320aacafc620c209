"""The tour behind ``python -m gactors demo``.

A small shop runs as a supervised actor tree. While its workers process a steady
stream of jobs, the tour injects one failure per directive (resume, restart, stop,
escalate), takes the database away from a backoff-supervised connection, and finally
shuts the system down. After each step it prints the live tree, as
:meth:`ActorSystem.tree <gactors.ActorSystem.tree>` shows it (state, mailbox depth and
restart count per actor), marking what changed, and the log events the supervisors
published. It ends with a summary of what the viewer saw, checked against what really
happened: the exit status is 0 only if every step went as narrated.

The tree::

    /user/shop                  restarts a child that escalates to it
          ├── orders            TimeoutError: RESUME, ValueError: RESTART, PermissionError: STOP
          │     ├── pricer
          │     ├── packer
          │     └── mailer
          ├── accounts          LedgerCorrupted: ESCALATE (not its call)
          │     ├── ledger
          │     └── auditor
          └── db                a BackoffSupervisor (on_stop)
                └── connection  fails while the database is down
"""

from __future__ import annotations

import itertools
import logging
import re
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import gevent

from gactors import (
    Actor,
    ActorInitializationException,
    ActorRef,
    ActorSystem,
    DeadLetter,
    Directive,
    Identify,
    LogEvent,
    OneForOneStrategy,
    Props,
    Terminated,
)
from gactors.backoff import BackoffOpts, BackoffSupervisor

__all__ = ["run"]

Narrate = Callable[[str], None]

SLOWDOWN = 1.8  # the packer's jobs take this much longer than the others'


# -- messages ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    worker: str
    n: int


@dataclass(frozen=True)
class Fail:
    """Makes the worker that receives it raise ``error`` (the injected failure)."""

    error: Exception


@dataclass(frozen=True)
class Query:
    n: int


@dataclass(frozen=True)
class Connected:
    attempt: int


@dataclass(frozen=True)
class AwaitConnected:
    attempt: int  # reply once a connection attempt numbered at least this succeeded


@dataclass(frozen=True)
class AwaitTerminated:
    name: str


class LedgerCorrupted(Exception):
    """The books do not add up: nothing the accounts department can fix by itself."""


# -- the outside world -------------------------------------------------------------------------
class Database:
    """A stand-in for a database that the tour takes down for a while."""

    def __init__(self) -> None:
        self.down = False
        self.down_since = self.lost_at = 0.0
        self.attempts: list[tuple[float, bool]] = []  # (monotonic time, connected?)

    def go_down(self) -> None:
        self.down = True
        self.down_since = time.monotonic()
        self.lost_at = 0.0  # when a query first failed: the connection was lost

    def come_back(self) -> None:
        self.down = False

    def connect(self) -> int:
        now = time.monotonic()
        ok = not self.down
        self.attempts.append((now, ok))
        if not ok:
            raise ConnectionRefusedError("refused")
        return len(self.attempts)

    def query(self) -> None:
        if self.down:
            self.lost_at = self.lost_at or time.monotonic()
            raise ConnectionResetError("the database went down")


# -- the actors --------------------------------------------------------------------------------
class Worker(Actor):
    """Does jobs (a little monkey-patched I/O each) and counts them."""

    def __init__(self, stopped: list[str], job_time: float) -> None:
        self.stopped = stopped
        self.job_time = job_time
        self.done = 0

    def receive(self, message: Any) -> None:
        if isinstance(message, Job):
            gevent.sleep(self.job_time)  # I/O: every other actor runs meanwhile
            self.done += 1
        elif isinstance(message, Fail):
            raise message.error
        elif message == "jobs":
            self.sender.tell(self.done)
        else:
            self.unhandled(message)

    def post_stop(self) -> None:
        self.stopped.append(self.ref.name)


def _orders_decider(exc: BaseException) -> Directive | None:
    if isinstance(exc, TimeoutError):
        return Directive.RESUME  # transient: keep the state, drop the message
    if isinstance(exc, ValueError):
        return Directive.RESTART  # a bug: start again from a clean state
    if isinstance(exc, PermissionError):
        return Directive.STOP  # hopeless: retrying cannot help
    return None  # anything else: escalate


class Department(Actor):
    """Supervises named workers and routes jobs to them; watches them (DeathWatch)."""

    def __init__(self, workers: tuple[str, ...], stopped: list[str], job_time: float) -> None:
        self.stopped = stopped
        self.refused = 0
        self.terminated: list[str] = []
        self.waiting: dict[str, list[ActorRef]] = {}
        for name in workers:
            # The packer is slow: it cannot keep up, and its mailbox grows.
            t = job_time * SLOWDOWN if name == "packer" else job_time
            self.context.watch(self.context.actor_of(Props(Worker, stopped, t), name))

    def receive(self, message: Any) -> None:
        if isinstance(message, Job):
            child = self.context.child(message.worker)
            if child is None:
                self.refused += 1  # its worker was stopped for good
            else:
                child.forward(message)
        elif isinstance(message, Terminated):
            name = message.actor.name
            self.terminated.append(name)
            for asker in self.waiting.pop(name, []):
                asker.tell(name)
        elif isinstance(message, AwaitTerminated):
            if message.name in self.terminated:
                self.sender.tell(message.name)
            else:
                self.waiting.setdefault(message.name, []).append(self.sender)
        elif message == "refused":
            self.sender.tell(self.refused)
        else:
            self.unhandled(message)

    def post_stop(self) -> None:
        self.stopped.append(self.ref.name)


class Orders(Department):
    supervisor_strategy = OneForOneStrategy(_orders_decider, max_retries=3, within=60.0)


def _accounts_decider(exc: BaseException) -> Directive:
    if isinstance(exc, LedgerCorrupted):
        return Directive.ESCALATE  # not ours to judge: fail, and let the shop decide
    return Directive.RESTART


class Accounts(Department):
    supervisor_strategy = OneForOneStrategy(_accounts_decider)


class Connection(Actor):
    """Connects in ``pre_start``; a failed connect or query stops it (see the options)."""

    def __init__(self, db: Database, stopped: list[str], narrate: Narrate) -> None:
        self.db = db
        self.stopped = stopped
        self.narrate = narrate

    def pre_start(self) -> None:
        db = self.db
        try:
            attempt = db.connect()
        except ConnectionRefusedError as e:
            t = time.monotonic() - db.down_since
            self.narrate(
                f"   db: connection attempt {len(db.attempts)}, {t:.2f} s into the outage: {e}"
            )
            raise
        if attempt > 1:
            t = time.monotonic() - db.down_since
            self.narrate(
                f"   db: connection attempt {attempt}, {t:.2f} s after the outage began: connected"
            )
        # Messages to our parent (the backoff supervisor) go on to *its* parent.
        self.context.parent.tell(Connected(attempt))

    def receive(self, message: Any) -> None:
        if isinstance(message, Query):
            self.db.query()
        else:
            self.unhandled(message)

    def post_stop(self) -> None:
        self.stopped.append(self.ref.name)


class Shop(Actor):
    """The top of the tree. Its default-like strategy restarts a child that fails,
    including one that escalated a failure of its own child to it."""

    supervisor_strategy = OneForOneStrategy(max_retries=3, within=60.0)

    def __init__(self, db_opts: BackoffOpts, stopped: list[str], job_time: float) -> None:
        self.stopped = stopped
        self.connected = 0
        self.waiting: list[tuple[int, ActorRef]] = []
        context = self.context
        context.actor_of(Props(Orders, ("pricer", "packer", "mailer"), stopped, job_time), "orders")
        context.actor_of(Props(Accounts, ("ledger", "auditor"), stopped, job_time), "accounts")
        context.actor_of(BackoffSupervisor.props(db_opts), "db")

    def receive(self, message: Any) -> None:
        if isinstance(message, Connected):
            self.connected = message.attempt
            still_waiting = []
            for attempt, asker in self.waiting:
                if self.connected >= attempt:
                    asker.tell(self.connected)
                else:
                    still_waiting.append((attempt, asker))
            self.waiting = still_waiting
        elif isinstance(message, AwaitConnected):
            if self.connected >= message.attempt:
                self.sender.tell(self.connected)
            else:
                self.waiting.append((message.attempt, self.sender))
        else:
            self.unhandled(message)

    def post_stop(self) -> None:
        self.stopped.append(self.ref.name)


# -- the live tree ----------------------------------------------------------------------------
_LINE = re.compile(
    r"^(?P<indent> *)(?P<name>\S+)  \[(?P<state>\w+)\] mailbox=(?P<m>\d+) restarts=(?P<r>\d+)"
)


class Row(NamedTuple):
    """One actor in a snapshot of the tree."""

    state: str
    restarts: int
    ref: ActorRef | None
    mailbox: int


class TreeView:
    """Prints ``system.tree()`` with what changed since the previous snapshot marked:
    ``*`` changed state or restart count, ``+`` a new actor (or a new incarnation
    under the same name), ``-`` an actor that is gone."""

    def __init__(self, system: ActorSystem, out: Narrate) -> None:
        self.system = system
        self.out = out
        self.prev: dict[str, Row] = {}

    def show(self) -> dict[str, Row]:
        system = self.system
        now: dict[str, Row] = {}
        rows: list[str] = []
        stack: list[str] = []
        for line in system.tree().splitlines():
            m = _LINE.match(line)
            if m is None:  # pragma: no cover - the format of tree() is fixed
                rows.append(f"   {line}")
                continue
            depth = len(m["indent"]) // 2
            del stack[depth:]
            stack.append(m["name"])
            path = "/" + "/".join(stack[1:])
            ref = system.lookup(path) if depth else None
            state, restarts = m["state"], int(m["r"])
            now[path] = Row(state, restarts, ref, int(m["m"]))
            before = self.prev.get(path)
            note = ""
            if not self.prev:
                mark = " "
            elif before is None or (ref is not None and before[2] != ref):
                mark, note = "+", "new" if before is None else "new incarnation, same name"
            elif before[:2] != (state, restarts):
                mark = "*"
                changes = []
                if before[0] != state:
                    changes.append(f"{before[0]} -> {state}")
                if before[1] != restarts:
                    changes.append(f"restarts {before[1]} -> {restarts}")
                note = ", ".join(changes)
            else:
                mark = " "
            rows.append(f" {mark} {line}" + (f"    <- {note}" if note else ""))
        for path in self.prev:
            if path not in now:
                rows.append(f" - {'  ' * (path.count('/'))}{path.rsplit('/', 1)[-1]}    <- gone")
        self.out("\n".join(rows))
        self.prev = now
        return now


# -- the tour ----------------------------------------------------------------------------------
@dataclass
class _Facts:
    """What happened, for the summary and its checks."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def check(self, ok: bool, problem: str) -> None:
        if not ok:
            self.problems.append(problem)


def run(fast: bool = False) -> int:
    """Run the tour; returns the process exit status (0: everything went as narrated).

    ``fast`` shortens every pause (for CI): a few seconds instead of about fifteen.
    """
    pace = 0.08 if fast else 1.0

    def say(text: str = "") -> None:
        print(text, flush=True)

    def pause(seconds: float) -> None:
        gevent.sleep(seconds * pace)

    gactors_logger = logging.getLogger("gactors")
    level = gactors_logger.level
    # The supervisors log every failure with a traceback; the tour shows the same
    # events from the event stream, one line each, instead.
    gactors_logger.setLevel(logging.CRITICAL)
    try:
        return _Tour(pace, say, pause).run()
    finally:
        gactors_logger.setLevel(level)


class _Tour:
    """The tour, one method per step. The steps share the system, the tree view, the
    refs of the tree's inner actors and what was seen so far (``facts``)."""

    # set by start(), once the system exists
    system: ActorSystem
    view: TreeView
    shop: ActorRef
    orders: ActorRef
    accounts: ActorRef
    db_sup: ActorRef
    dead_before: int  # dead letters before the shutdown (set by announce_shutdown)

    def __init__(self, pace: float, say: Narrate, pause: Callable[[float], None]) -> None:
        self.say = say
        self.pause = pause
        self.facts = _Facts()
        self.stopped: list[str] = []  # post_stop, in order (the actors append to it)
        self.db = Database()
        self.job_time = 0.02
        self.min_backoff = 0.2 * pace
        self.dead_letters: list[DeadLetter] = []

    # -- the whole tour ---------------------------------------------------------------------
    def run(self) -> int:
        self.introduce()
        with ActorSystem("demo") as system:
            self.start(system)
            feeder = gevent.spawn(self.feed)
            try:
                self.at_work()
                self.resume()
                self.restart()
                self.stop()
                self.escalate()
                self.backoff()
            finally:
                feeder.kill()
            self.announce_shutdown()
        self.check_shutdown(system)
        return self.summary()

    def introduce(self) -> None:
        say = self.say
        say("gactors demo: a supervised actor tree at work while failures are injected.")
        say("After each step the live tree is printed as system.tree() shows it (state, mailbox")
        say("depth, restart count), with what changed marked: * changed, + new, - gone.")
        say("'log:' lines are the failure reports supervisors publish on the event stream.")

    def start(self, system: ActorSystem) -> None:
        """Build the tree and wait until the database is connected."""
        min_backoff = self.min_backoff
        db_opts = (
            BackoffOpts.on_stop(
                Props(Connection, self.db, self.stopped, self.say),
                "connection",
                min_backoff=min_backoff,
                max_backoff=10 * min_backoff,
                random_factor=0.2,
            )
            # A failed connect or query stops the connection; on_stop then backs off.
            .with_default_stopping_strategy()
        )
        self.system = system
        system.event_stream.subscribe(self.show_log, LogEvent)
        system.event_stream.subscribe(self.dead_letters.append, DeadLetter)
        self.shop = system.actor_of(Props(Shop, db_opts, self.stopped, self.job_time), "shop")
        self.view = TreeView(system, self.say)
        self.shop.ask(AwaitConnected(1), timeout=5.0)  # the tree is built, the db connected
        self.orders, self.accounts = self.ref("orders"), self.ref("accounts")
        self.db_sup = self.ref("db")

    # -- helpers ------------------------------------------------------------------------------
    def show_log(self, e: LogEvent) -> None:
        if e.level >= logging.WARNING:
            where = e.source.split("/user/", 1)[-1]
            self.say(f"   log: {e.level_name:<7} {where}: {_short(e)}")

    def step(self, number: int, title: str, *lines: str) -> None:
        if number:
            self.pause(1.0)  # time to read the previous step
        self.say("")
        self.say(f"== {number}/6  {title} " + "=" * max(0, 68 - len(title)))
        for line in lines:
            self.say(line)

    def ref(self, path: str) -> ActorRef:
        found = self.system.lookup(f"/user/shop/{path}")
        if found is None:
            raise LookupError(f"/user/shop/{path} is not alive")
        return found

    def jobs(self, path: str) -> int:
        done: int = self.ref(path).ask("jobs", timeout=5.0)
        return done

    def feed(self) -> None:
        """The feeder greenlet: bursts of jobs for the workers, queries for the db."""
        orders, accounts, db_sup = self.orders, self.accounts, self.db_sup
        n = 0
        while True:
            for _ in range(3):  # small bursts: mailboxes fill up a little
                for name in ("pricer", "packer", "mailer"):
                    orders.tell(Job(name, n))
                for name in ("ledger", "auditor"):
                    accounts.tell(Job(name, n))
                n += 1
            db_sup.tell(Query(n))  # forwarded to the current connection, if any
            gevent.sleep(0.1)

    # -- the steps ------------------------------------------------------------------------------
    def at_work(self) -> None:
        self.step(
            0,
            "AT WORK",
            "A feeder sends bursts of jobs to five workers (each job is a little",
            "monkey-patched I/O) and queries to the database connection.",
        )
        self.pause(1.5)
        self.view.show()

    def resume(self) -> None:
        facts = self.facts
        self.step(
            1,
            "RESUME",
            "pricer raises TimeoutError; orders' strategy maps TimeoutError to RESUME.",
        )
        before = self.jobs("orders/pricer")
        self.ref("orders/pricer").tell(Fail(TimeoutError("the price service was slow")))
        after = self.jobs("orders/pricer")  # answered once the pricer runs again
        self.pause(1.0)
        tree = self.view.show()
        self.say(
            f"The same instance carries on: {before} jobs done before, {after} after (state "
            "kept);\nthe failing message was dropped; the restart count stays 0."
        )
        facts.check(after >= before > 0, f"pricer lost its state ({before} -> {after})")
        facts.check(tree["/user/shop/orders/pricer"][1] == 0, "pricer was restarted")
        facts.lines.append(
            f"RESUME    pricer kept its state ({before} -> {after} jobs) after a "
            "TimeoutError; the failing message was dropped."
        )

    def restart(self) -> None:
        facts = self.facts
        self.step(
            2,
            "RESTART",
            "packer raises ValueError; orders' strategy maps ValueError to RESTART.",
        )
        packer = self.ref("orders/packer")
        before = self.jobs("orders/packer")
        packer.tell(Fail(ValueError("a bug in the packer")))
        after = self.jobs("orders/packer")
        self.pause(1.0)
        tree = self.view.show()
        waiting = tree["/user/shop/orders/packer"].mailbox
        self.say(
            f"A fresh instance behind the same ref: {before} jobs done before, {after} "
            "after (counting\nfrom 0 again). The packer is slow and its mailbox kept "
            f"growing: the restart kept it\n({waiting} jobs waiting), no queued job was lost."
        )
        facts.check(tree["/user/shop/orders/packer"][1] == 1, "packer was not restarted")
        facts.check(self.ref("orders/packer") == packer, "the restarted packer has a new ref")
        facts.check(after < before, f"packer kept its state ({before} -> {after})")
        facts.lines.append(
            f"RESTART   packer got a fresh instance after a ValueError ({before} -> "
            f"{after} jobs): same ref, mailbox kept, restarts=1."
        )

    def stop(self) -> None:
        facts = self.facts
        self.step(
            3,
            "STOP",
            "mailer raises PermissionError; orders' strategy maps PermissionError to STOP.",
        )
        mailer = self.ref("orders/mailer")
        mailer.tell(Fail(PermissionError("mail server credentials revoked")))
        self.orders.ask(AwaitTerminated("mailer"), timeout=5.0)  # orders watches its workers
        self.pause(1.0)
        refused = self.orders.ask("refused", timeout=5.0)
        tree = self.view.show()
        self.say(
            "The mailer is gone for good. orders watches its workers, so DeathWatch told it\n"
            f"(Terminated); since then it refused {refused} jobs for the mailer."
        )
        facts.check("/user/shop/orders/mailer" not in tree, "mailer is still in the tree")
        facts.check(mailer.ask(Identify(3), timeout=5.0).ref is None, "mailer is alive")
        facts.lines.append(
            "STOP      mailer was stopped after a PermissionError; orders learnt it "
            "from DeathWatch (Terminated)."
        )

    def escalate(self) -> None:
        facts = self.facts
        self.step(
            4,
            "ESCALATE",
            "ledger raises LedgerCorrupted; accounts' strategy maps it to ESCALATE.",
        )
        ledger, auditor = self.ref("accounts/ledger"), self.ref("accounts/auditor")
        ledger.tell(Fail(LedgerCorrupted("the books do not add up")))
        # accounts' restart stops its old children: the old ledger answers no more.
        gone = ledger.ask(Identify(4), timeout=5.0).ref is None
        self.accounts.ask(Identify(4), timeout=5.0)  # answered once accounts runs again
        self.pause(1.0)
        tree = self.view.show()
        self.say(
            "accounts failed with the same exception and its parent, shop, restarted it.\n"
            "The default pre_restart stopped accounts' children; the new accounts instance\n"
            "created a new ledger and auditor (new incarnations under the same names)."
        )
        facts.check(gone, "the old ledger survived its parent's restart")
        facts.check(tree["/user/shop/accounts"][1] == 1, "accounts was not restarted")
        facts.check(
            self.ref("accounts/ledger") != ledger and self.ref("accounts/auditor") != auditor,
            "accounts' children were not re-created",
        )
        facts.lines.append(
            "ESCALATE  ledger's LedgerCorrupted was not accounts' call: accounts failed "
            "with it, shop restarted accounts, and a new ledger and auditor were created."
        )

    def backoff(self) -> None:
        facts, db = self.facts, self.db
        self.step(
            5,
            "BACKOFF",
            "The database goes down. The next query fails and the connection stops. Its",
            "BackoffSupervisor (db) starts a new one after a delay that doubles each time",
            "(plus up to 20 % jitter), instead of hammering the database in a tight loop.",
            "The tour brings the database back after the third failed attempt.",
        )
        attempts_before = len(db.attempts)
        db.go_down()
        self.wait_for_attempts(attempts_before, 2)
        self.say("Between two attempts there is no connection at all:")
        self.view.show()
        self.wait_for_attempts(attempts_before, 3)
        db.come_back()
        outage = time.monotonic() - db.down_since
        connected = self.shop.ask(AwaitConnected(attempts_before + 1), timeout=30.0)
        times = [db.lost_at] + [t for t, _ in db.attempts[attempts_before:]]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        tree = self.view.show()
        restarts = connected - attempts_before  # the connections started after the first
        self.say(
            "Delays before each attempt: "
            + ", ".join(f"{g:.2f} s" for g in gaps)
            + f"; connected again on attempt {connected}."
        )
        facts.check(restarts >= 4, f"only {restarts} backoff restarts")
        facts.check("/user/shop/db/connection" in tree, "no connection after the outage")
        facts.lines.append(
            f"BACKOFF   the database was down for {outage:.1f} s: the backoff "
            f"supervisor started {restarts} new connections, after delays of "
            + ", ".join(f"{g:.2f}" for g in gaps)
            + " s, not in a tight loop."
        )
        self.pause(1.0)

    def wait_for_attempts(self, attempts_before: int, n: int) -> None:
        """Until the database has seen ``n`` connection attempts since the outage."""
        db = self.db
        deadline = time.monotonic() + 60 * self.min_backoff + 10.0
        while len(db.attempts) < attempts_before + n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no connection attempt #{n} in time")
            gevent.sleep(0.005)

    def announce_shutdown(self) -> None:
        """Step 6, inside the ``with`` block: leaving it terminates the system."""
        self.step(
            6,
            "SHUTDOWN",
            "Leaving `with ActorSystem(...)` terminates the system: /user stops its subtree",
            "bottom-up (children before parents, post_stop on each), then /system and the root.",
        )
        self.stopped.clear()  # from here on: the shutdown only
        self.dead_before = len(self.dead_letters)

    def check_shutdown(self, system: ActorSystem) -> None:
        """Step 6, after the ``with`` block: what the shutdown did."""
        facts, stopped, say = self.facts, self.stopped, self.say
        queued = sum(isinstance(d.message, Job) for d in self.dead_letters[self.dead_before :])
        say(f"post_stop, in order: {', '.join(stopped)}")
        say(f"jobs still queued in mailboxes, now dead letters: {queued}")
        say(f"system terminated: {system.is_terminated}")
        facts.check(system.is_terminated, "the system did not terminate")
        parents = {
            "pricer": "orders",
            "packer": "orders",
            "ledger": "accounts",
            "auditor": "accounts",
            "orders": "shop",
            "accounts": "shop",
            "connection": "shop",
        }
        for child, parent in parents.items():
            facts.check(
                child in stopped
                and parent in stopped
                and stopped.index(child) < stopped.index(parent),
                f"{child} did not stop before {parent}: {stopped}",
            )
        facts.lines.append(
            "SHUTDOWN  terminating the system stopped the tree bottom-up: post_stop ran on "
            f"children before their parents, shop last; {queued} queued jobs became dead "
            "letters."
        )

    def summary(self) -> int:
        say, facts = self.say, self.facts
        say("")
        say("== What you just saw " + "=" * 55)
        for line in facts.lines:
            say(textwrap.fill(line, width=88, initial_indent="  ", subsequent_indent=" " * 12))
        say("  Every failure was logged once, by the supervisor that handled it ('log:' lines).")
        say("  The code of this tour: gactors/_demo.py. Next: the tutorial in the documentation.")
        if facts.problems:
            say("")
            say("The tour did not go as narrated:")
            for p in facts.problems:
                say(f"  - {p}")
            return 1
        return 0


def _short(event: LogEvent) -> str:
    """A log event's message in one line; an initialization failure by its cause."""
    cause = event.cause
    if isinstance(cause, ActorInitializationException) and cause.__cause__ is not None:
        directive = event.message.rsplit(" ", 1)[-1]
        inner = cause.__cause__
        return f"{type(inner).__name__} in pre_start: {inner} {directive}"
    return event.message


def main() -> int:  # pragma: no cover - used by hand: python -m gactors._demo
    return run(fast="--fast" in sys.argv)

"""``python -m gactors demo``: the README's first command.

The tour runs in a fresh interpreter (``--fast``: the same steps with short pauses);
it must exit 0 -- which it does only if every step went as narrated, the demo checks
itself -- and say what happened. The tree view it prints is tested in-process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest

from gactors import Actor, ActorSystem, Identify, PoisonPill, Props
from gactors._demo import TreeView


def run_demo(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("GACTORS_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "gactors", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess[str]:
    return run_demo("demo", "--fast")


def test_demo_exits_0_without_tracebacks(demo: subprocess.CompletedProcess[str]) -> None:
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "Traceback" not in demo.stderr, demo.stderr
    assert "did not go as narrated" not in demo.stdout, demo.stdout


@pytest.mark.parametrize(
    "title",
    [
        "0/6  AT WORK",
        "1/6  RESUME",
        "2/6  RESTART",
        "3/6  STOP",
        "4/6  ESCALATE",
        "5/6  BACKOFF",
        "6/6  SHUTDOWN",
        "What you just saw",
    ],
)
def test_demo_narrates_every_step(demo: subprocess.CompletedProcess[str], title: str) -> None:
    assert f"== {title} ==" in demo.stdout


def row(mark: str, depth: int, rest: str) -> str:
    """A line of the demo's tree view, as a regex: mark column, indentation, ``rest``."""
    return r"\n " + re.escape(mark) + " " + "  " * depth + rest


@pytest.mark.parametrize(
    "pattern",
    [
        # The live tree, as system.tree() prints it, with the changes marked.
        row(" ", 0, r"/  \[running\] mailbox=\d+ restarts=0\n"),
        row(" ", 4, r"pricer  \[running\] mailbox=\d+ restarts=0\n"),
        row("*", 4, r"packer  \[running\] mailbox=\d+ restarts=1    <- restarts 0 -> 1\n"),
        row("-", 4, r"mailer    <- gone\n"),
        row("*", 3, r"accounts  \[running\] mailbox=\d+ restarts=1    <- restarts 0 -> 1\n"),
        row("+", 4, r"ledger  \[running\] mailbox=\d+ restarts=0    <- new incarnation"),
        row("-", 4, r"connection    <- gone\n"),
        row("+", 4, r"connection  \[running\] mailbox=\d+ restarts=0    <- new\n"),
        # The supervisors' log events, one line each.
        r"log: WARNING shop/orders/pricer: TimeoutError: .* \(resume\)",
        r"log: ERROR   shop/orders/packer: ValueError: .* \(restart\)",
        r"log: ERROR   shop/orders/mailer: PermissionError: .* \(stop\)",
        r"log: ERROR   shop/accounts: LedgerCorrupted: .* \(restart\)",
        r"log: ERROR   shop/db/connection: ConnectionRefusedError in pre_start: refused \(stop\)",
        # What the viewer saw, with the numbers of this run.
        r"RESUME    pricer kept its state \((\d+) -> \d+ jobs\)",
        r"RESTART   packer got a fresh instance after a ValueError \(\d+ -> \d+ jobs\)",
        r"STOP      mailer was stopped",
        r"ESCALATE  ledger's LedgerCorrupted was not accounts' call",
        r"db: connection attempt \d+, [\d.]+ s after the outage began: connected",
        r"BACKOFF   the database was down for [\d.]+ s: the backoff supervisor started\s+\d+ new",
        r"post_stop, in order: .*, shop\n",
        r"jobs still queued in mailboxes, now dead letters: \d+\n",
        r"its mailbox kept growing: the restart kept it\n\(\d+ jobs waiting\)",
        r"system terminated: True",
    ],
)
def test_demo_says_what_happened(demo: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert re.search(pattern, demo.stdout), f"no match for {pattern!r} in:\n{demo.stdout}"


def test_demo_shutdown_is_bottom_up(demo: subprocess.CompletedProcess[str]) -> None:
    m = re.search(r"post_stop, in order: (.*)\n", demo.stdout)
    assert m is not None
    order = m.group(1).split(", ")
    for child, parent in [("pricer", "orders"), ("ledger", "accounts"), ("orders", "shop")]:
        assert order.index(child) < order.index(parent), order


def test_unknown_command_is_a_usage_error() -> None:
    proc = run_demo("fly", timeout=30.0)
    assert proc.returncode == 2
    assert "usage: python -m gactors" in proc.stderr


class Child(Actor):
    def receive(self, message: Any) -> None:
        if message == "fail":
            raise ValueError("on purpose")


class Parent(Actor):
    def __init__(self) -> None:
        self.context.actor_of(Props(Child), "kid")

    def receive(self, message: Any) -> None:
        self.unhandled(message)


def test_tree_view_marks_changes(actor_system: ActorSystem) -> None:
    from gactors.testkit import event_filter

    lines: list[str] = []
    view = TreeView(actor_system, lines.append)
    parent = actor_system.actor_of(Props(Parent), "parent")
    parent.ask(Identify(0), timeout=5.0)  # built, with its child
    first = view.show()
    assert first["/user/parent/kid"][:2] == ("running", 0)
    assert not any(line.startswith((" *", " +", " -")) for line in lines[0].splitlines())

    kid = actor_system.lookup("/user/parent/kid")
    assert kid is not None
    with event_filter(actor_system, ValueError):
        kid.tell("fail")
    kid.ask(Identify(1), timeout=5.0)  # answered after the restart
    view.show()
    assert "\n *       kid  [running] mailbox=0 restarts=1    <- restarts 0 -> 1" in lines[1]

    kid.tell(PoisonPill)
    assert kid.ask(Identify(2), timeout=5.0).ref is None
    actor_system.actor_of(Props(Child), "late")
    parent.ask(Identify(3), timeout=5.0)
    view.show()
    assert "\n +     late  [running] mailbox=0 restarts=0    <- new\n" in lines[2]
    # The kid may still be in the tree until the parent processed its termination.
    if "/user/parent/kid" not in view.prev:
        assert "\n -       kid    <- gone" in lines[2]


TOKENS = r"\(fencing token \d+ -> \d+\)"


# -- python -m gactors demo cluster --------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster_demo() -> subprocess.CompletedProcess[str]:
    """The cluster tour, run as a reader runs it: it starts its own server and nodes."""
    pytest.importorskip("redis")
    pytest.importorskip("msgspec")
    from gactors.testkit._redis_server import NO_SERVER_HINT, find_server_binary

    if find_server_binary() is None:
        if os.environ.get("CI") or os.environ.get("GACTORS_TEST_REQUIRE_REDIS"):
            pytest.fail(f"the cluster demo needs a server binary: {NO_SERVER_HINT}")
        pytest.skip(NO_SERVER_HINT)
    return run_demo("demo", "cluster", "--fast", timeout=100.0)


@pytest.mark.slow
@pytest.mark.timeout(110)
def test_cluster_demo_moves_entities_and_the_singleton(
    cluster_demo: subprocess.CompletedProcess[str],
) -> None:
    out = cluster_demo.stdout
    assert cluster_demo.returncode == 0, out + cluster_demo.stderr
    assert "Traceback" not in cluster_demo.stderr, cluster_demo.stderr
    for title in ["1/4  START", "2/4  AT WORK", "3/4  KILL", "4/4  COUNTS", "What you just saw"]:
        assert f"== {title} ==" in out, out
    for pattern in [
        r"A throwaway (redis|valkey)-server at redis://127\.0\.0\.1:\d+/0",
        r"  node-A: pid \d+, gactors://demo@\S+",
        r"  node-C: pid \d+, gactors://demo@\S+",
        r"This process joined as a fourth node that hosts nothing",
        r"  node-[ABC]: +\d+ counters .*\+ singleton 'leader'",
        r"kill -9 (node-[ABC]) \(pid \d+\): it runs the singleton",
        # Live: entities and the singleton starting again elsewhere, with a larger token.
        r"  \+ *[\d.]+s  counter c\d\d moved node-[ABC] -> node-[ABC] " + TOKENS,
        r"  \+ *[\d.]+s  singleton 'leader' moved node-[ABC] -> node-[ABC] " + TOKENS,
        r"everything node-[ABC] ran is running again, [\d.]+ s after the kill",
        # The counts: nothing lost but the moved entities' in-memory state, pointed out.
        r"c\d\d +node-[ABC] +\d+ +\d+  moved from node-[ABC]: "
        r"increments #1-#\d+ lived in its memory",
        r"\* No count was lost on the \d+ counters? that stayed where they were\.",
        r"\* The \d+ counters? that moved lost their in-memory state: \d+",
    ]:
        assert re.search(pattern, out), f"no line matching {pattern!r} in:\n{out}"
    assert "WRONG" not in out, out
    # Moves go from the killed node to a survivor, and the tokens only grew.
    victim = re.search(r"kill -9 (node-[ABC])", out)
    assert victim is not None
    for m in re.finditer(
        r"moved (node-[ABC]) -> (node-[ABC]) \(fencing token (\d+) -> (\d+)\)", out
    ):
        assert m.group(1) == victim.group(1) and m.group(2) != victim.group(1), m.group(0)
        assert int(m.group(4)) > int(m.group(3)), m.group(0)

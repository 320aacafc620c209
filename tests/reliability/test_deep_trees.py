"""Trees deeper than the interpreter's recursion limit (about 1,000 frames).

Every walk over the hierarchy (paths, tree(), supervision, stopping, termination) is
a loop or goes through the dispatcher one level at a time, never a Python recursion:
at about 500 levels the lazily built paths used to raise RecursionError inside an
ask's timeout callback (the ask never returned) and inside failure handling (the
wrong actor was restarted and its subtree lost).
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import pytest

from gactors import Actor, ActorRef, ActorSystem, AskTimeoutError, Props
from gactors.testkit import TestProbe, event_filter

DEPTH = 2_000
INCARNATIONS: Counter[int] = Counter()


class Node(Actor):
    """Level ``n`` of a chain; level 0 is the leaf."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.child: ActorRef | None = None
        INCARNATIONS[n] += 1

    def pre_start(self) -> None:
        if self.n > 0:
            self.child = self.context.actor_of(Props(Node, self.n - 1), "n")

    def post_restart(self, reason: BaseException) -> None:
        pass  # keep the children (the default would stop them and re-create through pre_start)

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        pass  # keep the children

    def receive(self, message: Any) -> None:
        if message == "leaf":
            if self.child is None:
                self.sender.tell(self.context.self)
            else:
                self.child.forward(message)
        elif message == "boom":
            raise ValueError("boom at the leaf")
        elif message == "silent":
            pass  # never replies
        elif message == "incarnation":
            self.sender.tell(INCARNATIONS[self.n])


@pytest.fixture
def deep(actor_system: ActorSystem) -> tuple[ActorRef, ActorRef]:
    assert sys.getrecursionlimit() < DEPTH
    INCARNATIONS.clear()
    top = actor_system.actor_of(Props(Node, DEPTH - 1), "n")
    leaf = top.ask("leaf", timeout=30)
    return top, leaf


def test_paths_tree_and_repr(actor_system: ActorSystem, deep: tuple[ActorRef, ActorRef]) -> None:
    _, leaf = deep
    text = str(leaf.path)
    assert text == "gactors://" + actor_system.name + "/user" + "/n" * DEPTH
    assert len(leaf.path.elements) == DEPTH + 1
    assert repr(leaf) == f"ActorRef({text}#{leaf._uid})"
    assert actor_system.lookup(leaf.path) == leaf
    assert actor_system.lookup(text) == leaf
    lines = actor_system.tree().splitlines()
    # "/", "user", "system" and the chain.
    assert len(lines) == DEPTH + 3
    # Depth first: the leaf comes last under /user, indented one step per level.
    assert lines[-2] == "  " * (DEPTH + 1) + "n  [running] mailbox=0 restarts=0"
    assert lines[-1].strip().startswith("system  [running]")


def test_ask_timeout_at_the_bottom(deep: tuple[ActorRef, ActorRef]) -> None:
    _, leaf = deep
    fut = leaf.ask("silent", timeout=0.5, block=False)
    with pytest.raises(AskTimeoutError, match="ask timed out"):
        fut.get(20)  # bounded: it used to never complete


def test_failure_at_the_bottom_restarts_the_leaf_only(
    actor_system: ActorSystem, deep: tuple[ActorRef, ActorRef], probe: TestProbe
) -> None:
    top, leaf = deep
    with event_filter(actor_system, ValueError, "boom at the leaf"):
        leaf.tell("boom")
    # The leaf was restarted by its parent, in place; no other level was touched.
    assert leaf.ask("incarnation", timeout=10) == 2
    assert sum(INCARNATIONS.values()) == DEPTH + 1
    assert set(INCARNATIONS) == set(range(DEPTH))
    assert top.ask("leaf", timeout=30) == leaf
    assert "RecursionError" not in actor_system.tree()


def test_stop_the_whole_tree(
    actor_system: ActorSystem, deep: tuple[ActorRef, ActorRef], probe: TestProbe
) -> None:
    top, leaf = deep
    probe.watch(top)
    probe.watch(leaf)
    actor_system.stop(top)
    got = [probe.receive_one(60) for _ in range(2)]
    terminated = {t.actor for t in got}
    assert terminated == {top, leaf}
    assert actor_system.lookup("/user/n") is None
    lines = actor_system.tree().splitlines()
    assert lines[1].strip().startswith("user  [") and lines[2].strip().startswith("system  [")


def test_terminate_a_system_with_a_deep_tree() -> None:
    system = ActorSystem("deep-terminate")
    try:
        top = system.actor_of(Props(Node, DEPTH - 1), "n")
        leaf = top.ask("leaf", timeout=30)
        assert str(leaf.path).count("/n") == DEPTH
    finally:
        system.terminate()
        assert system.await_termination(60), system.tree()[-2000:]


class PlainNode(Node):
    """A Node with Akka's default restart hooks: a restart stops the whole subtree and
    pre_start builds it again."""

    post_restart = Actor.post_restart
    pre_restart = Actor.pre_restart


def test_restart_at_the_top_rebuilds_the_whole_subtree(actor_system: ActorSystem) -> None:
    INCARNATIONS.clear()
    top = actor_system.actor_of(Props(PlainNode, DEPTH - 1), "n")
    leaf = top.ask("leaf", timeout=30)
    with event_filter(actor_system, ValueError, "boom at the leaf"):
        top.tell("boom")  # the same failure, raised at the top this time
    new_leaf = top.ask("leaf", timeout=60)
    assert new_leaf != leaf and new_leaf.path == leaf.path
    assert top.ask("incarnation", timeout=10) == 2
    assert all(INCARNATIONS[n] == 2 for n in range(DEPTH))

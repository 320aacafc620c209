"""Stopping: PoisonPill, Kill, context.stop, system.stop (SPEC §6.5, §7).

Ported scenarios: SupervisorMiscSpec (recreate a child once the old one is Terminated,
not while it is alive, create a similar kid in the fault handling strategy),
ActorLifeCycleSpec (post_stop after the children), DeathWatchSpec/ActorRefSpec (dead
letters for a stopped actor), plus the mailbox semantics of each way to stop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from gevent.event import Event

from gactors import (
    Actor,
    ActorKilledException,
    ActorRef,
    ActorSystem,
    DeadLetter,
    Identify,
    IllegalStateError,
    InvalidActorNameException,
    Kill,
    OneForOneStrategy,
    PoisonPill,
    Props,
    SupervisorStrategy,
)
from gactors.pattern import graceful_stop
from gactors.testkit import await_condition

from ._kit import DEFAULT_TIMEOUT, Probe, event_filter


class Reporter(Actor):
    """Reports every message to ``report``; can block on ``gate`` while processing."""

    def __init__(self, report: ActorRef, gate: Event | None = None, entered: Event | None = None):
        self.report = report
        self.gate = gate
        self.entered = entered

    def receive(self, message: Any) -> None:
        if message == "block":
            assert self.entered is not None and self.gate is not None
            self.entered.set()
            self.gate.wait(5.0)
            self.report.tell("block finished")
        elif message == "stop self":
            self.context.stop(self.ref)
            self.report.tell("after stop self")  # the current message finishes
        else:
            self.report.tell(message)

    def post_stop(self) -> None:
        self.report.tell("post_stop")


def _dead_letters(system: ActorSystem) -> Probe:
    dead = Probe(system)
    system.event_stream.subscribe(dead.ref, DeadLetter)
    return dead


def _expect_dead(dead: Probe, recipient: ActorRef, messages: Iterable[Any]) -> None:
    got = [dead.expect_msg_type(DeadLetter) for _ in messages]
    assert [d.message for d in got] == list(messages)
    assert all(d.recipient == recipient for d in got)


def test_poison_pill_after_queued_messages(actor_system: ActorSystem, probe: Probe) -> None:
    dead = _dead_letters(actor_system)
    a = actor_system.actor_of(Props(Reporter, probe.ref))
    for m in (1, 2, PoisonPill, 3, 4):
        a.tell(m)
    assert probe.receive_n(3) == [1, 2, "post_stop"]
    _expect_dead(dead, a, [3, 4])
    probe.expect_no_message(0.2)


def test_kill_after_queued_messages(actor_system: ActorSystem, probe: Probe) -> None:
    dead = _dead_letters(actor_system)
    a = actor_system.actor_of(Props(Reporter, probe.ref))
    with event_filter(actor_system, ActorKilledException, occurrences=1, level=40):
        for m in (1, 2, Kill, 3, 4):
            a.tell(m)
        assert probe.receive_n(3) == [1, 2, "post_stop"]
    _expect_dead(dead, a, [3, 4])


def test_context_stop_self_finishes_the_current_message(
    actor_system: ActorSystem, probe: Probe
) -> None:
    dead = _dead_letters(actor_system)
    a = actor_system.actor_of(Props(Reporter, probe.ref))
    for m in (1, "stop self", 2, 3):
        a.tell(m)
    assert probe.receive_n(3) == [1, "after stop self", "post_stop"]
    _expect_dead(dead, a, [2, 3])


def test_system_stop_finishes_the_current_message(actor_system: ActorSystem, probe: Probe) -> None:
    dead = _dead_letters(actor_system)
    gate, entered = Event(), Event()
    a = actor_system.actor_of(Props(Reporter, probe.ref, gate, entered))
    a.tell("block")
    a.tell("behind")
    assert entered.wait(5.0)
    actor_system.stop(a)  # a system message: overtakes "behind"
    gate.set()
    assert probe.receive_n(2) == ["block finished", "post_stop"]
    _expect_dead(dead, a, ["behind"])


def test_telling_a_stopped_actor_publishes_dead_letters(
    actor_system: ActorSystem, probe: Probe
) -> None:
    dead = _dead_letters(actor_system)
    a = actor_system.actor_of(Props.empty())
    probe.watch(a)
    actor_system.stop(a)
    probe.expect_terminated(a)
    a.tell("too late", probe.ref)  # never raises
    letter = dead.expect_msg_type(DeadLetter)
    assert (letter.message, letter.sender, letter.recipient) == ("too late", probe.ref, a)
    assert a.ask(Identify("who"), timeout=5.0).ref is None


def test_stop_is_bottom_up(actor_system: ActorSystem, probe: Probe) -> None:
    # A binary tree three levels deep: every actor's post_stop comes after those of all
    # its descendants, and it sees no children left.
    class Node(Actor):
        def __init__(self, depth: int) -> None:
            if depth < 3:
                for i in range(2):
                    self.context.actor_of(Props(Node, depth + 1), f"n{depth + 1}{i}")

        def pre_start(self) -> None:
            probe.ref.tell("started")

        def post_stop(self) -> None:
            probe.ref.tell((str(self.ref.path), len(self.context.children)))

    top = actor_system.actor_of(Props(Node, 1), "n1")
    assert probe.receive_n(7) == ["started"] * 7
    probe.watch(top)
    actor_system.stop(top)
    got = probe.receive_n(7)
    probe.expect_terminated(top)  # the watcher hears of it after the whole subtree
    paths = [p for p, _ in got]
    assert all(n == 0 for _, n in got)
    assert paths[-1] == str(top.path)
    for i, p in enumerate(paths):
        descendants = [k for k, q in enumerate(paths) if q.startswith(p + "/")]
        assert all(k < i for k in descendants), (p, paths)


def test_parent_post_stop_waits_for_slow_children(actor_system: ActorSystem, probe: Probe) -> None:
    release = Event()

    class Slow(Actor):
        def post_stop(self) -> None:
            release.wait(5.0)
            probe.ref.tell("child stopped")

    class Parent(Actor):
        def __init__(self) -> None:
            self.context.actor_of(Props(Slow))

        def post_stop(self) -> None:
            probe.ref.tell("parent stopped")

    parent = actor_system.actor_of(Props(Parent))
    assert parent.ask(Identify(0), timeout=5.0).ref == parent
    parent.tell(PoisonPill)
    probe.expect_no_message(0.3)
    release.set()
    assert probe.receive_n(2) == ["child stopped", "parent stopped"]


def test_child_name_is_free_once_the_termination_was_processed(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorMiscSpec "be able to recreate child when old child is Terminated".
    class Parent(Actor):
        def __init__(self) -> None:
            self.kid = self.context.watch(self.context.actor_of(Props.empty(), "foo"))

        def receive(self, message: Any) -> None:
            if message == "engage":
                self.context.stop(self.kid)
            else:  # Terminated(kid)
                new = self.context.actor_of(Props.empty(), "foo")
                probe.ref.tell((new != self.kid, new.path == self.kid.path))

    parent = actor_system.actor_of(Props(Parent))
    parent.tell("engage")
    probe.expect_msg((True, True))


def test_child_name_is_taken_while_the_child_is_terminating(actor_system: ActorSystem) -> None:
    # SupervisorMiscSpec "not be able to recreate child when old child is alive".
    class Parent(Actor):
        def receive(self, message: Any) -> None:
            kid = self.context.actor_of(Props.empty(), "foo")
            self.context.stop(kid)
            try:
                self.context.actor_of(Props.empty(), "foo")
            except InvalidActorNameException as e:
                self.sender.tell(("green", str(e)))
            else:
                self.sender.tell("red")

    verdict, reason = actor_system.actor_of(Props(Parent)).ask("engage", timeout=5.0)
    assert verdict == "green" and "foo" in reason


def test_similar_kid_created_in_handle_child_terminated(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorMiscSpec "be able to create a similar kid in the fault handling strategy".
    class Recreating(OneForOneStrategy):
        def handle_child_terminated(self, context: Any, child: Any, children: Any) -> None:
            new = context.actor_of(Props.empty(), child.path.name)
            probe.ref.tell("green" if new != child and new.path == child.path else "red")

    class Parent(Actor):
        supervisor_strategy = Recreating()

        def receive(self, message: Any) -> None:
            self.context.stop(self.context.actor_of(Props.empty(), "Robert"))

    parent = actor_system.actor_of(Props(Parent))
    parent.tell("engage")
    probe.expect_msg("green")
    probe.watch(parent)
    # While the parent stops, the strategy's attempt to create a kid is refused: the
    # error is logged (nobody could decide on it), and the parent still terminates.
    with event_filter(
        actor_system, IllegalStateError, message="handle_child_terminated failed", level=40
    ):
        actor_system.stop(parent)
        probe.expect_terminated(parent)


def test_stopping_a_failed_actor_awaiting_its_supervisor(
    actor_system: ActorSystem, probe: Probe
) -> None:
    deciding, release = Event(), Event()

    def slow(exc: BaseException) -> Any:
        deciding.set()
        release.wait(5.0)
        return SupervisorStrategy.default_strategy.decider(exc)

    class Sup(Actor):
        supervisor_strategy = OneForOneStrategy(slow)

        def receive(self, message: Any) -> None:
            self.sender.tell(self.context.actor_of(message))

    class Failing(Actor):
        def receive(self, message: Any) -> None:
            raise ValueError("fail")

        def post_stop(self) -> None:
            probe.ref.tell("stopped")

    sup = actor_system.actor_of(Props(Sup))
    kid = sup.ask(Props(Failing), timeout=5.0)
    probe.watch(kid)
    with event_filter(actor_system, ValueError, occurrences=1):
        kid.tell("fail")
        assert deciding.wait(5.0)
        actor_system.stop(kid)  # stopped while its supervisor is still deciding
        release.set()
        probe.expect_msg("stopped")
        probe.expect_terminated(kid)


def test_stop_twice_gives_one_terminated(actor_system: ActorSystem, probe: Probe) -> None:
    a = actor_system.actor_of(Props(Reporter, probe.ref))
    watcher = Probe(actor_system)
    watcher.watch(a)
    actor_system.stop(a)
    actor_system.stop(a)
    a.tell(PoisonPill)
    probe.expect_msg("post_stop")
    watcher.expect_terminated(a)
    watcher.expect_no_message(0.2)
    probe.expect_no_message(0.1)


def test_children_mailboxes_go_to_dead_letters_when_the_parent_stops(
    actor_system: ActorSystem, probe: Probe
) -> None:
    dead = _dead_letters(actor_system)
    gate, entered = Event(), Event()

    class Parent(Actor):
        def __init__(self) -> None:
            self.kid = self.context.actor_of(Props(Reporter, probe.ref, gate, entered), "kid")

        def receive(self, message: Any) -> None:
            self.kid.tell("block")
            self.kid.tell("queued")

    parent = actor_system.actor_of(Props(Parent))
    parent.tell("go")
    assert entered.wait(5.0)
    actor_system.stop(parent)
    # The kid learns of it only once the parent processed its stop; no message can
    # tell us when that happened, so look at the parent's state.
    await_condition(lambda: parent._cell.is_terminating, timeout=DEFAULT_TIMEOUT)
    gate.set()
    assert probe.receive_n(2) == ["block finished", "post_stop"]
    letter = dead.expect_msg_type(DeadLetter)
    assert letter.message == "queued" and letter.recipient.path.name == "kid"


@pytest.mark.parametrize("stop_message", [PoisonPill, Kill])
def test_graceful_stop_resolves_true_once_terminated(
    actor_system: ActorSystem, probe: Probe, stop_message: Any
) -> None:
    a = actor_system.actor_of(Props(Reporter, probe.ref))
    with event_filter(actor_system, ActorKilledException, occurrences=int(stop_message is Kill)):
        assert graceful_stop(a, 5.0, stop_message).get(5.0) is True
    probe.expect_msg("post_stop")

"""Failures while an actor is being created (SPEC §5 actor_of, §6.4).

Ported scenarios: SupervisorSpec ("log pre-creation check failures" for top-level and
child actors), SupervisorHierarchySpec ("handle failure in creation when the
supervision strategy returns Resume and Restart"), ActorLifeCycleSpec (no post_stop for
a failed creation).
"""

from __future__ import annotations

from typing import Any

import pytest

from gactors import (
    Actor,
    ActorInitializationException,
    ActorSystem,
    Directive,
    InvalidActorNameException,
    OneForOneStrategy,
    Props,
)

from ._actors import Boom, Supervisor
from ._kit import Probe, event_filter, mute


class Fragile(Actor):
    """Fails in ``__init__`` or ``pre_start`` while ``plan`` says so (one entry per attempt)."""

    def __init__(self, plan: list[str], report: Any) -> None:
        self.report = report
        self.step = plan.pop(0) if plan else "ok"
        report.tell(("init", self.step))
        if self.step == "ctor":
            raise Boom("constructor failed")

    def pre_start(self) -> None:
        if self.step == "pre_start":
            raise Boom("pre_start failed")
        self.report.tell("started")

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        self.report.tell("pre_restart")

    def post_restart(self, reason: BaseException) -> None:
        self.report.tell("post_restart")

    def post_stop(self) -> None:
        self.report.tell("post_stop")

    def receive(self, message: Any) -> None:
        self.report.tell(("got", message))


@pytest.mark.parametrize("where", ["ctor", "pre_start"])
def test_creation_failure_is_actor_initialization_exception_and_stops(
    actor_system: ActorSystem, probe: Probe, where: str
) -> None:
    watcher = Probe(actor_system)
    with event_filter(actor_system, ActorInitializationException, occurrences=1, level=40) as ev:
        ref = actor_system.actor_of(Props(Fragile, [where], probe.ref), "fragile")
        watcher.watch(ref)
        probe.expect_msg(("init", where))
        watcher.expect_terminated(ref)
    exc = ev.events[0].cause
    assert isinstance(exc, ActorInitializationException)
    assert str(exc).startswith(f"{ref.path}: ")
    assert isinstance(exc.__cause__, Boom) and exc.actor == ref
    assert ev.events[0].source == str(ref.path)
    probe.expect_no_message()  # no post_stop for a failed creation


def test_actor_of_never_raises_for_a_failing_constructor(actor_system: ActorSystem) -> None:
    class Broken(Actor):
        def __init__(self) -> None:
            raise RuntimeError("no")

    with mute(actor_system, ActorInitializationException):
        ref = actor_system.actor_of(Props(Broken))
        probe = Probe(actor_system)
        probe.watch(ref)
        probe.expect_terminated(ref)


def test_resume_of_failed_creation_is_a_fresh_attempt(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorHierarchySpec: Resume after a creation failure creates the actor again;
    # messages sent meanwhile are processed after the successful pre_start.
    sup = actor_system.actor_of(Props(Supervisor, OneForOneStrategy(lambda e: Directive.RESUME)))
    with event_filter(actor_system, ActorInitializationException, occurrences=2, level=30):
        ref = sup.ask(Props(Fragile, ["ctor", "pre_start"], probe.ref), timeout=5.0)
        ref.tell("hello")
        assert probe.receive_n(5) == [
            ("init", "ctor"),
            ("init", "pre_start"),
            ("init", "ok"),
            "started",
            ("got", "hello"),
        ]
    probe.expect_no_message()


def test_restart_of_failed_creation_is_a_fresh_attempt(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # Neither pre_restart, post_restart nor post_stop is called for a failed attempt.
    sup = actor_system.actor_of(Props(Supervisor, OneForOneStrategy(lambda e: Directive.RESTART)))
    with event_filter(actor_system, ActorInitializationException, occurrences=1, level=40):
        ref = sup.ask(Props(Fragile, ["pre_start"], probe.ref), timeout=5.0)
        ref.tell("hello")
        assert probe.receive_n(4) == [
            ("init", "pre_start"),
            ("init", "ok"),
            "started",
            ("got", "hello"),
        ]
    probe.expect_no_message()


def test_messages_sent_before_creation_are_processed_after_pre_start(
    actor_system: ActorSystem, probe: Probe
) -> None:
    ref = actor_system.actor_of(Props(Fragile, [], probe.ref))
    for i in range(5):
        ref.tell(i)
    assert probe.receive_n(7) == [("init", "ok"), "started"] + [("got", i) for i in range(5)]


def test_children_of_a_failed_attempt_are_stopped_before_the_next_one(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # The failed attempt created a named child; the next attempt can create it again.
    attempts = [0]

    class Kid(Actor):
        def post_stop(self) -> None:
            probe.ref.tell("kid stopped")

    class Parent(Actor):
        def __init__(self) -> None:
            attempts[0] += 1
            self.kid = self.context.actor_of(Props(Kid), "kid")
            if attempts[0] == 1:
                raise Boom("after creating the kid")

        def pre_start(self) -> None:
            probe.ref.tell(("started", attempts[0], self.kid.path.name))

    sup = actor_system.actor_of(Props(Supervisor, OneForOneStrategy(lambda e: Directive.RESTART)))
    with event_filter(actor_system, ActorInitializationException, occurrences=1):
        sup.ask(Props(Parent), timeout=5.0)
        probe.expect_msg("kid stopped")
        probe.expect_msg(("started", 2, "kid"))


def test_creation_failure_can_be_escalated(actor_system: ActorSystem, probe: Probe) -> None:
    seen: list[BaseException] = []
    top = actor_system.actor_of(
        Props(Supervisor, OneForOneStrategy(lambda e: seen.append(e) or Directive.STOP))
    )
    middle = top.ask(
        Props(Supervisor, OneForOneStrategy({ActorInitializationException: Directive.ESCALATE})),
        timeout=5.0,
    )
    probe.watch(middle)
    with event_filter(actor_system, ActorInitializationException, occurrences=1) as ev:
        middle.ask(Props(Fragile, ["ctor"], probe.ref), timeout=5.0)
        probe.expect_msg(("init", "ctor"))
        probe.expect_terminated(middle)
    assert ev.events[0].source == str(middle.path)  # logged once, where it was handled
    assert len(seen) == 1 and isinstance(seen[0], ActorInitializationException)


def test_factory_returning_a_non_actor_is_a_creation_failure(
    actor_system: ActorSystem, probe: Probe
) -> None:
    with event_filter(actor_system, ActorInitializationException, occurrences=1) as ev:
        ref = actor_system.actor_of(Props(lambda: "not an actor"))
        probe.watch(ref)
        probe.expect_terminated(ref)
    assert isinstance(ev.events[0].cause.__cause__, TypeError)


def test_invalid_child_props_raise_at_once_in_the_parent(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorSpec "log pre-creation check failures when creating a normal child actor":
    # the caller of actor_of gets the error synchronously; the parent is not failed.
    class Parent(Actor):
        def receive(self, message: Any) -> None:
            try:
                self.context.actor_of(Props(Actor).with_dispatcher("no-such-dispatcher"))
            except ValueError as e:
                self.sender.tell(("refused", str(e)))

    parent = actor_system.actor_of(Props(Parent))
    event, text = parent.ask("create", timeout=5.0)
    assert event == "refused" and "no-such-dispatcher" in text
    assert parent.ask("again", timeout=5.0)[0] == "refused"  # still the same instance


def test_invalid_child_name_in_constructor_fails_the_creation(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Parent(Actor):
        def __init__(self) -> None:
            self.context.actor_of(Props(Actor), "bad/name")

    with event_filter(actor_system, ActorInitializationException, message="bad/name") as ev:
        ref = actor_system.actor_of(Props(Parent))
        probe.watch(ref)
        probe.expect_terminated(ref)
    assert isinstance(ev.events[0].cause.__cause__, InvalidActorNameException)

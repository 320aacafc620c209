"""The four directives and the failure protocol (SPEC §6.1-6.2).

Ported scenarios: SupervisorSpec (call-kill-call, one-way kill, ask of a failing
message), SupervisorHierarchySpec (resume children after Resume, suspend children
while failing, survive being stressed), SupervisorMiscSpec (the failing child is the
sender in the strategy).
"""

from __future__ import annotations

import random
from typing import Any

import gevent
import pytest
from gevent.event import Event

from gactors import (
    Actor,
    ActorKilledException,
    ActorSystem,
    DeadLetter,
    Directive,
    Kill,
    OneForOneStrategy,
    Props,
    SupervisorStrategy,
    default_decider,
)
from gactors import _sysmsg as sm
from gactors.testkit import await_condition

from ._actors import Boom, Fail, Supervisor, worker_props
from ._kit import DEFAULT_TIMEOUT, Probe, event_filter, mute


def _supervisor(system: ActorSystem, decider: Any, **kw: Any) -> Any:
    return system.actor_of(Props(Supervisor, OneForOneStrategy(decider, **kw)))


def _child(sup: Any, props: Props, name: str | None = None) -> Any:
    return sup.ask(props if name is None else (props, name), timeout=5.0)


# -- RESUME ------------------------------------------------------------------------------------


def test_resume_keeps_state_and_drops_the_failing_message(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = _supervisor(actor_system, lambda e: Directive.RESUME)
    w = _child(sup, worker_props(probe.ref, "w", start=10))
    probe.expect_msg(("w", "pre_start", 0))
    with event_filter(actor_system, Boom, occurrences=1):
        w.tell("inc")
        w.tell(Fail())
        w.tell("inc")
    assert w.ask("get", timeout=5.0) == 12  # 10 + 2: state kept, failing message dropped
    assert w.ask("gen", timeout=5.0) == 0  # the same instance
    probe.expect_no_message()  # no restart hook, no stop


def test_resume_resumes_the_whole_subtree(actor_system: ActorSystem, probe: Probe) -> None:
    # SupervisorHierarchySpec "resume children after Resume": a resumed middle actor's
    # own child (suspended with it) works again too.
    top = _supervisor(actor_system, lambda e: Directive.RESUME)
    middle = _child(top, Props(Supervisor, SupervisorStrategy.default_strategy))
    leaf = _child(middle, worker_props(probe.ref, "leaf"))
    probe.expect_msg(("leaf", "pre_start", 0))
    assert leaf.ask("ping", timeout=5.0) == "pong"
    with event_filter(actor_system, Boom, occurrences=1, source=str(middle.path)):
        middle.tell(Fail())
    assert leaf.ask("ping", timeout=5.0) == "pong"
    assert isinstance(middle.ask(Props(Actor), timeout=5.0), type(leaf))
    probe.expect_no_message()


def test_children_are_suspended_while_the_parent_awaits_its_supervisor(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorHierarchySpec "suspend children while failing": while the decision on a
    # failed actor is pending, its child processes nothing; after Resume it does.
    release = Event()
    deciding = Event()

    def slow_resume(exc: BaseException) -> Directive:
        deciding.set()
        release.wait(5.0)
        return Directive.RESUME

    top = _supervisor(actor_system, slow_resume)
    middle = _child(top, Props(Supervisor, SupervisorStrategy.default_strategy))
    leaf = _child(middle, worker_props(probe.ref, "leaf"))
    probe.expect_msg(("leaf", "pre_start", 0))
    with mute(actor_system, Boom):
        middle.tell(Fail())
        assert deciding.wait(5.0)
        leaf.tell("ping", probe.ref)
        probe.expect_no_message(0.3)
        release.set()
        probe.expect_msg("pong")


def test_resume_of_escalated_failure_resumes_the_original_child(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SPEC §6.2: "If that grandparent resumes, the original failing child resumes too."
    top = _supervisor(actor_system, lambda e: Directive.RESUME)
    middle = _child(top, Props(Supervisor, OneForOneStrategy(lambda e: Directive.ESCALATE)))
    leaf = _child(middle, worker_props(probe.ref, "leaf", start=1))
    probe.expect_msg(("leaf", "pre_start", 0))
    with event_filter(actor_system, Boom, occurrences=1, source=str(middle.path)):
        leaf.tell("inc")
        leaf.tell(Fail())
    assert leaf.ask("get", timeout=5.0) == 2
    assert middle.ask(Props(Actor), timeout=5.0) is not None  # the middle runs again
    probe.expect_no_message()


# -- RESTART -----------------------------------------------------------------------------------


def test_restart_clears_state_and_keeps_the_ref(actor_system: ActorSystem, probe: Probe) -> None:
    sup = _supervisor(actor_system, lambda e: Directive.RESTART)
    w = _child(sup, worker_props(probe.ref, "w", start=5))
    probe.expect_msg(("w", "pre_start", 0))
    with event_filter(actor_system, Boom, occurrences=1):
        w.tell("inc")
        w.tell(Fail())
    assert w.ask("get", timeout=5.0) == 5
    assert w.ask("gen", timeout=5.0) == 1
    tag, event, gen, reason, message = probe.expect_msg_type(tuple)
    assert (tag, event, gen) == ("w", "pre_restart", 0)
    assert isinstance(reason, Boom) and isinstance(message, Fail) and message.exc is reason
    assert probe.expect_msg_type(tuple)[:3] == ("w", "post_stop", 0)
    assert probe.expect_msg_type(tuple)[:3] == ("w", "post_restart", 1)


def test_call_fail_call_one_way(actor_system: ActorSystem, probe: Probe) -> None:
    # SupervisorSpec "one-way call-kill-call single actor OneForOne".
    sup = _supervisor(actor_system, [Exception], max_retries=3, within=5.0)
    w = _child(sup, worker_props(None, "w"))
    with event_filter(actor_system, Boom, occurrences=1):
        w.tell("ping", probe.ref)
        w.tell(Fail())
        w.tell("ping", probe.ref)
    probe.expect_msg("pong")
    probe.expect_msg("pong")
    probe.expect_no_message()


def test_ask_of_the_failing_message_raises_the_same_exception(actor_system: ActorSystem) -> None:
    # SupervisorSpec "kill single actor OneForOne" then "call-kill-call".
    sup = _supervisor(actor_system, [Exception], max_retries=3, within=5.0)
    w = _child(sup, worker_props(None, "w"))
    assert w.ask("ping", timeout=5.0) == "pong"
    failure = Boom("asked and failed")
    with event_filter(actor_system, Boom, occurrences=1), pytest.raises(Boom) as info:
        w.ask(Fail(failure), timeout=5.0)
    # The asker's own copy (issue 29): same type, arguments and traceback, another object.
    assert type(info.value) is Boom and info.value.args == failure.args
    assert info.value is not failure
    assert w.ask("ping", timeout=5.0) == "pong"


def test_only_the_failing_child_restarts_under_one_for_one(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorSpec "call-kill-call multiple actors OneForOne".
    sup = _supervisor(actor_system, [Exception], max_retries=3, within=5.0)
    ws = [_child(sup, worker_props(None, f"w{i}", start=i)) for i in range(3)]
    for w in ws:
        w.tell("inc")
    with event_filter(actor_system, Boom, occurrences=1, source=str(ws[1].path)):
        ws[1].tell(Fail())
    assert [w.ask("get", timeout=5.0) for w in ws] == [1, 1, 3]
    assert [w.ask("gen", timeout=5.0) for w in ws] == [0, 1, 0]


# -- STOP --------------------------------------------------------------------------------------


def test_stop_directive_stops_the_child_and_dead_letters_its_mailbox(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = _supervisor(actor_system, lambda e: Directive.STOP)
    w = _child(sup, worker_props(probe.ref, "w"))
    probe.expect_msg(("w", "pre_start", 0))
    watcher = Probe(actor_system)
    watcher.watch(w)
    dead = Probe(actor_system)
    actor_system.event_stream.subscribe(dead.ref, DeadLetter)
    with event_filter(actor_system, Boom, occurrences=1):
        w.tell(Fail())
        w.tell("queued behind the failure")
    watcher.expect_terminated(w)
    probe.expect_msg(("w", "post_stop", 0))
    letter = dead.fish_for_message(lambda m: isinstance(m, DeadLetter) and m.recipient == w)
    assert letter.message == "queued behind the failure" and letter.recipient == w


def test_default_decider_stops_on_kill(actor_system: ActorSystem, probe: Probe) -> None:
    sup = actor_system.actor_of(Props(Supervisor, SupervisorStrategy.default_strategy))
    w = _child(sup, worker_props(probe.ref, "w"))
    probe.expect_msg(("w", "pre_start", 0))
    probe.watch(w)
    with event_filter(actor_system, ActorKilledException, occurrences=1):
        w.tell(Kill)
    probe.expect_msg(("w", "post_stop", 0))
    probe.expect_terminated(w)


# -- ESCALATE ----------------------------------------------------------------------------------


def test_escalate_fails_the_parent_with_the_same_exception_object(
    actor_system: ActorSystem, probe: Probe
) -> None:
    seen: list[BaseException] = []

    def top_decider(exc: BaseException) -> Directive:
        seen.append(exc)
        return Directive.RESTART

    top = _supervisor(actor_system, top_decider)
    middle = _child(top, worker_props(probe.ref, "middle"))
    probe.expect_msg(("middle", "pre_start", 0))
    # the middle escalates everything (a sequence decider: nothing listed, all escalate)
    escalating = Props(Supervisor, OneForOneStrategy([]))
    mid2 = _child(top, escalating)
    leaf = _child(mid2, worker_props(probe.ref, "leaf"))
    probe.expect_msg(("leaf", "pre_start", 0))
    failure = Boom("escalated as is")
    with event_filter(actor_system, Boom, occurrences=1) as logged:
        leaf.tell(Fail(failure))
    assert seen == [failure] and seen[0] is failure
    assert logged.events[0].source == str(mid2.path)  # the level that handled it logs it
    # mid2 restarted (its default pre_restart stopped the leaf)
    assert probe.expect_msg_type(tuple)[:3] == ("leaf", "post_stop", 0)
    assert middle.ask("gen", timeout=5.0) == 0  # the sibling is untouched


def test_callable_decider_returning_none_escalates(actor_system: ActorSystem, probe: Probe) -> None:
    seen: list[BaseException] = []
    top = _supervisor(actor_system, lambda e: seen.append(e) or Directive.RESUME)
    middle = _child(top, Props(Supervisor, OneForOneStrategy(lambda e: None)))
    leaf = _child(middle, worker_props(probe.ref, "leaf", start=3))
    probe.expect_msg(("leaf", "pre_start", 0))
    failure = Boom("none means escalate")
    with event_filter(actor_system, Boom, occurrences=1, level=30):
        leaf.tell(Fail(failure))
    assert leaf.ask("get", timeout=5.0) == 3
    assert seen == [failure]


def test_fatal_base_exception_escalates_under_default_decider(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Severe(BaseException):
        pass

    seen: list[BaseException] = []
    top = _supervisor(actor_system, lambda e: seen.append(e) or Directive.RESTART)
    middle = _child(top, Props(Supervisor, SupervisorStrategy.default_strategy))
    leaf = _child(middle, worker_props(probe.ref, "leaf"))
    probe.expect_msg(("leaf", "pre_start", 0))
    failure = Severe("not an Exception")
    assert default_decider(failure) is Directive.ESCALATE
    with event_filter(actor_system, Severe, occurrences=1, source=str(middle.path)):
        leaf.tell(Fail(failure))
    assert probe.expect_msg_type(tuple)[:3] == ("leaf", "post_stop", 0)
    assert seen == [failure]


# -- deciders ----------------------------------------------------------------------------------


class _Base(Exception):
    pass


class _Derived(_Base):
    pass


@pytest.mark.parametrize("order", ["base-first", "derived-first"])
def test_mapping_decider_most_specific_type_wins(
    actor_system: ActorSystem, probe: Probe, order: str
) -> None:
    pairs = [(_Base, Directive.RESTART), (_Derived, Directive.RESUME)]
    if order == "derived-first":
        pairs.reverse()
    sup = _supervisor(actor_system, dict(pairs))
    w = _child(sup, worker_props(probe.ref, "w", start=7))
    probe.expect_msg(("w", "pre_start", 0))
    with event_filter(actor_system, _Derived, occurrences=1, level=30):
        w.tell(Fail(_Derived("resume me")))
    assert w.ask("get", timeout=5.0) == 7 and w.ask("gen", timeout=5.0) == 0
    with event_filter(actor_system, _Base, occurrences=1, level=40):
        w.tell(Fail(_Base("restart me")))
    assert w.ask("gen", timeout=5.0) == 1


def test_mapping_decider_without_match_escalates(actor_system: ActorSystem, probe: Probe) -> None:
    seen: list[BaseException] = []
    top = _supervisor(actor_system, lambda e: seen.append(e) or Directive.RESUME)
    middle = _child(top, Props(Supervisor, OneForOneStrategy({KeyError: Directive.STOP})))
    leaf = _child(middle, worker_props(probe.ref, "leaf"))
    probe.expect_msg(("leaf", "pre_start", 0))
    with event_filter(actor_system, Boom, occurrences=1):
        leaf.tell(Fail())
    assert leaf.ask("ping", timeout=5.0) == "pong"
    assert len(seen) == 1 and isinstance(seen[0], Boom)


def test_sequence_decider_restarts_listed_types(actor_system: ActorSystem, probe: Probe) -> None:
    sup = _supervisor(actor_system, [KeyError, Boom])
    w = _child(sup, worker_props(probe.ref, "w"))
    probe.expect_msg(("w", "pre_start", 0))
    with event_filter(actor_system, Boom, occurrences=1, level=40):
        w.tell(Fail())
    assert w.ask("gen", timeout=5.0) == 1


def test_failing_child_is_the_sender_while_deciding(actor_system: ActorSystem) -> None:
    # SupervisorMiscSpec "have access to the failing child's reference in supervisorStrategy".
    senders: list[Any] = []

    class Parent(Actor):
        @property  # type: ignore[override]
        def supervisor_strategy(self) -> SupervisorStrategy:
            def decide(exc: BaseException) -> Directive:
                senders.append(self.sender)
                return Directive.STOP

            return OneForOneStrategy(decide)

        def receive(self, message: Any) -> None:
            child = self.context.actor_of(Props.empty(), "child")
            child.tell(Kill)
            self.sender.tell(child)

    parent = actor_system.actor_of(Props(Parent), "parent")
    with event_filter(actor_system, ActorKilledException, occurrences=1):
        child = parent.ask("doit", timeout=5.0)
    assert senders == [child]
    assert senders[0].path.parent == parent.path and senders[0].path.name == "child"


def test_decider_that_raises_fails_the_supervisor(actor_system: ActorSystem, probe: Probe) -> None:
    broken = ValueError("the decider itself broke")
    seen: list[BaseException] = []

    def bad(exc: BaseException) -> Directive:
        raise broken

    top = _supervisor(actor_system, lambda e: seen.append(e) or Directive.RESTART)
    middle = _child(top, Props(Supervisor, OneForOneStrategy(bad)))
    leaf = _child(middle, worker_props(probe.ref, "leaf"))
    probe.expect_msg(("leaf", "pre_start", 0))
    with event_filter(actor_system, ValueError, occurrences=1, source=str(middle.path)):
        leaf.tell(Fail())
    assert seen == [broken]
    # the middle restarted: its default pre_restart stopped the leaf
    assert probe.expect_msg_type(tuple)[:3] == ("leaf", "post_stop", 0)


# -- the failure report --------------------------------------------------------------------------


def test_failure_report_overtakes_queued_ordinary_messages(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # Failed travels through the parent's system queue: the parent handles it before the
    # ordinary messages already waiting in its mailbox.
    order: list[str] = []
    kid_failed = Event()

    class Kid(Actor):
        def receive(self, message: Any) -> None:
            kid_failed.set()  # waiters run later, after the report below was sent
            raise Boom("kid failed")

    class Parent(Actor):
        supervisor_strategy = OneForOneStrategy(
            lambda e: order.append("decided") or Directive.RESUME
        )

        def __init__(self) -> None:
            self.kid = self.context.actor_of(Props(Kid), "kid")

        def receive(self, message: Any) -> None:
            if message == "start":
                self.kid.tell("fail")
                # Park until the kid failed: its report is then in our system queue,
                # ahead of the two ordinary messages already in our mailbox.
                assert kid_failed.wait(5.0)
                order.append("start done")
            else:
                order.append(message)
                if message == "last":
                    probe.ref.tell(list(order))

    parent = actor_system.actor_of(Props(Parent))
    with mute(actor_system, Boom):
        parent.tell("start")
        parent.tell("queued-1")
        parent.tell("last")
        assert probe.receive_one() == ["start done", "decided", "queued-1", "last"]


def test_stale_failure_reports_are_ignored(actor_system: ActorSystem, probe: Probe) -> None:
    # A Failed from a dead earlier incarnation of a same-named child (uid mismatch), or
    # from an actor that is not a child at all, changes nothing.
    decided: list[BaseException] = []
    sup = _supervisor(actor_system, lambda e: decided.append(e) or Directive.RESTART)
    old = _child(sup, worker_props(probe.ref, "old"), "kid")
    probe.expect_msg(("old", "pre_start", 0))
    probe.watch(old)
    actor_system.stop(old)
    probe.expect_msg(("old", "post_stop", 0))
    probe.expect_terminated(old)
    new = _child(sup, worker_props(probe.ref, "new", start=4), "kid")
    probe.expect_msg(("new", "pre_start", 0))
    assert new.path == old.path and new != old
    stranger = actor_system.actor_of(Props.empty())
    sup._send_system(sm.Failed(old, Boom("stale"), old._uid, 1))
    sup._send_system(sm.Failed(stranger, Boom("stranger"), stranger._uid, 1))
    assert new.ask("get", timeout=5.0) == 4
    assert new.ask("gen", timeout=5.0) == 0
    assert decided == []
    probe.expect_no_message()


def test_failure_of_a_child_being_stopped_is_ignored(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # The parent stops the child while the child is failing: its report is dropped and
    # the child is not restarted.
    decided: list[BaseException] = []
    failing = Event()
    release = Event()

    class Kid(Actor):
        def receive(self, message: Any) -> None:
            failing.set()
            release.wait(5.0)
            raise Boom("while being stopped")

        def post_restart(self, reason: BaseException) -> None:
            probe.ref.tell("kid restarted")

        def post_stop(self) -> None:
            probe.ref.tell("kid stopped")

    sup = _supervisor(actor_system, lambda e: decided.append(e) or Directive.RESTART)
    kid = _child(sup, Props(Kid))
    kid.tell("go")
    assert failing.wait(5.0)
    actor_system.stop(sup)
    # No message can tell us when the supervisor has begun stopping (it is waiting for
    # the busy kid); look at its state.
    await_condition(lambda: sup._cell.is_terminating, timeout=DEFAULT_TIMEOUT)
    release.set()
    probe.expect_msg("kid stopped")
    probe.expect_no_message()
    assert decided == []


# -- stress (SupervisorHierarchySpec "survive being stressed") ------------------------------------


class StressFailure(Exception):
    """Carries the directive the supervisor applies, after ``escalations`` escalations."""

    def __init__(self, directive: Directive, escalations: int) -> None:
        super().__init__(f"{directive.name} after {escalations} escalation(s)")
        self.directive = directive
        self.escalations = escalations


def _stress_decider(exc: BaseException) -> Directive:
    if isinstance(exc, StressFailure):
        if exc.escalations > 0:
            exc.escalations -= 1  # the very same object travels up
            return Directive.ESCALATE
        return exc.directive
    return Directive.STOP


class Hierarchy(Actor):
    supervisor_strategy = OneForOneStrategy(_stress_decider)

    def __init__(self, depth: int, breadth: int, errors: list[str], registry: list[Any]) -> None:
        self.depth = depth
        self.errors = errors
        self.failed = False  # this instance failed with RESTART: it must never run again
        if not self.context.children and depth > 1:
            for i in range(breadth):
                child = Props(Hierarchy, depth - 1, breadth, errors, registry)
                registry.append(self.context.actor_of(child, f"c{i}"))

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        pass  # keep the children: they are restarted as survivors

    def receive(self, message: Any) -> None:
        if self.failed:
            self.errors.append(f"{self.ref.path}: failed instance processed {message!r}")
        # Suspension travels down one level per hop (each child suspends its own
        # children when it processes its Suspend), so the invariant is per hop: an
        # actor never runs while its own parent is failed or suspended.
        parent = self._gactors_cell.parent_cell
        if parent.path.name != "user" and (parent.failed is not None or parent.suspend_count):
            self.errors.append(
                f"{self.ref.path}: ran while its parent was "
                f"{'failed' if parent.failed is not None else 'suspended'}"
            )
        if isinstance(message, StressFailure):
            self.failed = message.directive is Directive.RESTART and message.escalations == 0
            raise message
        self.sender.tell(("pong", self.ref.path.name))


@pytest.mark.parametrize("seed", [1234, 99])
def test_hierarchy_survives_random_failures(
    actor_system: ActorSystem, probe: Probe, seed: int
) -> None:
    rnd = random.Random(seed)
    errors: list[str] = []
    registry: list[Any] = []
    top = actor_system.actor_of(Props(Hierarchy, 3, 3, errors, registry), "stress")
    registry.append(top)
    assert top.ask("ping", timeout=5.0)[0] == "pong"
    for ref in list(registry):
        assert ref.ask("ping", timeout=5.0)[0] == "pong"  # all 13 built
    assert len(registry) == 13
    depth = {ref: len(ref.path.elements) - 1 for ref in registry}  # top is 1
    pings = 0
    with mute(actor_system, StressFailure):
        for _ in range(600):
            ref = rnd.choice(registry)
            if rnd.random() < 0.5:
                ref.tell("ping", probe.ref)
                pings += 1
            else:
                directive = rnd.choice([Directive.RESUME, Directive.RESTART])
                # decided inside the tree (the top's own failures go to /user: restart)
                escalations = rnd.randrange(max(depth[ref] - 1, 1))
                ref.tell(StressFailure(directive, escalations))
            if rnd.random() < 0.05:
                gevent.sleep(0)  # let the tree work now and then, mid-stream
        for ref in registry:  # at the end every actor must be responsive again
            ref.tell("ping", probe.ref)
            pings += 1
        got = probe.receive_n(pings, timeout=10.0)
    assert all(g[0] == "pong" for g in got)
    probe.expect_no_message(0.1)  # answered exactly once
    assert errors == []
    probe.watch(top)
    actor_system.stop(top)
    probe.expect_terminated(top)
    assert all(actor_system.lookup(r.path) is None for r in registry)

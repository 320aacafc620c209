"""All-for-one supervision (SPEC §6.2).

Ported scenarios: SupervisorSpec (kill / call-kill-call multiple actors AllForOne,
restart killed actors in a nested supervisor hierarchy, not restart a temporary actor
under all-for-one), SupervisorHierarchySpec ("restart manager and workers in
AllForOne").
"""

from __future__ import annotations

from typing import Any

import pytest
from gevent.event import Event

from gactors import (
    Actor,
    ActorKilledException,
    ActorSystem,
    AllForOneStrategy,
    Directive,
    Kill,
    OneForOneStrategy,
    Props,
    SupervisorStrategy,
)

from ._actors import Boom, Fail, Supervisor, worker_props
from ._kit import Probe, event_filter, mute


def _afo(system: ActorSystem, decider: Any = (Exception,), keep: bool = True, **kw: Any) -> Any:
    return system.actor_of(Props(Supervisor, AllForOneStrategy(list(decider), **kw), keep))


def _children(sup: Any, probe: Probe, tags: list[str], start: int = 0) -> list[Any]:
    refs = [sup.ask(worker_props(probe.ref, t, start), timeout=5.0) for t in tags]
    for t in tags:
        probe.expect_msg((t, "pre_start", 0))
    return refs


def _restarts(events: list[tuple[Any, ...]], tag: str) -> list[tuple[Any, ...]]:
    return [e for e in events if e[0] == tag]


def test_restart_restarts_every_child_with_the_same_reason(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = _afo(actor_system)
    a, b, c = _children(sup, probe, ["a", "b", "c"])
    failing = Fail(Boom("b fails"))
    with event_filter(actor_system, Boom, occurrences=1, source=str(b.path)):
        b.tell(failing)
        events = probe.receive_n(9)  # pre_restart, post_stop, post_restart for each
    for tag in ("a", "b", "c"):
        evs = _restarts(events, tag)
        assert [e[1] for e in evs] == ["pre_restart", "post_stop", "post_restart"]
        pre, _, post = evs
        assert pre[3] is failing.exc and post[3] is failing.exc
        # only the failing child sees its message; siblings get None
        assert pre[4] is (failing if tag == "b" else None)
    assert [r.ask("gen", timeout=5.0) for r in (a, b, c)] == [1, 1, 1]


def test_call_kill_call_multiple_actors(actor_system: ActorSystem, probe: Probe) -> None:
    sup = _afo(actor_system, max_retries=3, within=5.0)
    refs = _children(sup, probe, ["a", "b", "c"])
    for r in refs:
        assert r.ask("ping", timeout=5.0) == "pong"
    with event_filter(actor_system, Boom, occurrences=1), pytest.raises(Boom):
        refs[1].ask(Fail(), timeout=5.0)
    probe.receive_n(9)
    for r in refs:
        assert r.ask("ping", timeout=5.0) == "pong"


def test_resume_resumes_only_the_failing_child(actor_system: ActorSystem, probe: Probe) -> None:
    sup = actor_system.actor_of(Props(Supervisor, AllForOneStrategy(lambda e: Directive.RESUME)))
    a, b = _children(sup, probe, ["a", "b"], start=10)
    a.tell("inc")
    b.tell("inc")
    with event_filter(actor_system, Boom, occurrences=1, level=30):
        b.tell(Fail())
    assert [r.ask("get", timeout=5.0) for r in (a, b)] == [11, 11]
    assert [r.ask("gen", timeout=5.0) for r in (a, b)] == [0, 0]
    probe.expect_no_message()


def test_stop_stops_every_child(actor_system: ActorSystem, probe: Probe) -> None:
    sup = actor_system.actor_of(Props(Supervisor, AllForOneStrategy(lambda e: Directive.STOP)))
    a, b, c = _children(sup, probe, ["a", "b", "c"])
    for r in (a, b, c):
        probe.watch(r)
    with event_filter(actor_system, Boom, occurrences=1, level=40):
        a.tell(Fail())
    got = probe.receive_n(6)
    assert sorted(g[0] for g in got if isinstance(g, tuple)) == ["a", "b", "c"]
    assert {g.actor for g in got if not isinstance(g, tuple)} == {a, b, c}
    assert sup.ask(Props.empty(), timeout=5.0) is not None  # the supervisor lives on


def test_going_over_the_limit_stops_every_child(actor_system: ActorSystem, probe: Probe) -> None:
    # SupervisorSpec "not restart temporary actor" with all-for-one and a sibling.
    sup = _afo(actor_system, max_retries=0)
    a, b = _children(sup, probe, ["a", "b"])
    probe.watch(a)
    probe.watch(b)
    with event_filter(actor_system, Boom, occurrences=1):
        a.tell(Fail())
    got = probe.receive_n(4)
    assert {g for g in got if isinstance(g, tuple)} == {
        ("a", "post_stop", 0),
        ("b", "post_stop", 0),
    }
    assert {g.actor for g in got if not isinstance(g, tuple)} == {a, b}


def test_limit_counts_restarts_of_every_child(actor_system: ActorSystem, probe: Probe) -> None:
    # Each all-for-one restart counts for every child: with one restart allowed, the
    # second failure - of either child - stops both.
    sup = _afo(actor_system, max_retries=1)
    a, b = _children(sup, probe, ["a", "b"])
    with mute(actor_system, Boom):
        a.tell(Fail())
        assert len(probe.receive_n(6)) == 6
        b.tell(Fail())
        got = probe.receive_n(2)
    assert set(got) == {("a", "post_stop", 1), ("b", "post_stop", 1)}


def test_restart_manager_and_workers(actor_system: ActorSystem, probe: Probe) -> None:
    # SupervisorHierarchySpec: killing one worker of an all-for-one manager that
    # escalates everything restarts the manager and all three workers.
    class CountDown(Actor):
        def __init__(self, strategy: SupervisorStrategy, tag: str) -> None:
            self._strategy = strategy
            self.tag = tag

        @property  # type: ignore[override]
        def supervisor_strategy(self) -> SupervisorStrategy:
            return self._strategy

        def receive(self, message: Any) -> None:
            self.sender.tell(self.context.actor_of(message))

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            pass  # keeps its children

        def post_restart(self, reason: BaseException) -> None:
            probe.ref.tell(("restarted", self.tag))

    boss = actor_system.actor_of(Props(Supervisor, OneForOneStrategy([Exception])))
    manager = boss.ask(Props(CountDown, AllForOneStrategy([]), "manager"), timeout=5.0)
    workers = [
        manager.ask(Props(CountDown, SupervisorStrategy.default_strategy, f"w{i}"), timeout=5.0)
        for i in range(3)
    ]
    with event_filter(actor_system, ActorKilledException, occurrences=1, source=str(manager.path)):
        workers[0].tell(Kill)
        got = probe.receive_n(4)
    assert got[0] == ("restarted", "manager")
    assert sorted(got[1:]) == [("restarted", "w0"), ("restarted", "w1"), ("restarted", "w2")]


def test_restart_killed_actors_in_nested_hierarchy(actor_system: ActorSystem, probe: Probe) -> None:
    # SupervisorSpec: top (all-for-one, restart) > [pp1, middle (all-for-one, escalate
    # everything) > [pp2, pp3]]; killing pp2 restarts all three ping-pong actors.
    top = _afo(actor_system, max_retries=3, within=5.0)
    pp1 = top.ask(worker_props(probe.ref, "pp1"), timeout=5.0)
    middle = top.ask(
        Props(Supervisor, AllForOneStrategy([], max_retries=3, within=5.0), True), timeout=5.0
    )
    pp2 = middle.ask(worker_props(probe.ref, "pp2"), timeout=5.0)
    pp3 = middle.ask(worker_props(probe.ref, "pp3"), timeout=5.0)
    probe.receive_n(3)
    for r in (pp1, pp2, pp3):
        assert r.ask("ping", timeout=5.0) == "pong"
    with event_filter(actor_system, Boom, occurrences=1):
        pp2.tell(Fail())
        got = probe.receive_n(9)
    restarted = sorted(g[0] for g in got if g[1] == "post_restart")
    assert restarted == ["pp1", "pp2", "pp3"]
    for r in (pp1, pp2, pp3):
        assert r.ask("ping", timeout=5.0) == "pong"
        assert r.ask("gen", timeout=5.0) == 1


def test_siblings_queued_messages_survive_the_restart(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # A busy sibling's mailbox fills up while the decision is made; it finishes its
    # current message, is suspended and restarted, and the new instance then processes
    # every queued message exactly once.
    decided, gate, busy = Event(), Event(), Event()

    class Sibling(Actor):
        def __init__(self) -> None:
            self.count = 0
            probe.ref.tell("sibling built")

        def receive(self, message: Any) -> None:
            if message == "block":
                busy.set()
                gate.wait(5.0)
            elif message == "inc":
                self.count += 1
            else:
                self.sender.tell(self.count)

    def decide(exc: BaseException) -> Directive:
        decided.set()
        return Directive.RESTART

    sup = actor_system.actor_of(Props(Supervisor, AllForOneStrategy(decide)))
    a = sup.ask(worker_props(None, "a"), timeout=5.0)
    b = sup.ask(Props(Sibling), timeout=5.0)
    probe.expect_msg("sibling built")
    with mute(actor_system, Boom):
        b.tell("block")
        assert busy.wait(5.0)
        for _ in range(25):
            b.tell("inc")
        a.tell(Fail())
        assert decided.wait(5.0)
        gate.set()
        probe.expect_msg("sibling built")  # the restart happened ...
        assert b.ask("get", timeout=5.0) == 25  # ... before the queued messages


def test_child_being_stopped_is_left_out(actor_system: ActorSystem, probe: Probe) -> None:
    class Parent(Actor):
        supervisor_strategy = AllForOneStrategy([Exception])

        def __init__(self) -> None:
            self.a = self.context.actor_of(worker_props(probe.ref, "a"), "a")
            self.b = self.context.actor_of(worker_props(probe.ref, "b"), "b")

        def receive(self, message: Any) -> None:
            self.context.stop(self.a)
            self.b.tell(Fail())

    p = actor_system.actor_of(Props(Parent))
    probe.receive_n(2)
    with event_filter(actor_system, Boom, occurrences=1):
        p.tell("go")
        got = probe.receive_n(4)
    assert ("a", "post_stop", 0) in got
    assert [g[1] for g in got if g[0] == "b"] == ["pre_restart", "post_stop", "post_restart"]
    probe.expect_no_message()


def test_escalate_under_all_for_one_leaves_siblings_to_the_grandparent(
    actor_system: ActorSystem, probe: Probe
) -> None:
    top = actor_system.actor_of(Props(Supervisor, OneForOneStrategy(lambda e: Directive.RESUME)))
    middle = top.ask(
        Props(Supervisor, AllForOneStrategy(lambda e: Directive.ESCALATE)), timeout=5.0
    )
    a = middle.ask(worker_props(probe.ref, "a", 1), timeout=5.0)
    b = middle.ask(worker_props(probe.ref, "b", 2), timeout=5.0)
    probe.receive_n(2)
    with event_filter(actor_system, Boom, occurrences=1, level=30, source=str(middle.path)):
        a.tell(Fail())
    assert [r.ask("get", timeout=5.0) for r in (a, b)] == [1, 2]
    assert [r.ask("gen", timeout=5.0) for r in (a, b)] == [0, 0]
    probe.expect_no_message()

"""The restart sequence of SPEC §6.3, step by step, and its ordering guarantees.

Ported scenarios: SupervisorTreeSpec (kill the middle of a three-level tree and see it
and its child restarted), SupervisorSpec ("attempt restart when exception during
restart"), SupervisorHierarchySpec (restart keeps children when pre_restart does not
stop them), plus the exact §6.3 order recorded through one shared log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from gevent.event import Event

from gactors import (
    Actor,
    ActorRef,
    ActorSystem,
    DeadLetter,
    Directive,
    Identify,
    OneForOneStrategy,
    PostRestartException,
    PreRestartException,
    Props,
    Status,
    Terminated,
)

from ._actors import Boom, Fail, Supervisor, worker_props
from ._kit import Probe, event_filter, mute

# -- the shared-log tree ---------------------------------------------------------------------


class Node(Actor):
    """One actor of a recorded tree: every hook and message goes into ``journal``.

    ``tree`` maps child names to their own subtrees; children are created in the
    constructor unless they survived a restart. With ``keep`` the restart hooks keep
    the children (so they are restarted as survivors, step (f)); without it the
    default ``pre_restart`` stops them and the new instance creates them again.
    """

    def __init__(
        self,
        name: str,
        tree: dict[str, Any],
        journal: list[tuple[Any, ...]],
        gens: dict[str, int],
        keep: bool,
        ready: ActorRef,
    ) -> None:
        self.name = name
        self.journal = journal
        self.keep = keep
        self.ready = ready
        self.gen = gens.get(name, 0)
        gens[name] = self.gen + 1
        journal.append(("init", name, self.gen))
        for child, sub in tree.items():
            if self.context.child(child) is None:
                self.context.actor_of(Props(Node, child, sub, journal, gens, keep, ready), child)

    def pre_start(self) -> None:
        self.journal.append(("pre_start", self.name, self.gen))
        self.ready.tell(("started", self.name, self.gen))

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        self.journal.append(("pre_restart", self.name, self.gen, reason, message))
        if self.name == "r":
            # Messages sent *during* the restart: processed afterwards, exactly once.
            targets = [self.ref]
            if self.keep:
                targets += [self.context.system.lookup(p) for p in ("/user/r/m", "/user/r/m/l")]
            for target in targets:
                for k in range(3):
                    target.tell(("during", k))
        if not self.keep:
            super().pre_restart(reason, message)

    def post_restart(self, reason: BaseException) -> None:
        self.journal.append(("post_restart", self.name, self.gen, reason))
        super().post_restart(reason)  # default: pre_start

    def post_stop(self) -> None:
        self.journal.append(("post_stop", self.name, self.gen))

    def receive(self, message: Any) -> None:
        if isinstance(message, Fail):
            self.journal.append(("fail", self.name, self.gen))
            raise message.exc
        if message == "sync":
            self.sender.tell(("synced", self.name))
            return
        self.journal.append(("msg", self.name, self.gen, message))


TREE = {"m": {"l": {}}}
N = 20


def _build(
    system: ActorSystem, probe: Probe, keep: bool
) -> tuple[list[tuple[Any, ...]], dict[str, ActorRef]]:
    journal: list[tuple[Any, ...]] = []
    system.actor_of(Props(Node, "r", TREE, journal, {}, keep, probe.ref), "r")
    started = {probe.expect_msg_type(tuple)[1] for _ in range(3)}
    assert started == {"r", "m", "l"}
    refs = {
        name: system.lookup(f"/user/{path}")
        for name, path in [("r", "r"), ("m", "r/m"), ("l", "r/m/l")]
    }
    assert all(refs.values())
    return journal, refs  # type: ignore[return-value]


def _hooks(journal: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [e for e in journal if e[0] != "msg"]


def _messages(journal: list[tuple[Any, ...]], name: str) -> list[tuple[int, Any]]:
    return [(e[2], e[3]) for e in journal if e[0] == "msg" and e[1] == name]


def _sync(refs: dict[str, ActorRef], names: Iterator[str] | list[str]) -> None:
    for name in names:
        assert refs[name].ask("sync", timeout=5.0) == ("synced", name)


def test_exact_restart_order_with_survivors_and_no_lost_messages(
    actor_system: ActorSystem, probe: Probe
) -> None:
    """SPEC §6.3 (a)-(g) on a three-level tree whose hooks keep the children."""
    journal, refs = _build(actor_system, probe, keep=True)
    del journal[:]
    cause = Boom("r fails")
    failing = Fail(cause)
    with event_filter(actor_system, Boom, occurrences=1, source=str(refs["r"].path)):
        refs["r"].tell(failing)
        for i in range(N):  # queued while the tree is suspended and restarting
            for name in ("r", "m", "l"):
                refs[name].tell(i)
        _sync(refs, ["r", "m", "l"])

    assert _hooks(journal) == [
        ("fail", "r", 0),
        ("pre_restart", "r", 0, cause, failing),  # (b) on the old instance
        ("init", "r", 1),  # (d) the factory builds a new instance
        ("post_restart", "r", 1, cause),  # (e)
        ("pre_start", "r", 1),  # the default post_restart
        ("pre_restart", "m", 0, cause, None),  # (f) survivors: parent's cause, no message
        ("init", "m", 1),
        ("post_restart", "m", 1, cause),
        ("pre_start", "m", 1),
        ("pre_restart", "l", 0, cause, None),  # ... recursively
        ("init", "l", 1),
        ("post_restart", "l", 1, cause),
        ("pre_start", "l", 1),
    ]
    during = [(1, ("during", k)) for k in range(3)]
    # (g) every queued message is processed once, in order, by the new instance; the
    # failing message is not processed again (no second "fail" above).
    assert _messages(journal, "r") == [(1, i) for i in range(N)] + during
    for name in ("m", "l"):
        got = _messages(journal, name)
        assert got == [(1, i) for i in range(N)] + during
        restarted_at = journal.index(("post_restart", name, 1, cause))
        first_msg = next(k for k, e in enumerate(journal) if e[0] == "msg" and e[1] == name)
        assert first_msg > restarted_at
    # the refs stay the same
    assert actor_system.lookup("/user/r/m/l") == refs["l"]


def test_exact_restart_order_with_default_hooks(actor_system: ActorSystem, probe: Probe) -> None:
    """Default hooks: children stopped bottom-up, waited for, and created anew (§6.3 b-e)."""
    journal, refs = _build(actor_system, probe, keep=False)
    del journal[:]
    cause = Boom("r fails")
    failing = Fail(cause)
    with event_filter(actor_system, Boom, occurrences=1, source=str(refs["r"].path)):
        refs["r"].tell(failing)
        for i in range(N):
            refs["r"].tell(i)
        probe.receive_n(3)  # the new r, m and l started
        _sync(refs, ["r"])

    assert _hooks(journal) == [
        ("fail", "r", 0),
        ("pre_restart", "r", 0, cause, failing),
        ("post_stop", "r", 0),  # called by the default pre_restart
        ("post_stop", "l", 0),  # (c) the children stop bottom-up ...
        ("post_stop", "m", 0),
        ("init", "r", 1),  # ... before the new instance is built
        ("post_restart", "r", 1, cause),
        ("pre_start", "r", 1),
        ("init", "m", 1),  # the same names, re-created by the new constructor
        ("pre_start", "m", 1),
        ("init", "l", 1),
        ("pre_start", "l", 1),
    ]
    assert _messages(journal, "r") == [(1, i) for i in range(N)] + [
        (1, ("during", k)) for k in range(3)
    ]
    new_m = actor_system.lookup("/user/r/m")
    assert new_m is not None and new_m != refs["m"]


def test_killing_the_middle_restarts_it_and_its_child(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorTreeSpec: pre_restart runs for the middle actor, then for its child.
    class Level(Actor):
        supervisor_strategy = OneForOneStrategy([Exception], max_retries=3, within=1.0)

        def receive(self, message: Any) -> None:
            if isinstance(message, Props):
                self.sender.tell(self.context.actor_of(message))
            elif isinstance(message, Fail):
                raise message.exc

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            probe.ref.tell(self.ref.path)

    head = actor_system.actor_of(Props(Level))
    middle = head.ask(Props(Level), timeout=5.0)
    last = middle.ask(Props(Level), timeout=5.0)
    with event_filter(actor_system, Boom, occurrences=1):
        middle.tell(Fail())
    probe.expect_msg(middle.path)
    probe.expect_msg(last.path)
    probe.expect_no_message()


def test_child_already_stopping_is_not_restarted_but_waited_for(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # A child stopped just before the failure is no survivor: it is not restarted, and
    # the new instance is built only once it has terminated (its post_stop is slow).
    hold = Event()

    class SlowStop(Actor):
        def post_stop(self) -> None:
            hold.wait(5.0)
            probe.ref.tell(("a", "post_stop"))

    class Parent(Actor):
        def __init__(self) -> None:
            if not self.context.children:
                self.a = self.context.actor_of(Props(SlowStop), "a")
                self.context.actor_of(worker_props(probe.ref, "b"), "b")

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            probe.ref.tell(("parent", "pre_restart"))  # keeps the children
            hold.set()

        def post_restart(self, reason: BaseException) -> None:
            names = tuple(c.name for c in self.context.children)
            probe.ref.tell(("parent", "post_restart", names))

        def receive(self, message: Any) -> None:
            self.context.stop(self.a)
            raise Boom("stop a, then fail")

    p = actor_system.actor_of(Props(Parent))
    probe.expect_msg(("b", "pre_start", 0))
    with event_filter(actor_system, Boom, occurrences=1):
        p.tell("go")
        got = probe.receive_n(6)
    assert got[:3] == [
        ("parent", "pre_restart"),
        ("a", "post_stop"),
        ("parent", "post_restart", ("b",)),
    ]
    assert [g[1] for g in got[3:]] == ["pre_restart", "post_stop", "post_restart"]
    assert all(g[0] == "b" for g in got[3:])
    probe.expect_no_message()


def test_exceptions_during_restart_are_logged_and_restart_retried(
    actor_system: ActorSystem,
) -> None:
    # SupervisorSpec "attempt restart when exception during restart": instance 0 fails
    # in pre_restart (logged, restart goes on), instance 1 in its constructor
    # (PostRestartException, restarted: a fresh creation), instance 2 works.
    inits = [0]

    class Dying(Actor):
        def __init__(self) -> None:
            self.init = inits[0]
            inits[0] += 1
            if self.init % 3 == 1:
                raise ValueError("Don't wanna!")

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            if self.init % 3 == 0:
                raise ValueError("Don't wanna!")

        def receive(self, message: Any) -> None:
            if message == "ping":
                self.sender.tell("pong")
            else:
                failure = Boom("Expected")
                self.sender.tell(Status.Failure(failure))
                raise failure

    sup = actor_system.actor_of(
        Props(Supervisor, OneForOneStrategy([Exception], max_retries=3, within=10.0))
    )
    dying = sup.ask(Props(Dying), timeout=5.0)
    with (
        event_filter(actor_system, Boom, message="Expected", occurrences=1),
        event_filter(actor_system, PreRestartException, message="Don't wanna!", occurrences=1),
        event_filter(actor_system, PostRestartException, message="Don't wanna!", occurrences=1),
        pytest.raises(Boom),
    ):
        dying.ask("die", timeout=5.0)
    assert dying.ask("ping", timeout=5.0) == "pong"
    assert inits[0] == 3


def test_post_restart_failure_is_post_restart_exception_stopped_by_default(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class BadPostRestart(Actor):
        def post_restart(self, reason: BaseException) -> None:
            raise ValueError("post_restart broke")

        def receive(self, message: Any) -> None:
            raise Boom("first failure")

    a = actor_system.actor_of(Props(BadPostRestart))
    probe.watch(a)
    with (
        event_filter(actor_system, Boom, occurrences=1),
        event_filter(actor_system, PostRestartException, occurrences=1, level=40) as logged,
    ):
        a.tell("fail")
        probe.expect_terminated(a)
    exc = logged.events[0].cause
    assert isinstance(exc, PostRestartException)
    assert isinstance(exc.__cause__, ValueError) and isinstance(exc.original_cause, Boom)
    assert str(a.path) in str(exc)


def test_pending_child_failure_waits_while_parent_is_suspended(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # A child's report that arrives while its parent is itself failed waits; when the
    # grandparent resumes the parent, the parent's strategy handles it then.
    decided: list[str] = []
    gp_deciding = Event()
    release_gp = Event()
    kid_busy = Event()
    kid_go = Event()

    def gp_decider(exc: BaseException) -> Directive:
        decided.append("gp")
        gp_deciding.set()
        release_gp.wait(5.0)
        return Directive.RESUME

    class Kid(Actor):
        def receive(self, message: Any) -> None:
            kid_busy.set()
            kid_go.wait(5.0)
            raise Boom("kid")

        def post_restart(self, reason: BaseException) -> None:
            probe.ref.tell(("kid restarted", reason))

    def parent_decider(exc: BaseException) -> Directive:
        decided.append(f"parent:{exc}")
        return Directive.RESTART

    gp = actor_system.actor_of(Props(Supervisor, OneForOneStrategy(gp_decider)))
    parent = gp.ask(Props(Supervisor, OneForOneStrategy(parent_decider)), timeout=5.0)
    kid = parent.ask(Props(Kid), timeout=5.0)
    with mute(actor_system, Boom):
        kid.tell("work")
        assert kid_busy.wait(5.0)
        parent.tell(Fail(Boom("parent")))  # the parent fails while the kid is busy
        assert gp_deciding.wait(5.0)
        kid_go.set()  # the kid fails now: its parent is suspended
        probe.expect_no_message(0.3)  # ... so nobody decides on the kid meanwhile
        assert decided == ["gp"]
        release_gp.set()
        event, reason = probe.expect_msg_type(tuple)
    assert event == "kid restarted" and str(reason) == "kid"
    assert decided == ["gp", "parent:kid"]


@pytest.mark.parametrize("keep", [True, False])
def test_pending_child_failure_settled_by_parent_restart(
    actor_system: ActorSystem, probe: Probe, keep: bool
) -> None:
    # SPEC §6.2: "a child restarted as part of its parent's restart has its pending
    # failure settled by that restart" - it is not restarted a second time, and the
    # parent's strategy never decides on it. Without kept children the pending report
    # comes from a child being stopped and is dropped as well.
    kid_failed = Event()
    decided: list[BaseException] = []
    builds: list[str] = []

    class Kid(Actor):
        def __init__(self) -> None:
            builds.append("kid")

        def receive(self, message: Any) -> None:
            kid_failed.set()
            raise Boom("kid fails first")

    class Parent(Actor):
        @property  # type: ignore[override]
        def supervisor_strategy(self) -> OneForOneStrategy:
            return OneForOneStrategy(lambda e: decided.append(e) or Directive.RESTART)

        def __init__(self) -> None:
            builds.append("parent")
            if self.context.child("kid") is None:
                self.kid = self.context.actor_of(Props(Kid), "kid")
            else:
                self.kid = self.context.child("kid")

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            if not keep:
                super().pre_restart(reason, message)

        def receive(self, message: Any) -> None:
            if message == "sync":
                self.sender.tell(len(self.context.children))
                return
            self.kid.tell("fail")
            assert kid_failed.wait(5.0)  # the kid's Failed is now in our system queue
            raise Boom("parent fails before handling it")

    parent = actor_system.actor_of(Props(Parent), "parent")
    with mute(actor_system, Boom):
        parent.tell("go")
        assert parent.ask("sync", timeout=5.0) == 1
        kid = actor_system.lookup("/user/parent/kid")
        assert kid is not None
        assert kid.ask(Identify("ping"), timeout=5.0).ref == kid
    assert decided == []
    assert builds == ["parent", "kid", "parent", "kid"]


def test_escalated_failure_restart_gives_survivors_no_message(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # The middle escalates; the top restarts it keeping its children, so both leaves
    # are restarted as survivors with the escalated exception as reason and
    # message=None: SPEC 3 ("None for sibling/child/escalation restarts") and 6.3(f)
    # ("surviving children are restarted ... with message=None"), even for the leaf
    # whose own message failed. (Akka passes that leaf its message; the spec wins.)
    class Leaf(Actor):
        def receive(self, message: Any) -> None:
            raise message.exc

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            probe.ref.tell((self.ref.path.name, reason, message))

    top = actor_system.actor_of(Props(Supervisor, OneForOneStrategy(lambda e: Directive.RESTART)))
    middle = top.ask(
        Props(Supervisor, OneForOneStrategy(lambda e: Directive.ESCALATE), True), timeout=5.0
    )
    origin = middle.ask((Props(Leaf), "origin"), timeout=5.0)
    middle.ask((Props(Leaf), "sibling"), timeout=5.0)
    failing = Fail(Boom("escalated, then restarted"))
    with event_filter(actor_system, Boom, occurrences=1, source=str(middle.path)):
        origin.tell(failing)
        got = {name: (reason, message) for name, reason, message in probe.receive_n(2)}
    assert got == {"origin": (failing.exc, None), "sibling": (failing.exc, None)}
    assert got["origin"][0] is failing.exc


def test_system_messages_not_lost_when_the_decider_raises(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorSpec "not lose system messages when a NonFatal exception occurs when
    # processing a system message": the decider rethrows, the parent is restarted by
    # /user, its pre_restart stops (without unwatching) the child, and the new parent
    # instance still gets the child's Terminated.
    gate = Event()
    dead = Probe(actor_system)
    actor_system.event_stream.subscribe(dead.ref, DeadLetter)

    class Child(Actor):
        def post_restart(self, reason: BaseException) -> None:
            probe.ref.tell("child restarted")

        def receive(self, message: Any) -> None:
            if message == "latch":
                gate.wait(5.0)
                raise ValueError("OHNOES")
            self.sender.tell("child green")

    def decider(exc: BaseException) -> Directive:
        if isinstance(exc, ValueError) and str(exc) == "OHNOES":
            raise exc
        return Directive.RESTART

    class Parent(Actor):
        supervisor_strategy = OneForOneStrategy(decider)

        def __init__(self) -> None:
            self.child = self.context.watch(self.context.actor_of(Props(Child), "child"))

        def post_restart(self, reason: BaseException) -> None:
            probe.ref.tell("parent restarted")

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            for c in self.context.children:  # stop, but keep watching (no unwatch)
                self.context.stop(c)
            self.post_stop()

        def receive(self, message: Any) -> None:
            if type(message) is Terminated and message.actor.path == self.child.path:
                probe.ref.tell("child terminated")
            elif message == "latch":
                self.child.tell("latch")
            elif message == "test":
                self.sender.tell("green")
            elif message == "testchild":
                self.child.forward("test")
            elif message == "testchildAndAck":
                self.child.forward("test")
                self.sender.tell("ack")

    parent = actor_system.actor_of(Props(Parent), "parent")
    parent.tell("latch")
    assert parent.ask("testchildAndAck", timeout=5.0) == "ack"
    with event_filter(actor_system, ValueError, "OHNOES", occurrences=1, source=str(parent.path)):
        gate.set()
        probe.expect_msg("parent restarted")
        probe.expect_msg("child terminated")
    letter = dead.fish_for_message(lambda m: isinstance(m, DeadLetter) and m.message == "test")
    assert letter.recipient.path.name == "child"
    assert parent.ask("test", timeout=5.0) == "green"
    assert parent.ask("testchild", timeout=5.0) == "child green"
    probe.expect_no_message(0.1)  # the child was never restarted

"""Lifecycle hooks: pre_start, pre_restart, post_restart, post_stop (SPEC §3, §6.3-6.5).

Ported scenarios: ActorLifeCycleSpec (hooks over several restarts, the defaults,
never-restarted actors, failures in post_stop, the behavior stack), SupervisorSpec
("restart properly when same instance is returned"), SupervisorMiscSpec (named
children created in the constructor).
"""

from __future__ import annotations

from typing import Any

from gevent.event import Event

from gactors import (
    Actor,
    ActorKilledException,
    ActorSystem,
    Directive,
    Kill,
    OneForOneStrategy,
    PoisonPill,
    Props,
    Terminated,
)

from ._actors import Boom, Fail, Supervisor
from ._kit import Probe, event_filter


class LifeCycle(Actor):
    """Reports ``(event, id, generation)``; the generation comes from a shared counter."""

    def __init__(self, report: Any, ident: str, gens: list[int]) -> None:
        self.report = report
        self.ident = ident
        self.gen = gens[0]
        gens[0] += 1

    def tell(self, event: str) -> None:
        self.report.tell((event, self.ident, self.gen))

    def pre_start(self) -> None:
        self.tell("pre_start")

    def post_stop(self) -> None:
        self.tell("post_stop")

    def receive(self, message: Any) -> None:
        if message == "status":
            self.sender.tell(("OK", self.ident, self.gen))
        elif isinstance(message, Fail):
            raise message.exc


class LifeCycleWithRestartHooks(LifeCycle):
    def pre_restart(self, reason: BaseException, message: Any) -> None:
        self.tell("pre_restart")

    def post_restart(self, reason: BaseException) -> None:
        self.tell("post_restart")


def _supervisor(system: ActorSystem, **kw: Any) -> Any:
    return system.actor_of(Props(Supervisor, OneForOneStrategy([Exception], **kw)))


def test_overridden_restart_hooks_over_several_restarts(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = _supervisor(actor_system, max_retries=3)
    a = sup.ask(Props(LifeCycleWithRestartHooks, probe.ref, "x", [0]), timeout=5.0)
    probe.expect_msg(("pre_start", "x", 0))
    with event_filter(actor_system, ActorKilledException, occurrences=4):
        for gen in range(3):
            a.tell(Kill)
            probe.expect_msg(("pre_restart", "x", gen))
            probe.expect_msg(("post_restart", "x", gen + 1))
            a.tell("status", probe.ref)
            probe.expect_msg(("OK", "x", gen + 1))
        a.tell(Kill)  # over the limit: stopped, and only post_stop runs
        probe.expect_msg(("post_stop", "x", 3))
    probe.expect_no_message()


def test_default_restart_hooks_call_post_stop_then_pre_start(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = _supervisor(actor_system, max_retries=3)
    a = sup.ask(Props(LifeCycle, probe.ref, "x", [0]), timeout=5.0)
    probe.expect_msg(("pre_start", "x", 0))
    with event_filter(actor_system, ActorKilledException, occurrences=4):
        for gen in range(3):
            a.tell(Kill)
            probe.expect_msg(("post_stop", "x", gen))
            probe.expect_msg(("pre_start", "x", gen + 1))
            a.tell("status", probe.ref)
            probe.expect_msg(("OK", "x", gen + 1))
        a.tell(Kill)
        probe.expect_msg(("post_stop", "x", 3))
    probe.expect_no_message()


def test_restart_hooks_not_called_when_never_restarted(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = _supervisor(actor_system, max_retries=3)
    a = sup.ask(Props(LifeCycleWithRestartHooks, probe.ref, "x", [0]), timeout=5.0)
    probe.expect_msg(("pre_start", "x", 0))
    a.tell("status", probe.ref)
    probe.expect_msg(("OK", "x", 0))
    actor_system.stop(a)
    probe.expect_msg(("post_stop", "x", 0))
    probe.expect_no_message()


def test_failure_in_post_stop_is_logged_and_the_actor_still_terminates(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class BadStop(Actor):
        def post_stop(self) -> None:
            raise Boom("hurrah")

    a = actor_system.actor_of(Props(BadStop))
    probe.watch(a)
    with event_filter(actor_system, Boom, message="hurrah", occurrences=1, level=40):
        a.tell(PoisonPill)
    probe.expect_terminated(a)


def test_behavior_stack_is_reset_on_restart(actor_system: ActorSystem) -> None:
    class Hot(Actor):
        def receive(self, message: Any) -> None:
            if message == "become":
                self.context.become(self.other, discard_old=False)
                self.sender.tell("ok")
            else:
                self.sender.tell(42)

        def other(self, message: Any) -> None:
            if message == "fail":
                raise Boom("buh")
            self.sender.tell(43)

    a = actor_system.actor_of(Props(Hot))
    assert a.ask("hello", timeout=5.0) == 42
    assert a.ask("become", timeout=5.0) == "ok"
    assert a.ask("hello", timeout=5.0) == 43
    with event_filter(actor_system, Boom, message="buh", occurrences=1):
        a.tell("fail")
    assert a.ask("hello", timeout=5.0) == 42


def test_pre_restart_gets_the_failing_message_and_post_restart_the_reason(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Hooks(Actor):
        def receive(self, message: Any) -> None:
            raise message.exc

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            probe.ref.tell(("pre_restart", reason, message))

        def post_restart(self, reason: BaseException) -> None:
            probe.ref.tell(("post_restart", reason))

    a = actor_system.actor_of(Props(Hooks))
    failing = Fail(Boom("why"))
    with event_filter(actor_system, Boom, occurrences=1):
        a.tell(failing)
    assert probe.receive_one() == ("pre_restart", failing.exc, failing)
    event, reason = probe.receive_one()
    assert event == "post_restart" and reason is failing.exc


def test_restart_works_when_the_factory_returns_the_same_instance(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorSpec "restart properly when same instance is returned".
    counts = {"pre_restart": 0, "post_restart": 0, "pre_start": 0, "post_stop": 0}

    class Reused(Actor):
        def _hook(self, name: str) -> None:
            counts[name] += 1
            probe.ref.tell(f"{name}{counts[name]}")

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            self._hook("pre_restart")

        def post_restart(self, reason: BaseException) -> None:
            self._hook("post_restart")

        def pre_start(self) -> None:
            self._hook("pre_start")

        def post_stop(self) -> None:
            self._hook("post_stop")

        def receive(self, message: Any) -> None:
            if message == "crash":
                probe.ref.tell("crashed")
                raise Boom("expected")
            self.sender.tell("pong")

    cache: list[Reused] = []

    def factory() -> Reused:
        if not cache:
            cache.append(Reused())
        return cache[0]

    class Master(Actor):
        supervisor_strategy = OneForOneStrategy([Exception], max_retries=3)

        def __init__(self) -> None:
            self.child = self.context.actor_of(Props(factory))

        def receive(self, message: Any) -> None:
            self.child.forward(message)

    master = actor_system.actor_of(Props(Master))
    probe.expect_msg("pre_start1")
    master.tell("ping", probe.ref)
    probe.expect_msg("pong")
    with event_filter(actor_system, Boom, message="expected", occurrences=4):
        for i in range(1, 4):
            master.tell("crash")
            probe.expect_msg("crashed")
            probe.expect_msg(f"pre_restart{i}")
            probe.expect_msg(f"post_restart{i}")
            master.tell("ping", probe.ref)
            probe.expect_msg("pong")
        master.tell("crash")
        probe.expect_msg("crashed")
        probe.expect_msg("post_stop1")
    probe.expect_no_message()


def test_named_children_created_in_constructor_survive_restarts(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorMiscSpec "be able to create named children in its constructor": the
    # default pre_restart stops "bob" and the restart waits for it, so the new
    # instance can create "bob" again.
    class Parent(Actor):
        def __init__(self) -> None:
            self.bob = self.context.actor_of(Props.empty(), "bob")

        def pre_start(self) -> None:
            probe.ref.tell(("pre_start", self.bob))

        def receive(self, message: Any) -> None:
            if isinstance(message, Exception):
                raise message
            self.sender.tell(self.context.children)

    a = actor_system.actor_of(Props(Parent))
    _, bob1 = probe.expect_msg_type(tuple)
    with event_filter(actor_system, Boom, message="weird message", occurrences=1):
        a.tell(Boom("weird message"))
    _, bob2 = probe.expect_msg_type(tuple)
    assert bob1.path == bob2.path and bob1 != bob2
    assert a.ask("children", timeout=5.0) == (bob2,)


def test_default_pre_restart_waits_for_children_before_building_new_instance(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SPEC §6.3 (c): the new instance is built only once the children stopped in
    # pre_restart have terminated; a slow child post_stop holds the restart back.
    release = Event()

    class SlowStop(Actor):
        def post_stop(self) -> None:
            probe.ref.tell("child post_stop begins")
            release.wait(5.0)
            probe.ref.tell("child post_stop ends")

    class Parent(Actor):
        def __init__(self) -> None:
            probe.ref.tell("parent built")
            self.context.actor_of(Props(SlowStop), "slow")

        def receive(self, message: Any) -> None:
            raise Boom("restart me")

    a = actor_system.actor_of(Props(Parent))
    probe.expect_msg("parent built")
    with event_filter(actor_system, Boom, occurrences=1):
        a.tell("fail")
        probe.expect_msg("child post_stop begins")
        probe.expect_no_message(0.3)  # the new instance is not built meanwhile
        release.set()
        probe.expect_msg("child post_stop ends")
        probe.expect_msg("parent built")


def test_default_pre_restart_unwatches_children(actor_system: ActorSystem, probe: Probe) -> None:
    # The default pre_restart unwatches before stopping: the stopped children's
    # Terminated never reaches the new instance (no DeathPactException).
    class Parent(Actor):
        def __init__(self) -> None:
            self.kid = self.context.watch(self.context.actor_of(Props.empty()))
            probe.ref.tell(("built", self.kid))

        def receive(self, message: Any) -> None:
            if type(message) is Terminated:
                probe.ref.tell(("terminated", message.actor))
            elif message == "fail":
                raise Boom("restart")
            else:
                self.sender.tell("alive")

    a = actor_system.actor_of(Props(Parent))
    _, kid1 = probe.expect_msg_type(tuple)
    with event_filter(actor_system, Boom, occurrences=1):
        a.tell("fail")
    event, kid2 = probe.expect_msg_type(tuple)
    assert event == "built" and kid2 != kid1
    assert a.ask("are you alive?", timeout=5.0) == "alive"
    probe.expect_no_message()


def test_context_usable_in_constructor(actor_system: ActorSystem, probe: Probe) -> None:
    class Early(Actor):
        def __init__(self) -> None:
            probe.ref.tell(
                (self.ref, self.context.self, self.context.parent, len(self.context.children))
            )
            self.log.debug("logging works in __init__")

    a = actor_system.actor_of(Props(Early), "early")
    ref, self_ref, parent, nchildren = probe.expect_msg_type(tuple)
    assert ref == a and self_ref == a
    assert str(parent.path).endswith("/user") and nchildren == 0


def test_post_stop_runs_after_a_stop_directive_but_no_restart_hooks(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = actor_system.actor_of(Props(Supervisor, OneForOneStrategy(lambda e: Directive.STOP)))
    a = sup.ask(Props(LifeCycleWithRestartHooks, probe.ref, "x", [0]), timeout=5.0)
    probe.expect_msg(("pre_start", "x", 0))
    with event_filter(actor_system, Boom, occurrences=1):
        a.tell(Fail())
    probe.expect_msg(("post_stop", "x", 0))
    probe.expect_no_message()

"""The three guardians and fatal exceptions (SPEC §5, §6.6).

Ported scenarios: SupervisorSpec ("log pre-creation check failures when creating a
top-level actor"), ActorSystemSpec/guardian behaviour of Akka classic (the user
guardian's configurable strategy, escalation from ``/user`` terminating the system, the
system guardian outliving user actors, termination callbacks after every actor).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from greenlet import GreenletExit

from gactors import (
    Actor,
    ActorInitializationException,
    ActorKilledException,
    ActorSystem,
    Directive,
    Identify,
    IllegalStateError,
    Kill,
    OneForOneStrategy,
    PluginError,
    Props,
    StoppingSupervisorStrategy,
    SupervisorStrategy,
    SupervisorStrategyConfigurator,
    Terminated,
)

from ._actors import Boom, Fail, worker_props
from ._kit import Probe, event_filter, mute


class Severe(BaseException):
    """Not an ``Exception``: escalated by the default decider."""


class EscalateAll(SupervisorStrategyConfigurator):
    def create(self) -> SupervisorStrategy:
        return OneForOneStrategy(lambda e: Directive.ESCALATE)


@contextmanager
def system_with(**config: Any) -> Iterator[ActorSystem]:
    system = ActorSystem("guardians", config=config)
    try:
        yield system
    finally:
        system.terminate()
        assert system.await_termination(10.0), system.tree()


def _raiser() -> Props:
    return worker_props(None, "top")


# -- /user ------------------------------------------------------------------------------------


def test_top_level_actors_are_children_of_user(actor_system: ActorSystem) -> None:
    class Top(Actor):
        def receive(self, message: Any) -> None:
            self.sender.tell(self.context.parent)

    top = actor_system.actor_of(Props(Top), "top")
    parent = top.ask("parent?", timeout=5.0)
    assert str(top.path) == "gactors://supervision/user/top"
    assert parent.path.elements == ("user",) and top.path.parent == parent.path


def test_default_guardian_restarts_failing_top_level_actor(actor_system: ActorSystem) -> None:
    top = actor_system.actor_of(_raiser())
    with event_filter(actor_system, Boom, occurrences=1, level=40, source=str(top.path)):
        top.tell(Fail())
    assert top.ask("gen", timeout=5.0) == 1


@pytest.mark.parametrize("how", ["kill", "creation"])
def test_default_guardian_stops_top_level_actor(
    actor_system: ActorSystem, probe: Probe, how: str
) -> None:
    # SupervisorSpec "log pre-creation check failures when creating a top-level actor".
    class Broken(Actor):
        def __init__(self) -> None:
            raise Boom("cannot start")

    exc_type = ActorKilledException if how == "kill" else ActorInitializationException
    with event_filter(actor_system, exc_type, occurrences=1, level=40):
        top = actor_system.actor_of(_raiser() if how == "kill" else Props(Broken))
        probe.watch(top)
        if how == "kill":
            top.tell(Kill)
        probe.expect_terminated(top)
    assert not actor_system.is_terminated


@pytest.mark.parametrize("setting", ["stopping", StoppingSupervisorStrategy])
def test_stopping_guardian_strategy_stops_failing_top_level_actors(setting: Any) -> None:
    with system_with(guardian_supervisor_strategy=setting) as system:
        probe = Probe(system)
        top = system.actor_of(_raiser())
        probe.watch(top)
        with event_filter(system, Boom, occurrences=1, level=40):
            top.tell(Fail())
            probe.expect_terminated(top)
        assert not system.is_terminated
        assert system.actor_of(_raiser()).ask("ping", timeout=5.0) == "pong"


def test_escalation_from_user_guardian_terminates_the_system(actor_system: ActorSystem) -> None:
    class Stopped(Actor):
        def post_stop(self) -> None:
            stopped.append(self.ref.path.name)

    stopped: list[str] = []
    bystander = actor_system.actor_of(Props(Stopped), "bystander")
    assert bystander.ask(Identify(1), timeout=5.0).ref == bystander
    top = actor_system.actor_of(_raiser(), "top")
    with event_filter(
        actor_system, Severe, occurrences=1, level=40, source="gactors://supervision/user"
    ):
        top.tell(Fail(Severe("not an Exception")))
        assert actor_system.await_termination(5.0)
    assert stopped == ["bystander"]
    with pytest.raises(IllegalStateError):
        actor_system.actor_of(_raiser())


@pytest.mark.parametrize("form", ["class", "instance", "path"])
def test_custom_configurator_escalating_everything(form: str) -> None:
    setting: Any = {
        "class": EscalateAll,
        "instance": EscalateAll(),
        "path": f"{__name__}:EscalateAll",
    }[form]
    with system_with(guardian_supervisor_strategy=setting) as system:
        top = system.actor_of(_raiser())
        with mute(system, Boom):
            top.tell(Fail())
            assert system.await_termination(5.0)


def test_unknown_guardian_strategy_is_rejected_at_construction() -> None:
    with pytest.raises(PluginError, match="no-such-strategy"):
        ActorSystem("bad", config={"guardian_supervisor_strategy": "no-such-strategy"})


# -- /system ------------------------------------------------------------------------------------


class Recorder(Actor):
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal

    def receive(self, message: Any) -> None:
        if isinstance(message, Fail):
            raise message.exc
        if message == "sync":
            self.sender.tell("synced")
            return
        self.journal.append(f"got {message}")

    def post_restart(self, reason: BaseException) -> None:
        self.journal.append("restarted")

    def post_stop(self) -> None:
        self.journal.append("recorder stopped")


def _system_actor(system: ActorSystem, props: Props, name: str) -> Any:
    # The framework's own actors live under /system; tests create one the same way.
    return system.system_cell.attach_child(props, name)


def test_system_guardian_outlives_user_actors_during_shutdown() -> None:
    journal: list[str] = []

    class User(Actor):
        def __init__(self, recorder: Any) -> None:
            self.recorder = recorder

        def post_stop(self) -> None:
            journal.append("user stopped")
            self.recorder.tell("user's last words")

    with system_with() as system:
        recorder = _system_actor(system, Props(Recorder, journal), "recorder")
        for i in range(3):
            system.actor_of(Props(User, recorder), f"u{i}")
        assert system.lookup("/user/u2") is not None
        system.terminate()
        assert system.await_termination(5.0)
    # every user actor stopped first; the recorder got all their last words, then stopped
    assert sorted(journal[:-1]) == ["got user's last words"] * 3 + ["user stopped"] * 3
    assert journal[-1] == "recorder stopped"
    assert journal.index("user stopped") < journal.index("got user's last words")


def test_probe_under_system_sees_user_actors_terminate_on_shutdown(
    actor_system: ActorSystem, probe: Probe
) -> None:
    tops = [actor_system.actor_of(Props.empty(), f"t{i}") for i in range(3)]
    for t in tops:
        probe.watch(t)
    actor_system.terminate()
    assert {probe.expect_msg_type(Terminated).actor for _ in tops} == set(tops)
    assert actor_system.await_termination(5.0)


@pytest.mark.parametrize(
    ("failure", "restarted"),
    [(Boom("restart me"), True), (ActorKilledException("kill"), False)],
)
def test_system_guardian_strategy(
    actor_system: ActorSystem, probe: Probe, failure: Exception, restarted: bool
) -> None:
    journal: list[str] = []
    rec = _system_actor(actor_system, Props(Recorder, journal), "rec")
    probe.watch(rec)
    with event_filter(actor_system, type(failure), occurrences=1, level=40):
        rec.tell(Fail(failure))
        if restarted:
            rec.tell("after")
            assert rec.ask("sync", timeout=5.0) == "synced"
        else:
            probe.expect_terminated(rec)
    if restarted:
        assert journal == ["recorder stopped", "restarted", "got after"]
    else:
        assert journal == ["recorder stopped"]


def test_system_guardian_stops_child_whose_creation_failed(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Broken(Actor):
        def __init__(self) -> None:
            raise Boom("no")

    with event_filter(actor_system, ActorInitializationException, occurrences=1):
        ref = _system_actor(actor_system, Props(Broken), "broken")
        probe.watch(ref)
        probe.expect_terminated(ref)


def test_system_guardian_escalation_terminates_the_system(actor_system: ActorSystem) -> None:
    rec = _system_actor(actor_system, Props(Recorder, []), "rec")
    with mute(actor_system, Severe):
        rec.tell(Fail(Severe("escalated by /system")))
        assert actor_system.await_termination(5.0)


# -- termination -----------------------------------------------------------------------------


def test_termination_hooks_run_after_every_actor_in_reverse_order() -> None:
    journal: list[str] = []

    class Last(Actor):
        def post_stop(self) -> None:
            journal.append("actor stopped")

    with system_with() as system:
        system.actor_of(Props(Last))
        system.register_on_termination(lambda: journal.append("hook 1"))
        system.register_on_termination(lambda: journal.append("hook 2"))
        assert system.terminate() is system.terminate()  # idempotent
        assert system.await_termination(5.0)
        with pytest.raises(IllegalStateError):
            system.register_on_termination(lambda: None)
    assert journal == ["actor stopped", "hook 2", "hook 1"]


# -- fatal exceptions (SPEC §6.6) ---------------------------------------------------------------


@pytest.mark.parametrize("fatal", [SystemExit(3), KeyboardInterrupt()])
def test_fatal_exceptions_stop_the_system_and_propagate(
    actor_system: ActorSystem, probe: Probe, fatal: BaseException
) -> None:
    top = actor_system.actor_of(_raiser())
    assert top.ask("ping", timeout=5.0) == "pong"
    with pytest.raises(type(fatal)) as info:
        top.tell(Fail(fatal))
        probe.receive_one(5.0)  # blocked in the hub: gevent re-raises it here
    assert info.value is fatal
    assert actor_system.await_termination(5.0)


def test_greenlet_exit_is_not_swallowed(actor_system: ActorSystem, probe: Probe) -> None:
    top = actor_system.actor_of(_raiser())
    probe.watch(top)
    top.tell(Fail(GreenletExit()))
    probe.expect_terminated(top)
    assert actor_system.await_termination(5.0)


def test_a_fatal_exception_in_a_system_message_is_handled_once(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # The system message whose handler raised a fatal exception is consumed: when the
    # cell is run again (to stop) it does not run the hook a second time.
    calls: list[str] = []

    class FatalStart(Actor):
        def pre_start(self) -> None:
            calls.append("pre_start")
            raise SystemExit(4)

        def receive(self, message: Any) -> None:
            pass

    with pytest.raises(SystemExit):
        actor_system.actor_of(Props(FatalStart))
        probe.receive_one(5.0)  # blocked in the hub: gevent re-raises it here
    assert actor_system.await_termination(5.0)
    assert calls == ["pre_start"]


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
def test_unknown_guardian_strategy_names_the_known_ones() -> None:
    with pytest.raises(PluginError, match="default"):
        ActorSystem("bad", config={"guardian_supervisor_strategy": "no-such-strategy"})

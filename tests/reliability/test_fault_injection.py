"""Fault injection (issue 8): faults outside ``receive``'s ordinary exceptions.

Each test injects one fault and checks its documented outcome (the catalogue is
``docs/reliability.md``): the system keeps working, or terminates, but never hangs,
and nothing is lost silently.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import gevent
import greenlet
import pytest
from gevent.event import Event
from zope.interface import implementer

from gactors import (
    Actor,
    ActorInitializationException,
    ActorRef,
    ActorSystem,
    DeadLetter,
    Directive,
    Kill,
    OneForOneStrategy,
    PoisonPill,
    PostRestartException,
    PreRestartException,
    Props,
    SupervisorStrategy,
    SupervisorStrategyConfigurator,
    Terminated,
    UnhandledMessage,
    plugins,
)
from gactors.interfaces import ISupervisorStrategy
from gactors.testkit import TestProbe, event_filter

WAIT = 5.0


class Boom(Exception):
    pass


class BadStr(Exception):
    """An exception whose text cannot be taken."""

    def __str__(self) -> str:
        raise RuntimeError("broken __str__")


class BadRepr:
    """A message whose repr raises."""

    def __repr__(self) -> str:
        raise RuntimeError("broken __repr__")


class MyBase(BaseException):
    """A BaseException that is neither an Exception nor one of the fatal three."""


class Collect:
    """A plain-callable event-stream subscriber that keeps what it gets."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)


@pytest.fixture
def probe(system: ActorSystem) -> TestProbe:
    return TestProbe(system)


# -- actors ----------------------------------------------------------------------------------------
class Reporter(Actor):
    """Reports its lifecycle to ``probe``; ``"ping"`` → ``("pong", generation)``;
    an exception instance as a message is raised; ``"block"`` waits on ``gate``."""

    generation = 0

    def __init__(self, probe: ActorRef, gate: Event | None = None) -> None:
        self.probe = probe
        self.gate = gate
        Reporter.generation += 1
        self.gen = Reporter.generation

    def pre_start(self) -> None:
        self.probe.tell(("pre_start", self.gen))

    def post_stop(self) -> None:
        self.probe.tell(("post_stop", self.gen))

    def post_restart(self, reason: BaseException) -> None:
        self.probe.tell(("post_restart", self.gen))

    def receive(self, message: Any) -> None:
        if isinstance(message, BaseException):
            raise message
        if message == "ping":
            self.sender.tell(("pong", self.gen))
        elif message == "block":
            self.probe.tell(greenlet.getcurrent())
            assert self.gate is not None
            self.gate.wait()
            self.probe.tell("unblocked")
        else:
            self.probe.tell(message)


class Parent(Actor):
    """Creates a ``Reporter`` child on ``("child", name)``, any child on ``("props",
    props, name)`` (replies with the ref); supervises with ``strategy``; exception
    instances as messages are raised; anything else goes to ``probe``."""

    def __init__(self, probe: ActorRef, strategy: Any = None, gate: Event | None = None) -> None:
        self.probe = probe
        self.gate = gate
        self._strategy = strategy if strategy is not None else SupervisorStrategy.default_strategy

    @property  # type: ignore[override]
    def supervisor_strategy(self) -> Any:
        return self._strategy

    def pre_start(self) -> None:
        self.probe.tell(("parent started", self.ref))

    def post_restart(self, reason: BaseException) -> None:
        self.probe.tell(("parent restarted", type(reason).__name__))

    def receive(self, message: Any) -> None:
        if isinstance(message, tuple) and message[0] == "child":
            props = Props(Reporter, self.probe, self.gate)
            self.sender.tell(self.context.actor_of(props, message[1]))
        elif isinstance(message, tuple) and message[0] == "props":
            self.sender.tell(self.context.actor_of(message[1], message[2]))
        elif isinstance(message, BaseException):
            raise message
        else:
            self.probe.tell(message)


def start_parent(system: ActorSystem, probe: TestProbe, strategy: Any, name: str = "p") -> ActorRef:
    parent = system.actor_of(Props(Parent, probe.ref, strategy), name)
    assert probe.expect_msg_type(tuple)[0] == "parent started"
    return parent


def start_child(parent: ActorRef, probe: TestProbe, name: str = "c") -> ActorRef:
    child = parent.ask(("child", name), timeout=WAIT)
    assert probe.expect_msg_type(tuple)[0] == "pre_start"
    return child  # type: ignore[no-any-return]


def expect_all(probe: TestProbe, *expected: Any) -> None:
    """The next ``len(expected)`` messages are ``expected`` in any order (they come from
    different actors: their relative order is not specified)."""
    got = probe.receive_n(len(expected), timeout=WAIT)
    rest = list(got)
    for e in expected:
        for i, g in enumerate(rest):
            if g == e:
                del rest[i]
                break
        else:
            raise AssertionError(f"expected {expected!r} in any order, got {got!r}")


# -- supervision machinery that raises ------------------------------------------------------------
def test_a_decider_that_raises_fails_the_supervisor(system: ActorSystem, probe: TestProbe) -> None:
    def decider(exc: BaseException) -> Directive:
        raise RuntimeError("decider broken")

    parent = start_parent(system, probe, OneForOneStrategy(decider))
    child = start_child(parent, probe)
    gen = Reporter.generation
    probe.watch(child)
    # The supervisor fails with the decider's exception; /user restarts it, and the
    # default pre_restart stops the child that was being decided on.
    with event_filter(system, RuntimeError, message="decider broken", source=parent):
        child.tell(Boom("child fails"))
        expect_all(
            probe, ("post_stop", gen), Terminated(child), ("parent restarted", "RuntimeError")
        )
    parent.tell("still there")
    probe.expect_msg("still there")


def test_a_decider_returning_garbage_fails_the_supervisor(
    system: ActorSystem, probe: TestProbe
) -> None:
    garbage: Any = lambda exc: "restart"  # noqa: E731
    parent = start_parent(system, probe, OneForOneStrategy(garbage))
    child = start_child(parent, probe)
    gen = Reporter.generation
    probe.watch(child)
    with event_filter(system, TypeError, message="decider returned", source=parent):
        child.tell(Boom())
        expect_all(probe, ("post_stop", gen), Terminated(child), ("parent restarted", "TypeError"))


def test_a_decider_that_raises_escalates_to_a_resuming_grandparent(
    system: ActorSystem, probe: TestProbe
) -> None:
    """The supervisor's failure counts as an escalation of the child's: when the
    grandparent resumes the supervisor, the child resumes too, its state kept."""

    def broken(exc: BaseException) -> Directive:
        raise RuntimeError("decider broken")

    grand = start_parent(system, probe, OneForOneStrategy({RuntimeError: Directive.RESUME}), "g")
    props = Props(Parent, probe.ref, OneForOneStrategy(broken))
    parent = grand.ask(("props", props, "p"), timeout=WAIT)
    assert probe.expect_msg_type(tuple)[0] == "parent started"
    child = start_child(parent, probe)
    gen = Reporter.generation
    with event_filter(system, RuntimeError, message="decider broken", level=logging.WARNING):
        child.tell(Boom())
        child.tell("after")
        probe.expect_msg("after")
    assert child.ask("ping", timeout=WAIT) == ("pong", gen)  # the same instance
    probe.expect_no_message(0.05)  # nothing stopped, nothing restarted


@implementer(ISupervisorStrategy)
class BrokenPluginStrategy:
    """A plugin strategy whose ``handle_failure`` or ``handle_child_terminated`` raises."""

    def __init__(self, fail_on_failure: bool, fail_on_terminated: bool) -> None:
        self.decider = lambda exc: Directive.RESTART
        self.fail_on_failure = fail_on_failure
        self.fail_on_terminated = fail_on_terminated

    def handle_failure(
        self, context: Any, child: ActorRef, cause: BaseException, stats: Any, children: Any
    ) -> bool:
        if self.fail_on_failure:
            raise RuntimeError("plugin handle_failure broken")
        SupervisorStrategy.restart_child(child, cause, suspend_first=False)
        return True

    def handle_child_terminated(self, context: Any, child: ActorRef, children: Any) -> None:
        if self.fail_on_terminated:
            raise RuntimeError("plugin handle_child_terminated broken")


@pytest.fixture
def broken_plugin() -> Iterator[str]:
    name = "reliability-broken"
    plugins.register_strategy(name, BrokenPluginStrategy(True, False), replace=True)
    try:
        yield name
    finally:
        plugins.unregister("strategy", name)


def test_a_plugin_strategy_whose_handle_failure_raises(
    system: ActorSystem, probe: TestProbe, broken_plugin: str
) -> None:
    strategy = plugins.get_strategy(broken_plugin)
    parent = start_parent(system, probe, strategy)
    child = start_child(parent, probe)
    gen = Reporter.generation
    probe.watch(child)
    with event_filter(system, RuntimeError, message="handle_failure broken", source=parent):
        child.tell(Boom())
        expect_all(
            probe, ("post_stop", gen), Terminated(child), ("parent restarted", "RuntimeError")
        )


def test_a_strategy_whose_handle_child_terminated_raises(
    system: ActorSystem, probe: TestProbe
) -> None:
    parent = start_parent(system, probe, BrokenPluginStrategy(False, True))
    child = start_child(parent, probe)
    # A running supervisor fails with it (and is restarted by /user)...
    with event_filter(system, RuntimeError, message="handle_child_terminated broken"):
        system.stop(child)
        assert probe.expect_msg_type(tuple)[0] == "post_stop"
        assert probe.expect_msg_type(tuple) == ("parent restarted", "RuntimeError")
    # ...a stopping one only logs it, and stops.
    start_child(parent, probe, "c2")
    probe.watch(parent)
    with event_filter(system, RuntimeError, message="handle_child_terminated failed"):
        system.stop(parent)
        assert probe.expect_msg_type(tuple)[0] == "post_stop"
        probe.expect_terminated(parent)


def test_a_supervisor_strategy_property_that_raises_or_is_not_a_strategy(
    system: ActorSystem, probe: TestProbe
) -> None:
    class NoStrategy(Parent):
        @property  # type: ignore[override]
        def supervisor_strategy(self) -> Any:
            return "not a strategy"

    parent = system.actor_of(Props(NoStrategy, probe.ref), "p")
    assert probe.expect_msg_type(tuple)[0] == "parent started"
    child = start_child(parent, probe)
    # It fails at every use: deciding on the child (/user restarts the parent), then
    # again when that restart stops the child (logged: the parent is failed already).
    with event_filter(
        system, TypeError, message="supervisor_strategy must be", source=parent, occurrences=2
    ):
        child.tell(Boom())
        assert probe.expect_msg_type(tuple)[0] == "post_stop"
        assert probe.expect_msg_type(tuple) == ("parent restarted", "TypeError")


def test_a_configurator_whose_create_raises() -> None:
    class Broken(SupervisorStrategyConfigurator):
        def create(self) -> SupervisorStrategy:
            raise RuntimeError("configurator broken")

    class NotAStrategy(SupervisorStrategyConfigurator):
        def create(self) -> Any:
            return object()

    with pytest.raises(RuntimeError, match="configurator broken"):
        ActorSystem("broken", config={"guardian_supervisor_strategy": Broken})
    with pytest.raises(plugins.PluginError, match="guardian_supervisor_strategy"):
        ActorSystem("broken", config={"guardian_supervisor_strategy": NotAStrategy})


# -- the event stream ------------------------------------------------------------------------------
def test_a_subscriber_that_raises_is_logged_and_others_still_get_the_event(
    system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: Any) -> None:
        raise RuntimeError("subscriber broken")

    after = Collect()
    system.event_stream.subscribe(broken, str)
    system.event_stream.subscribe(after, str)
    with caplog.at_level(logging.ERROR, logger="gactors.eventstream"):
        system.event_stream.publish("hello")
    assert after.events == ["hello"]
    assert any("subscriber broken" in r.getMessage() or r.exc_info for r in caplog.records)


def test_a_subscriber_that_raises_on_dead_letters_does_not_disturb_the_sender(
    system: ActorSystem, probe: TestProbe
) -> None:
    def broken(event: Any) -> None:
        raise RuntimeError("subscriber broken")

    seen = Collect()
    system.event_stream.subscribe(broken, DeadLetter)
    system.event_stream.subscribe(seen, DeadLetter)
    dead = system.actor_of(Props(Reporter, probe.ref), "dead")
    probe.expect_msg_type(tuple)
    probe.watch(dead)
    dead.tell(PoisonPill)
    assert probe.expect_msg_type(tuple)[0] == "post_stop"
    probe.expect_terminated(dead)
    dead.tell("lost")  # tell never raises, whatever the subscribers do
    assert [e.message for e in seen.events] == ["lost"]


def test_a_subscriber_raising_a_fatal_exception_reaches_the_publisher(system: ActorSystem) -> None:
    def fatal(event: Any) -> None:
        raise SystemExit("subscriber exits")

    system.event_stream.subscribe(fatal, str)
    with pytest.raises(SystemExit, match="subscriber exits"):
        system.event_stream.publish("hello")


def test_an_actor_publishing_to_a_fatal_subscriber_terminates_the_system(
    system: ActorSystem,
) -> None:
    """A fatal exception raised in a subscriber called from an actor is a fatal
    exception of that actor: the system terminates and gevent re-raises it."""

    def fatal(event: Any) -> None:
        raise SystemExit("subscriber exits")

    system.event_stream.subscribe(fatal, UnhandledMessage)
    ref = system.actor_of(Props.empty(), "nobody")  # every message is unhandled
    ref.tell("unhandled")
    with pytest.raises(SystemExit, match="subscriber exits"):
        system.await_termination(WAIT)
    assert system.await_termination(WAIT)


class BrokenHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise RuntimeError("logging handler broken")


@pytest.fixture
def broken_log_handler(capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    logger = logging.getLogger("gactors")
    handler = BrokenHandler()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def test_a_logging_handler_that_raises_breaks_neither_tell_nor_supervision(
    system: ActorSystem,
    probe: TestProbe,
    broken_log_handler: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    gen = probe.expect_msg_type(tuple)[1]
    ref.tell(Boom("logged through a broken handler"))  # the failure log is made in the hub
    assert probe.expect_msg_type(tuple) == ("post_stop", gen)
    assert probe.expect_msg_type(tuple) == ("post_restart", gen + 1)
    assert ref.ask("ping", timeout=WAIT) == ("pong", gen + 1)
    probe.watch(ref)
    system.stop(ref)
    probe.expect_msg_type(tuple)
    probe.expect_terminated(ref)
    ref.tell("dead letter logged from this greenlet")  # tell never raises
    gevent.sleep(0.05)
    assert "logging handler broken" in capsys.readouterr().err


# -- scheduler and timers ---------------------------------------------------------------------
def test_a_scheduled_callable_that_raises_is_logged_and_not_repeated(
    system: ActorSystem, probe: TestProbe, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise RuntimeError("task broken")

    with caplog.at_level(logging.ERROR, logger="gactors.scheduler"):
        task = system.scheduler.schedule_with_fixed_delay(0.0, 0.01, broken)
        system.scheduler.schedule_once(0.2, probe.ref, "later")
        probe.expect_msg("later")
    assert calls == [1]
    assert task.cancelled
    assert any("will not run again" in r.getMessage() for r in caplog.records)


def test_a_scheduled_tell_to_a_stopped_actor_is_a_dead_letter(
    system: ActorSystem, probe: TestProbe
) -> None:
    seen = Collect()
    system.event_stream.subscribe(seen, DeadLetter)
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    probe.expect_msg_type(tuple)
    probe.watch(ref)
    system.stop(ref)
    probe.expect_msg_type(tuple)
    probe.expect_terminated(ref)
    system.scheduler.schedule_once(0.0, ref, "too late")
    system.scheduler.schedule_once(0.05, probe.ref, "after")
    probe.expect_msg("after")
    assert [(e.message, e.recipient) for e in seen.events] == [("too late", ref)]


def test_a_scheduled_callable_raising_a_fatal_exception_reaches_the_main_greenlet(
    system: ActorSystem, probe: TestProbe
) -> None:
    """Scheduled callables run in the hub: gevent hands a fatal exception to the main
    greenlet; the actor system is not an actor's failure and keeps running."""

    def fatal() -> None:
        raise SystemExit("task exits")

    system.scheduler.schedule_once(0.0, fatal)
    with pytest.raises(SystemExit, match="task exits"):
        gevent.sleep(0.5)
    ref = system.actor_of(Props(Reporter, probe.ref), "alive")
    assert ref.ask("ping", timeout=WAIT)[0] == "pong"


class TimerFails(Actor):
    """Its fixed-delay timer's message makes it fail (every time)."""

    def __init__(self, probe: ActorRef) -> None:
        self.probe = probe

    def pre_start(self) -> None:
        self.timers.start_timer_with_fixed_delay("tick", "tick", 0.01)
        self.probe.tell("started")

    def receive(self, message: Any) -> None:
        if message == "tick":
            raise Boom("timer target fails")


def test_a_timer_whose_message_fails_the_actor_is_supervised(
    system: ActorSystem, probe: TestProbe
) -> None:
    parent = start_parent(system, probe, OneForOneStrategy(max_retries=2))
    # Each instance fails on its first tick; the restart cancels the old timer and
    # pre_start starts a new one; the third failure goes over the limit: stopped.
    with event_filter(system, Boom, message="timer target fails", occurrences=3):
        child = parent.ask(("props", Props(TimerFails, probe.ref), "t"), timeout=WAIT)
        probe.watch(child)
        for _ in range(3):
            probe.expect_msg("started")
        probe.expect_terminated(child)
    probe.expect_no_message(0.1)  # no timer of a stopped actor fires


# -- unhandled, and text that cannot be taken -----------------------------------------------------
def test_an_unhandled_that_raises_is_an_ordinary_failure(
    system: ActorSystem, probe: TestProbe
) -> None:
    class Strict(Reporter):
        def receive(self, message: Any) -> None:
            if message == "ping":
                self.sender.tell(("pong", self.gen))
            else:
                self.unhandled(message)

        def unhandled(self, message: Any) -> None:
            raise LookupError(f"cannot handle {message!r}")

    ref = system.actor_of(Props(Strict, probe.ref), "strict")
    probe.expect_msg_type(tuple)
    with event_filter(system, LookupError, message="cannot handle"):
        ref.tell("what?")
        assert probe.expect_msg_type(tuple)[0] == "post_stop"  # default: restart
    assert ref.ask("ping", timeout=WAIT)[0] == "pong"


def test_an_exception_whose_str_raises_is_supervised_normally(
    system: ActorSystem, probe: TestProbe
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    gen = probe.expect_msg_type(tuple)[1]
    with event_filter(system, BadStr, message="str() raised", occurrences=1):
        ref.tell(BadStr())
        assert probe.expect_msg_type(tuple) == ("post_stop", gen)
        assert probe.expect_msg_type(tuple) == ("post_restart", gen + 1)
    assert ref.ask("ping", timeout=WAIT) == ("pong", gen + 1)
    assert not system.is_terminated


def test_a_constructor_raising_an_exception_whose_str_raises(
    system: ActorSystem, probe: TestProbe
) -> None:
    class BadCtor(Actor):
        def __init__(self) -> None:
            raise BadStr()

    probe_ref = system.actor_of(Props(Reporter, probe.ref), "witness")
    probe.expect_msg_type(tuple)
    with event_filter(system, ActorInitializationException, message="str() raised"):
        ref = system.actor_of(Props(BadCtor), "bad")
        probe.watch(ref)
        probe.expect_terminated(ref)  # the default decider stops it, as for any init failure
    assert probe_ref.ask("ping", timeout=WAIT)[0] == "pong"


def test_pre_restart_failing_on_a_message_whose_repr_raises(
    system: ActorSystem, probe: TestProbe
) -> None:
    class FailingPreRestart(Reporter):
        def receive(self, message: Any) -> None:
            if isinstance(message, BadRepr):
                raise Boom("fails on the bad message")
            super().receive(message)

        def pre_restart(self, reason: BaseException, message: Any) -> None:
            raise BadStr()

    ref = system.actor_of(Props(FailingPreRestart, probe.ref), "r")
    gen = probe.expect_msg_type(tuple)[1]
    with (
        event_filter(system, PreRestartException, message="repr() raised"),
        event_filter(system, Boom),
    ):
        ref.tell(BadRepr())
        assert probe.expect_msg_type(tuple) == ("post_restart", gen + 1)
    assert ref.ask("ping", timeout=WAIT) == ("pong", gen + 1)


def test_post_restart_raising_an_exception_whose_str_raises(
    system: ActorSystem, probe: TestProbe
) -> None:
    class FailingPostRestart(Reporter):
        def post_restart(self, reason: BaseException) -> None:
            raise BadStr()

    ref = system.actor_of(Props(FailingPostRestart, probe.ref), "r")
    gen = probe.expect_msg_type(tuple)[1]
    probe.watch(ref)
    with (
        event_filter(system, PostRestartException, message="str() raised"),
        event_filter(system, Boom),
    ):
        ref.tell(Boom())
        # PostRestartException: the default decider stops it (the new instance had
        # failed, so no post_stop for it).
        expect_all(probe, ("post_stop", gen), Terminated(ref))


def test_a_dead_letter_whose_repr_raises(system: ActorSystem, probe: TestProbe) -> None:
    seen = Collect()
    system.event_stream.subscribe(seen, DeadLetter)
    system.dead_letters.tell(BadRepr())
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    probe.expect_msg_type(tuple)
    assert ref.ask("ping", timeout=WAIT)[0] == "pong"
    assert len(seen.events) == 1 and isinstance(seen.events[0].message, BadRepr)


# -- BaseExceptions inside receive -------------------------------------------------------------
def test_greenlet_exit_in_receive_terminates_the_system(
    system: ActorSystem, probe: TestProbe
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    gen = probe.expect_msg_type(tuple)[1]
    ref.tell(greenlet.GreenletExit())
    assert system.await_termination(WAIT)
    assert probe.expect_msg_type(tuple) == ("post_stop", gen)  # stopped, not restarted


@pytest.mark.parametrize(
    "exc", [KeyboardInterrupt(), SystemExit(3)], ids=["KeyboardInterrupt", "SystemExit"]
)
def test_a_fatal_exception_in_receive_terminates_the_system_and_is_reraised(
    system: ActorSystem, probe: TestProbe, exc: BaseException
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    gen = probe.expect_msg_type(tuple)[1]
    ref.tell(exc)
    # gevent re-raises it in the main greenlet (here: the test, waiting).
    with pytest.raises(type(exc)):
        system.await_termination(WAIT)
    assert system.await_termination(WAIT)
    assert probe.expect_msg_type(tuple) == ("post_stop", gen)


def test_a_custom_base_exception_escalates_to_the_root_and_terminates_the_system(
    system: ActorSystem, probe: TestProbe
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    gen = probe.expect_msg_type(tuple)[1]
    with event_filter(system, MyBase, occurrences=None):
        ref.tell(MyBase("not an Exception"))
        assert system.await_termination(WAIT)
    assert probe.expect_msg_type(tuple) == ("post_stop", gen)


def test_a_custom_base_exception_is_supervised_by_a_strategy_that_handles_it(
    system: ActorSystem, probe: TestProbe
) -> None:
    parent = start_parent(system, probe, OneForOneStrategy({MyBase: Directive.RESTART}))
    child = start_child(parent, probe)
    with event_filter(system, MyBase):
        child.tell(MyBase())
        assert probe.expect_msg_type(tuple)[0] == "post_stop"
        assert probe.expect_msg_type(tuple)[0] == "post_restart"
    assert child.ask("ping", timeout=WAIT)[0] == "pong"


# -- greenlets killed from outside ------------------------------------------------------------
def test_killing_the_worker_of_a_blocked_actor_terminates_the_system(
    system: ActorSystem, probe: TestProbe
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref, Event()), "r")
    gen = probe.expect_msg_type(tuple)[1]
    ref.tell("block")
    worker = probe.expect_msg_type(greenlet.greenlet)
    gevent.kill(worker)  # GreenletExit inside receive: fatal, as SPEC 6.6 says
    assert system.await_termination(WAIT)
    assert probe.expect_msg_type(tuple) == ("post_stop", gen)
    assert worker.dead


def test_throwing_an_exception_into_a_blocked_actor_is_an_ordinary_failure(
    system: ActorSystem, probe: TestProbe
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref, Event()), "r")
    gen = probe.expect_msg_type(tuple)[1]
    ref.tell("block")
    ref.tell("queued behind")
    worker = probe.expect_msg_type(greenlet.greenlet)
    with event_filter(system, Boom, message="from outside"):
        gevent.kill(worker, Boom("from outside"))
        assert probe.expect_msg_type(tuple) == ("post_stop", gen)
        assert probe.expect_msg_type(tuple) == ("post_restart", gen + 1)
    probe.expect_msg("queued behind")  # the mailbox survived the restart
    assert not system.is_terminated


def test_killing_the_lingering_worker_does_not_stop_the_system(
    system: ActorSystem, probe: TestProbe
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    probe.expect_msg_type(tuple)
    assert ref.ask("ping", timeout=WAIT)[0] == "pong"
    dispatcher = system.dispatcher
    idle = [w for w in dispatcher.workers if w.cell is None]
    for w in idle:
        w.throw(greenlet.GreenletExit)
        assert w.dead
    assert not any(w.dead for w in dispatcher.workers)
    for n in range(20):
        assert ref.ask("ping", timeout=WAIT)[0] == "pong", n
    assert not system.is_terminated


# -- suspension, shutdown and restarts interrupted ----------------------------------------------
def test_a_suspended_subtree_processes_nothing_until_the_decision(
    system: ActorSystem, probe: TestProbe
) -> None:
    """While the grandparent's decider is still deciding on the parent's failure, the
    parent's child processes no message; after the resume it processes all, in order."""
    gate = Event()

    def slow_resume(exc: BaseException) -> Directive:
        gate.wait()  # parks the grandparent's worker; the rest of the system runs on
        return Directive.RESUME

    grand = start_parent(system, probe, OneForOneStrategy(slow_resume), "g")
    parent = grand.ask(("props", Props(Parent, probe.ref), "p"), timeout=WAIT)
    assert probe.expect_msg_type(tuple)[0] == "parent started"
    child = start_child(parent, probe)
    with event_filter(system, Boom, level=logging.WARNING):
        parent.tell(Boom("parent fails"))
        for i in range(5):
            child.tell(i)
        probe.expect_no_message(0.3)
        gate.set()
        assert probe.receive_n(5) == [0, 1, 2, 3, 4]
    assert child.ask("ping", timeout=WAIT)[0] == "pong"


def test_terminate_with_an_actor_blocked_forever_times_out_then_completes(
    system: ActorSystem, probe: TestProbe
) -> None:
    gate = Event()
    ref = system.actor_of(Props(Reporter, probe.ref, gate), "r")
    gen = probe.expect_msg_type(tuple)[1]
    ref.tell("block")
    probe.expect_msg_type(greenlet.greenlet)
    system.terminate()
    assert not system.await_termination(0.3)  # a defined answer, not a hang
    assert "r  [" in system.tree()  # still alive: its current message never finished
    gate.set()
    assert system.await_termination(WAIT)
    assert probe.receive_n(2) == ["unblocked", ("post_stop", gen)]


def test_a_failing_termination_hook_is_logged_and_the_others_run(
    system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []
    system.register_on_termination(lambda: ran.append("first registered"))

    def broken() -> None:
        raise RuntimeError("hook broken")

    system.register_on_termination(broken)
    with caplog.at_level(logging.ERROR, logger="gactors"):
        system.terminate()
        assert system.await_termination(WAIT)
    assert ran == ["first registered"]
    assert any("termination hook" in r.getMessage() for r in caplog.records)


def test_a_failing_future_callback_is_logged(
    system: ActorSystem, probe: TestProbe, caplog: pytest.LogCaptureFixture
) -> None:
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    probe.expect_msg_type(tuple)
    fut = ref.ask("ping", timeout=WAIT, block=False)
    got: list[Any] = []

    def broken(f: Any) -> None:
        raise RuntimeError("callback broken")

    with caplog.at_level(logging.ERROR, logger="gactors.future"):
        fut.add_done_callback(broken)
        fut.add_done_callback(lambda f: got.append(f.get(0)))
        assert fut.get(WAIT)[0] == "pong"
        gevent.sleep(0)
    assert got and got[0][0] == "pong"
    assert any("callback" in r.getMessage() for r in caplog.records)


def test_a_stop_while_a_restart_waits_for_children(system: ActorSystem, probe: TestProbe) -> None:
    """The restart of ``p`` waits for its child to stop (its post_stop blocks); ``p``
    is stopped meanwhile: it stops for good, the new instance is never built, and the
    old instance's ``post_stop`` runs once more at the end (as in Akka)."""
    gate = Event()

    class SlowStop(Reporter):
        def post_stop(self) -> None:
            self.probe.tell("child stopping")
            gate.wait()
            super().post_stop()

    class P(Parent):
        def receive(self, message: Any) -> None:
            if message == "slow child":
                self.sender.tell(self.context.actor_of(Props(SlowStop, self.probe), "slow"))
            else:
                super().receive(message)

        def post_stop(self) -> None:
            self.probe.tell("parent post_stop")

    parent = system.actor_of(Props(P, probe.ref), "p")
    probe.expect_msg_type(tuple)
    child = parent.ask("slow child", timeout=WAIT)
    probe.expect_msg_type(tuple)
    probe.watch(parent)
    try:
        with event_filter(system, Boom):
            parent.tell(Boom("restart me"))
            # pre_restart: the child is told to stop, then the parent's post_stop runs.
            expect_all(probe, "parent post_stop", "child stopping")
        system.stop(parent)  # arrives while the restart waits for the child
        probe.expect_no_message(0.1)
    finally:
        gate.set()
    expect_all(probe, ("post_stop", Reporter.generation), "parent post_stop", Terminated(parent))
    probe.expect_no_message(0.1)  # never restarted
    del child


def test_kill_and_poison_pill_to_a_stopped_actor_are_dead_letters(
    system: ActorSystem, probe: TestProbe
) -> None:
    seen = Collect()
    system.event_stream.subscribe(seen, DeadLetter)
    ref = system.actor_of(Props(Reporter, probe.ref), "r")
    probe.expect_msg_type(tuple)
    probe.watch(ref)
    system.stop(ref)
    probe.expect_msg_type(tuple)
    probe.expect_terminated(ref)
    ref.tell(Kill)
    ref.tell(PoisonPill)
    ref.tell("hello")
    system.dead_letters.tell("direct")
    assert [e.message for e in seen.events] == [Kill, PoisonPill, "hello", "direct"]

"""Bad-input catalogue (issue 8): every public entry point fed what it must refuse.

Wrong types, out-of-range values, closed systems, foreign threads, re-entrancy and
late replies — each with its clear error or its documented outcome (the catalogue
is ``docs/reliability.md``). Nothing here may hang: every wait has a timeout.
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import gevent
import pytest
from gevent.threadpool import ThreadPool

from gactors import (
    Actor,
    ActorInitializationException,
    ActorRef,
    ActorSystem,
    AllForOneStrategy,
    AskTimeoutError,
    ConfigError,
    DeadLetter,
    Directive,
    IllegalStateError,
    InvalidActorNameException,
    InvalidMessageException,
    OneForOneStrategy,
    PluginError,
    PoisonPill,
    Props,
    Stash,
    StashOverflowException,
    Status,
    pattern,
)
from gactors._future import Future
from gactors.backoff import BackoffOpts
from gactors.routing import RoundRobinPool
from gactors.testkit import TestProbe, event_filter

WAIT = 5.0
NAN = float("nan")

BAD_TIMEOUTS = [0, -1, -0.5, NAN, math.inf, 10**400, 1e300, timedelta(seconds=-1)]
"""Durations refused (ValueError) wherever a positive number of seconds is required."""
NOT_DURATIONS = ["1", b"1", True, [1], object()]
"""Refused (TypeError) wherever a duration is required: not a number or a timedelta."""


def short(value: Any) -> str:
    """A test id that stays readable for 10**400."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} chars)"


class Collect:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)


class Echo(Actor):
    """Replies with what it got; special requests exercise re-entrancy."""

    def receive(self, message: Any) -> None:
        if message == "ask myself":
            try:
                self.ref.ask("hello", timeout=1.0)
            except IllegalStateError as e:
                self.sender.tell(("refused", str(e)))
        elif message == "ask myself later":
            # Not blocking: the reply arrives once this message is done.
            fut = self.ref.ask("hello", timeout=WAIT, block=False)
            pattern.pipe_to(fut, self.sender)
        elif message == "await termination":
            try:
                self.context.system.await_termination(1.0)
            except IllegalStateError as e:
                self.sender.tell(("refused", str(e)))
        elif isinstance(message, tuple) and message[0] == "ask":
            # Ask another actor and pass the outcome on.
            try:
                self.sender.tell(("answer", message[1].ask(message[2], timeout=message[3])))
            except AskTimeoutError as e:
                self.sender.tell(("timed out", str(e)))
        elif message == "slow":
            gevent.sleep(0.3)
            self.sender.tell("slow reply")
        elif message == "twice":
            self.sender.tell("first")
            self.sender.tell("second")
        else:
            self.sender.tell(message)


@pytest.fixture
def echo(system: ActorSystem) -> ActorRef:
    return system.actor_of(Props(Echo), "echo")


@pytest.fixture
def dead_letters(system: ActorSystem) -> Collect:
    c = Collect()
    system.event_stream.subscribe(c, DeadLetter)
    return c


def in_thread(fn: Any, *args: Any) -> Any:
    """Run ``fn`` in a real OS thread; the calling greenlet waits cooperatively."""
    pool = ThreadPool(1)
    try:
        return pool.spawn(fn, *args).get(timeout=WAIT * 2)
    finally:
        pool.kill()


# -- ActorSystem and settings ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["", "a b", "-x", "x/y", "é", None, 5, "$sys"])
def test_invalid_system_names(name: Any) -> None:
    with pytest.raises(ValueError, match="invalid actor system name"):
        ActorSystem(name)


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ([("default_ask_timeout", 1)], "mapping"),
        ({"no_such_setting": 1}, "unknown setting 'no_such_setting'"),
        ({"default_ask_timeout": "5"}, "'default_ask_timeout'"),
        ({"default_ask_timeout": 0}, "'default_ask_timeout'"),
        ({"default_ask_timeout": NAN}, "'default_ask_timeout'"),
        ({"default_ask_timeout": True}, "'default_ask_timeout'"),
        ({"dispatcher_throughput": 0}, "'dispatcher_throughput'"),
        ({"dispatcher_throughput": 1.5}, "'dispatcher_throughput'"),
        ({"log_dead_letters": -1}, "'log_dead_letters'"),
        ({"debug_lifecycle": "yes"}, "'debug_lifecycle'"),
        ({"stash_capacity": -1}, "'stash_capacity'"),
        ({"blocking_threshold": -1.0}, "'blocking_threshold'"),
        ({"shutdown_timeout": NAN}, "'shutdown_timeout'"),
        ({"guardian_supervisor_strategy": None}, "'guardian_supervisor_strategy'"),
        ({"guardian_supervisor_strategy": ""}, "'guardian_supervisor_strategy'"),
    ],
)
def test_invalid_settings_raise_config_error_naming_the_key(config: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ActorSystem("bad", config=config)


def test_invalid_config_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        ActorSystem("bad", config=tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[gactors\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        ActorSystem("bad", config=broken)
    other = tmp_path / "other.toml"
    other.write_text("[other]\nx = 1\n")
    with pytest.raises(ConfigError, match=r"no \[gactors\] table"):
        ActorSystem("bad", config=other)
    monkeypatch.setenv("GACTORS_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="cannot read config file"):
        ActorSystem("bad")


def test_unknown_guardian_strategy_names_the_known_ones() -> None:
    with pytest.raises(PluginError, match="default"):
        ActorSystem("bad", config={"guardian_supervisor_strategy": "no-such-strategy"})


# -- Props and actor creation -----------------------------------------------------------------
def test_invalid_props() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        Props(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not a gactors\.Actor subclass"):
        Props(dict)  # type: ignore[arg-type]
    for capacity in (0, -1, True, "3", 1.5):
        with pytest.raises(ValueError, match="mailbox capacity"):
            Props(Echo).with_mailbox(capacity)  # type: ignore[arg-type]
    for name in ("", 5, None):
        with pytest.raises(TypeError, match="dispatcher name"):
            Props(Echo).with_dispatcher(name)  # type: ignore[arg-type]


def test_an_actor_cannot_be_instantiated_directly() -> None:
    with pytest.raises(IllegalStateError, match="cannot be instantiated directly"):
        Echo()


@pytest.mark.parametrize("name", ["", "a/b", "$reserved", "a b", "ü", 5, b"bytes"], ids=repr)
def test_invalid_actor_names(system: ActorSystem, name: Any) -> None:
    with pytest.raises(InvalidActorNameException):
        system.actor_of(Props(Echo), name)


def test_actor_of_refuses_what_is_not_props_and_taken_names(system: ActorSystem) -> None:
    with pytest.raises(TypeError, match="needs a Props"):
        system.actor_of(Echo)  # type: ignore[arg-type]
    system.actor_of(Props(Echo), "taken")
    with pytest.raises(InvalidActorNameException, match="not unique"):
        system.actor_of(Props(Echo), "taken")
    with pytest.raises(ValueError, match="unknown dispatcher"):
        system.actor_of(Props(Echo).with_dispatcher("other"))


def test_a_factory_returning_a_non_actor_is_an_initialization_failure(
    system: ActorSystem,
) -> None:
    probe = TestProbe(system)
    with event_filter(system, ActorInitializationException, message="not a gactors.Actor"):
        ref = system.actor_of(Props(lambda: "not an actor"), "bad")  # type: ignore[arg-type, return-value]
        probe.watch(ref)
        probe.expect_terminated(ref)  # the default decider stops it


# -- messages and asks ------------------------------------------------------------------------
def test_none_is_not_a_message(system: ActorSystem, echo: ActorRef) -> None:
    with pytest.raises(InvalidMessageException):
        echo.tell(None)
    with pytest.raises(InvalidMessageException):
        echo.ask(None, timeout=1.0)
    with pytest.raises(InvalidMessageException):
        system.dead_letters.tell(None)
    with pytest.raises(InvalidMessageException):
        system.scheduler.schedule_once(0.1, echo, None)
    with pytest.raises(ValueError, match="cannot publish None"):
        system.event_stream.publish(None)


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=short)
def test_bad_ask_timeouts(echo: ActorRef, timeout: Any) -> None:
    with pytest.raises(ValueError, match="ask timeout"):
        echo.ask("x", timeout=timeout)
    with pytest.raises(ValueError, match="ask timeout"):
        pattern.ask(echo, "x", timeout)


@pytest.mark.parametrize("timeout", NOT_DURATIONS, ids=short)
def test_ask_timeouts_of_the_wrong_type(echo: ActorRef, timeout: Any) -> None:
    with pytest.raises(TypeError, match="ask timeout must be a number of seconds or a timedelta"):
        echo.ask("x", timeout=timeout)


def test_a_huge_ask_timeout_is_a_clear_value_error(echo: ActorRef) -> None:
    # It used to escape as OverflowError from deep inside gevent.
    with pytest.raises(ValueError, match="ask timeout is too large: an int of 1329 bits"):
        echo.ask("x", timeout=10**400)


@pytest.mark.parametrize("timeout", [-1, NAN, math.inf, 10**400], ids=short)
def test_bad_future_waits(echo: ActorRef, system: ActorSystem, timeout: Any) -> None:
    fut = echo.ask("x", timeout=WAIT, block=False)
    with pytest.raises(ValueError, match="timeout"):
        fut.get(timeout)
    with pytest.raises(ValueError, match="timeout"):
        system.await_termination(timeout)
    assert fut.get(WAIT) == "x"


@pytest.mark.parametrize("timeout", ["1", [1], True], ids=repr)
def test_future_waits_of_the_wrong_type(echo: ActorRef, system: ActorSystem, timeout: Any) -> None:
    fut = echo.ask("x", timeout=WAIT, block=False)
    with pytest.raises(TypeError, match="timeout"):
        fut.get(timeout)
    with pytest.raises(TypeError, match="timeout"):
        system.await_termination(timeout)
    assert fut.get(timedelta(seconds=WAIT)) == "x"


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=short)
def test_bad_graceful_stop_timeouts(echo: ActorRef, timeout: Any) -> None:
    with pytest.raises(ValueError, match="graceful_stop timeout"):
        pattern.graceful_stop(echo, timeout)


@pytest.mark.parametrize("timeout", NOT_DURATIONS, ids=short)
def test_graceful_stop_timeouts_of_the_wrong_type(echo: ActorRef, timeout: Any) -> None:
    with pytest.raises(TypeError, match="graceful_stop timeout"):
        pattern.graceful_stop(echo, timeout)


def test_durations_may_be_timedeltas(echo: ActorRef, system: ActorSystem) -> None:
    assert echo.ask("x", timeout=timedelta(seconds=WAIT)) == "x"
    assert pattern.ask(echo, "y", timedelta(seconds=WAIT)).get(WAIT) == "y"
    assert pattern.graceful_stop(echo, timedelta(seconds=WAIT)).get(WAIT) is True


def test_pattern_functions_check_their_arguments(echo: ActorRef) -> None:
    with pytest.raises(TypeError):
        pattern.ask("not a ref", "x", 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pattern.pipe_to("not a future", echo)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pattern.pipe_to(echo.ask("x", timeout=WAIT, block=False), "not a ref")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pattern.graceful_stop("not a ref", 1.0)  # type: ignore[arg-type]


def test_asking_a_stopped_actor_times_out_and_the_message_is_a_dead_letter(
    system: ActorSystem, dead_letters: Collect
) -> None:
    ref = system.actor_of(Props(Echo), "gone")
    assert pattern.graceful_stop(ref, WAIT).get(WAIT) is True
    with pytest.raises(AskTimeoutError, match="gone"):
        ref.ask("anyone?", timeout=0.2)
    assert [e.message for e in dead_letters.events] == ["anyone?"]


def test_a_reply_after_the_timeout_is_a_dead_letter(
    system: ActorSystem, echo: ActorRef, dead_letters: Collect
) -> None:
    with pytest.raises(AskTimeoutError):
        echo.ask("slow", timeout=0.05)
    assert echo.ask("sync", timeout=WAIT) == "sync"  # the slow reply has been sent by now
    assert [(e.message, e.sender) for e in dead_letters.events] == [("slow reply", echo)]


def test_a_second_reply_is_a_dead_letter(
    system: ActorSystem, echo: ActorRef, dead_letters: Collect
) -> None:
    assert echo.ask("twice", timeout=WAIT) == "first"
    assert echo.ask("sync", timeout=WAIT) == "sync"
    assert [e.message for e in dead_letters.events] == ["second"]


def test_status_replies(system: ActorSystem, echo: ActorRef) -> None:
    assert echo.ask(Status.Success(3), timeout=WAIT) == 3
    with pytest.raises(KeyError):
        echo.ask(Status.Failure(KeyError("k")), timeout=WAIT)


def test_forward_outside_an_actor(echo: ActorRef) -> None:
    with pytest.raises(IllegalStateError, match="inside an actor"):
        echo.forward("x")


def test_a_sender_that_is_not_a_ref_fails_the_actor_that_replies(
    system: ActorSystem, echo: ActorRef
) -> None:
    """``tell`` does not check ``sender`` (the hot path): the actor fails when it uses
    it, and is supervised like any failure."""
    with event_filter(system, AttributeError, message="tell"):
        echo.tell("hello", 42)  # type: ignore[arg-type]
    assert echo.ask("still alive", timeout=WAIT) == "still alive"


# -- re-entrancy ----------------------------------------------------------------------------
def test_an_actor_asking_itself_blocking_is_refused(echo: ActorRef) -> None:
    kind, text = echo.ask("ask myself", timeout=WAIT)
    assert kind == "refused" and "cannot block asking itself" in text


def test_an_actor_asking_itself_without_blocking_gets_its_reply(echo: ActorRef) -> None:
    assert echo.ask("ask myself later", timeout=WAIT) == "hello"


def test_two_actors_asking_each_other_time_out_instead_of_hanging(
    system: ActorSystem,
) -> None:
    a = system.actor_of(Props(Echo), "a")
    b = system.actor_of(Props(Echo), "b")
    # a asks b, which asks a back while a is blocked in its ask: b's ask times out,
    # then b answers, and a gets b's answer.
    outcome = a.ask(("ask", b, ("ask", a, "ping", 0.2), 2.0), timeout=WAIT)
    assert outcome[0] == "answer"
    assert outcome[1][0] == "timed out"


def test_await_termination_inside_an_actor_is_refused(echo: ActorRef) -> None:
    kind, text = echo.ask("await termination", timeout=WAIT)
    assert kind == "refused" and "cannot wait for the termination of its own system" in text


def test_terminate_from_inside_an_actor(system: ActorSystem) -> None:
    class Quitter(Actor):
        def receive(self, message: Any) -> None:
            self.context.system.terminate()

    system.actor_of(Props(Quitter), "q").tell("quit")
    assert system.await_termination(WAIT)


def test_waiting_for_a_future_inside_the_hub_is_refused(system: ActorSystem) -> None:
    fut: Future[int] = Future(system._hub, system._tid)
    errors: list[BaseException] = []

    def in_hub() -> None:
        try:
            fut.get(0.1)
        except BaseException as e:
            errors.append(e)

    system._hub.loop.run_callback(in_hub)
    gevent.sleep(0.05)
    assert len(errors) == 1 and isinstance(errors[0], IllegalStateError)


# -- context ------------------------------------------------------------------------------
class Misuser(Actor):
    """Tries one misuse of its context per message; replies with the exception."""

    def receive(self, message: Any) -> None:
        ctx = self.context
        actions = {
            "watch non-ref": lambda: ctx.watch("x"),  # type: ignore[arg-type]
            "unwatch non-ref": lambda: ctx.unwatch(3),  # type: ignore[arg-type]
            "watch_with None": lambda: ctx.watch_with(self.ref, None),
            "rewatch": lambda: (
                ctx.watch_with(self.sender, "a"),
                ctx.watch_with(self.sender, "b"),
            ),
            "become non-callable": lambda: ctx.become("nope"),  # type: ignore[arg-type]
            "negative receive timeout": lambda: ctx.set_receive_timeout(-1),
            "nan receive timeout": lambda: ctx.set_receive_timeout(NAN),
            "str receive timeout": lambda: ctx.set_receive_timeout("1"),  # type: ignore[arg-type]
            "huge receive timeout": lambda: ctx.set_receive_timeout(10**400),
            "stop non-ref": lambda: ctx.stop("x"),  # type: ignore[arg-type]
            "bad child name": lambda: ctx.actor_of(Props(Echo), "a/b"),
            "child non-props": lambda: ctx.actor_of(Echo),  # type: ignore[arg-type]
            "timer None": lambda: self.timers.start_single_timer("k", None, 0.1),
            "timer unhashable key": lambda: self.timers.start_single_timer([], "m", 0.1),
            "timer nan": lambda: self.timers.start_single_timer("k", "m", NAN),
            "timer zero interval": lambda: self.timers.start_timer_at_fixed_rate("k", "m", 0),
        }
        try:
            actions[message]()
        except Exception as e:
            self.sender.tell(type(e).__name__)
        else:
            self.sender.tell("accepted")


@pytest.mark.parametrize(
    ("misuse", "error"),
    [
        ("watch non-ref", "TypeError"),
        ("unwatch non-ref", "TypeError"),
        ("watch_with None", "InvalidMessageException"),
        ("rewatch", "IllegalStateError"),
        ("become non-callable", "TypeError"),
        ("negative receive timeout", "ValueError"),
        ("nan receive timeout", "ValueError"),
        ("str receive timeout", "TypeError"),
        ("huge receive timeout", "ValueError"),
        ("stop non-ref", "TypeError"),
        ("bad child name", "InvalidActorNameException"),
        ("child non-props", "TypeError"),
        ("timer None", "InvalidMessageException"),
        ("timer unhashable key", "TypeError"),
        ("timer nan", "ValueError"),
        ("timer zero interval", "ValueError"),
    ],
)
def test_context_misuse_raises_inside_the_actor(
    system: ActorSystem, misuse: str, error: str
) -> None:
    ref = system.actor_of(Props(Misuser), "m")
    assert ref.ask(misuse, timeout=WAIT) == error


# -- strategies, scheduler, event stream, system methods -----------------------------------
@pytest.mark.parametrize("cls", [OneForOneStrategy, AllForOneStrategy])
def test_invalid_strategy_arguments(cls: Any) -> None:
    for max_retries in (-2, 1.5, "3", True):
        with pytest.raises(ValueError, match="max_retries"):
            cls(max_retries=max_retries)
    for within in (0, -1, NAN, "1", True):
        with pytest.raises(ValueError, match="within"):
            cls(max_retries=1, within=within)
    with pytest.raises(ValueError, match="within needs an explicit max_retries"):
        cls(within=1.0)
    with pytest.raises(ValueError, match="within needs an explicit max_retries"):
        cls(max_retries=-1, within=timedelta(seconds=1))
    with pytest.raises(TypeError, match="decider"):
        cls(42)
    with pytest.raises(TypeError, match="not an exception class"):
        cls({"ValueError": Directive.RESTART})
    with pytest.raises(TypeError, match="must be a Directive"):
        cls({ValueError: "restart"})
    with pytest.raises(TypeError, match="not an exception class"):
        cls([ValueError, 3])


def test_invalid_scheduler_arguments(system: ActorSystem, echo: ActorRef) -> None:
    sched = system.scheduler
    for delay in (NAN, math.inf, 10**400):
        with pytest.raises(ValueError, match="delay"):
            sched.schedule_once(delay, echo, "x")
    for not_a_delay in ("1", None, True):
        with pytest.raises(TypeError, match="delay must be a number of seconds or a timedelta"):
            sched.schedule_once(not_a_delay, echo, "x")  # type: ignore[arg-type]
    for interval in (0, -1, NAN):
        with pytest.raises(ValueError):
            sched.schedule_at_fixed_rate(0.1, interval, echo, "x")
        with pytest.raises(ValueError):
            sched.schedule_with_fixed_delay(0.1, interval, echo, "x")
    with pytest.raises(TypeError, match="ActorRef or a callable"):
        sched.schedule_once(0.1, "not a receiver", "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes no message"):
        sched.schedule_once(0.1, lambda: None, "x")
    with pytest.raises(TypeError, match="sender"):
        sched.schedule_once(0.1, echo, "x", sender="me")  # type: ignore[arg-type]
    assert sched.active_tasks == 0  # nothing was scheduled by the refused calls


def test_invalid_event_stream_arguments(system: ActorSystem) -> None:
    with pytest.raises(TypeError, match="subscriber"):
        system.event_stream.subscribe(42, str)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="class"):
        system.event_stream.subscribe(print, "str")  # type: ignore[arg-type]
    assert system.event_stream.unsubscribe(print) is False


def test_invalid_system_method_arguments(system: ActorSystem) -> None:
    with pytest.raises(TypeError, match="stop"):
        system.stop("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        system.register_on_termination(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        system.lookup(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        system.lookup("not a path")
    assert system.lookup("/user/nobody") is None
    with pytest.raises(ValueError, match="belongs to system 'other-system'"):
        system.lookup("gactors://other-system/user/x")
    system.stop(system.dead_letters)  # not an actor: nothing happens


def test_invalid_backoff_and_pool_options() -> None:
    child = Props(Echo)
    with pytest.raises(ValueError):
        BackoffOpts.on_stop(child, "c", 2.0, 1.0, 0.2)  # min > max
    with pytest.raises(ValueError):
        BackoffOpts.on_failure(child, "c", -1.0, 1.0, 0.2)
    with pytest.raises(ValueError):
        BackoffOpts.on_stop(child, "c", 0.1, 1.0, 1.5)
    with pytest.raises(ValueError):
        BackoffOpts.on_stop(child, "c", NAN, 1.0, 0.2)
    with pytest.raises(ValueError):
        RoundRobinPool(0)


def test_stash_misuse(system: ActorSystem) -> None:
    class Stasher(Stash, Actor):
        def receive(self, message: Any) -> None:
            try:
                self.stash()
                if message == "twice":
                    self.stash()
            except Exception as e:
                self.sender.tell(type(e).__name__)

    tiny = ActorSystem("tiny", config={"stash_capacity": 1})
    try:
        ref = tiny.actor_of(Props(Stasher), "s")
        assert ref.ask("twice", timeout=WAIT) == "IllegalStateError"
        assert ref.ask("over capacity", timeout=WAIT) == StashOverflowException.__name__
    finally:
        tiny.terminate()
        assert tiny.await_termination(WAIT)


# -- closed systems -----------------------------------------------------------------------
def test_everything_on_a_terminated_system(system: ActorSystem, dead_letters: Collect) -> None:
    ref = system.actor_of(Props(Echo), "e")
    probe_events = Collect()
    system.event_stream.subscribe(probe_events, str)
    fut = system.terminate()
    assert system.await_termination(WAIT)
    assert system.terminate() is fut  # idempotent
    assert system.is_terminated
    with pytest.raises(IllegalStateError, match="terminated"):
        system.actor_of(Props(Echo))
    with pytest.raises(IllegalStateError, match="terminated"):
        system.register_on_termination(lambda: None)
    with pytest.raises(IllegalStateError, match="closed"):
        system.scheduler.schedule_once(0.1, ref, "x")
    ref.tell("after the end")  # never raises: a dead letter
    assert [e.message for e in dead_letters.events] == ["after the end"]
    with pytest.raises(AskTimeoutError):
        ref.ask("anyone?", timeout=0.1)
    assert system.lookup("/user/e") is None
    system.stop(ref)  # nothing to stop
    system.event_stream.publish("still delivered")
    assert probe_events.events == ["still delivered"]
    assert "[dead]" in system.tree()


def test_actor_of_while_terminating(system: ActorSystem) -> None:
    class Slow(Actor):
        def receive(self, message: Any) -> None:
            gevent.sleep(0.2)

    system.actor_of(Props(Slow), "slow").tell("work")
    gevent.sleep(0.01)
    system.terminate()
    with pytest.raises(IllegalStateError, match="terminat"):
        system.actor_of(Props(Echo))
    assert system.await_termination(WAIT)


# -- foreign threads -------------------------------------------------------------------------
def test_foreign_thread_calls(system: ActorSystem, echo: ActorRef) -> None:
    def work() -> list[Any]:
        out: list[Any] = [echo.ask("from a thread", timeout=WAIT)]
        try:
            echo.ask(None, timeout=1.0)
        except InvalidMessageException:
            out.append("None refused")
        child = system.actor_of(Props(Echo), "made-in-a-thread")
        out.append(child.ask("hi", timeout=WAIT))
        try:
            system.actor_of(Props(Echo), "made-in-a-thread")
        except InvalidActorNameException:
            out.append("duplicate refused")
        silent = system.actor_of(Props(Actor), "silent")  # never replies
        try:
            silent.ask("anyone?", timeout=0.2)
        except AskTimeoutError:
            out.append("timed out")
        out.append(system.await_termination(0.05))
        return out

    assert in_thread(work) == [
        "from a thread",
        "None refused",
        "hi",
        "duplicate refused",
        "timed out",
        False,
    ]


def test_terminate_and_await_from_a_foreign_thread(system: ActorSystem) -> None:
    def work() -> bool:
        system.terminate()
        return system.await_termination(WAIT)

    assert in_thread(work) is True


def test_tell_from_a_foreign_thread_to_a_stopped_actor(
    system: ActorSystem, dead_letters: Collect
) -> None:
    ref = system.actor_of(Props(Echo), "e")
    assert pattern.graceful_stop(ref, WAIT).get(WAIT) is True
    in_thread(ref.tell, "too late")
    assert system.actor_of(Props(Echo), "sync").ask("sync", timeout=WAIT) == "sync"
    assert [e.message for e in dead_letters.events] == ["too late"]


def test_poison_pill_is_the_only_stop_message_graceful_stop_needs(
    system: ActorSystem,
) -> None:
    ref = system.actor_of(Props(Echo), "e")
    with pytest.raises(AskTimeoutError):
        # A stop message the actor does not stop on: a defined failure, not a hang.
        pattern.graceful_stop(ref, 0.1, stop_message="not a stop").get(WAIT)
    assert pattern.graceful_stop(ref, WAIT, PoisonPill).get(WAIT) is True


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_are_refused(system: ActorSystem, name: str) -> None:
    with pytest.raises(InvalidActorNameException, match="relative path element"):
        system.actor_of(Props(Echo), name)

    class Parent(Actor):
        def receive(self, message: Any) -> None:
            try:
                self.context.actor_of(Props(Echo), name)
                self.sender.tell("created")
            except InvalidActorNameException as e:
                self.sender.tell(str(e))

    assert "relative path element" in system.actor_of(Props(Parent)).ask("go", timeout=5)


@pytest.mark.parametrize(
    "path",
    [
        "/user//echo",
        "/user/echo/",
        "//user/echo",
        "/user/./echo",
        "/user/x/../echo",
        "gactors://{name}/user//echo",
        "gactors://{name}/user/echo/",
    ],
)
def test_paths_with_empty_or_dot_elements_name_no_actor(
    system: ActorSystem, echo: ActorRef, path: str
) -> None:
    assert system.lookup("/user/echo") == echo
    assert system.lookup(path.format(name=system.name)) is None


def test_stop_refuses_a_ref_of_another_system(system: ActorSystem, echo: ActorRef) -> None:
    with ActorSystem("other") as other:
        foreign = other.actor_of(Props(Echo), "foreign")

        class Stopper(Actor):
            def receive(self, message: Any) -> None:
                try:
                    self.context.stop(message)
                    self.sender.tell("stopped")
                except ValueError as e:
                    self.sender.tell(str(e))

        with pytest.raises(ValueError, match="belongs to actor system 'other'"):
            system.stop(foreign)
        stopper = system.actor_of(Props(Stopper))
        assert "belongs to actor system 'other'" in stopper.ask(foreign, timeout=5)
        assert foreign.ask("still here", timeout=5) == "still here"
        with pytest.raises(ValueError, match=f"belongs to actor system '{system.name}'"):
            other.stop(echo)
    assert echo.ask("alive", timeout=5) == "alive"


def test_stop_refuses_the_guardians(system: ActorSystem, echo: ActorRef) -> None:
    user = system.lookup("/user")
    root = system.lookup("/")
    sysg = system.lookup("/system")
    assert user is not None and root is not None and sysg is not None
    for guardian in (user, sysg, root):
        with pytest.raises(ValueError, match="use terminate"):
            system.stop(guardian)

    class Stopper(Actor):
        def receive(self, message: Any) -> None:
            try:
                self.context.stop(message)
                self.sender.tell("stopped")
            except ValueError as e:
                self.sender.tell(str(e))

    stopper = system.actor_of(Props(Stopper))
    for guardian in (user, sysg, root):
        assert "use terminate()" in stopper.ask(guardian, timeout=5)
    gevent.sleep(0.05)
    assert not system.is_terminated
    assert echo.ask("alive", timeout=5) == "alive"
    # An actor may still stop itself, and system.stop a top-level actor.
    system.stop(stopper)
    system.terminate()
    assert system.await_termination(10)


# -- arguments Python would refuse -------------------------------------------------------------
class NoInit(Actor):
    def receive(self, message: Any) -> None:
        self.sender.tell(message)


def test_props_refuses_arguments_for_a_class_without_init() -> None:
    # Actor defines __new__, so object.__init__ used to swallow the arguments silently.
    with pytest.raises(TypeError, match=r"NoInit\(\) takes no arguments"):
        Props(NoInit, "typo", retries=3)
    with pytest.raises(TypeError, match="takes no arguments"):
        Props(NoInit, retries=3)
    assert Props(NoInit).args == ()  # without arguments it is fine


def test_status_failure_needs_an_exception() -> None:
    for bad in ("not an exception", None, 42, ValueError):
        with pytest.raises(TypeError, match=r"Status\.Failure needs an exception instance"):
            Status.Failure(bad)  # type: ignore[arg-type]
    assert isinstance(Status.Failure(KeyError("k")).cause, KeyError)


def test_a_factory_passing_arguments_to_a_class_without_init_fails_its_creation(
    system: ActorSystem,
) -> None:
    probe = TestProbe(system)
    with event_filter(system, ActorInitializationException, message="takes no arguments"):
        ref = system.actor_of(Props(lambda: NoInit("typo")), "typo")  # type: ignore[call-arg]
        probe.watch(ref)
        probe.expect_terminated(ref)

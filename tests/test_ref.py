"""ActorRef: tell, ask, forward, equality, dead letters, Identify (SPEC section 4)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import gevent
import pytest
from _actors import Collector, Echo, Recorder, ReentrantEcho
from _inputs import BAD_TIMEOUTS, NOT_DURATIONS, WAIT, in_thread, short
from gevent.queue import Queue

import gactors
from gactors import (
    Actor,
    ActorIdentity,
    ActorInitializationException,
    ActorRef,
    ActorSystem,
    AskTimeoutError,
    Identify,
    IllegalStateError,
    InvalidMessageException,
    PoisonPill,
    Props,
    Status,
    pattern,
)
from gactors._threads import start_new_thread
from gactors.testkit import event_filter


def test_tell_none_is_rejected(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo))
    with pytest.raises(InvalidMessageException, match="None"):
        ref.tell(None)
    with pytest.raises(InvalidMessageException):
        ref.ask(None)
    with pytest.raises(InvalidMessageException):
        system.dead_letters.tell(None)


def test_tell_never_switches_greenlets(system: ActorSystem) -> None:
    q: Queue = Queue()
    ref = system.actor_of(Props(Recorder, q))
    current = gevent.getcurrent()
    switched = []

    def tracer(event: str, args: Any) -> None:
        if event in ("switch", "throw") and args[0] is current:
            switched.append(args)

    import greenlet

    old = greenlet.settrace(tracer)
    try:
        for i in range(100):
            ref.tell(i)
    finally:
        greenlet.settrace(old)
    assert switched == []
    assert q.get(timeout=2) == 0


def test_ask_returns_reply(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo))
    assert ref.ask({"k": 1}, timeout=2) == {"k": 1}


def test_ask_unwraps_status(system: ActorSystem) -> None:
    class Replier(Actor):
        def receive(self, message: Any) -> None:
            if message == "ok":
                self.sender.tell(Status.Success(42))
            else:
                self.sender.tell(Status.Failure(KeyError("nope")))

    ref = system.actor_of(Props(Replier))
    assert ref.ask("ok", timeout=2) == 42
    with pytest.raises(KeyError, match="nope"):
        ref.ask("fail", timeout=2)


def test_ask_raises_the_exception_of_the_failing_actor(system: ActorSystem) -> None:
    err = ValueError("bad input")

    class Failing(Actor):
        def receive(self, message: Any) -> None:
            if message == "fail":
                raise err
            self.sender.tell("fine")

    ref = system.actor_of(Props(Failing))
    started = time.monotonic()
    with pytest.raises(ValueError) as info:
        ref.ask("fail", timeout=5)
    # The asker's own copy of it (issue 29: the failure log keeps the original).
    assert type(info.value) is ValueError and info.value.args == err.args
    assert info.value is not err
    assert time.monotonic() - started < 2  # at once, not after the timeout
    assert ref.ask("after", timeout=2) == "fine"  # supervision restarted it


def test_ask_timeout_and_late_reply_goes_to_dead_letters(
    system: ActorSystem, dead_letters: Collector
) -> None:
    class Late(Actor):
        def receive(self, message: Any) -> None:
            gevent.sleep(0.2)
            self.sender.tell("late")

    ref = system.actor_of(Props(Late))
    with pytest.raises(AskTimeoutError) as info:
        ref.ask("q", timeout=0.05)
    assert isinstance(info.value, TimeoutError)
    dl = dead_letters.get(timeout=3)
    assert dl.message == "late" and dl.sender == ref


def test_ask_default_timeout_from_settings() -> None:
    class Silent(Actor):
        def receive(self, message: Any) -> None:
            pass

    with ActorSystem("asktimeout", {"default_ask_timeout": 0.05}) as system:
        ref = system.actor_of(Props(Silent))
        started = time.monotonic()
        with pytest.raises(AskTimeoutError):
            ref.ask("x")
        assert time.monotonic() - started < 2


def test_ask_timeout_validation(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo))
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout"):
            ref.ask("x", timeout=bad)
    for wrong in ("1", True):
        # Not a duration at all: a TypeError, as everywhere a duration is taken.
        with pytest.raises(TypeError, match="timeout"):
            ref.ask("x", timeout=wrong)


def test_ask_non_blocking_returns_future(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo))
    fut = ref.ask("x", timeout=2, block=False)
    assert isinstance(fut, gactors.Future)
    assert fut.get(2) == "x" and fut.done() and fut.exception() is None


def test_asked_actor_may_keep_sender_and_reply_later(system: ActorSystem) -> None:
    class Deferred(Actor):
        def __init__(self) -> None:
            self.waiting: list[gactors.ActorRef] = []

        def receive(self, message: Any) -> None:
            if message == "question":
                self.waiting.append(self.sender)
            elif message == "answer-now":
                for s in self.waiting:
                    s.tell("the answer")

    ref = system.actor_of(Props(Deferred))
    fut = ref.ask("question", timeout=2, block=False)
    gevent.sleep(0.02)
    assert not fut.done()
    ref.tell("answer-now")
    assert fut.get(2) == "the answer"


def test_actor_cannot_block_asking_itself(system: ActorSystem) -> None:
    class Narcissus(Actor):
        def receive(self, message: Any) -> None:
            if message == "go":
                try:
                    self.ref.ask("again", timeout=1)
                except IllegalStateError as e:
                    self.sender.tell(str(e))

    ref = system.actor_of(Props(Narcissus))
    assert "cannot block asking itself" in ref.ask("go", timeout=2)


def test_actor_can_ask_another_actor_while_others_run(system: ActorSystem) -> None:
    echo = system.actor_of(Props(Echo))

    class Asker(Actor):
        def receive(self, message: Any) -> None:
            self.sender.tell(echo.ask(message, timeout=2) + "!")

    asker = system.actor_of(Props(Asker))
    assert asker.ask("hey", timeout=3) == "hey!"


def test_forward_keeps_the_original_sender(system: ActorSystem) -> None:
    echo = system.actor_of(Props(Echo))

    class Middle(Actor):
        def receive(self, message: Any) -> None:
            echo.forward(message)

    middle = system.actor_of(Props(Middle))
    assert middle.ask("through", timeout=2) == "through"
    with pytest.raises(IllegalStateError, match="inside an actor"):
        echo.forward("outside")


def test_equality_by_path_and_uid(system: ActorSystem) -> None:
    q: Queue = Queue()

    class Parent(Actor):
        def receive(self, message: Any) -> None:
            if message == "make":
                q.put(self.context.actor_of(Props(Echo), "kid"))
            elif message == "stop":
                kid = self.context.child("kid")
                self.context.watch(kid)
                self.context.stop(kid)
            elif isinstance(message, gactors.Terminated):
                q.put("gone")

    p = system.actor_of(Props(Parent))
    p.tell("make")
    first = q.get(timeout=2)
    p.tell("stop")
    assert q.get(timeout=2) == "gone"
    p.tell("make")
    second = q.get(timeout=2)
    assert first.path == second.path
    assert (first != second and hash(first) != hash(second)) or first != second
    assert first == first and {first: 1}[first] == 1
    assert "kid" in repr(first) and str(first) == str(first.path)


def test_tell_to_stopped_actor_publishes_dead_letter(
    system: ActorSystem, dead_letters: Collector
) -> None:
    ref = system.actor_of(Props(Echo))
    assert gactors.pattern.graceful_stop(ref, 2).get(3) is True
    ref.tell("anyone?")  # never raises
    dl = dead_letters.get()
    assert (dl.message, dl.sender, dl.recipient) == ("anyone?", None, ref)


def test_dead_letters_ref_publishes(system: ActorSystem, dead_letters: Collector) -> None:
    system.dead_letters.tell("lost")
    assert dead_letters.get().message == "lost"


def test_dead_letters_logged_then_quiet(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    with ActorSystem("dlq", {"log_dead_letters": 2}) as system:
        with caplog.at_level(logging.INFO, logger="gactors.deadletters"):
            for i in range(5):
                system.dead_letters.tell(i)
        records = [r for r in caplog.records if r.name == "gactors.deadletters"]
    assert len(records) == 2
    assert "no more dead letters will be logged" in records[-1].getMessage()


def test_identify(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo))
    assert ref.ask(Identify("id-1"), timeout=2) == ActorIdentity("id-1", ref)
    ref.tell(PoisonPill)
    gevent.sleep(0.05)
    answer = ref.ask(Identify("id-2"), timeout=2)
    assert answer.correlation_id == "id-2" and answer.ref is None


def test_pipe_to_and_pattern_ask(system: ActorSystem) -> None:
    q: Queue = Queue()
    echo = system.actor_of(Props(Echo))
    rec = system.actor_of(Props(Recorder, q))
    fut = gactors.pattern.ask(echo, "piped", 2)
    gactors.pattern.pipe_to(fut, rec)
    assert q.get(timeout=2) == "piped"

    class Failing(Actor):
        def receive(self, message: Any) -> None:
            raise RuntimeError("nope")

    failing = system.actor_of(Props(Failing))
    gactors.pattern.pipe_to(gactors.pattern.ask(failing, "x", 2), rec)
    got = q.get(timeout=2)
    assert isinstance(got, Status.Failure) and isinstance(got.cause, RuntimeError)


def test_graceful_stop_true_and_timeout(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo))
    assert gactors.pattern.graceful_stop(ref, 2).get(3) is True

    class Stubborn(Actor):
        def receive(self, message: Any) -> None:
            pass  # ignores the custom stop message

    s = system.actor_of(Props(Stubborn))
    fut = gactors.pattern.graceful_stop(s, 0.05, stop_message="please stop")
    with pytest.raises(AskTimeoutError):
        fut.get(3)
    with pytest.raises(ValueError):
        gactors.pattern.graceful_stop(s, 0)


def test_future_callbacks_and_timeout(system: ActorSystem) -> None:
    echo = system.actor_of(Props(Echo))
    seen: list[Any] = []
    fut = echo.ask("cb", timeout=2, block=False)
    fut.add_done_callback(lambda f: seen.append(f.get()))
    assert fut.get(2) == "cb"
    gevent.sleep(0)
    assert seen == ["cb"]
    fut.add_done_callback(lambda f: seen.append("late"))  # already done: runs at once
    assert seen == ["cb", "late"]
    with pytest.raises(TypeError):
        fut.add_done_callback(3)  # type: ignore[arg-type]

    class Silent(Actor):
        def receive(self, message: Any) -> None:
            pass

    pending = system.actor_of(Props(Silent)).ask("x", timeout=5, block=False)
    with pytest.raises(TimeoutError):
        pending.get(0.01)
    assert not pending.done()
    assert "pending" in repr(pending)


# -- timeouts after the hub was blocked (SPEC 4: a timeout counts from the call) ---------------
real_sleep = gevent.monkey.get_original("time", "sleep")
BLOCK = 1.2  # a real CPU block of the hub, longer than every timeout below


class SlowReply(Actor):
    """Answers after a cooperative 0.3 s; on ``"stop-slowly"`` stops, taking 0.3 s."""

    def receive(self, message: Any) -> None:
        if message == "stop-slowly":
            self.context.stop(self.ref)
            return
        gevent.sleep(0.3)
        self.sender.tell(("late-but-in-time", message))

    def post_stop(self) -> None:
        gevent.sleep(0.3)


def _block_the_hub() -> None:
    """Hold the hub with unpatched code: gevent's loop clock stops meanwhile."""
    gevent.sleep(0.01)  # start from a fresh loop iteration
    real_sleep(BLOCK)


def test_ask_timeout_counts_from_the_call_after_the_hub_was_blocked(system: ActorSystem) -> None:
    ref = system.actor_of(Props(SlowReply))
    assert ref.ask("warm-up", timeout=5)
    _block_the_hub()
    started = time.monotonic()
    # Before the fix: AskTimeoutError at once (the timer counted from before the block).
    assert ref.ask("x", timeout=1.0) == ("late-but-in-time", "x")
    assert 0.25 <= time.monotonic() - started < 1.0
    # And a real timeout still comes after the full second, not earlier.
    silent = system.actor_of(Props(Actor))
    _block_the_hub()
    started = time.monotonic()
    with pytest.raises(AskTimeoutError):
        silent.ask("x", timeout=1.0)
    assert time.monotonic() - started >= 0.95


class ReplyOnCue(Actor):
    """Keeps the asker of ``"question"``; replies to it when told ``"cue"``."""

    def __init__(self) -> None:
        self.asker: Any = None

    def receive(self, message: Any) -> None:
        if message == "question":
            self.asker = self.sender
        elif message == "cue":
            self.asker.tell("answer")


def test_future_get_timeout_counts_from_the_call_after_the_hub_was_blocked(
    system: ActorSystem,
) -> None:
    ref = system.actor_of(Props(ReplyOnCue))
    fut = ref.ask("question", timeout=10, block=False)
    _block_the_hub()

    def cue_later() -> None:
        # From another OS thread, so that nothing in the hub refreshes its clock first.
        real_sleep(0.3)
        ref.tell("cue")

    start_new_thread(cue_later, ())
    started = time.monotonic()
    assert fut.get(1.0) == "answer"  # before the fix: TimeoutError at once
    assert time.monotonic() - started < 1.0


def test_pattern_timeouts_count_from_the_call_after_the_hub_was_blocked(
    system: ActorSystem,
) -> None:
    ref = system.actor_of(Props(SlowReply))
    _block_the_hub()
    assert gactors.pattern.ask(ref, "x", 1.0).get(5) == ("late-but-in-time", "x")
    _block_the_hub()
    # post_stop takes 0.3 s: well within the 1 s, counted from now.
    assert gactors.pattern.graceful_stop(ref, 1.0, "stop-slowly").get(5) is True


def test_await_termination_counts_from_the_call_after_the_hub_was_blocked() -> None:
    system = ActorSystem("await-after-block")
    system.actor_of(Props(SlowReply))  # its post_stop takes 0.3 s
    _block_the_hub()
    system.terminate()
    started = time.monotonic()
    assert system.await_termination(1.0)  # before the fix: False at once
    assert time.monotonic() - started < 1.0


# -- ask(timeout=None) is the default timeout, never a wait without end (SPEC 4) ----------------
def test_ask_timeout_none_means_the_default_ask_timeout() -> None:
    with ActorSystem("ask-none", {"default_ask_timeout": 0.2}) as system:
        silent = system.actor_of(Props(Actor))
        started = time.monotonic()
        # Before the fix this future never completed (get(3) raised TimeoutError).
        fut = silent.ask("x", timeout=None, block=False)
        with pytest.raises(AskTimeoutError):
            fut.get(3)
        with pytest.raises(AskTimeoutError):
            gactors.pattern.ask(silent, "x", None).get(3)
        with pytest.raises(AskTimeoutError):
            # Future.get(None) of an ask is bounded by the ask's own timer.
            silent.ask("y", timeout=None, block=False).get()
        assert time.monotonic() - started < 2.5
        # An actor stopped before it replies: the ask ends too.
        stopping = system.actor_of(Props(Actor))
        fut = stopping.ask("x", timeout=None, block=False)
        system.stop(stopping)
        with pytest.raises(AskTimeoutError):
            fut.get(3)


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
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


def test_durations_may_be_timedeltas(echo: ActorRef, system: ActorSystem) -> None:
    assert echo.ask("x", timeout=timedelta(seconds=WAIT)) == "x"
    assert pattern.ask(echo, "y", timedelta(seconds=WAIT)).get(WAIT) == "y"
    assert pattern.graceful_stop(echo, timedelta(seconds=WAIT)).get(WAIT) is True


def test_asking_a_stopped_actor_times_out_and_the_message_is_a_dead_letter(
    system: ActorSystem, dead_letters: Collector
) -> None:
    ref = system.actor_of(Props(Echo), "gone")
    assert pattern.graceful_stop(ref, WAIT).get(WAIT) is True
    with pytest.raises(AskTimeoutError, match="gone"):
        ref.ask("anyone?", timeout=0.2)
    assert [e.message for e in dead_letters.events] == ["anyone?"]


def test_a_reply_after_the_timeout_is_a_dead_letter(
    system: ActorSystem, echo: ActorRef, dead_letters: Collector
) -> None:
    with pytest.raises(AskTimeoutError):
        echo.ask("slow", timeout=0.05)
    assert echo.ask("sync", timeout=WAIT) == "sync"  # the slow reply has been sent by now
    assert [(e.message, e.sender) for e in dead_letters.events] == [("slow reply", echo)]


def test_a_second_reply_is_a_dead_letter(
    system: ActorSystem, echo: ActorRef, dead_letters: Collector
) -> None:
    assert echo.ask("twice", timeout=WAIT) == "first"
    assert echo.ask("sync", timeout=WAIT) == "sync"
    assert [e.message for e in dead_letters.events] == ["second"]


def test_status_replies(system: ActorSystem, echo: ActorRef) -> None:
    assert echo.ask(Status.Success(3), timeout=WAIT) == 3
    with pytest.raises(KeyError):
        echo.ask(Status.Failure(KeyError("k")), timeout=WAIT)


def test_status_failure_needs_an_exception() -> None:
    for bad in ("not an exception", None, 42, ValueError):
        with pytest.raises(TypeError, match=r"Status\.Failure needs an exception instance"):
            Status.Failure(bad)  # type: ignore[arg-type]
    assert isinstance(Status.Failure(KeyError("k")).cause, KeyError)


def test_forward_outside_an_actor(echo: ActorRef) -> None:
    with pytest.raises(IllegalStateError, match="inside an actor"):
        echo.forward("x")


@pytest.mark.parametrize("sender", ["notaref", 42, object(), Echo], ids=short)
def test_a_sender_that_is_not_a_ref_is_refused_at_tell(
    system: ActorSystem, echo: ActorRef, dead_letters: Collector, sender: Any
) -> None:
    """Issue 29: refused where the mistake is, not later as an AttributeError of the
    receiving actor's ``self.sender.tell`` (which restarted it)."""
    with pytest.raises(TypeError, match="sender must be an ActorRef or None"):
        echo.tell("hello", sender)
    with pytest.raises(TypeError, match="sender must be an ActorRef or None"):
        system.dead_letters.tell("hello", sender)
    assert echo.ask("still alive", timeout=WAIT) == "still alive"
    assert not dead_letters.events  # nothing was sent


class FailsToStart(Actor):
    def __init__(self) -> None:
        raise ValueError("no start")


def test_an_ask_of_a_terminated_actor_fails_at_once(system: ActorSystem) -> None:
    # Issue 28: as in Akka, an ask of an actor that has already terminated (here its
    # constructor failed) fails at once, saying so, instead of waiting the timeout.
    with event_filter(system, ActorInitializationException):
        ref = system.actor_of(Props(FailsToStart), "fails-to-start")
        # Sent before the constructor ran: the actor stops with the ask in its mailbox.
        t0 = time.monotonic()
        with pytest.raises(AskTimeoutError, match="terminated before processing it"):
            ref.ask("queued", timeout=10.0)
        assert time.monotonic() - t0 < 5.0
    t0 = time.monotonic()
    with pytest.raises(AskTimeoutError, match="had already terminated") as info:
        ref.ask("late", timeout=10.0)
    assert time.monotonic() - t0 < 5.0
    assert "fails-to-start" in str(info.value)
    # From another OS thread, and without blocking, alike.
    fut = ref.ask("late", timeout=10.0, block=False)
    with pytest.raises(AskTimeoutError, match="had already terminated"):
        fut.get(5.0)
    result: list[BaseException] = []

    def from_thread() -> None:
        try:
            ref.ask("from a thread", timeout=10.0)
        except BaseException as e:
            result.append(e)

    in_thread(from_thread)
    assert len(result) == 1 and isinstance(result[0], AskTimeoutError), result


def test_an_ask_of_an_actor_of_a_terminated_system_fails_at_once() -> None:
    # Issue 29 item 5.
    system = ActorSystem("terminated-ask", config={"log_dead_letters": 0})
    ref = system.actor_of(Props(Echo), "echo")
    assert ref.ask("hi", timeout=WAIT) == "hi"
    system.terminate()
    assert system.await_termination(WAIT)
    t0 = time.monotonic()
    with pytest.raises(AskTimeoutError, match="had already terminated"):
        ref.ask("too late", timeout=10.0)
    assert time.monotonic() - t0 < 5.0


def test_an_actor_asking_itself_blocking_is_refused(echo: ActorRef) -> None:
    kind, text = echo.ask("ask myself", timeout=WAIT)
    assert kind == "refused" and "cannot block asking itself" in text


def test_an_actor_asking_itself_without_blocking_gets_its_reply(echo: ActorRef) -> None:
    assert echo.ask("ask myself later", timeout=WAIT) == "hello"


def test_two_actors_asking_each_other_time_out_instead_of_hanging(
    system: ActorSystem,
) -> None:
    a = system.actor_of(Props(ReentrantEcho), "a")
    b = system.actor_of(Props(ReentrantEcho), "b")
    # a asks b, which asks a back while a is blocked in its ask: b's ask times out,
    # then b answers, and a gets b's answer.
    outcome = a.ask(("ask", b, ("ask", a, "ping", 0.2), 2.0), timeout=WAIT)
    assert outcome[0] == "answer"
    assert outcome[1][0] == "timed out"

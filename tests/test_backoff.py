"""Backoff supervision (SPEC section 8): options, policies and the supervisor.

Delays are Akka's 3 s / 30 s / 0.2 example scaled down a hundred times (0.03 s /
0.3 s / 0.2), so that a full exponential series takes under a second. Lower bounds of
measured delays are tight (a timer never fires early); upper bounds get a generous
allowance for a loaded machine, and the exact formula is checked separately with a
seeded random generator.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from _actors import Echo
from _inputs import NAN
from gevent.queue import Empty, Queue
from zope.interface import implementer
from zope.interface.verify import verifyClass, verifyObject

from gactors import (
    Actor,
    ActorInitializationException,
    ActorSystem,
    DeadLetter,
    Directive,
    OneForOneStrategy,
    PluginError,
    Props,
    SupervisorStrategy,
    Terminated,
    UnhandledMessage,
)
from gactors.backoff import (
    BackoffOpts,
    BackoffSupervisor,
    ConstantBackoff,
    CurrentChild,
    DecorrelatedJitterBackoff,
    ExponentialBackoff,
    FullJitterBackoff,
    GetCurrentChild,
    GetRestartCount,
    Reset,
    RestartCount,
)
from gactors.interfaces import IBackoffPolicy

MIN, MAX, RF = 0.03, 0.3, 0.2
EARLY = 0.002  # clock granularity allowance on lower bounds
LATE = 0.15  # allowance on upper bounds for a loaded machine
TIMEOUT = 3.0


# -- helpers --------------------------------------------------------------------------------------
@pytest.fixture
def system(request: pytest.FixtureRequest) -> Iterator[ActorSystem]:
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40].strip("-")
    s = ActorSystem(name or "backoff")
    yield s
    s.terminate()
    assert s.await_termination(10), f"system did not terminate:\n{s.tree()}"


class Events:
    """A gevent queue that actors put (kind, detail, monotonic time) tuples into."""

    def __init__(self) -> None:
        self.queue: Queue = Queue()

    def put(self, kind: str, detail: Any = None) -> None:
        self.queue.put((kind, detail, time.monotonic()))

    def expect(self, kind: str, timeout: float = TIMEOUT) -> tuple[Any, float]:
        try:
            got, detail, t = self.queue.get(timeout=timeout)
        except Empty:
            raise AssertionError(f"no {kind!r} event within {timeout} s") from None
        assert got == kind, f"expected {kind!r}, got {(got, detail)!r}"
        return detail, t

    def expect_none(self, duration: float) -> None:
        try:
            event = self.queue.get(timeout=duration)
        except Empty:
            return
        raise AssertionError(f"unexpected event {event!r}")


class Child(Actor):
    """Reports its lifecycle; "stop" stops it, "boom" fails it, "reset" sends Reset to
    its parent, ("to-parent", x) sends x to its parent, anything else is echoed."""

    def __init__(self, events: Events) -> None:
        self.events = events
        self.state = 0

    def pre_start(self) -> None:
        self.events.put("start", self.ref)

    def post_stop(self) -> None:
        self.events.put("stop", self.ref)

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        self.events.put("pre_restart", self.ref)
        super().pre_restart(reason, message)

    def receive(self, message: Any) -> None:
        if message == "stop":
            self.context.stop(self.ref)
        elif message == "boom":
            raise ValueError("boom")
        elif message == "bad-arg":
            raise TypeError("bad arg")
        elif message == "reset":
            self.context.parent.tell(Reset)
        elif message == "inc":
            self.state += 1
        elif message == "state":
            self.sender.tell(self.state)
        elif isinstance(message, tuple) and message[0] == "to-parent":
            self.context.parent.tell(message[1])
        else:
            self.sender.tell(("echo", message))


class Watcher(Actor):
    """Watches a ref and reports its Terminated."""

    def __init__(self, target: Any, events: Events) -> None:
        self.events = events
        self.context.watch(target)

    def receive(self, message: Any) -> None:
        if isinstance(message, Terminated):
            self.events.put("terminated", message.actor)


class Parent(Actor):
    """Creates a backoff supervisor and reports every message it receives."""

    def __init__(self, options: BackoffOpts, events: Events) -> None:
        self.events = events
        self.supervisor = self.context.actor_of(BackoffSupervisor.props(options), "sup")

    def receive(self, message: Any) -> None:
        if message == "supervisor?":
            self.sender.tell(self.supervisor)
        else:
            self.events.put("parent-got", (message, self.sender))


def start(system: ActorSystem, options: BackoffOpts, name: str = "sup") -> Any:
    return system.actor_of(BackoffSupervisor.props(options), name)


def count(sup: Any) -> int:
    reply = sup.ask(GetRestartCount, timeout=TIMEOUT)
    assert isinstance(reply, RestartCount)
    return int(reply.count)


def current_child(sup: Any) -> Any:
    reply = sup.ask(GetCurrentChild, timeout=TIMEOUT)
    assert isinstance(reply, CurrentChild)
    return reply.ref


def exp_bounds(n: int, lo: float = MIN, hi: float = MAX, rf: float = RF) -> tuple[float, float]:
    base = min(hi, lo * 2**n)
    return base, base * (1 + rf)


# The helpers use a long auto reset, so that a slow machine never resets a count that a
# test is about to check; the tests of resetting set their own.
def on_stop(events: Events) -> BackoffOpts:
    return BackoffOpts.on_stop(Props(Child, events), "c", MIN, MAX, RF).with_auto_reset(10.0)


def on_failure(events: Events) -> BackoffOpts:
    return BackoffOpts.on_failure(Props(Child, events), "c", MIN, MAX, RF).with_auto_reset(10.0)


# -- options --------------------------------------------------------------------------------------
class TestOptions:
    def test_defaults(self) -> None:
        o = BackoffOpts.on_stop(Props(Actor), "c", 3, 30, 0.2)
        assert (o.mode, o.child_name, o.min_backoff, o.max_backoff, o.random_factor) == (
            "on_stop",
            "c",
            3.0,
            30.0,
            0.2,
        )
        assert o.auto_reset == 3.0  # the default auto reset is min_backoff
        assert not o.manual_reset
        assert o.max_retries is None
        assert o.policy is ExponentialBackoff
        assert BackoffOpts.on_failure(Props(Actor), "c", 3, 30, 0.2).mode == "on_failure"

    def test_timedelta_durations(self) -> None:
        o = BackoffOpts.on_stop(Props(Actor), "c", timedelta(seconds=1), timedelta(minutes=1), 0)
        assert (o.min_backoff, o.max_backoff) == (1.0, 60.0)
        assert o.with_auto_reset(timedelta(seconds=5)).auto_reset == 5.0

    def test_builders_return_new_options(self) -> None:
        o = BackoffOpts.on_stop(Props(Actor), "c", 1, 10, 0.1)
        p = o.with_max_retries(3)
        assert p is not o and p.max_retries == 3 and o.max_retries is None
        assert o.with_manual_reset().manual_reset and o.with_manual_reset().auto_reset is None
        assert o.with_manual_reset().with_auto_reset(2).auto_reset == 2.0
        assert not o.with_manual_reset().with_auto_reset(2).manual_reset
        assert o.with_reply_while_stopped("down").reply_while_stopped == "down"
        pred = o.with_final_stop_message(lambda m: m == "bye").final_stop_message
        assert pred is not None and pred("bye")
        stopping = o.with_default_stopping_strategy().strategy
        assert stopping is SupervisorStrategy.stopping_strategy
        custom = OneForOneStrategy({ValueError: Directive.RESUME})
        assert o.with_supervisor_strategy(custom).strategy is custom
        assert "max_retries=3" in repr(p)

    @pytest.mark.parametrize(
        ("args", "fragment"),
        [
            ((2.0, 1.0, 0.2), "must not be greater than max_backoff"),
            ((-1.0, 1.0, 0.2), "min_backoff"),
            ((0.1, -1.0, 0.2), "max_backoff"),
            ((0.1, 1.0, -0.1), "random_factor"),
            ((0.1, 1.0, 1.5), "random_factor"),
            ((float("nan"), 1.0, 0.2), "min_backoff"),
            ((0.1, float("inf"), 0.2), "max_backoff"),
        ],
    )
    def test_invalid_values(self, args: tuple[float, float, float], fragment: str) -> None:
        for build in (BackoffOpts.on_stop, BackoffOpts.on_failure):
            with pytest.raises(ValueError, match=fragment):
                build(Props(Actor), "c", *args)

    @pytest.mark.parametrize("zero", [0, 0.0, -0.0, timedelta(0)], ids=repr)
    def test_a_min_backoff_that_is_not_positive_is_refused(self, zero: Any) -> None:
        # SPEC 8: a zero min_backoff restarted a child that stops at once some 20,000
        # times a second, at full CPU.
        for build in (BackoffOpts.on_stop, BackoffOpts.on_failure):
            with pytest.raises(ValueError, match="min_backoff must be > 0"):
                build(Props(Actor), "c", zero, 1.0, 0.2)

    def test_invalid_builder_values(self) -> None:
        o = BackoffOpts.on_stop(Props(Actor), "c", 0.1, 1.0, 0.2)
        with pytest.raises(ValueError, match="auto reset"):
            o.with_auto_reset(0)
        with pytest.raises(ValueError, match="auto reset"):
            o.with_auto_reset(-1)
        with pytest.raises(ValueError, match="max_retries"):
            o.with_max_retries(-2)
        with pytest.raises(ValueError, match="max_retries"):
            o.with_max_retries(1.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="None"):
            o.with_reply_while_stopped(None)
        with pytest.raises(TypeError, match="predicate"):
            o.with_final_stop_message("stop")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="None"):
            o.with_supervisor_strategy(None)

    def test_invalid_child(self) -> None:
        with pytest.raises(TypeError, match="Props"):
            BackoffOpts.on_stop(Actor, "c", 0.1, 1.0, 0.2)  # type: ignore[arg-type]
        for bad in ("", "a/b", "$x"):
            with pytest.raises(ValueError, match="child_name"):
                BackoffOpts.on_stop(Props(Actor), bad, 0.1, 1.0, 0.2)
        with pytest.raises(TypeError, match="min_backoff"):
            BackoffOpts.on_stop(Props(Actor), "c", "1", 1.0, 0.2)  # type: ignore[arg-type]

    def test_policy_by_name(self) -> None:
        o = BackoffOpts.on_stop(Props(Actor), "c", 0.1, 1.0, 0.2)
        assert o.with_policy("exponential").policy is ExponentialBackoff
        assert o.with_policy("full-jitter").policy is FullJitterBackoff
        assert o.with_policy("decorrelated-jitter").policy is DecorrelatedJitterBackoff
        assert o.with_policy("constant").policy is ConstantBackoff
        assert o.with_policy("gactors.backoff:ConstantBackoff").policy is ConstantBackoff

    def test_unknown_policy_name_lists_the_known_ones(self) -> None:
        o = BackoffOpts.on_stop(Props(Actor), "c", 0.1, 1.0, 0.2)
        with pytest.raises(PluginError) as info:
            o.with_policy("fibonacci")
        text = str(info.value)
        assert "'fibonacci'" in text
        for known in ("exponential", "full-jitter", "decorrelated-jitter", "constant"):
            assert known in text

    def test_policy_instance_is_accepted(self) -> None:
        policy = ConstantBackoff(0.1, 1.0, 0.0)
        o = BackoffOpts.on_stop(Props(Actor), "c", 0.1, 1.0, 0.2).with_policy(policy)
        assert o.policy(0.1, 1.0, 0.2) is policy

    def test_unknown_strategy_name(self) -> None:
        o = BackoffOpts.on_failure(Props(Actor), "c", 0.1, 1.0, 0.2)
        assert o.with_supervisor_strategy("stopping").strategy is (
            SupervisorStrategy.stopping_strategy
        )
        with pytest.raises(PluginError, match="known supervisor strategy names: 'default'"):
            o.with_supervisor_strategy("nope")

    def test_props_needs_options(self) -> None:
        with pytest.raises(TypeError, match="BackoffOpts"):
            BackoffSupervisor.props({"min_backoff": 1})  # type: ignore[arg-type]
        props = BackoffSupervisor.props(BackoffOpts.on_stop(Props(Actor), "c", 0.1, 1.0, 0.2))
        assert isinstance(props, Props)


# -- policies -------------------------------------------------------------------------------------
class TestPolicies:
    @pytest.mark.parametrize(
        "cls", [ExponentialBackoff, FullJitterBackoff, DecorrelatedJitterBackoff, ConstantBackoff]
    )
    def test_builtins_implement_the_interface(self, cls: type) -> None:
        assert verifyClass(IBackoffPolicy, cls)
        assert verifyObject(IBackoffPolicy, cls(1.0, 10.0, 0.2))

    def test_exponential_formula_akka_example(self) -> None:
        # SPEC section 8: with 3 s / 30 s / 0.2 the delays fall in [3, 3.6), [6, 7.2),
        # [12, 14.4), [24, 28.8), then [30, 36).
        expected = [(3, 3.6), (6, 7.2), (12, 14.4), (24, 28.8), (30, 36), (30, 36), (30, 36)]
        rng = random.Random(42)
        p = ExponentialBackoff(3.0, 30.0, 0.2, rng=rng)
        for _ in range(200):
            for n, (lo, hi) in enumerate(expected):
                d = p.next_delay(n)
                assert lo <= d < hi, (n, d)

    def test_exponential_uses_the_random_value_exactly(self) -> None:
        class Fixed(random.Random):
            def random(self) -> float:
                return 0.5

        p = ExponentialBackoff(3.0, 30.0, 0.2, rng=Fixed())
        assert [p.next_delay(n) for n in range(5)] == pytest.approx([3.3, 6.6, 13.2, 26.4, 33.0])
        assert ExponentialBackoff(3.0, 30.0, 0.0).next_delay(2) == 12.0
        # Huge restart counts neither overflow nor exceed the cap.
        assert ExponentialBackoff(3.0, 30.0, 0.0).next_delay(10_000) == 30.0
        assert ExponentialBackoff(0.0, 30.0, 0.2).next_delay(5) == 0.0

    def test_full_jitter(self) -> None:
        p = FullJitterBackoff(1.0, 10.0, 0.2, rng=random.Random(1))
        for n, cap in enumerate([1, 2, 4, 8, 10, 10]):
            delays = [p.next_delay(n) for _ in range(300)]
            assert all(0.0 <= d <= cap for d in delays)
            assert max(delays) > cap * 0.8  # the whole range is used
            assert min(delays) < cap * 0.2

    def test_decorrelated_jitter(self) -> None:
        p = DecorrelatedJitterBackoff(1.0, 20.0, 0.2, rng=random.Random(2))
        previous = 1.0
        seen = []
        for n in range(300):
            d = p.next_delay(n)
            assert 1.0 <= d <= 20.0
            assert d <= max(1.0, previous * 3.0)
            previous = d
            seen.append(d)
        assert max(seen) == 20.0 or max(seen) > 15.0
        p.reset()
        assert p.previous == 1.0
        assert 1.0 <= p.next_delay(0) <= 3.0

    def test_constant(self) -> None:
        p = ConstantBackoff(2.0, 30.0, 0.5, rng=random.Random(3))
        for n in (0, 1, 5, 50):
            assert 2.0 <= p.next_delay(n) < 3.0
        assert ConstantBackoff(2.0, 30.0, 0.0).next_delay(7) == 2.0


# -- the supervisor: on_stop ----------------------------------------------------------------------
class TestOnStop:
    def test_restart_delays_follow_the_exponential_formula(self, system: ActorSystem) -> None:
        events = Events()
        # Manual reset: a slow machine must not reset the count between two stops.
        sup = start(system, on_stop(events).with_manual_reset())
        first, _ = events.expect("start")
        children = {first}
        for n in range(5):
            current_child(sup).tell("stop")
            _, stopped_at = events.expect("stop")
            child, started_at = events.expect("start")
            lo, hi = exp_bounds(n)
            gap = started_at - stopped_at
            assert lo - EARLY <= gap < hi + LATE, (n, gap, lo, hi)
            assert count(sup) == n + 1
            children.add(child)
        assert len(children) == 6  # a new incarnation every time
        assert children.pop().name == "c"

    def test_forwards_to_the_child_keeping_the_sender(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_stop(events))
        child, _ = events.expect("start")
        assert current_child(sup) == child
        assert sup.ask("hello", timeout=TIMEOUT) == ("echo", "hello")
        sup.tell("inc")
        sup.tell("inc")
        assert sup.ask("state", timeout=TIMEOUT) == 2

    def test_messages_from_the_child_go_to_the_supervisors_parent(
        self, system: ActorSystem
    ) -> None:
        events = Events()
        parent = system.actor_of(Props(Parent, on_stop(events), events), "parent")
        sup = parent.ask("supervisor?", timeout=TIMEOUT)
        events.expect("start")
        sup.tell(("to-parent", "news"))
        (message, sender), _ = events.expect("parent-got")
        assert message == "news"
        assert sender == sup  # the supervisor stands in for its child

    def test_failure_restarts_in_place_with_the_default_strategy(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_stop(events))
        child, _ = events.expect("start")
        sup.tell("inc")
        sup.tell("boom")
        events.expect("pre_restart")
        events.expect("stop")  # post_stop from the default pre_restart
        restarted, _ = events.expect("start")  # post_restart -> pre_start
        assert restarted == child  # the same ref: an ordinary restart, no backoff
        assert sup.ask("state", timeout=TIMEOUT) == 0
        assert count(sup) == 0

    def test_default_stopping_strategy_turns_failures_into_backoff(
        self, system: ActorSystem
    ) -> None:
        events = Events()
        sup = start(system, on_stop(events).with_default_stopping_strategy())
        child, _ = events.expect("start")
        sup.tell("boom")
        _, stopped_at = events.expect("stop")
        new, started_at = events.expect("start")
        assert new != child
        assert started_at - stopped_at >= MIN - EARLY
        assert count(sup) == 1

    def test_strategy_by_name(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_stop(events).with_supervisor_strategy("stopping"))
        child, _ = events.expect("start")
        sup.tell("boom")
        events.expect("stop")
        assert events.expect("start")[0] != child
        assert count(sup) == 1

    def test_decider_without_opinion_falls_back_to_the_default(self, system: ActorSystem) -> None:
        events = Events()
        strategy = OneForOneStrategy({TypeError: Directive.STOP})
        sup = start(system, on_stop(events).with_supervisor_strategy(strategy))
        child, _ = events.expect("start")
        sup.tell("boom")  # ValueError: no opinion -> default decider -> restart in place
        events.expect("pre_restart")
        events.expect("stop")
        assert events.expect("start")[0] == child
        sup.tell("bad-arg")  # TypeError -> stop -> backoff
        events.expect("stop")
        assert events.expect("start")[0] != child
        assert count(sup) == 1

    def test_max_retries_stops_the_supervisor(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_stop(events).with_max_retries(2).with_manual_reset())
        events.expect("start")
        system.actor_of(Props(Watcher, sup, events))
        for _ in range(2):
            sup.tell("stop")
            events.expect("stop")
            events.expect("start")
        assert count(sup) == 2
        sup.tell("stop")
        events.expect("stop")
        ref, _ = events.expect("terminated")
        assert ref == sup
        events.expect_none(MIN * 3)  # no further child

    def test_no_limit_with_minus_one(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_stop(events).with_max_retries(-1).with_manual_reset())
        events.expect("start")
        for _ in range(3):
            sup.tell("stop")
            events.expect("stop")
            events.expect("start")
        assert count(sup) == 3

    def test_auto_reset_only_after_a_quiet_period(self, system: ActorSystem) -> None:
        events = Events()
        quiet = 0.25
        sup = start(system, on_stop(events).with_auto_reset(quiet))
        events.expect("start")
        sup.tell("stop")
        events.expect("stop")
        events.expect("start")
        assert count(sup) == 1  # not reset before the quiet period ends
        # The child stops again within the quiet period: the count keeps growing.
        sup.tell("stop")
        _, stopped_at = events.expect("stop")
        events.expect("start")
        assert count(sup) == 2
        # Now it stays up: the count goes back to 0 only once the quiet period, timed from
        # the (delayed) start of the child, has passed.
        while count(sup) != 0:
            assert time.monotonic() - stopped_at < exp_bounds(1)[1] + quiet + LATE, "no reset"
            events.expect_none(0.01)
        assert time.monotonic() - stopped_at >= exp_bounds(1)[0] + quiet - EARLY
        # And the next delay starts again from min_backoff.
        sup.tell("stop")
        _, stopped_at = events.expect("stop")
        _, restarted_at = events.expect("start")
        lo, hi = exp_bounds(0)
        assert lo - EARLY <= restarted_at - stopped_at < hi + LATE
        assert count(sup) == 1

    def test_stop_within_the_quiet_period_keeps_the_count(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_stop(events).with_auto_reset(5.0))
        events.expect("start")
        for n in range(3):
            sup.tell("stop")
            events.expect("stop")
            events.expect("start")
            assert count(sup) == n + 1

    def test_manual_reset(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_stop(events).with_manual_reset())
        events.expect("start")
        for _ in range(2):
            sup.tell("stop")
            events.expect("stop")
            events.expect("start")
        assert count(sup) == 2
        sup.tell("reset")  # the child sends Reset to its parent
        assert sup.ask("hello", timeout=TIMEOUT) == ("echo", "hello")
        assert count(sup) == 0

    def test_reset_without_manual_reset_is_unhandled(self, system: ActorSystem) -> None:
        events = Events()
        unhandled: Queue = Queue()
        system.event_stream.subscribe(unhandled.put, UnhandledMessage)
        sup = start(system, on_stop(events).with_auto_reset(5.0))
        events.expect("start")
        sup.tell("stop")
        events.expect("stop")
        events.expect("start")
        sup.tell(Reset)
        event = unhandled.get(timeout=TIMEOUT)
        assert event.message is Reset and event.recipient == sup
        assert count(sup) == 1

    def test_dead_letters_while_stopped(self, system: ActorSystem) -> None:
        events = Events()
        letters: Queue = Queue()
        system.event_stream.subscribe(letters.put, DeadLetter)
        sup = start(system, BackoffOpts.on_stop(Props(Child, events), "c", 0.5, 1.0, 0.0))
        events.expect("start")
        sup.tell("stop")
        events.expect("stop")
        assert current_child(sup) is None
        sup.tell("lost")
        letter = letters.get(timeout=TIMEOUT)
        assert letter.message == "lost" and letter.recipient == sup

    def test_reply_while_stopped(self, system: ActorSystem) -> None:
        events = Events()
        opts = BackoffOpts.on_stop(Props(Child, events), "c", 0.5, 1.0, 0.0)
        sup = start(system, opts.with_reply_while_stopped("down, try later"))
        events.expect("start")
        sup.tell("stop")
        events.expect("stop")
        assert sup.ask("hello", timeout=TIMEOUT) == "down, try later"
        events.expect("start", timeout=TIMEOUT)
        assert sup.ask("hello", timeout=TIMEOUT) == ("echo", "hello")

    def test_final_stop_message_stops_the_supervisor_with_the_child(
        self, system: ActorSystem
    ) -> None:
        events = Events()
        opts = on_stop(events).with_final_stop_message(lambda m: m == "stop")
        sup = start(system, opts)
        events.expect("start")
        system.actor_of(Props(Watcher, sup, events))
        sup.tell("stop")  # forwarded; the child stops itself on it
        events.expect("stop")
        ref, _ = events.expect("terminated")
        assert ref == sup
        events.expect_none(MIN * 3)

    def test_final_stop_message_while_stopped_stops_the_supervisor(
        self, system: ActorSystem
    ) -> None:
        events = Events()
        opts = BackoffOpts.on_stop(Props(Child, events), "c", 0.5, 1.0, 0.0)
        sup = start(system, opts.with_final_stop_message(lambda m: m == "shutdown"))
        events.expect("start")
        system.actor_of(Props(Watcher, sup, events))
        current_child(sup).tell("stop")  # straight to the child: not a final message
        events.expect("stop")
        sup.tell("shutdown")
        ref, _ = events.expect("terminated")
        assert ref == sup

    def test_policy_is_called_with_the_restart_count_and_reset(self, system: ActorSystem) -> None:
        calls: list[Any] = []

        @implementer(IBackoffPolicy)
        class Recording:
            def __init__(self, lo: float, hi: float, rf: float) -> None:
                calls.append(("new", lo, hi, rf))

            def next_delay(self, restart_count: int) -> float:
                calls.append(("delay", restart_count))
                return 0.01

            def reset(self) -> None:
                calls.append(("reset",))

        events = Events()
        sup = start(system, on_stop(events).with_manual_reset().with_policy(Recording))
        events.expect("start")
        for _ in range(2):
            sup.tell("stop")
            events.expect("stop")
            events.expect("start")
        sup.tell("reset")
        sup.ask("sync", timeout=TIMEOUT)
        assert count(sup) == 0
        sup.tell("stop")
        events.expect("stop")
        events.expect("start")
        assert calls == [
            ("new", MIN, MAX, RF),
            ("delay", 0),
            ("delay", 1),
            ("reset",),
            ("delay", 0),
        ]

    def test_broken_policy_fails_the_supervisors_creation(self, system: ActorSystem) -> None:
        events = Events()

        def factory(lo: float, hi: float, rf: float) -> Any:
            return object()  # not an IBackoffPolicy

        sup = start(system, on_stop(events).with_policy(factory))
        system.actor_of(Props(Watcher, sup, events))
        ref, _ = events.expect("terminated")  # default decider: initialization -> stop
        assert ref == sup
        events.expect_none(0.05)  # no child was ever created

    def test_stopping_the_supervisor_stops_the_child_and_cancels_restarts(
        self, system: ActorSystem
    ) -> None:
        events = Events()
        sup = start(system, BackoffOpts.on_stop(Props(Child, events), "c", 0.05, 0.1, 0.0))
        events.expect("start")
        sup.tell("stop")
        events.expect("stop")
        system.stop(sup)
        events.expect_none(0.15)  # the pending restart never happens


# -- the supervisor: on_failure -------------------------------------------------------------------
class TestOnFailure:
    def test_failure_stops_the_child_and_starts_a_new_one_after_the_delay(
        self, system: ActorSystem
    ) -> None:
        events = Events()
        sup = start(system, on_failure(events).with_manual_reset())
        child, _ = events.expect("start")
        for n in range(4):
            sup.tell("inc")
            sup.tell("boom")
            _, stopped_at = events.expect("stop")  # stopped, not restarted in place
            new, started_at = events.expect("start")
            assert new != child
            child = new
            lo, hi = exp_bounds(n)
            assert lo - EARLY <= started_at - stopped_at < hi + LATE, n
            assert count(sup) == n + 1
            assert sup.ask("state", timeout=TIMEOUT) == 0

    def test_voluntary_stop_stops_the_supervisor(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_failure(events))
        events.expect("start")
        system.actor_of(Props(Watcher, sup, events))
        sup.tell("stop")
        events.expect("stop")
        ref, _ = events.expect("terminated")
        assert ref == sup
        events.expect_none(MIN * 3)

    def test_the_same_stop_under_on_stop_restarts(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_stop(events))
        events.expect("start")
        sup.tell("stop")
        events.expect("stop")
        events.expect("start")
        assert count(sup) == 1

    def test_max_retries_stops_the_supervisor(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_failure(events).with_max_retries(2).with_manual_reset())
        events.expect("start")
        system.actor_of(Props(Watcher, sup, events))
        for _ in range(2):
            sup.tell("boom")
            events.expect("stop")
            events.expect("start")
        assert count(sup) == 2
        sup.tell("boom")
        events.expect("stop")
        ref, _ = events.expect("terminated")
        assert ref == sup
        events.expect_none(MIN * 3)

    def test_max_retries_of_the_strategy(self, system: ActorSystem) -> None:
        events = Events()
        strategy = OneForOneStrategy(max_retries=1)
        opts = on_failure(events).with_supervisor_strategy(strategy).with_manual_reset()
        sup = start(system, opts)
        events.expect("start")
        system.actor_of(Props(Watcher, sup, events))
        sup.tell("boom")
        events.expect("stop")
        events.expect("start")
        sup.tell("boom")
        events.expect("stop")
        ref, _ = events.expect("terminated")
        assert ref == sup

    def test_resume_from_the_strategy(self, system: ActorSystem) -> None:
        events = Events()
        strategy = OneForOneStrategy({ValueError: Directive.RESUME})
        sup = start(system, on_failure(events).with_supervisor_strategy(strategy))
        child, _ = events.expect("start")
        sup.tell("inc")
        sup.tell("boom")
        sup.tell("inc")
        assert sup.ask("state", timeout=TIMEOUT) == 2
        assert current_child(sup) == child
        assert count(sup) == 0
        events.expect_none(0.01)

    def test_stop_from_the_strategy_stops_the_supervisor(self, system: ActorSystem) -> None:
        events = Events()
        strategy = OneForOneStrategy({ValueError: Directive.STOP})
        sup = start(system, on_failure(events).with_supervisor_strategy(strategy))
        events.expect("start")
        system.actor_of(Props(Watcher, sup, events))
        sup.tell("boom")
        events.expect("stop")
        ref, _ = events.expect("terminated")
        assert ref == sup

    def test_auto_reset(self, system: ActorSystem) -> None:
        events = Events()
        quiet = 0.15
        sup = start(system, on_failure(events).with_auto_reset(quiet))
        events.expect("start")
        sup.tell("boom")
        _, stopped_at = events.expect("stop")
        events.expect("start")
        assert count(sup) == 1
        while count(sup) != 0:
            assert time.monotonic() - stopped_at < exp_bounds(0)[1] + quiet + LATE, "no reset"
            events.expect_none(0.01)
        assert time.monotonic() - stopped_at >= exp_bounds(0)[0] + quiet - EARLY

    def test_manual_reset(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_failure(events).with_manual_reset())
        events.expect("start")
        sup.tell("boom")
        events.expect("stop")
        events.expect("start")
        assert count(sup) == 1
        sup.tell("reset")
        sup.ask("sync", timeout=TIMEOUT)
        assert count(sup) == 0

    def test_forwarding_and_current_child(self, system: ActorSystem) -> None:
        events = Events()
        sup = start(system, on_failure(events))
        child, _ = events.expect("start")
        assert current_child(sup) == child
        assert sup.ask("ping", timeout=TIMEOUT) == ("echo", "ping")


# -- messages -------------------------------------------------------------------------------------
def test_messages() -> None:
    assert repr(Reset) == "Reset"
    assert repr(GetCurrentChild) == "GetCurrentChild"
    assert repr(GetRestartCount) == "GetRestartCount"
    assert RestartCount(2) == RestartCount(2) != RestartCount(3)
    assert hash(RestartCount(2)) == hash(RestartCount(2))
    assert CurrentChild(None) == CurrentChild(None)
    assert repr(RestartCount(2)) == "RestartCount(2)"
    assert repr(CurrentChild(None)) == "CurrentChild(None)"


# -- failures while the child starts ---------------------------------------------------------------
class FailingStart(Actor):
    """Fails in pre_start the first ``failures`` times (counted across incarnations)."""

    def __init__(self, events: Events, attempts: list[int], failures: int) -> None:
        self.events, self.attempts, self.failures = events, attempts, failures

    def pre_start(self) -> None:
        self.attempts.append(1)
        if len(self.attempts) <= self.failures:
            raise ConnectionError("database down")
        self.events.put("start", self.ref)

    def receive(self, message: Any) -> None:
        self.sender.tell(("echo", message))


def test_initialization_failures_with_on_stop_and_the_stopping_strategy(
    system: ActorSystem,
) -> None:
    events, attempts = Events(), list[int]()
    opts = (
        BackoffOpts.on_stop(Props(FailingStart, events, attempts, 2), "c", MIN, MAX, RF)
        .with_default_stopping_strategy()
        .with_manual_reset()
    )
    sup = start(system, opts)
    events.expect("start")
    assert len(attempts) == 3
    assert count(sup) == 2
    assert sup.ask("up?", timeout=TIMEOUT) == ("echo", "up?")


def test_initialization_failures_with_on_failure_need_a_restarting_decider(
    system: ActorSystem,
) -> None:

    events, attempts = Events(), list[int]()
    child = Props(FailingStart, events, attempts, 2)
    # The default decider stops a child that failed to initialize: the supervisor stops.
    sup = start(system, BackoffOpts.on_failure(child, "c", MIN, MAX, RF), "plain")
    system.actor_of(Props(Watcher, sup, events))
    ref, _ = events.expect("terminated")
    assert ref == sup and len(attempts) == 1
    # A decider restarting ActorInitializationException turns them into backoff restarts.
    attempts = list[int]()
    child = Props(FailingStart, events, attempts, 2)
    strategy = OneForOneStrategy({ActorInitializationException: Directive.RESTART})
    opts = BackoffOpts.on_failure(child, "c", MIN, MAX, RF).with_supervisor_strategy(strategy)
    sup = start(system, opts.with_manual_reset(), "restarting")
    events.expect("start")
    assert len(attempts) == 3
    assert count(sup) == 2


class RestartingParent(Actor):
    """Restarts its children on any failure (Kill included) and reports messages."""

    supervisor_strategy = OneForOneStrategy(lambda exc: Directive.RESTART)

    def __init__(self, options: BackoffOpts) -> None:
        self.supervisor = self.context.actor_of(BackoffSupervisor.props(options), "sup")

    def receive(self, message: Any) -> None:
        self.sender.tell(self.supervisor)


def test_a_restart_of_the_supervisor_starts_afresh(system: ActorSystem) -> None:
    from gactors import Kill

    events = Events()
    opts = BackoffOpts.on_stop(Props(Child, events), "c", 1.0, 2.0, 0.0).with_manual_reset()
    parent = system.actor_of(Props(RestartingParent, opts), "parent")
    sup = parent.ask("supervisor?", timeout=TIMEOUT)
    first, _ = events.expect("start")
    sup.tell("stop")
    events.expect("stop")
    assert count(sup) == 1  # a start is scheduled in 1 s
    sup.tell(Kill)  # the supervisor itself fails; its parent restarts it
    second, _ = events.expect("start", timeout=0.8)  # at once, not after the backoff
    assert second != first
    assert count(sup) == 0
    assert current_child(sup) == second


class StopsAtOnce(Actor):
    """Counts its incarnations and stops as soon as it started."""

    started = 0

    def pre_start(self) -> None:
        StopsAtOnce.started += 1
        self.context.stop(self.ref)


def test_a_tiny_min_backoff_cannot_spin(system: ActorSystem) -> None:
    # 1e-9 is positive, so legal (SPEC 8); with the "constant" policy it asked for a
    # restart every nanosecond: thousands a second. Restarts are at least 10 ms apart.
    StopsAtOnce.started = 0
    opts = BackoffOpts.on_stop(Props(StopsAtOnce), "c", 1e-9, 1.0, 0.0).with_policy("constant")
    sup = start(system, opts)
    time.sleep(1.0)  # patched: the hub runs the supervisor meanwhile
    system.stop(sup)
    # At most ~100 in the second (10 ms apart); generous for a slow machine, far from
    # the thousands without the floor.
    assert 1 <= StopsAtOnce.started <= 150


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
def test_invalid_backoff_options() -> None:
    # (RoundRobinPool(0) is refused in test_routing.py.)
    child = Props(Echo)
    with pytest.raises(ValueError):
        BackoffOpts.on_stop(child, "c", 2.0, 1.0, 0.2)  # min > max
    with pytest.raises(ValueError):
        BackoffOpts.on_failure(child, "c", -1.0, 1.0, 0.2)
    with pytest.raises(ValueError):
        BackoffOpts.on_stop(child, "c", 0.1, 1.0, 1.5)
    with pytest.raises(ValueError):
        BackoffOpts.on_stop(child, "c", NAN, 1.0, 0.2)

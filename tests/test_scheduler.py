"""system.scheduler: schedule_once, fixed delay, fixed rate, Cancellable (SPEC section 9)."""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import gevent
import pytest
from _inputs import NAN
from gevent import monkey

from gactors import (
    Actor,
    ActorRef,
    ActorSystem,
    Cancellable,
    IllegalStateError,
    InvalidMessageException,
    Props,
)
from gactors.testkit import TestProbe, await_condition

# The suite may run monkey-patched or not: these are real in both cases.
real_sleep: Callable[[float], None] = monkey.get_original("time", "sleep")
start_new_thread: Callable[..., int] = monkey.get_original("_thread", "start_new_thread")

# Timers never fire early; libev may round a little, hence a small tolerance on the
# lower bounds. No test asserts an upper bound on speed.
EPS = 0.01


class Stamp:
    """A message recording when it was told."""


def test_schedule_once_delivers_after_the_delay(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    start = time.monotonic()
    c = actor_system.scheduler.schedule_once(0.1, probe.ref, "tick")
    assert isinstance(c, Cancellable)
    probe.expect_msg("tick")
    assert time.monotonic() - start >= 0.1 - EPS
    probe.expect_no_message(0.15)  # once only
    assert not c.cancelled
    assert c.cancel() is False  # already ran
    assert actor_system.scheduler.active_tasks == 0


def test_schedule_once_with_sender_and_timedelta(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    other = TestProbe(actor_system)
    actor_system.scheduler.schedule_once(timedelta(milliseconds=20), probe.ref, "hi", other.ref)
    probe.expect_msg("hi")
    assert probe.last_sender == other.ref
    actor_system.scheduler.schedule_once(0, probe.ref, "no sender")
    probe.expect_msg("no sender")
    assert probe.last_sender is None


def test_cancel_before_it_fires(actor_system: ActorSystem, probe: TestProbe) -> None:
    c = actor_system.scheduler.schedule_once(0.1, probe.ref, "never")
    assert actor_system.scheduler.active_tasks == 1
    assert c.cancel() is True
    assert c.cancelled
    assert c.cancel() is False  # only the first cancel cancels
    probe.expect_no_message(0.25)
    assert actor_system.scheduler.active_tasks == 0


def test_fixed_delay_repeats_until_cancelled(actor_system: ActorSystem, probe: TestProbe) -> None:
    start = time.monotonic()
    c = actor_system.scheduler.schedule_with_fixed_delay(0.02, 0.05, probe.ref, "tick")
    assert probe.receive_n(4) == ["tick"] * 4
    assert time.monotonic() - start >= 0.02 + 3 * 0.05 - EPS
    assert c.cancel() is True and c.cancelled
    probe.expect_no_message(0.15)


def test_fixed_delay_gaps_are_never_shorter_than_the_delay(actor_system: ActorSystem) -> None:
    stamps: list[float] = []
    c = actor_system.scheduler.schedule_with_fixed_delay(
        0, 0.05, lambda: stamps.append(time.monotonic())
    )
    gevent.sleep(0.01)
    real_sleep(0.2)  # block the hub: the task is late once...
    await_condition(lambda: len(stamps) >= 4, timeout=5)
    c.cancel()
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    # ... but fixed delay never catches up: each delay is measured from the last run.
    assert all(g >= 0.05 - EPS for g in gaps), gaps


def test_fixed_rate_catches_up_after_a_late_start(actor_system: ActorSystem) -> None:
    stamps: list[float] = []
    start = time.monotonic()
    c = actor_system.scheduler.schedule_at_fixed_rate(
        0.05, 0.05, lambda: stamps.append(time.monotonic())
    )
    real_sleep(0.3)  # block the hub: the first five firings are all late
    await_condition(lambda: len(stamps) >= 8, timeout=5, interval=0.005)
    c.cancel()
    # Every firing keeps to the grid start + n * 0.05 (never early)...
    for n, t in enumerate(stamps, start=1):
        assert t - start >= n * 0.05 - EPS, (n, t - start)
    # ... and the missed ones ran back to back as soon as the hub was free again (with
    # fixed-delay semantics these four gaps would add up to at least 0.2 s).
    assert stamps[4] - stamps[0] < 0.2 - EPS, [t - start for t in stamps]


def test_fixed_rate_delivers_messages(actor_system: ActorSystem, probe: TestProbe) -> None:
    c = actor_system.scheduler.schedule_at_fixed_rate(0, 0.03, probe.ref, "tick")
    assert probe.receive_n(3) == ["tick"] * 3
    assert c.cancel() is True
    # Ticks told before the cancel are ahead of this marker; none may follow it.
    probe.ref.tell("marker")
    assert probe.fish_for_message(lambda m: m != "tick") == "marker"
    probe.expect_no_message(0.15)


def test_callable_task(actor_system: ActorSystem) -> None:
    calls: list[int] = []
    actor_system.scheduler.schedule_once(0.01, lambda: calls.append(1))
    await_condition(lambda: calls, timeout=5)
    assert calls == [1]


def test_failing_repeated_callable_is_not_run_again(
    actor_system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    def task() -> None:
        calls.append(1)
        raise RuntimeError("task failed")

    with caplog.at_level(logging.ERROR, logger="gactors.scheduler"):
        c = actor_system.scheduler.schedule_with_fixed_delay(0, 0.02, task)
        gevent.sleep(0.2)
    assert calls == [1]
    assert c.cancelled
    assert any("will not run again" in r.getMessage() for r in caplog.records)


def test_a_task_may_cancel_itself(actor_system: ActorSystem) -> None:
    calls: list[int] = []
    box: list[Cancellable] = []

    def task() -> None:
        calls.append(1)
        if len(calls) == 2:
            box[0].cancel()

    box.append(actor_system.scheduler.schedule_with_fixed_delay(0, 0.02, task))
    gevent.sleep(0.2)
    assert calls == [1, 1]
    assert box[0].cancelled


class SchedulingActor(Actor):
    """Schedules messages to itself with the system scheduler, from inside receive."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def receive(self, message: Any) -> None:
        if message == "go":
            self.context.system.scheduler.schedule_once(0.02, self.ref, "later", self.ref)
        else:
            self.target.tell((message, self.sender))


def test_scheduling_from_inside_an_actor(actor_system: ActorSystem, probe: TestProbe) -> None:
    a = actor_system.actor_of(Props(SchedulingActor, probe.ref))
    a.tell("go")
    assert probe.expect_msg(("later", a))


def test_schedule_and_cancel_from_a_foreign_thread(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    errors: list[BaseException] = []
    cancellables: list[Cancellable] = []
    done: list[bool] = []

    def run() -> None:
        try:
            actor_system.scheduler.schedule_once(0.02, probe.ref, "from thread")
            c = actor_system.scheduler.schedule_once(0.3, probe.ref, "cancelled")
            cancellables.append(c)
            assert c.cancel() is True
        except BaseException as e:
            errors.append(e)
        finally:
            done.append(True)

    start_new_thread(run, ())
    probe.expect_msg("from thread")
    await_condition(lambda: done, timeout=10)
    assert not errors
    assert cancellables[0].cancelled
    probe.expect_no_message(0.4)


def test_termination_cancels_everything_and_closes_the_scheduler() -> None:
    system = ActorSystem("sched-term")
    try:
        probe = TestProbe(system)
        once = system.scheduler.schedule_once(30, probe.ref, "late")
        repeated = system.scheduler.schedule_with_fixed_delay(0, 0.01, lambda: None)
        assert system.scheduler.active_tasks == 2
    finally:
        system.terminate()
        assert system.await_termination(10)
    assert once.cancelled and repeated.cancelled
    assert system.scheduler.active_tasks == 0
    with pytest.raises(IllegalStateError, match="closed"):
        system.scheduler.schedule_once(0, lambda: None)


@pytest.mark.parametrize(
    ("args", "exc"),
    [
        (("x", "ref", "m"), TypeError),  # delay not a number (nor a timedelta)
        ((True, "ref", "m"), TypeError),
        ((float("inf"), "ref", "m"), ValueError),
        ((10**400, "ref", "m"), ValueError),
        ((float("nan"), "ref", "m"), ValueError),
        ((0.1, "ref", None), InvalidMessageException),
        ((0.1, "ref"), InvalidMessageException),
        ((0.1, object(), "m"), TypeError),
        ((0.1, "callable", "m"), TypeError),  # a callable takes no message
    ],
)
def test_schedule_once_validation(
    actor_system: ActorSystem, probe: TestProbe, args: tuple[Any, ...], exc: type
) -> None:
    resolved = tuple(
        probe.ref if a == "ref" else (lambda: None) if a == "callable" else a for a in args
    )
    with pytest.raises(exc):
        actor_system.scheduler.schedule_once(*resolved)
    assert actor_system.scheduler.active_tasks == 0


def test_repeating_validation(actor_system: ActorSystem, probe: TestProbe) -> None:
    s = actor_system.scheduler
    with pytest.raises(ValueError, match="delay must be > 0"):
        s.schedule_with_fixed_delay(0, 0, probe.ref, "m")
    with pytest.raises(ValueError, match="interval must be > 0"):
        s.schedule_at_fixed_rate(0, -1, probe.ref, "m")
    # A negative initial delay means "now".
    c = s.schedule_once(-5, probe.ref, "now")
    probe.expect_msg("now")
    assert not c.cancelled


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
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

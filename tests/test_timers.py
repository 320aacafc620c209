"""self.timers: keyed per-actor timers (SPEC section 9).

The central guarantee: a message from a timer that was cancelled or replaced (also by
a restart or a stop) is never delivered, even when it was already in the mailbox.
The actors below prove the "already in the mailbox" part by yielding inside
``receive`` until the timer has fired, and reporting the mailbox length.
"""

from __future__ import annotations

import time
from typing import Any

import gevent
import pytest

from gactors import (
    Actor,
    ActorSystem,
    DeadLetter,
    InvalidMessageException,
    NotInfluenceReceiveTimeout,
    PoisonPill,
    Props,
    ReceiveTimeout,
)
from gactors.testkit import TestProbe, event_filter


def queued(actor: Actor) -> int:
    return len(actor._gactors_cell.mailbox)


def wait_until_queued(actor: Actor, n: int = 1, timeout: float = 5.0) -> int:
    """Inside receive: let the hub run until ``n`` messages are in our mailbox."""
    deadline = time.monotonic() + timeout
    while queued(actor) < n and time.monotonic() < deadline:
        gevent.sleep(0.005)
    return queued(actor)


class Timed(Actor):
    """Drives its timers on command and reports everything else to ``target``."""

    instances = 0

    def __init__(self, target: Any) -> None:
        self.target = target
        Timed.instances += 1
        self.generation = Timed.instances

    def receive(self, message: Any) -> None:
        t = self.timers
        match message:
            case ("single", key, msg, delay):
                t.start_single_timer(key, msg, delay)
            case ("fixed-delay", key, msg, delay):
                t.start_timer_with_fixed_delay(key, msg, delay)
            case ("fixed-rate", key, msg, interval):
                t.start_timer_at_fixed_rate(key, msg, interval)
            case ("cancel", key):
                t.cancel(key)
                self.target.tell(("cancelled", key))
            case "cancel-all":
                t.cancel_all()
                self.target.tell("cancelled-all")
            case "sender?":
                self.target.tell(("sender", self.sender))
            case ("active?", key):
                self.target.tell(("active", key, t.is_timer_active(key)))
            case ("replace-queued", key):
                # The first timer fires while we are still in receive: its message is
                # queued behind us when the timer is replaced.
                t.start_single_timer(key, "old", 0)
                n = wait_until_queued(self)
                t.start_single_timer(key, "new", 0.01)
                self.target.tell(("queued", n))
            case ("cancel-queued", key):
                t.start_single_timer(key, "cancelled-message", 0)
                n = wait_until_queued(self)
                t.cancel(key)
                self.target.tell(("queued", n, t.is_timer_active(key)))
            case ("fail-with-queued", key):
                t.start_timer_with_fixed_delay(key, "tick", 0.005)
                n = wait_until_queued(self)
                self.target.tell(("queued", n))
                raise ValueError("fail with a tick queued")
            case ("stop-with-queued", key):
                t.start_timer_with_fixed_delay(key, "tick", 0.005)
                n = wait_until_queued(self)
                self.target.tell(("queued", n))
                self.context.stop(self.ref)
            case _:
                self.target.tell(message)

    def post_restart(self, reason: BaseException) -> None:
        self.target.tell(("restarted", self.generation, self.timers.active_keys))


@pytest.fixture
def timed(actor_system: ActorSystem, probe: TestProbe) -> Any:
    Timed.instances = 0
    return actor_system.actor_of(Props(Timed, probe.ref), "timed")


def test_single_timer_fires_once_and_is_then_inactive(timed: Any, probe: TestProbe) -> None:
    timed.tell(("single", "k", "tick", 0.1))
    timed.tell(("active?", "k"))
    probe.expect_msg(("active", "k", True))
    probe.expect_msg("tick")
    timed.tell(("active?", "k"))
    probe.expect_msg(("active", "k", False))
    probe.expect_no_message(0.15)


def test_timer_messages_come_from_no_sender(
    actor_system: ActorSystem, timed: Any, probe: TestProbe
) -> None:
    timed.tell(("single", "k", "sender?", 0))
    probe.expect_msg(("sender", actor_system.dead_letters))


def test_replacing_a_timer_drops_its_queued_message(timed: Any, probe: TestProbe) -> None:
    timed.tell(("replace-queued", "k"))
    probe.expect_msg(("queued", 1))  # "old" was in the mailbox when replaced...
    probe.expect_msg("new")  # ... and is never delivered
    probe.expect_no_message(0.15)


def test_starting_a_timer_with_a_used_key_replaces_it(timed: Any, probe: TestProbe) -> None:
    timed.tell(("single", "k", "first", 0.15))
    timed.tell(("single", "k", "second", 0.05))
    probe.expect_msg("second")
    probe.expect_no_message(0.25)


def test_cancel_drops_a_queued_message(timed: Any, probe: TestProbe) -> None:
    timed.tell(("cancel-queued", "k"))
    probe.expect_msg(("queued", 1, False))
    probe.expect_no_message(0.15)


def test_cancel_before_firing(timed: Any, probe: TestProbe) -> None:
    timed.tell(("single", "k", "never", 0.1))
    timed.tell(("cancel", "k"))
    probe.expect_msg(("cancelled", "k"))
    timed.tell(("cancel", "unknown"))  # cancelling nothing is fine
    probe.expect_msg(("cancelled", "unknown"))
    probe.expect_no_message(0.2)


@pytest.mark.parametrize("kind", ["fixed-delay", "fixed-rate"])
def test_repeating_timer_until_cancelled(kind: str, timed: Any, probe: TestProbe) -> None:
    timed.tell((kind, "k", "tick", 0.02))
    assert probe.receive_n(3) == ["tick"] * 3
    timed.tell(("active?", "k"))
    assert probe.fish_for_message(lambda m: m != "tick") == ("active", "k", True)
    timed.tell(("cancel", "k"))
    # Ticks queued before the cancel are dropped too: nothing after the confirmation.
    assert probe.fish_for_message(lambda m: m != "tick") == ("cancelled", "k")
    probe.expect_no_message(0.15)


def test_cancel_all(timed: Any, probe: TestProbe) -> None:
    timed.tell(("fixed-delay", "a", "a", 0.02))
    timed.tell(("fixed-rate", "b", "b", 0.02))
    timed.tell(("single", "c", "c", 0.3))
    probe.fish_for_message(lambda m: m == "a")
    probe.fish_for_message(lambda m: m == "b")
    timed.tell("cancel-all")
    probe.fish_for_message(lambda m: m == "cancelled-all")
    probe.expect_no_message(0.4)
    for key in "abc":
        timed.tell(("active?", key))
        probe.expect_msg(("active", key, False))


def test_restart_cancels_timers_and_drops_queued_ticks(
    actor_system: ActorSystem, timed: Any, probe: TestProbe
) -> None:
    with event_filter(actor_system, ValueError, message="fail with a tick queued"):
        timed.tell(("fail-with-queued", "k"))
        n = probe.expect_msg_type(tuple)
    assert n[0] == "queued" and n[1] >= 1
    # The new instance has no timers, and none of the queued ticks reaches it.
    probe.expect_msg(("restarted", 2, ()))
    probe.expect_no_message(0.15)
    # The fresh instance can use the same key again.
    timed.tell(("single", "k", "after-restart", 0.01))
    probe.expect_msg("after-restart")


class StartsTimerInConstructor(Actor):
    instances = 0

    def __init__(self, target: Any) -> None:
        StartsTimerInConstructor.instances += 1
        self.target = target
        self.n = StartsTimerInConstructor.instances
        self.timers.start_single_timer("hello", ("hello", self.n), 0.02)

    def receive(self, message: Any) -> None:
        if message == "fail":
            raise ValueError("fail")
        self.target.tell(message)


def test_timer_of_the_new_instance_survives_the_restart(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    StartsTimerInConstructor.instances = 0
    a = actor_system.actor_of(Props(StartsTimerInConstructor, probe.ref))
    # Fail before the first instance's timer fires: only the second one's arrives.
    with event_filter(actor_system, ValueError):
        a.tell("fail")
    probe.expect_msg(("hello", 2))
    probe.expect_no_message(0.1)


def test_stop_cancels_timers_without_dead_letters(
    actor_system: ActorSystem, timed: Any, probe: TestProbe
) -> None:
    dead = TestProbe(actor_system)
    actor_system.event_stream.subscribe(dead.ref, DeadLetter)
    probe.watch(timed)
    timed.tell(("stop-with-queued", "k"))
    n = probe.expect_msg_type(tuple)
    assert n[0] == "queued" and n[1] >= 1
    probe.expect_terminated(timed)
    # The queued ticks are neither delivered nor reported as dead letters, and no
    # scheduler task is left behind.
    dead.expect_no_message(0.15)
    assert actor_system.scheduler.active_tasks == 0


def test_poison_pill_from_a_timer_stops_the_actor(timed: Any, probe: TestProbe) -> None:
    probe.watch(timed)
    timed.tell(("single", "k", PoisonPill, 0.02))
    probe.expect_terminated(timed)


class Quiet(NotInfluenceReceiveTimeout):
    def __repr__(self) -> str:
        return "Quiet()"


class TimedWithReceiveTimeout(Actor):
    def __init__(self, target: Any, message: Any) -> None:
        self.target = target
        self.context.set_receive_timeout(0.3)
        self.timers.start_timer_with_fixed_delay("k", message, 0.05)

    def receive(self, message: Any) -> None:
        if message is ReceiveTimeout:
            self.target.tell("timeout")
            self.context.stop(self.ref)


def test_not_influencing_timer_messages_do_not_reset_the_receive_timeout(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    a = actor_system.actor_of(Props(TimedWithReceiveTimeout, probe.ref, Quiet()))
    probe.expect_msg("timeout")  # despite a Quiet message every 0.05 s
    probe.watch(a)
    probe.expect_terminated(a)


def test_ordinary_timer_messages_reset_the_receive_timeout(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    actor_system.actor_of(Props(TimedWithReceiveTimeout, probe.ref, "busy"))
    probe.expect_no_message(0.8)  # a "busy" message every 0.05 s keeps it from firing


def test_validation(actor_system: ActorSystem, probe: TestProbe) -> None:
    errors: list[str] = []

    class Validating(Actor):
        def pre_start(self) -> None:
            for call in (
                lambda: self.timers.start_single_timer("k", None, 1),
                lambda: self.timers.start_single_timer("k", "m", "soon"),
                lambda: self.timers.start_timer_with_fixed_delay("k", "m", 0),
                lambda: self.timers.start_timer_at_fixed_rate("k", "m", -1),
                lambda: self.timers.start_single_timer(["unhashable"], "m", 1),
            ):
                try:
                    call()
                except (ValueError, TypeError, InvalidMessageException) as e:
                    errors.append(type(e).__name__)
            probe.ref.tell(("done", self.timers.active_keys))

    actor_system.actor_of(Props(Validating))
    probe.expect_msg(("done", ()))
    assert errors == [
        "InvalidMessageException",
        "TypeError",  # "soon" is not a duration
        "ValueError",
        "ValueError",
        "TypeError",
    ]


class BlockThenTimer(Actor):
    def __init__(self, target: Any) -> None:
        self.target = target

    def receive(self, message: Any) -> None:
        if message == "go":
            gevent.sleep(0.01)  # resumed by a timer: nothing refreshes the clock for us
            gevent.monkey.get_original("time", "sleep")(1.2)  # holds the hub
            self.timers.start_single_timer("k", "tick", 1.0)
            self.target.tell(("armed", time.monotonic()))
        elif message == "tick":
            self.target.tell(("tick", time.monotonic()))


def test_a_timer_started_after_the_hub_was_blocked_waits_its_full_delay(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    # The scheduler already armed its timers from a fresh clock; kept here as the guard
    # for self.timers (SPEC 4: every timeout counts from the call).
    a = actor_system.actor_of(Props(BlockThenTimer, probe.ref))
    a.tell("go")
    _, armed = probe.expect_msg_type(tuple, timeout=10)
    _, ticked = probe.expect_msg_type(tuple, timeout=10)
    assert ticked - armed >= 0.9

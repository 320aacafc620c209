"""context.set_receive_timeout (SPEC section 7): repeats while idle, kept across
restarts, not reset by NotInfluenceReceiveTimeout messages."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import gevent
import pytest

from gactors import (
    Actor,
    ActorSystem,
    NotInfluenceReceiveTimeout,
    Props,
    ReceiveTimeout,
)
from gactors.testkit import TestProbe, dilated, event_filter

EPS = 0.01


class Quiet(NotInfluenceReceiveTimeout):
    """A message that does not reset the receive timeout."""


class Idle(Actor):
    """Reports ReceiveTimeout (with the time) and its instance number to ``target``."""

    instances = 0

    def __init__(self, target: Any, timeout: float | None = None) -> None:
        Idle.instances += 1
        self.n = Idle.instances
        self.target = target
        if timeout is not None:
            self.context.set_receive_timeout(timeout)

    def receive(self, message: Any) -> None:
        if message is ReceiveTimeout:
            self.target.tell(("timeout", self.n, time.monotonic()))
        elif isinstance(message, tuple) and message[0] == "set":
            self.context.set_receive_timeout(message[1])
            self.target.tell(("set", self.context.receive_timeout))
        elif message == "get":
            self.target.tell(("timeout-is", self.n, self.context.receive_timeout))
        elif message == "fail":
            raise ValueError("fail")
        elif isinstance(message, Quiet):
            pass
        else:
            self.target.tell(message)


@pytest.fixture(autouse=True)
def _reset_instances() -> None:
    Idle.instances = 0


def timeouts(probe: TestProbe, n: int) -> list[float]:
    got = probe.receive_n(n)
    assert all(m[0] == "timeout" for m in got), got
    return [m[2] for m in got]


def test_fires_after_idle_and_repeats(actor_system: ActorSystem, probe: TestProbe) -> None:
    start = time.monotonic()
    actor_system.actor_of(Props(Idle, probe.ref, 0.1))
    stamps = timeouts(probe, 3)
    assert stamps[0] - start >= 0.1 - EPS
    # Each repetition comes a full period after the previous one was processed.
    assert stamps[1] - stamps[0] >= 0.1 - EPS
    assert stamps[2] - stamps[1] >= 0.1 - EPS


def test_ordinary_messages_reset_it(actor_system: ActorSystem, probe: TestProbe) -> None:
    period = dilated(0.4)  # a slow machine gets more slack between keepalives
    a = actor_system.actor_of(Props(Idle, probe.ref, period))
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        a.tell("keepalive")
        assert probe.expect_msg("keepalive")  # no ReceiveTimeout in between
        gevent.sleep(0.05)
    last = time.monotonic()
    (stamp,) = timeouts(probe, 1)
    assert stamp - last >= period - 0.1  # from the last keepalive (processed just before)


def test_not_influence_messages_do_not_reset_it(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    start = time.monotonic()
    a = actor_system.actor_of(Props(Idle, probe.ref, 0.3))
    got: Any = None
    deadline = time.monotonic() + 10
    # Quiet messages every 0.03 s: ordinary ones at that pace would keep it off forever.
    while got is None and time.monotonic() < deadline:
        a.tell(Quiet())
        try:
            got = probe.receive_one(timeout=0.03)
        except AssertionError:
            pass
    assert got is not None and got[0] == "timeout", got
    assert got[2] - start >= 0.3 - EPS


def test_kept_across_restarts(actor_system: ActorSystem, probe: TestProbe) -> None:
    a = actor_system.actor_of(Props(Idle, probe.ref))
    a.tell(("set", 0.15))
    probe.expect_msg(("set", 0.15))
    with event_filter(actor_system, ValueError):
        a.tell("fail")
    # The second instance never set it, and gets it all the same, repeatedly.
    first, second = probe.receive_n(2)
    assert first[:2] == ("timeout", 2) and second[:2] == ("timeout", 2)
    a.tell("get")
    assert probe.fish_for_message(lambda m: m[0] == "timeout-is") == ("timeout-is", 2, 0.15)


def test_restart_rearms_it_for_a_full_period(actor_system: ActorSystem, probe: TestProbe) -> None:
    a = actor_system.actor_of(Props(Idle, probe.ref, 0.3))
    with event_filter(actor_system, ValueError):
        a.tell("fail")
    restarted = time.monotonic()
    (stamp,) = timeouts(probe, 1)
    assert stamp - restarted >= 0.3 - 0.05


def test_set_none_switches_it_off(actor_system: ActorSystem, probe: TestProbe) -> None:
    a = actor_system.actor_of(Props(Idle, probe.ref, 0.1))
    timeouts(probe, 1)
    a.tell(("set", None))
    # A timeout fired just before the switch may still arrive ahead of the reply.
    assert probe.fish_for_message(lambda m: m[0] == "set") == ("set", None)
    probe.expect_no_message(0.3)
    a.tell("get")
    assert probe.expect_msg(("timeout-is", 1, None))


def test_timedelta_and_validation(actor_system: ActorSystem, probe: TestProbe) -> None:
    a = actor_system.actor_of(Props(Idle, probe.ref))
    a.tell(("set", timedelta(milliseconds=50)))
    probe.expect_msg(("set", 0.05))
    timeouts(probe, 1)

    errors: list[str] = []

    class Validating(Actor):
        def pre_start(self) -> None:
            for bad in (0, -1, "1", True):
                try:
                    self.context.set_receive_timeout(bad)  # type: ignore[arg-type]
                except (ValueError, TypeError) as e:
                    # A bad value is a ValueError, a non-duration a TypeError.
                    errors.append(f"{type(e).__name__} {bad!r}")
            probe.ref.tell(("validated", self.context.receive_timeout))

    actor_system.actor_of(Props(Validating))
    assert probe.fish_for_message(lambda m: m[0] == "validated") == ("validated", None)
    assert errors == ["ValueError 0", "ValueError -1", "TypeError '1'", "TypeError True"]


def test_stopped_actor_gets_no_more_timeouts(actor_system: ActorSystem, probe: TestProbe) -> None:
    a = actor_system.actor_of(Props(Idle, probe.ref, 0.05))
    timeouts(probe, 1)
    probe.watch(a)
    actor_system.stop(a)
    probe.fish_for_message(lambda m: not (isinstance(m, tuple) and m[0] == "timeout"))
    probe.expect_no_message(0.2)


class BlocksTheHub(Actor):
    """Receive timeout 1 s; ``("block", s)`` holds the hub with unpatched code."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.context.set_receive_timeout(1.0)

    def receive(self, message: Any) -> None:
        if message is ReceiveTimeout:
            self.target.tell(("timeout", time.monotonic()))
        elif isinstance(message, tuple) and message[0] == "block":
            # Resumed by a timer (not from gevent's callback queue, which refreshes the
            # clock for timers started meanwhile), then hold the hub: the actor's batch
            # ends with the loop's clock lagging by the whole block.
            gevent.sleep(0.01)
            real_sleep = gevent.monkey.get_original("time", "sleep")
            real_sleep(message[1])
            self.target.tell(("unblocked", time.monotonic()))


def test_receive_timeout_counts_from_the_message_after_the_hub_was_blocked(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    a = actor_system.actor_of(Props(BlocksTheHub, probe.ref))
    a.tell(("block", 1.2))
    _, unblocked = probe.expect_msg_type(tuple, timeout=10)
    _, fired = probe.expect_msg_type(tuple, timeout=10)
    # The idle period starts after the message; before the fix the timer was armed from
    # the loop's clock of before the block, and fired at once.
    assert fired - unblocked >= 0.9

"""The Stash mixin (SPEC section 10)."""

from __future__ import annotations

from typing import Any

import pytest
from _inputs import WAIT

from gactors import (
    Actor,
    ActorSystem,
    DeadLetter,
    Identify,
    IllegalStateError,
    PoisonPill,
    Props,
    Stash,
    StashOverflowException,
    Terminated,
)
from gactors.testkit import TestProbe, event_filter


class Gate(Stash, Actor):
    """Stashes everything while closed; "open" unstashes all and forwards from then on.

    Each instance reports ``(message, instance number)`` so a test can tell which
    incarnation processed what.
    """

    instances = 0

    def __init__(self, target: Any, open_from: int | None = None) -> None:
        Gate.instances += 1
        self.n = Gate.instances
        self.target = target
        # Instance number ``open_from`` and later start open.
        self.is_open = open_from is not None and self.n >= open_from

    def receive(self, message: Any) -> None:
        if message == "fail":
            raise ValueError("fail on purpose")
        if message == "open":
            self.is_open = True
            self.unstash_all()
            self.target.tell(("opened", self.n))
        elif message == "close":
            self.is_open = False
        elif message == "size":
            self.target.tell(("size", self.stash_size))
        elif message == "unstash-one":
            self.unstash()
        elif message == "clear":
            self.target.tell(("cleared", self.clear_stash()))
        elif not self.is_open:
            self.stash()
        else:
            self.target.tell((message, self.n))


@pytest.fixture(autouse=True)
def _reset() -> None:
    Gate.instances = 0


def test_unstash_all_puts_messages_back_in_order_at_the_head(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    gate = actor_system.actor_of(Props(Gate, probe.ref))
    for m in ["a", "b", "c", "open", "d"]:
        gate.tell(m)
    # "d" was queued behind "open" before the unstash: the stashed ones overtake it.
    assert probe.receive_n(5) == [("opened", 1), ("a", 1), ("b", 1), ("c", 1), ("d", 1)]


def test_stashed_messages_keep_their_sender(actor_system: ActorSystem, probe: TestProbe) -> None:
    other = TestProbe(actor_system)

    class Replier(Stash, Actor):
        def receive(self, message: Any) -> None:
            if message == "go":
                self.unstash_all()
                self.context.become(lambda m: self.sender.tell(("re", m)))
            else:
                self.stash()

    r = actor_system.actor_of(Props(Replier))
    other.send(r, "question")
    probe.send(r, "go")
    other.expect_msg(("re", "question"))
    assert other.last_sender == r


def test_unstash_one_and_size(actor_system: ActorSystem, probe: TestProbe) -> None:
    gate = actor_system.actor_of(Props(Gate, probe.ref))
    for m in ["a", "b", "size"]:
        gate.tell(m)
    probe.expect_msg(("size", 2))
    gate.tell("unstash-one")  # "a" is processed again, and stashed again (still closed)
    gate.tell("size")
    probe.expect_msg(("size", 2))
    gate.tell("clear")
    probe.expect_msg(("cleared", ["b", "a"]))  # "a" went back to the end of the stash
    gate.tell("size")
    probe.expect_msg(("size", 0))


def test_stash_survives_two_restarts_in_order(actor_system: ActorSystem, probe: TestProbe) -> None:
    gate = actor_system.actor_of(Props(Gate, probe.ref, open_from=3))
    with event_filter(actor_system, ValueError, message="fail on purpose", occurrences=2):
        for m in [1, 2, 3, "fail", 4, "fail", 5]:
            gate.tell(m)
        # Instance 1 stashes 1-3 and fails. Instance 2 is given 1-3 back before
        # anything else, then 4; it stashes them all and fails. Instance 3 starts open:
        # it processes 1-4 (unstashed for it by the restart) and then 5.
        assert probe.receive_n(5) == [(1, 3), (2, 3), (3, 3), (4, 3), (5, 3)]
    probe.expect_no_message(0.1)


def test_stash_goes_to_dead_letters_on_stop_ahead_of_the_mailbox(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    dead = TestProbe(actor_system)
    actor_system.event_stream.subscribe(dead.ref, DeadLetter)
    gate = actor_system.actor_of(Props(Gate, probe.ref))
    probe.watch(gate)
    for m in ["a", "b", PoisonPill, "c"]:
        gate.tell(m)
    probe.expect_terminated(gate)
    letters = dead.receive_n(3)
    assert [d.message for d in letters] == ["a", "b", "c"]
    assert all(d.recipient == gate for d in letters)


@pytest.mark.gactors_config(stash_capacity=2)
def test_over_capacity(actor_system: ActorSystem, probe: TestProbe) -> None:
    class Bounded(Stash, Actor):
        def receive(self, message: Any) -> None:
            try:
                self.stash()
            except StashOverflowException as e:
                probe.ref.tell(("overflow", message, self.stash_size, str(e)))

    b = actor_system.actor_of(Props(Bounded))
    for m in ["a", "b", "c"]:
        b.tell(m)
    kind, message, size, text = probe.expect_msg_type(tuple)
    assert (kind, message, size) == ("overflow", "c", 2)
    assert "stash capacity (2, setting stash_capacity) exceeded" in text


@pytest.mark.gactors_config(stash_capacity=1)
def test_overflow_fails_the_actor_like_any_exception(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    gate = actor_system.actor_of(Props(Gate, probe.ref))
    with event_filter(actor_system, StashOverflowException):
        gate.tell("a")
        gate.tell("b")  # over capacity: the actor fails and is restarted
    gate.tell("open")
    # The stashed "a" survived the restart; "b" was the failing message (dropped).
    assert probe.receive_n(2) == [("opened", 2), ("a", 2)]


@pytest.mark.gactors_config(stash_capacity=0)
def test_capacity_zero_refuses_everything(actor_system: ActorSystem, probe: TestProbe) -> None:
    class Refused(Stash, Actor):
        def receive(self, message: Any) -> None:
            try:
                self.stash()
            except StashOverflowException:
                probe.ref.tell("refused")

    actor_system.actor_of(Props(Refused)).tell("x")
    probe.expect_msg("refused")


def test_stashing_the_same_message_twice(actor_system: ActorSystem, probe: TestProbe) -> None:
    class Twice(Stash, Actor):
        def receive(self, message: Any) -> None:
            self.stash()
            try:
                self.stash()
            except IllegalStateError as e:
                probe.ref.tell(("twice", message, self.stash_size, str(e)))

    t = actor_system.actor_of(Props(Twice))
    t.tell("x")
    t.tell("x")  # an equal (even identical) message sent again is a new delivery
    first = probe.expect_msg_type(tuple)
    second = probe.expect_msg_type(tuple)
    assert first[:3] == ("twice", "x", 1)
    assert second[:3] == ("twice", "x", 2)
    assert "twice" in first[3]


def test_stash_outside_message_processing(actor_system: ActorSystem, probe: TestProbe) -> None:
    class Early(Stash, Actor):
        def pre_start(self) -> None:
            try:
                self.stash()
            except IllegalStateError as e:
                probe.ref.tell(str(e))

    actor_system.actor_of(Props(Early))
    assert "only be called while processing a message" in probe.expect_msg_type(str)


def test_stashed_timer_message_is_delivered_once(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    class TimedGate(Gate):
        def pre_start(self) -> None:
            self.timers.start_single_timer("k", "from-timer", 0.01)

        def receive(self, message: Any) -> None:
            super().receive(message)
            if message == "from-timer" and not self.is_open:
                self.target.tell(("stashed", self.stash_size))

    gate = actor_system.actor_of(Props(TimedGate, probe.ref))
    probe.expect_msg(("stashed", 1))
    gate.tell("open")
    assert probe.receive_n(2) == [("opened", 1), ("from-timer", 1)]
    probe.expect_no_message(0.1)


def test_stash_with_become(actor_system: ActorSystem, probe: TestProbe) -> None:
    class Connecting(Stash, Actor):
        def receive(self, message: Any) -> None:
            if message == "connected":
                self.unstash_all()
                self.context.become(self.online)
            else:
                self.stash()

        def online(self, message: Any) -> None:
            if message == "disconnected":
                self.context.unbecome()
            else:
                probe.ref.tell(message)

    c = actor_system.actor_of(Props(Connecting))
    for m in ["q1", "q2", "connected", "q3", "disconnected", "q4", "connected"]:
        c.tell(m)
    assert probe.receive_n(4) == ["q1", "q2", "q3", "q4"]


def test_unstashed_terminated_is_delivered_again(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    # As in Akka: a Terminated put back by unstash is queued again, not dropped as stale.
    class Watcher(Stash, Actor):
        def __init__(self, target: Any) -> None:
            self.target = target
            self.ready = False

        def pre_start(self) -> None:
            self.context.watch(self.target)

        def receive(self, message: Any) -> None:
            if message == "ready":
                self.ready = True
                self.unstash_all()
            elif not self.ready:
                self.stash()
                probe.ref.tell(("stashed", type(message).__name__))
            elif isinstance(message, Terminated):
                probe.ref.tell(("terminated", message.actor == self.target))

    victim = actor_system.actor_of(Props(Gate, probe.ref), "victim")
    watcher = actor_system.actor_of(Props(Watcher, victim))
    assert watcher.ask(Identify(1), timeout=5).ref == watcher  # the watch is in place
    actor_system.stop(victim)
    probe.expect_msg(("stashed", "Terminated"))
    watcher.tell("ready")
    probe.expect_msg(("terminated", True))
    probe.expect_no_message(0.1)


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
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

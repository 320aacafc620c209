"""DeathWatch (SPEC §7): watch, watch_with, unwatch, Terminated and death pacts.

Ported scenarios: DeathWatchSpec (one Terminated when stopped / already dead, all and
only the current monitors notified, once when stopped but not when restarted, failing
a monitor that does not handle Terminated, watching a same-named child after the old
one died, only notify when watching, discard Terminated when unwatched between the
system message and its processing).
"""

from __future__ import annotations

from typing import Any

import pytest
from gevent.event import Event

from gactors import (
    Actor,
    ActorKilledException,
    ActorRef,
    ActorSystem,
    DeathPactException,
    Directive,
    Identify,
    IllegalStateError,
    Kill,
    OneForOneStrategy,
    PoisonPill,
    Props,
    SupervisorStrategy,
    Terminated,
)
from gactors import _sysmsg as sm

from ._actors import Boom, Fail, Supervisor, worker_props
from ._kit import Probe, event_filter, mute


class Wrapped:
    """A watcher forwards ``Terminated`` wrapped (it cannot be forwarded as is)."""

    def __init__(self, t: Terminated) -> None:
        self.t = t

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Wrapped) and other.t == self.t

    def __repr__(self) -> str:
        return f"Wrapped({self.t!r})"


class Watcher(Actor):
    """Watches ``target`` from its constructor and reports to ``report``."""

    def __init__(self, target: ActorRef, report: ActorRef) -> None:
        self.report = report
        self.context.watch(target)

    def receive(self, message: Any) -> None:
        if type(message) is Terminated:
            self.report.tell(Wrapped(message))
        elif isinstance(message, tuple) and message[0] == "watch":
            self.context.watch(message[1])
            self.sender.tell("watching")
        elif isinstance(message, tuple) and message[0] == "unwatch":
            self.context.unwatch(message[1])
            self.sender.tell("unwatched")
        elif isinstance(message, Fail):
            raise message.exc
        else:
            self.report.tell(message)


def _start_watching(system: ActorSystem, target: ActorRef, probe: Probe) -> ActorRef:
    w = system.actor_of(Props(Watcher, target, probe.ref))
    assert w.ask(Identify(0), timeout=5.0).ref == w  # constructed: the watch is sent
    return w


def _expect_termination_of(probe: Probe, ref: ActorRef) -> Terminated:
    got = probe.expect_msg_type(Wrapped)
    assert got.t.actor == ref
    return got.t


def test_one_terminated_when_stopped(actor_system: ActorSystem, probe: Probe) -> None:
    terminal = actor_system.actor_of(Props.empty())
    w = _start_watching(actor_system, terminal, probe)
    w.tell("hallo")
    probe.expect_msg("hallo")
    terminal.tell(PoisonPill)
    t = _expect_termination_of(probe, terminal)
    assert t.existence_confirmed is True and t.address_terminated is False
    probe.expect_no_message(0.2)


def test_one_terminated_when_already_dead(actor_system: ActorSystem, probe: Probe) -> None:
    terminal = actor_system.actor_of(Props.empty())
    probe.watch(terminal)
    terminal.tell(PoisonPill)
    probe.expect_terminated(terminal)
    _start_watching(actor_system, terminal, probe)
    t = _expect_termination_of(probe, terminal)
    assert t.existence_confirmed is False
    probe.expect_no_message(0.2)


def test_all_monitors_notified_once(actor_system: ActorSystem, probe: Probe) -> None:
    terminal = actor_system.actor_of(Props.empty())
    monitors = [_start_watching(actor_system, terminal, probe) for _ in range(3)]
    terminal.tell(PoisonPill)
    for _ in monitors:
        _expect_termination_of(probe, terminal)
    probe.expect_no_message(0.2)


def test_only_current_monitors_notified(actor_system: ActorSystem, probe: Probe) -> None:
    terminal = actor_system.actor_of(Props.empty())
    _start_watching(actor_system, terminal, probe)
    _start_watching(actor_system, terminal, probe)
    m2 = _start_watching(actor_system, terminal, probe)
    assert m2.ask(("unwatch", terminal), timeout=5.0) == "unwatched"
    terminal.tell(PoisonPill)
    _expect_termination_of(probe, terminal)
    _expect_termination_of(probe, terminal)
    probe.expect_no_message(0.2)


def test_terminated_once_when_stopped_but_not_when_restarted(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = actor_system.actor_of(Props(Supervisor, OneForOneStrategy([Exception], max_retries=2)))
    terminal = sup.ask(worker_props(None, "t"), timeout=5.0)
    _start_watching(actor_system, terminal, probe)
    with event_filter(actor_system, ActorKilledException, occurrences=3):
        terminal.tell(Kill)
        terminal.tell(Kill)
        assert terminal.ask("ping", timeout=5.0) == "pong"
        terminal.tell(Kill)
        _expect_termination_of(probe, terminal)
    probe.expect_no_message(0.2)


def test_monitor_not_handling_terminated_fails_with_death_pact(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # DeathWatchSpec "fail a monitor which does not handle Terminated()": the killed
    # actor's failure, then the brother's DeathPactException, then its termination.
    reports: list[tuple[str, BaseException]] = []

    class Recording(OneForOneStrategy):
        def handle_failure(
            self, context: Any, child: Any, cause: Any, stats: Any, children: Any
        ) -> bool:
            reports.append((child.path.name, cause))
            probe.ref.tell(("failed", child.path.name, type(cause).__name__))
            return super().handle_failure(context, child, cause, stats, children)

    class Brother(Actor):
        def __init__(self, target: ActorRef) -> None:
            self.context.watch(target)

        def receive(self, message: Any) -> None:
            self.unhandled(message)

    sup = actor_system.actor_of(Props(Supervisor, Recording()))
    failed = sup.ask((Props.empty(), "failed"), timeout=5.0)
    brother = sup.ask((Props(Brother, failed), "brother"), timeout=5.0)
    assert brother.ask(Identify(1), timeout=5.0).ref == brother
    _start_watching(actor_system, brother, probe)
    with (
        event_filter(actor_system, ActorKilledException, occurrences=1),
        event_filter(actor_system, DeathPactException, occurrences=1),
    ):
        failed.tell(Kill)
        assert probe.receive_n(3) == [
            ("failed", "failed", "ActorKilledException"),
            ("failed", "brother", "DeathPactException"),
            Wrapped(Terminated(brother)),
        ]
    assert reports[1][1].dead == failed  # type: ignore[attr-defined]


def test_watch_a_same_named_child_after_the_old_one_died(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Kid(Actor):
        def receive(self, message: Any) -> None:
            self.context.stop(self.ref)

    class Parent(Actor):
        def receive(self, message: Any) -> None:
            kid = self.context.watch(self.context.actor_of(Props(Kid), "kid"))
            kid.forward(message)

            def waiting(m: Any) -> None:
                if type(m) is Terminated and m.actor == kid:
                    probe.ref.tell("GREEN")
                    self.context.unbecome()

            self.context.become(waiting, discard_old=False)

    parent = actor_system.actor_of(Props(Parent))
    parent.tell("NKOTB")
    probe.expect_msg("GREEN")
    parent.tell("NKOTB")
    probe.expect_msg("GREEN")


def test_only_notify_when_watching(actor_system: ActorSystem, probe: Probe) -> None:
    subject = actor_system.actor_of(Props.empty())
    w = _start_watching(actor_system, actor_system.actor_of(Props.empty()), probe)
    # A notification about an actor it does not watch reaches nobody.
    w._send_system(sm.DeathWatchNotification(subject, True, False))
    w.tell("marker")
    probe.expect_msg("marker")
    probe.expect_no_message(0.2)


def test_unwatch_drops_a_terminated_already_queued(actor_system: ActorSystem, probe: Probe) -> None:
    # DeathWatchSpec "discard Terminated when unwatched between sysmsg and processing".
    entered = Event()
    release = Event()

    class W(Actor):
        def receive(self, message: Any) -> None:
            if isinstance(message, tuple) and message[0] == "W":
                self.context.watch(message[1])
            elif isinstance(message, tuple) and message[0] == "U":
                self.context.unwatch(message[1])
            elif message == "block":
                entered.set()
                release.wait(5.0)
            elif type(message) is Terminated:
                probe.ref.tell("received Terminated: should have been dropped")

    w = actor_system.actor_of(Props(W), "myDearWatcher")
    target = actor_system.actor_of(Props.empty())
    w.tell(("W", target))
    w.tell("block")
    assert entered.wait(5.0)
    probe.watch(target)
    actor_system.stop(target)
    probe.expect_terminated(target)  # w's notification is queued meanwhile
    w.tell(("U", target))
    release.set()
    # w now: processes the notification (Terminated queued), the unwatch, then the
    # queued Terminated, which must be dropped (or w would die of a death pact).
    assert w.ask(Identify(1), timeout=5.0).ref == w
    assert w.ask(Identify(2), timeout=5.0).ref == w
    probe.expect_no_message(0.2)


def test_watch_with_delivers_the_custom_message(actor_system: ActorSystem, probe: Probe) -> None:
    class W(Actor):
        def __init__(self, target: ActorRef) -> None:
            self.context.watch_with(target, ("gone", target.name))
            self.context.watch_with(target, ("gone", target.name))  # same message: fine

        def receive(self, message: Any) -> None:
            probe.ref.tell(message)

    target = actor_system.actor_of(Props.empty(), "target")
    w = actor_system.actor_of(Props(W, target))
    assert w.ask(Identify(0), timeout=5.0).ref == w
    actor_system.stop(target)
    probe.expect_msg(("gone", "target"))
    probe.expect_no_message(0.2)


def test_watch_with_a_different_message_is_illegal(actor_system: ActorSystem) -> None:
    class W(Actor):
        def receive(self, message: Any) -> None:
            target = message
            self.context.watch_with(target, "first")
            try:
                self.context.watch_with(target, "second")
            except IllegalStateError:
                self.sender.tell("refused")
                return
            self.sender.tell("accepted")

    w = actor_system.actor_of(Props(W))
    assert w.ask(actor_system.actor_of(Props.empty()), timeout=5.0) == "refused"


def test_watches_survive_the_watchers_restart(actor_system: ActorSystem, probe: Probe) -> None:
    target = actor_system.actor_of(Props.empty())
    w = _start_watching(actor_system, target, probe)
    with event_filter(actor_system, Boom, occurrences=1):
        w.tell(Fail())
    w.tell("restarted")
    probe.expect_msg("restarted")
    actor_system.stop(target)
    _expect_termination_of(probe, target)
    probe.expect_no_message(0.2)


def test_parent_watching_its_child_gets_one_terminated(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Parent(Actor):
        def __init__(self) -> None:
            self.kid = self.context.watch(self.context.actor_of(Props.empty(), "kid"))

        def receive(self, message: Any) -> None:
            if type(message) is Terminated:
                probe.ref.tell(("terminated", message.actor == self.kid))
            else:
                self.context.stop(self.kid)

    parent = actor_system.actor_of(Props(Parent))
    parent.tell("stop it")
    probe.expect_msg(("terminated", True))
    probe.expect_no_message(0.2)


def test_terminated_comes_after_messages_the_dead_actor_sent(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Chatty(Actor):
        def receive(self, message: Any) -> None:
            for i in range(5):
                message.tell(i)
            self.context.stop(self.ref)

    chatty = actor_system.actor_of(Props(Chatty))
    w = _start_watching(actor_system, chatty, probe)
    chatty.tell(w)
    assert probe.receive_n(6) == [0, 1, 2, 3, 4, Wrapped(Terminated(chatty))]


def test_unhandled_terminated_raises_death_pact_and_stops_the_watcher(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Sulky(Actor):
        def __init__(self, target: ActorRef) -> None:
            self.context.watch(target)

    target = actor_system.actor_of(Props.empty())
    sulky = actor_system.actor_of(Props(Sulky, target))
    assert sulky.ask(Identify(0), timeout=5.0).ref == sulky
    probe.watch(sulky)
    with event_filter(actor_system, DeathPactException, occurrences=1, level=40) as f:
        actor_system.stop(target)
        probe.expect_terminated(sulky)
    exc = f.events[0].cause
    assert isinstance(exc, DeathPactException) and exc.dead == target
    assert SupervisorStrategy.default_strategy.decider(exc) is Directive.STOP


def test_unhandled_custom_watch_message_is_no_death_pact(
    actor_system: ActorSystem, probe: Probe
) -> None:
    class Quiet(Actor):
        def __init__(self, target: ActorRef) -> None:
            self.context.watch_with(target, "target gone")

    target = actor_system.actor_of(Props.empty())
    quiet = actor_system.actor_of(Props(Quiet, target))
    assert quiet.ask(Identify(0), timeout=5.0).ref == quiet
    actor_system.stop(target)
    probe.watch(target)
    probe.expect_terminated(target)
    assert quiet.ask(Identify(1), timeout=5.0).ref == quiet  # still alive: no death pact


def test_terminated_equality_is_by_actor_only(actor_system: ActorSystem) -> None:
    a = actor_system.actor_of(Props.empty())
    b = actor_system.actor_of(Props.empty())
    assert Terminated(a, True, False) == Terminated(a, False, True)
    assert hash(Terminated(a, True, False)) == hash(Terminated(a, False, True))
    assert Terminated(a) != Terminated(b)


def test_watching_oneself_is_a_no_op(actor_system: ActorSystem, probe: Probe) -> None:
    class Narcissus(Actor):
        def __init__(self) -> None:
            assert self.context.watch(self.ref) == self.ref

        def post_stop(self) -> None:
            probe.ref.tell("stopped")

        def receive(self, message: Any) -> None:
            probe.ref.tell(message)

    n = actor_system.actor_of(Props(Narcissus))
    n.tell(PoisonPill)
    probe.expect_msg("stopped")
    probe.expect_no_message(0.2)


@pytest.mark.parametrize("by", ["PoisonPill", "system.stop", "Kill"])
def test_probe_sees_top_level_actor_terminate(
    actor_system: ActorSystem, probe: Probe, by: str
) -> None:
    ref = actor_system.actor_of(Props.empty())
    probe.watch(ref)
    with mute(actor_system, ActorKilledException):
        if by == "PoisonPill":
            ref.tell(PoisonPill)
        elif by == "Kill":
            ref.tell(Kill)
        else:
            actor_system.stop(ref)
        assert probe.expect_terminated(ref).existence_confirmed

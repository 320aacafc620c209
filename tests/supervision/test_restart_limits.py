"""Restart limits: ``max_retries`` and ``within`` (SPEC §6.2).

Ported scenarios: RestartStrategySpec (slave stays dead after max restarts within the
window, is immortal without limits, restarts again once outside the window, is not
restarted after max retries, stops within the window), SupervisorSpec (not restart a
child more times than permitted, not restart a temporary actor),
SupervisorHierarchySpec (notification to the supervisor on permanent failure).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import gevent
import pytest
from _inputs import NAN

from gactors import (
    Actor,
    ActorKilledException,
    ActorSystem,
    AllForOneStrategy,
    Directive,
    Kill,
    OneForOneStrategy,
    Props,
    Terminated,
)

from ._actors import Boom, Fail, Supervisor, worker_props
from ._kit import Probe, event_filter, mute


def _sup(system: ActorSystem, **kw: Any) -> Any:
    return system.actor_of(Props(Supervisor, OneForOneStrategy([Exception], **kw)))


def _slave(sup: Any, probe: Probe, tag: str = "s") -> Any:
    ref = sup.ask(worker_props(probe.ref, tag), timeout=5.0)
    probe.expect_msg((tag, "pre_start", 0))
    return ref


def _expect_restart(probe: Probe, tag: str, new_gen: int) -> None:
    assert probe.expect_msg_type(tuple)[:3] == (tag, "pre_restart", new_gen - 1)
    assert probe.expect_msg_type(tuple)[:3] == (tag, "post_stop", new_gen - 1)
    assert probe.expect_msg_type(tuple)[:3] == (tag, "post_restart", new_gen)


def test_stays_dead_after_max_restarts_within_window(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = _sup(actor_system, max_retries=2, within=5.0)
    slave = _slave(sup, probe)
    probe.watch(slave)
    with event_filter(actor_system, Boom, occurrences=3):
        slave.tell("ping", probe.ref)
        slave.tell(Fail())
        slave.tell("ping", probe.ref)
        probe.expect_msg("pong")
        _expect_restart(probe, "s", 1)
        probe.expect_msg("pong")
        slave.tell(Fail())
        slave.tell("ping", probe.ref)
        _expect_restart(probe, "s", 2)
        probe.expect_msg("pong")
        slave.tell(Fail())  # the third restart within the window is refused
        probe.expect_msg(("s", "post_stop", 2))
        probe.expect_terminated(slave)


def test_immortal_without_limits(actor_system: ActorSystem, probe: Probe) -> None:
    sup = _sup(actor_system)
    slave = sup.ask(worker_props(None, "s"), timeout=5.0)
    with event_filter(actor_system, Boom, occurrences=100):
        for _ in range(100):
            slave.tell(Fail())
        assert slave.ask("gen", timeout=5.0) == 100


def test_restarts_again_once_outside_the_window(actor_system: ActorSystem, probe: Probe) -> None:
    window = 0.4
    sup = _sup(actor_system, max_retries=2, within=window)
    slave = _slave(sup, probe)
    with mute(actor_system, Boom):
        slave.tell(Fail())
        _expect_restart(probe, "s", 1)
        slave.tell(Fail())
        _expect_restart(probe, "s", 2)
        gevent.sleep(window * 1.5)  # the scenario itself: let the window pass
        slave.tell(Fail())  # a new window opens, counting this restart as the first
        _expect_restart(probe, "s", 3)
        slave.tell(Fail())
        _expect_restart(probe, "s", 4)
        slave.tell(Fail())  # third in the new window: stopped
        probe.expect_msg(("s", "post_stop", 4))


def test_not_restarted_after_max_retries_without_window(
    actor_system: ActorSystem, probe: Probe
) -> None:
    sup = _sup(actor_system, max_retries=2)
    slave = _slave(sup, probe)
    probe.watch(slave)
    with mute(actor_system, Boom):
        slave.tell(Fail())
        _expect_restart(probe, "s", 1)
        slave.tell(Fail())
        _expect_restart(probe, "s", 2)
        slave.tell(Fail())
        probe.expect_msg(("s", "post_stop", 2))
        probe.expect_terminated(slave)


def test_max_retries_zero_never_restarts(actor_system: ActorSystem, probe: Probe) -> None:
    # SupervisorSpec "not restart temporary actor".
    sup = _sup(actor_system, max_retries=0)
    slave = _slave(sup, probe)
    probe.watch(slave)
    with event_filter(actor_system, Boom, occurrences=1), pytest.raises(Boom):
        slave.ask(Fail(), timeout=5.0)
    probe.expect_msg(("s", "post_stop", 0))
    probe.expect_terminated(slave)
    probe.expect_no_message()


def test_not_restart_child_more_times_than_permitted(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorSpec: a master watching its only child, restarts forbidden.
    class Master(Actor):
        supervisor_strategy = OneForOneStrategy([Exception], max_retries=0)

        def __init__(self) -> None:
            self.temp = self.context.watch(self.context.actor_of(worker_props(None, "t")))

        def receive(self, message: Any) -> None:
            if type(message) is Terminated and message.actor == self.temp:
                probe.ref.tell("terminated")
            else:
                self.temp.forward(message)

    master = actor_system.actor_of(Props(Master))
    with event_filter(actor_system, Boom, occurrences=1):
        master.tell(Fail())
    probe.expect_msg("terminated")
    probe.expect_no_message()


def test_going_over_the_limit_stops_the_child_not_the_supervisor(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorHierarchySpec "send notification to supervisor when permanent failure".
    class Boss(Actor):
        supervisor_strategy = OneForOneStrategy([BaseException], max_retries=1, within=5.0)

        def __init__(self) -> None:
            self.crasher = self.context.watch(
                self.context.actor_of(worker_props(probe.ref, "crasher"))
            )

        def receive(self, message: Any) -> None:
            if message == "kill crasher":
                self.crasher.tell(Kill)
            elif type(message) is Terminated:
                probe.ref.tell(("boss saw", message.actor == self.crasher))
            else:
                self.sender.tell("boss alive")

    boss = actor_system.actor_of(Props(Boss))
    probe.expect_msg(("crasher", "pre_start", 0))
    with event_filter(actor_system, ActorKilledException, occurrences=2):
        boss.tell("kill crasher")
        boss.tell("kill crasher")
        probe.fish_for_message(lambda m: m == ("boss saw", True))
    assert boss.ask("still there?", timeout=5.0) == "boss alive"


def test_only_restarts_count_against_the_limit(actor_system: ActorSystem, probe: Probe) -> None:
    class Soft(Exception):
        pass

    sup = actor_system.actor_of(
        Props(
            Supervisor,
            OneForOneStrategy({Soft: Directive.RESUME, Boom: Directive.RESTART}, max_retries=1),
        )
    )
    slave = _slave(sup, probe)
    with mute(actor_system, Soft, Boom):
        for _ in range(5):
            slave.tell(Fail(Soft("resumed, not counted")))
        assert slave.ask("gen", timeout=5.0) == 0
        slave.tell(Fail())  # the one restart allowed
        _expect_restart(probe, "s", 1)
        slave.tell(Fail())
        probe.expect_msg(("s", "post_stop", 1))


def test_limits_are_counted_per_child(actor_system: ActorSystem, probe: Probe) -> None:
    sup = _sup(actor_system, max_retries=1)
    a = _slave(sup, probe, "a")
    b = _slave(sup, probe, "b")
    with mute(actor_system, Boom):
        a.tell(Fail())
        _expect_restart(probe, "a", 1)
        b.tell(Fail())  # b has its own quota
        _expect_restart(probe, "b", 1)
        a.tell(Fail())
        probe.expect_msg(("a", "post_stop", 1))
    assert b.ask("gen", timeout=5.0) == 1


def test_within_as_timedelta(actor_system: ActorSystem, probe: Probe) -> None:
    strategy = OneForOneStrategy(max_retries=1, within=timedelta(seconds=3))
    assert strategy.within == 3.0
    sup = actor_system.actor_of(Props(Supervisor, strategy))
    slave = _slave(sup, probe)
    with mute(actor_system, Boom):
        slave.tell(Fail())
        _expect_restart(probe, "s", 1)
        slave.tell(Fail())
        probe.expect_msg(("s", "post_stop", 1))


@pytest.mark.parametrize("cls", [OneForOneStrategy, AllForOneStrategy])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"within": 1.0},
        {"max_retries": None, "within": 1.0},
        {"max_retries": -1, "within": 1.0},
        {"max_retries": -2},
        {"max_retries": 1.5},
        {"max_retries": 1, "within": 0},
        {"max_retries": 1, "within": -1.0},
    ],
)
def test_invalid_limits_are_value_errors(cls: type, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        cls(**kwargs)


def test_minus_one_means_no_limit(actor_system: ActorSystem) -> None:
    strategy = OneForOneStrategy(max_retries=-1)
    assert strategy.max_retries is None
    sup = actor_system.actor_of(Props(Supervisor, strategy))
    slave = sup.ask(worker_props(None, "s"), timeout=5.0)
    with event_filter(actor_system, Boom, occurrences=10):
        for _ in range(10):
            slave.tell(Fail())
        assert slave.ask("gen", timeout=5.0) == 10


def test_several_children_killed_at_once_all_restart(
    actor_system: ActorSystem, probe: Probe
) -> None:
    # SupervisorMiscSpec "restart a crashing actor and its dispatcher for any dispatcher"
    # (one dispatcher here): four workers killed together all come back and answer.
    class Worker4(Actor):
        def post_restart(self, reason: BaseException) -> None:
            probe.ref.tell(("restarted", self.ref.path.name))

        def receive(self, message: Any) -> None:
            if message == "status":
                self.sender.tell("OK")
            else:
                self.context.stop(self.ref)

    sup = _sup(actor_system, max_retries=3, within=5.0)
    workers = [sup.ask((Props(Worker4), f"actor{i}"), timeout=5.0) for i in range(1, 5)]
    with event_filter(actor_system, ActorKilledException, occurrences=4):
        for w in workers:
            w.tell(Kill)
        got = probe.receive_n(4)
    assert sorted(name for _, name in got) == ["actor1", "actor2", "actor3", "actor4"]
    assert [w.ask("status", timeout=5.0) for w in workers] == ["OK"] * 4


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
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

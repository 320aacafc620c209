"""Logging of handled failures (SPEC §6.7, §10).

One record per failure: WARNING for RESUME, ERROR for RESTART and STOP, with the
failing child's path as source; nothing where a failure is escalated (the level that
handles it logs it). ``logging_enabled=False`` silences a strategy. Records are
published as ``LogEvent`` on the event stream and go to the ``logging`` module.
Ported from the EventFilter expectations that run through Akka's supervision specs.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from gactors import (
    Actor,
    ActorInitializationException,
    ActorSystem,
    AllForOneStrategy,
    Directive,
    OneForOneStrategy,
    PoisonPill,
    PreRestartException,
    Props,
)
from gactors.testkit import await_condition

from ._actors import Boom, Fail, Supervisor, worker_props
from ._kit import LogRecorder, Probe


@pytest.fixture
def recorder(actor_system: ActorSystem) -> Iterator[LogRecorder]:
    r = LogRecorder(actor_system)
    yield r
    r.close()


def _sup(system: ActorSystem, strategy: Any) -> Any:
    return system.actor_of(Props(Supervisor, strategy))


@pytest.mark.parametrize(
    ("directive", "level"),
    [
        (Directive.RESUME, logging.WARNING),
        (Directive.RESTART, logging.ERROR),
        (Directive.STOP, logging.ERROR),
    ],
)
def test_one_record_per_handled_failure(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder, directive: Directive, level: int
) -> None:
    strategy = OneForOneStrategy(lambda e: directive)
    sup = _sup(actor_system, strategy)
    child = sup.ask(worker_props(probe.ref, "c"), timeout=5.0)
    probe.expect_msg(("c", "pre_start", 0))
    probe.watch(child)
    failure = Boom("logged once")
    child.tell(Fail(failure))
    if directive is Directive.STOP:
        probe.expect_msg(("c", "post_stop", 0))
        probe.expect_terminated(child)
    else:
        assert child.ask("ping", timeout=5.0) == "pong"
    [event] = recorder.caused_by(failure)
    assert event.level == level
    assert event.source == str(child.path)
    assert directive.name.lower() in event.message and "logged once" in event.message
    assert event.logger_class is OneForOneStrategy
    assert recorder.events == [event]


def test_escalation_is_logged_only_where_handled(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder
) -> None:
    top = _sup(actor_system, OneForOneStrategy(lambda e: Directive.RESTART))
    mid1 = top.ask(Props(Supervisor, OneForOneStrategy(lambda e: Directive.ESCALATE)), timeout=5.0)
    mid2 = mid1.ask(Props(Supervisor, OneForOneStrategy(lambda e: Directive.ESCALATE)), timeout=5.0)
    leaf = mid2.ask(worker_props(probe.ref, "leaf"), timeout=5.0)
    probe.expect_msg(("leaf", "pre_start", 0))
    failure = Boom("escalated twice")
    leaf.tell(Fail(failure))
    probe.expect_msg(("leaf", "post_stop", 0))  # mid1 restarted: its subtree stopped
    [event] = recorder.caused_by(failure)
    assert event.level == logging.ERROR and event.source == str(mid1.path)
    assert recorder.events == [event]


def test_logging_disabled_strategy_is_silent(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder
) -> None:
    sup = _sup(actor_system, OneForOneStrategy(lambda e: Directive.RESTART, logging_enabled=False))
    child = sup.ask(worker_props(probe.ref, "c"), timeout=5.0)
    for _ in range(3):
        child.tell(Fail())
    assert child.ask("gen", timeout=5.0) == 3
    assert recorder.events == []


def test_every_failure_is_logged_once(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder
) -> None:
    sup = _sup(actor_system, OneForOneStrategy(lambda e: Directive.RESUME))
    child = sup.ask(worker_props(None, "c"), timeout=5.0)
    failures = [Boom(f"failure {i}") for i in range(5)]
    for f in failures:
        child.tell(Fail(f))
    assert child.ask("ping", timeout=5.0) == "pong"
    assert [e.cause for e in recorder.events] == failures
    assert all(e.level == logging.WARNING for e in recorder.events)


def test_all_for_one_restart_is_logged_once_for_the_failing_child(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder
) -> None:
    sup = _sup(actor_system, AllForOneStrategy(lambda e: Directive.RESTART))
    a = sup.ask(worker_props(None, "a"), timeout=5.0)
    b = sup.ask(worker_props(None, "b"), timeout=5.0)
    failure = Boom("b fails")
    b.tell(Fail(failure))
    # b first: its answer comes from the new instance, after the decision that also
    # queued the restart of a
    assert b.ask("gen", timeout=5.0) == 1 and a.ask("gen", timeout=5.0) == 1
    [event] = recorder.events
    assert event.cause is failure and event.source == str(b.path)
    assert event.logger_class is AllForOneStrategy


def test_over_the_limit_is_logged_once(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder
) -> None:
    sup = _sup(actor_system, OneForOneStrategy(lambda e: Directive.RESTART, max_retries=0))
    child = sup.ask(worker_props(probe.ref, "c"), timeout=5.0)
    probe.expect_msg(("c", "pre_start", 0))
    child.tell(Fail())
    probe.expect_msg(("c", "post_stop", 0))
    assert len(recorder.events) == 1 and recorder.events[0].level == logging.ERROR


def test_creation_failure_is_logged_once_with_the_child_as_source(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder
) -> None:
    class Broken(Actor):
        def __init__(self) -> None:
            raise Boom("constructor")

    ref = actor_system.actor_of(Props(Broken))
    probe.watch(ref)
    probe.expect_terminated(ref)
    [event] = recorder.events
    assert isinstance(event.cause, ActorInitializationException)
    assert event.level == logging.ERROR and event.source == str(ref.path)


def test_post_stop_failure_is_logged_not_escalated(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder
) -> None:
    class BadStop(Actor):
        def post_stop(self) -> None:
            raise Boom("in post_stop")

    parent = _sup(actor_system, OneForOneStrategy(lambda e: Directive.RESTART))
    ref = parent.ask(Props(BadStop), timeout=5.0)
    probe.watch(ref)
    ref.tell(PoisonPill)
    probe.expect_terminated(ref)
    [event] = recorder.events
    assert isinstance(event.cause, Boom) and event.source == str(ref.path)
    assert parent.ask(Props.empty(), timeout=5.0) is not None  # the parent did not fail


def test_pre_restart_failure_is_logged_besides_the_failure(
    actor_system: ActorSystem, probe: Probe, recorder: LogRecorder
) -> None:
    class BadPreRestart(Actor):
        def pre_restart(self, reason: BaseException, message: Any) -> None:
            raise ValueError("in pre_restart")

        def receive(self, message: Any) -> None:
            if message == "ping":
                self.sender.tell("pong")
            else:
                raise Boom("first")

    ref = actor_system.actor_of(Props(BadPreRestart))
    ref.tell("fail")
    assert ref.ask("ping", timeout=5.0) == "pong"
    assert [type(e.cause) for e in recorder.events] == [Boom, PreRestartException]
    pre = recorder.events[1].cause
    assert isinstance(pre, PreRestartException)
    assert isinstance(pre.__cause__, ValueError) and isinstance(pre.original_cause, Boom)
    assert pre.message_being_processed == "fail"
    assert {e.source for e in recorder.events} == {str(ref.path)}


def test_records_reach_the_logging_module_with_the_actor_path(
    actor_system: ActorSystem, probe: Probe, caplog: pytest.LogCaptureFixture
) -> None:
    sup = _sup(actor_system, OneForOneStrategy(lambda e: Directive.RESTART))
    child = sup.ask(worker_props(None, "c"), timeout=5.0)
    with caplog.at_level(logging.WARNING, logger="gactors"):
        child.tell(Fail(Boom("to the logging module")))
        assert child.ask("gen", timeout=5.0) == 1
    records = [r for r in caplog.records if "to the logging module" in r.getMessage()]
    assert len(records) == 1
    record = records[0]
    assert record.levelno == logging.ERROR and record.name.startswith("gactors")
    assert record.actor_path == str(child.path)  # type: ignore[attr-defined]
    assert record.exc_info is not None and isinstance(record.exc_info[1], Boom)


class RaisesOnAsk(Actor):
    def receive(self, message: Any) -> None:
        raise ValueError(f"raised in the actor for {message!r}")


def test_the_failure_log_shows_the_actors_traceback_not_the_askers(
    actor_system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="gactors.supervision")
    ref = actor_system.actor_of(Props(RaisesOnAsk), "raiser")

    def the_askers_own_function() -> None:
        ref.ask("question", timeout=5.0)

    with pytest.raises(ValueError, match="raised in the actor") as raised:
        the_askers_own_function()
    # The asker got the exception (its own copy), with its own frames on top.
    asker_frames = [f.name for f in traceback.extract_tb(raised.value.__traceback__)]
    assert "the_askers_own_function" in asker_frames

    await_condition(lambda: [r for r in caplog.records if r.exc_info], timeout=5, interval=0.02)
    [record] = [r for r in caplog.records if r.exc_info and "question" in str(r.exc_info[1])]
    assert record.exc_info is not None
    logged = [f.name for f in traceback.extract_tb(record.exc_info[2])]
    # Before the fix the supervisor's record started in the asker's code.
    assert "the_askers_own_function" not in logged
    assert logged[-1] == "receive"


def _add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)``; on Python 3.10 (no add_note) the same attribute by hand."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]


class Annotated(ValueError):
    def __init__(self, code: int, *, detail: str) -> None:
        super().__init__(code)
        self.detail = detail


class RaisesAnnotated(Actor):
    def receive(self, message: Any) -> None:
        exc = Annotated(7, detail="from the actor")
        _add_note(exc, "the actor's note")
        raise exc


def test_the_asker_gets_its_own_exception_not_the_logged_one(
    actor_system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 29: the supervisor logs the failure after the asker got it; what the asker
    # does to its exception (a note, an attribute) must not show in that record.
    caplog.set_level(logging.ERROR, logger="gactors.supervision")
    log = LogRecorder(actor_system)
    ref = actor_system.actor_of(Props(RaisesAnnotated), "annotated")
    with pytest.raises(Annotated) as raised:
        ref.ask("question", timeout=5.0)
    mine = raised.value
    _add_note(mine, "the asker's note")
    mine.detail = "changed by the asker"
    await_condition(lambda: log.events, timeout=5, interval=0.02, message="the failure log")
    log.close()
    [logged] = [e.cause for e in log.events]
    assert isinstance(logged, Annotated) and logged is not mine
    assert logged.__notes__ == ["the actor's note"]
    assert logged.detail == "from the actor"
    # The asker's copy has everything the original had when it was raised.
    assert mine.args == (7,) and mine.__notes__ == ["the actor's note", "the asker's note"]
    assert [f.name for f in traceback.extract_tb(mine.__traceback__)][-1] == "receive"
    records = await_condition(
        lambda: [r for r in caplog.records if r.exc_info and "annotated" in r.getMessage()],
        timeout=5,
        interval=0.02,
        message="the failure's log record",
    )
    [record] = records
    assert record.exc_info is not None and record.exc_info[1] is logged

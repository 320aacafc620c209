"""The event stream and logging (SPEC section 10)."""

from __future__ import annotations

import logging
import queue
from typing import Any

import gevent
import pytest
from _actors import Collector, Recorder
from gevent.queue import Queue

import gactors
from gactors import Actor, ActorSystem, LogEvent, Props


class Base:
    pass


class Sub(Base):
    pass


def test_subscribers_get_class_and_subclasses(system: ActorSystem) -> None:
    c = Collector()
    assert system.event_stream.subscribe(c, Base) is True
    assert system.event_stream.subscribe(c, Base) is False
    system.event_stream.publish(Sub())
    system.event_stream.publish(Base())
    system.event_stream.publish("unrelated")
    got = c.drain()
    assert [type(e) for e in got] == [Sub, Base]


def test_actor_subscriber_and_unsubscribe(system: ActorSystem) -> None:
    q: Queue = Queue()
    ref = system.actor_of(Props(Recorder, q))
    system.event_stream.subscribe(ref, Base)
    ev = Base()
    system.event_stream.publish(ev)
    assert q.get(timeout=2) is ev
    assert system.event_stream.unsubscribe(ref) is True
    system.event_stream.publish(Base())
    with pytest.raises(queue.Empty):
        q.get(timeout=0.05)


def test_unsubscribe_one_class(system: ActorSystem) -> None:
    c = Collector()
    system.event_stream.subscribe(c, Base)
    system.event_stream.subscribe(c, str)
    system.event_stream.unsubscribe(c, Base)
    system.event_stream.publish(Base())
    system.event_stream.publish("s")
    assert c.drain() == ["s"]


def test_bad_subscriptions(system: ActorSystem) -> None:
    with pytest.raises(TypeError):
        system.event_stream.subscribe(42, Base)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        system.event_stream.subscribe(Collector(), "Base")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        system.event_stream.publish(None)


def test_failing_subscriber_does_not_break_publishing(
    system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    good = Collector()

    def bad(event: Any) -> None:
        raise RuntimeError("subscriber bug")

    system.event_stream.subscribe(bad, Base)
    system.event_stream.subscribe(good, Base)
    with caplog.at_level(logging.ERROR, logger="gactors.eventstream"):
        system.event_stream.publish(Base())
    assert len(good.drain()) == 1
    assert any("subscriber" in r.getMessage() for r in caplog.records)


def test_failure_log_event_goes_to_stream_and_logging(
    system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    events = Collector()
    system.event_stream.subscribe(events, LogEvent)

    class Failing(Actor):
        def receive(self, message: Any) -> None:
            raise ValueError("kaputt")

    with caplog.at_level(logging.ERROR, logger="gactors"):
        ref = system.actor_of(Props(Failing), "failing")
        ref.tell("x")
        ev = events.get()
        # The stdlib record is emitted from the hub greenlet right after the event
        # (see ActorSystem.publish_log): let the hub run once.
        gevent.sleep(0.01)
    assert ev.level == logging.ERROR and ev.source == str(ref.path)
    assert isinstance(ev.cause, ValueError) and "kaputt" in ev.message
    rec = next(r for r in caplog.records if "kaputt" in r.getMessage())
    assert rec.name.startswith("gactors") and rec.actor_path == str(ref.path)  # type: ignore[attr-defined]


def test_dead_letters_and_unhandled_are_published(system: ActorSystem) -> None:
    c = Collector()
    system.event_stream.subscribe(c, gactors.DeadLetter)
    system.event_stream.subscribe(c, gactors.UnhandledMessage)
    system.actor_of(Props.empty()).tell("nobody handles me")
    system.dead_letters.tell("nobody gets me")
    got = [c.get(), c.get()]
    assert {type(e) for e in got} == {gactors.DeadLetter, gactors.UnhandledMessage}


def test_subscribe_from_a_foreign_thread_is_carried_to_the_hub(system: ActorSystem) -> None:
    from gevent import monkey

    start_new_thread = monkey.get_original("_thread", "start_new_thread")
    allocate_lock = monkey.get_original("_thread", "allocate_lock")
    c = Collector()
    results: list[bool] = []
    done = allocate_lock()
    done.acquire()

    def from_thread() -> None:
        try:
            results.append(system.event_stream.subscribe(c, Base))
            results.append(system.event_stream.subscribe(c, Base))
        finally:
            done.release()

    start_new_thread(from_thread, ())
    while not done.acquire(False):
        gevent.sleep(0.005)
    assert results == [True, False]
    system.event_stream.publish(Sub())
    assert isinstance(c.get(), Sub)


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
def test_invalid_event_stream_arguments(system: ActorSystem) -> None:
    with pytest.raises(TypeError, match="subscriber"):
        system.event_stream.subscribe(42, str)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="class"):
        system.event_stream.subscribe(print, "str")  # type: ignore[arg-type]
    assert system.event_stream.unsubscribe(print) is False

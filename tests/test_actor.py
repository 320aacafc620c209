"""Actor and its context in use (SPEC section 3); Props: test_props.py; what the context
refuses: test_context.py."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _actors import Collector, Echo, Recorder
from gevent.queue import Queue

import gactors
from gactors import Actor, ActorSystem, IllegalStateError, Props
from gactors.testkit import TestProbe


def test_ref_context_and_log_usable_in_init(system: ActorSystem) -> None:
    q: Queue = Queue()

    class Early(Actor):
        def __init__(self) -> None:  # no super().__init__() on purpose
            self.me = self.ref
            self.ctx_self = self.context.self
            self.log.info("constructing")
            self.kid = self.context.actor_of(Props(Echo), "kid")

        def receive(self, message: Any) -> None:
            q.put((self.me, self.ctx_self, self.kid, self.context.children))

    ref = system.actor_of(Props(Early), "early")
    ref.tell("go")
    me, ctx_self, kid, children = q.get(timeout=2)
    assert me == ref == ctx_self
    assert children == (kid,)
    assert kid.path.parent == ref.path


def test_self_log_tags_records_with_path(
    system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    class Logs(Actor):
        def receive(self, message: Any) -> None:
            self.log.warning("hello %s", message)
            self.sender.tell("done")

    ref = system.actor_of(Props(Logs), "logger")
    with caplog.at_level(logging.WARNING, logger="gactors.actor"):
        assert ref.ask("world", timeout=2) == "done"
    rec = next(r for r in caplog.records if "hello world" in r.getMessage())
    assert rec.actor_path == str(ref.path)  # type: ignore[attr-defined]
    assert str(ref.path) in rec.getMessage()


def test_direct_instantiation_is_refused() -> None:
    with pytest.raises(IllegalStateError, match="actor_of"):
        Echo()


def test_unknown_dispatcher_is_rejected(system: ActorSystem) -> None:
    with pytest.raises(ValueError, match="unknown dispatcher"):
        system.actor_of(Props(Echo).with_dispatcher("nope"))


def test_bounded_mailbox_overflow_goes_to_dead_letters(
    system: ActorSystem, dead_letters: Collector
) -> None:
    import gevent

    gate = gevent.event.Event()

    class Slow(Actor):
        def receive(self, message: Any) -> None:
            gate.wait(5)

    ref = system.actor_of(Props(Slow).with_mailbox(2))
    ref.tell(1)
    gevent.sleep(0.05)  # the actor is now blocked on message 1
    for i in (2, 3, 4, 5):
        ref.tell(i)
    dl = [dead_letters.get().message for _ in range(2)]
    assert dl == [4, 5]
    gate.set()


def test_unhandled_publishes_unhandled_message(system: ActorSystem) -> None:
    events = Collector()
    system.event_stream.subscribe(events, gactors.UnhandledMessage)
    ref = system.actor_of(Props.empty(), "empty")
    ref.tell("what?")
    ev = events.get()
    assert ev.message == "what?" and ev.recipient == ref and ev.sender is None


def test_pre_start_runs_before_first_message_and_post_stop_after(system: ActorSystem) -> None:
    q: Queue = Queue()

    class Hooks(Actor):
        def pre_start(self) -> None:
            q.put("pre_start")

        def receive(self, message: Any) -> None:
            q.put(message)

        def post_stop(self) -> None:
            q.put("post_stop")

    ref = system.actor_of(Props(Hooks))
    ref.tell("m1")  # sent before construction finished: processed after pre_start
    ref.tell(gactors.PoisonPill)
    assert [q.get(timeout=2) for _ in range(3)] == ["pre_start", "m1", "post_stop"]


def test_sender_is_dead_letters_without_sender(system: ActorSystem) -> None:
    q: Queue = Queue()

    class Who(Actor):
        def receive(self, message: Any) -> None:
            q.put(self.sender)

    ref = system.actor_of(Props(Who))
    ref.tell("x")
    assert q.get(timeout=2) == system.dead_letters


def test_sender_is_per_message_and_a_class_may_not_define_it(system: ActorSystem) -> None:
    # self.sender is a plain attribute gactors sets before each message: it follows
    # the messages, a stale value assigned by the actor does not survive the next one,
    # and a subclass with a `sender` of its own is refused when it is defined.
    q: Queue = Queue()
    probe = TestProbe(system)

    class Who(Actor):
        def receive(self, message: Any) -> None:
            q.put(self.sender)
            self.sender = system.dead_letters  # has no effect on the next message

    ref = system.actor_of(Props(Who))
    probe.send(ref, "a")
    ref.tell("b")
    probe.send(ref, "c")
    assert [q.get(timeout=2) for _ in range(3)] == [probe.ref, system.dead_letters, probe.ref]

    with pytest.raises(TypeError, match="defines 'sender'"):

        class Shadowing(Actor):
            @property
            def sender(self) -> Any:  # type: ignore[override]
                return None


def test_implicit_sender_inside_actor(system: ActorSystem) -> None:
    q: Queue = Queue()
    rec = system.actor_of(Props(Recorder, q))

    class Proxy(Actor):
        def receive(self, message: Any) -> None:
            echo = self.context.actor_of(Props(Echo))
            echo.tell(message)  # the reply comes back to us
            self.context.become(lambda reply: rec.tell((reply, self.sender)))

    proxy = system.actor_of(Props(Proxy), "proxy")
    proxy.tell("ping")
    reply, sender = q.get(timeout=2)
    assert reply == "ping" and sender.path.parent == proxy.path


def test_context_children_child_parent_stop(system: ActorSystem) -> None:
    q: Queue = Queue()

    class Parent(Actor):
        def receive(self, message: Any) -> None:
            ctx = self.context
            if message == "make":
                a = ctx.actor_of(Props(Echo), "a")
                b = ctx.actor_of(Props(Echo))
                q.put((ctx.children, ctx.child("a"), ctx.child("zzz"), a, b))
            elif message == "stop-a":
                ctx.watch(ctx.child("a"))
                ctx.stop(ctx.child("a"))
            elif isinstance(message, gactors.Terminated):
                q.put(("terminated", message.actor.name, ctx.child("a"), len(ctx.children)))
            elif message == "parent?":
                q.put((ctx.parent, ctx.system, ctx.props))

    p = system.actor_of(Props(Parent), "parent")
    p.tell("make")
    children, child_a, missing, a, b = q.get(timeout=2)
    assert children == (a, b) and child_a == a and missing is None
    assert b.name.startswith("$")
    p.tell("stop-a")
    assert q.get(timeout=2) == ("terminated", "a", None, 1)
    p.tell("parent?")
    parent, sys_, props = q.get(timeout=2)
    assert parent == system.lookup("/user") and sys_ is system and props.factory is Parent


def test_become_and_unbecome(system: ActorSystem) -> None:
    class Moody(Actor):
        def receive(self, message: Any) -> None:
            if message == "angry":
                self.context.become(self.angry, discard_old=False)
            else:
                self.sender.tell(f"happy:{message}")

        def angry(self, message: Any) -> None:
            if message == "calm":
                self.context.unbecome()
            else:
                self.sender.tell(f"angry:{message}")

    ref = system.actor_of(Props(Moody))
    assert ref.ask("x", timeout=2) == "happy:x"
    ref.tell("angry")
    assert ref.ask("y", timeout=2) == "angry:y"
    ref.tell("calm")
    assert ref.ask("z", timeout=2) == "happy:z"


def test_become_needs_callable(system: ActorSystem) -> None:
    q: Queue = Queue()

    class Bad(Actor):
        def receive(self, message: Any) -> None:
            try:
                self.context.become("nope")  # type: ignore[arg-type]
            except TypeError as e:
                q.put(str(e))

    system.actor_of(Props(Bad)).tell(1)
    assert "callable" in q.get(timeout=2)


def test_an_actor_cannot_be_instantiated_directly() -> None:
    with pytest.raises(IllegalStateError, match="cannot be instantiated directly"):
        Echo()

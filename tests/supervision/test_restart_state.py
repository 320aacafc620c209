"""What a restart renews: a fresh instance from the Props factory, with its initial state
and behaviour (the default strategy restarts on an exception)."""

from __future__ import annotations

from typing import Any

from _actors import Echo

from gactors import Actor, ActorSystem, Props


def test_props_factory_called_again_on_restart(system: ActorSystem) -> None:
    calls: list[int] = []

    def factory(n: int) -> Actor:
        calls.append(n)
        return Echo()

    ref = system.actor_of(Props(factory, 7))
    assert ref.ask("a", timeout=2) == "a"
    assert calls == [7]

    class Boom(Actor):
        def receive(self, message: Any) -> None:
            if message == "boom":
                raise RuntimeError("x")
            self.sender.tell(message)

    built: list[int] = []

    def boom_factory() -> Actor:
        built.append(1)
        return Boom()

    b = system.actor_of(Props(boom_factory))
    assert b.ask(1, timeout=2) == 1
    b.tell("boom")
    assert b.ask(2, timeout=2) == 2
    assert len(built) == 2


def test_behavior_stack_resets_on_restart(system: ActorSystem) -> None:
    class Flip(Actor):
        def receive(self, message: Any) -> None:
            if message == "flip":
                self.context.become(self.flipped)
            else:
                self.sender.tell("normal")

        def flipped(self, message: Any) -> None:
            if message == "boom":
                raise ValueError("boom")
            self.sender.tell("flipped")

    ref = system.actor_of(Props(Flip))
    ref.tell("flip")
    assert ref.ask("?", timeout=2) == "flipped"
    ref.tell("boom")
    assert ref.ask("?", timeout=2) == "normal"


def test_default_strategy_restarts_with_fresh_state(system: ActorSystem) -> None:
    class Counter(Actor):
        def __init__(self, start: int = 0) -> None:
            self.n = start

        def receive(self, message: Any) -> None:
            if message == "inc":
                self.n += 1
            elif message == "get":
                self.sender.tell(self.n)
            elif message == "boom":
                raise ValueError("boom")

    counter = system.actor_of(Props(Counter, 5), "counter")
    counter.tell("inc")
    assert counter.ask("get", timeout=1.0) == 6
    counter.tell("boom")
    assert counter.ask("get", timeout=1.0) == 5

"""gactors._props: Props validation, and what a factory or a class may not do."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _actors import Collector, Echo

import gactors
from gactors import Actor, ActorInitializationException, ActorSystem, Props
from gactors.testkit import TestProbe, event_filter


def test_props_validation() -> None:
    with pytest.raises(TypeError, match="callable"):
        Props(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not a gactors\.Actor subclass"):
        Props(dict)  # type: ignore[arg-type]
    p = Props(Echo)
    assert p.with_dispatcher("default").dispatcher == "default"
    assert p.with_mailbox(10).mailbox_capacity == 10
    with pytest.raises(ValueError):
        p.with_mailbox(0)
    assert "Echo" in repr(p)


def test_factory_returning_non_actor_fails_creation(system: ActorSystem) -> None:
    errors = Collector()
    system.event_stream.subscribe(errors, gactors.LogEvent)
    ref = system.actor_of(Props(lambda: "not an actor"))  # type: ignore[arg-type, return-value]
    ev = errors.get()
    assert ev.level == logging.ERROR and ev.source == str(ref.path)
    assert isinstance(ev.cause, gactors.ActorInitializationException)
    assert "not a gactors.Actor" in str(ev.cause)


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
def test_invalid_props() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        Props(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not a gactors\.Actor subclass"):
        Props(dict)  # type: ignore[arg-type]
    for capacity in (0, -1, True, "3", 1.5):
        with pytest.raises(ValueError, match="mailbox capacity"):
            Props(Echo).with_mailbox(capacity)  # type: ignore[arg-type]
    for name in ("", 5, None):
        with pytest.raises(TypeError, match="dispatcher name"):
            Props(Echo).with_dispatcher(name)  # type: ignore[arg-type]


def test_a_factory_returning_a_non_actor_is_an_initialization_failure(
    system: ActorSystem,
) -> None:
    probe = TestProbe(system)
    with event_filter(system, ActorInitializationException, message="not a gactors.Actor"):
        ref = system.actor_of(Props(lambda: "not an actor"), "bad")  # type: ignore[arg-type, return-value]
        probe.watch(ref)
        probe.expect_terminated(ref)  # the default decider stops it


class NoInit(Actor):
    def receive(self, message: Any) -> None:
        self.sender.tell(message)


def test_props_refuses_arguments_for_a_class_without_init() -> None:
    # Actor defines __new__, so object.__init__ used to swallow the arguments silently.
    with pytest.raises(TypeError, match=r"NoInit\(\) takes no arguments"):
        Props(NoInit, "typo", retries=3)
    with pytest.raises(TypeError, match="takes no arguments"):
        Props(NoInit, retries=3)
    assert Props(NoInit).args == ()  # without arguments it is fine


def test_a_factory_passing_arguments_to_a_class_without_init_fails_its_creation(
    system: ActorSystem,
) -> None:
    probe = TestProbe(system)
    with event_filter(system, ActorInitializationException, message="takes no arguments"):
        ref = system.actor_of(Props(lambda: NoInit("typo")), "typo")  # type: ignore[call-arg]
        probe.watch(ref)
        probe.expect_terminated(ref)


class TwoArgs(Actor):
    def __init__(self, a: int, b: int, *, scale: int = 1) -> None:
        self.total = (a + b) * scale

    def receive(self, message: Any) -> None:
        self.sender.tell(self.total)


def _factory(a: int) -> Actor:
    return TwoArgs(a, a)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((1, 2, 3), {}, "too many positional arguments"),
        ((1,), {}, "missing a required argument: 'b'"),
        ((1, 2), {"x": 4}, "unexpected keyword argument 'x'"),
        ((), {}, "missing a required argument: 'a'"),
    ],
)
def test_props_checks_the_arguments_against_the_constructor(
    args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    # Issue 29: refused when the Props is made, not at every creation of the actor.
    with pytest.raises(TypeError, match=rf"Props\(TwoArgs, \.\.\.\).*TwoArgs\(a, b, \*.*{match}"):
        Props(TwoArgs, *args, **kwargs)


def test_props_checks_the_arguments_of_a_factory_function() -> None:
    with pytest.raises(TypeError, match="do not fit _factory"):
        Props(_factory, 1, 2)
    Props(_factory, 1)  # fits
    # Each shape is checked once: a later Props of the same shape still gets checked
    # by the cache, a new shape by the signature.
    Props(TwoArgs, 1, 2, scale=3)
    Props(TwoArgs, 5, 6, scale=7)
    with pytest.raises(TypeError, match="too many positional"):
        Props(TwoArgs, 1, 2, 3)


def test_props_with_fitting_arguments_builds_the_actor(system: ActorSystem) -> None:
    ref = system.actor_of(Props(TwoArgs, 1, 2, scale=3))
    assert ref.ask("total?", timeout=5.0) == 9

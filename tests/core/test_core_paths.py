"""Actor paths and names (SPEC section 4)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Echo

from gactors import Actor, ActorPath, ActorSystem, InvalidActorNameException, Props


def test_path_parts() -> None:
    p = ActorPath("app").child("user").child("a").child("b")
    assert str(p) == "gactors://app/user/a/b"
    assert p.name == "b"
    assert p.elements == ("user", "a", "b")
    assert str(p.parent) == "gactors://app/user/a"
    assert str(p.root) == "gactors://app/"
    assert p.root.name == "" and p.root.parent == p.root
    assert p == ActorPath.parse("gactors://app/user/a/b", "app")
    assert hash(p) == hash(ActorPath.parse("/user/a/b", "app"))


def test_parse_rejects_other_system_and_relative() -> None:
    with pytest.raises(ValueError, match="belongs to system"):
        ActorPath.parse("gactors://other/user/a", "app")
    with pytest.raises(ValueError):
        ActorPath.parse("user/a", "app")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        ("a/b", "'/'"),
        ("$gen", "reserved"),
        ("sp ace", "URL-safe"),
        ("ünï", "URL-safe"),
        (42, "must be a str"),
    ],
)
def test_invalid_names(system: ActorSystem, name: Any, reason: str) -> None:
    with pytest.raises(InvalidActorNameException, match=reason):
        system.actor_of(Props(Echo), name)


@pytest.mark.parametrize("name", ["a", "a-b_c.d", "x:y@z", "a$b", "%20x", "UPPER123"])
def test_valid_names(system: ActorSystem, name: str) -> None:
    assert system.actor_of(Props(Echo), name).name == name


def test_duplicate_name_is_rejected_with_reason(system: ActorSystem) -> None:
    system.actor_of(Props(Echo), "dup")
    with pytest.raises(InvalidActorNameException, match="not unique"):
        system.actor_of(Props(Echo), "dup")


def test_generated_names_are_unique_per_parent(system: ActorSystem) -> None:
    names = {system.actor_of(Props(Echo)).name for _ in range(200)}
    assert len(names) == 200
    assert all(n.startswith("$") for n in names)


def test_child_names_validated_in_context(system: ActorSystem) -> None:
    class Parent(Actor):
        def receive(self, message: Any) -> None:
            try:
                self.context.actor_of(Props(Echo), message)
                self.sender.tell("ok")
            except InvalidActorNameException as e:
                self.sender.tell(str(e))

    p = system.actor_of(Props(Parent))
    assert p.ask("kid", timeout=2) == "ok"
    assert "not unique" in p.ask("kid", timeout=2)
    assert "reserved" in p.ask("$x", timeout=2)

"""Actor paths and names (SPEC section 4)."""

from __future__ import annotations

from typing import Any

import pytest
from _actors import Echo

from gactors import Actor, ActorPath, ActorRef, ActorSystem, InvalidActorNameException, Props
from gactors.testkit import TestProbe


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


@pytest.mark.parametrize(
    ("n", "name"),
    [
        (1, "$b"),
        (62, "$+"),
        (63, "$~"),
        (64, "$ab"),
        (4095, "$~~"),
        (4096, "$aab"),
        (262143, "$~~~"),
        (262144, "$aaab"),
        (262144 * 64 + 1, "$baaab"),
    ],
)
def test_generated_names_are_akkas_base64_counter(n: int, name: str) -> None:
    # "$" then the counter in base 64 (a-z A-Z 0-9 + ~), lowest digit first.
    from gactors._dungeon.children import _generated_name

    assert _generated_name(n) == name


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


def test_paths_made_on_first_use_are_right_even_after_the_parents_stopped(
    system: ActorSystem,
) -> None:
    # A child's path is only built when somebody looks at it (one object less per
    # actor): it must be the same path as if it had been built at creation, also when
    # the first look comes after the whole branch has stopped.
    class Parent(Actor):
        def __init__(self) -> None:
            self.child = self.context.actor_of(Props(Parent if depth_left() else Echo), "c")

        def receive(self, message: Any) -> None:
            self.sender.tell(self.child)

    levels = [3]

    def depth_left() -> bool:
        levels[0] -= 1
        return levels[0] > 0

    top = system.actor_of(Props(Parent), "top")
    mid = top.ask("child", timeout=2)
    leaf = mid.ask("child", timeout=2)
    generated = system.actor_of(Props(Echo))
    probe = TestProbe(system)
    probe.watch(leaf)
    system.stop(top)
    probe.expect_terminated(leaf)
    base = f"gactors://{system.name}/user"
    assert str(leaf.path) == f"{base}/top/c/c"  # the first look at these paths
    assert str(mid.path) == f"{base}/top/c"
    assert leaf.path.parent == mid.path and mid.path.parent == top.path
    assert leaf.path.elements == ("user", "top", "c", "c")
    assert str(generated.path) == f"{base}/{generated.name}"
    assert generated.name.startswith("$")
    # Equality and hashing go by path and uid, whichever ref built its path first.
    assert {leaf: 1}[leaf] == 1 and leaf != mid and hash(leaf) != hash(mid)


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_are_refused(system: ActorSystem, name: str) -> None:
    with pytest.raises(InvalidActorNameException, match="relative path element"):
        system.actor_of(Props(Echo), name)

    class Parent(Actor):
        def receive(self, message: Any) -> None:
            try:
                self.context.actor_of(Props(Echo), name)
                self.sender.tell("created")
            except InvalidActorNameException as e:
                self.sender.tell(str(e))

    assert "relative path element" in system.actor_of(Props(Parent)).ask("go", timeout=5)


@pytest.mark.parametrize(
    "path",
    [
        "/user//echo",
        "/user/echo/",
        "//user/echo",
        "gactors://{name}/user//echo",
        "gactors://{name}/user/echo/",
    ],
)
def test_paths_with_empty_elements_name_no_actor(
    system: ActorSystem, echo: ActorRef, path: str
) -> None:
    assert system.lookup("/user/echo") == echo
    assert system.lookup(path.format(name=system.name)) is None


@pytest.mark.parametrize(
    "text", ["/user/a/../b", "/user/..", "gactors://app/user/.", "/../user", "/user/./a"]
)
def test_parse_refuses_relative_elements(text: str) -> None:
    # Issue 29: ".." was accepted as an element (no actor can be called so).
    with pytest.raises(ValueError, match="relative element"):
        ActorPath.parse(text, "app")


def test_lookup_and_selection_refuse_relative_elements(system: ActorSystem) -> None:
    system.actor_of(Props(Echo), "b")
    with pytest.raises(ValueError, match=r"relative element '\.\.'"):
        system.lookup("/user/a/../b")
    with pytest.raises(ValueError, match=r"relative element '\.\.'"):
        system.actor_selection("/user/a/../b")

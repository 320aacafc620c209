"""The actor cell's attributes are listed three times: ``ActorCell.__slots__``, the
assignments of ``ActorCell.__init__``, and the declarations of
``gactors._dungeon._state.CellState`` (for the type checker). Nothing else checks that
the three agree, so this does."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator

import pytest

from gactors import Actor, ActorSystem, Props
from gactors._cell import ActorCell
from gactors._dungeon import _state
from gactors._dungeon._state import CellState

# Properties and methods declared on CellState are not attributes: only annotated names
# count.
SLOTS = set(ActorCell.__slots__)


def _init_assignments() -> set[str]:
    """The ``self.<name> = ...`` targets of ActorCell.__init__ (chains included)."""
    source = textwrap.dedent(inspect.getsource(ActorCell.__init__))
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                names.add(target.attr)
    return names


def _declared_attributes() -> set[str]:
    """The annotated attributes of CellState (they exist for the type checker only)."""
    tree = ast.parse(inspect.getsource(_state))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CellState")
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_slots_and_init_agree() -> None:
    assigned = _init_assignments()
    assert assigned - SLOTS == set(), "assigned in __init__ but not a slot"
    assert SLOTS - assigned == set(), "a slot that __init__ leaves unset"


def test_slots_and_cell_state_declarations_agree() -> None:
    declared = _declared_attributes()
    assert declared - SLOTS == set(), "declared in CellState but not a slot"
    assert SLOTS - declared == set(), "a slot not declared in CellState"


def test_the_lists_are_not_empty() -> None:
    # The parsing above found something: an empty set on all sides would agree too.
    assert len(SLOTS) > 30
    assert len(_init_assignments()) == len(SLOTS)
    assert len(_declared_attributes()) == len(SLOTS)


def test_the_mixins_add_no_slots_and_no_dict() -> None:
    # Every concern declares empty slots at run time: one flat layout, no __dict__.
    for base in ActorCell.__mro__[1:]:
        if base is object:
            continue
        assert base.__dict__.get("__slots__") == (), base
    assert issubclass(ActorCell, CellState)
    assert "__dict__" not in ActorCell.__slots__


class _Idle(Actor):
    def receive(self, message: object) -> None:
        pass


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("cell")
    yield s
    s.terminate().get(timeout=10)


def test_a_new_cell_has_every_slot_set(system: ActorSystem) -> None:
    ref = system.actor_of(Props(_Idle), "idle")
    cell = ref._cell  # type: ignore[attr-defined]
    assert type(cell) is ActorCell
    unset = [name for name in SLOTS if not hasattr(cell, name)]
    assert unset == []
    with pytest.raises(AttributeError):
        cell.not_a_slot = 1  # no __dict__: a misspelt attribute fails at once


def test_a_child_cell_is_made_by_the_parent_cell(system: ActorSystem) -> None:
    ref = system.actor_of(Props(_Idle), "parent")
    parent = ref._cell  # type: ignore[attr-defined]
    child = parent.new_child_cell(Props(_Idle), "kid")
    assert type(child) is ActorCell
    assert child.parent_cell is parent
    assert child.parent == parent.ref
    assert child.name == "kid"

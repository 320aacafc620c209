"""The children container: names, creation, stopping, and waiting for children."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gactors import _sysmsg as sm
from gactors._decisions import ChildRestartStats
from gactors._dungeon._state import EMPTY, CellState
from gactors._path import validate_name
from gactors._ref import ActorRef
from gactors.exceptions import IllegalStateError, InvalidActorNameException

if TYPE_CHECKING:
    from typing_extensions import Self

    from gactors._dungeon._state import PropsSPI

# Why the cell is waiting for its children to terminate (Akka's SuspendReason).
USER_REQUEST = "user-request"  # children stopped by request: nothing waits
CREATION = "creation"  # a failed creation is retried once they are gone
TERMINATION = "termination"  # the cell stops once they are gone


class Recreation:
    """A restart continues (finish_recreate) once the children are gone."""

    __slots__ = ("cause",)

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause


class ChildrenView(Sequence["ActorRef"]):
    """The children as a sequence built only when used: handing the whole tuple to
    every ``handle_child_terminated`` call would make stopping n children O(n^2)."""

    __slots__ = ("_cell", "_refs")

    def __init__(self, cell: CellState) -> None:
        self._cell = cell
        self._refs: tuple[ActorRef, ...] | None = None

    def _get(self) -> tuple[ActorRef, ...]:
        refs = self._refs
        if refs is None:
            refs = self._refs = tuple(c.ref for c in self._cell.child_cells.values())
        return refs

    def __getitem__(self, index: Any) -> Any:
        return self._get()[index]

    def __len__(self) -> int:
        return len(self._cell.child_cells) if self._refs is None else len(self._refs)

    def __repr__(self) -> str:
        return f"ChildrenView({list(self._get())!r})"


def _restart_stats(child: CellState) -> ChildRestartStats:
    # The restart bookkeeping of a child, kept on the child's cell (so it goes away with
    # the child) but only made when a failure or a strategy needs it: most children
    # never fail, and one object less per actor is less for the garbage collector.
    stats = child.restart_stats
    if stats is None:
        stats = child.restart_stats = ChildRestartStats(child.ref, child)
    return stats


_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+~"


def _generated_name(n: int) -> str:
    # Like Akka: "$" followed by a base-64 counter (lowest digit first), unique per
    # parent. n >= 1.
    name = "$"
    while n:
        name += _ALPHABET[n & 63]
        n >>= 6
    return name


class Children(CellState):
    """Mixin of ActorCell: the children container."""

    if not TYPE_CHECKING:  # mypy would check every attribute against the empty slots
        __slots__ = ()

    # -- queries -----------------------------------------------------------------------------
    @property
    def children(self) -> tuple[ActorRef, ...]:
        return tuple(c.ref for c in self.child_cells.values())

    def child_by_name(self, name: str) -> ActorRef | None:
        c = self.child_cells.get(name)
        return c.ref if c is not None else None

    def child_cell_of(self, ref: ActorRef) -> Self | None:
        """The cell of ``ref`` if it is a child of this cell (and not an older namesake)."""
        # By the ref's own cell, not by its path: stopping or supervising many children
        # must not build a path object for each of them.
        cell = getattr(ref, "_cell", None)
        if cell is not None and self.child_cells.get(cell.name) is cell:
            return cell
        return None

    def stats_for(self, ref: ActorRef) -> ChildRestartStats | None:
        c = self.child_cell_of(ref)
        return None if c is None else _restart_stats(c)

    def live_child_stats(self) -> list[ChildRestartStats]:
        """Children not being stopped (the ones a strategy acts upon)."""
        to_die = self.to_die
        return [_restart_stats(c) for c in self.child_cells.values() if c.ref not in to_die]

    @property
    def is_terminating(self) -> bool:
        return self.termination_reason is TERMINATION

    @property
    def is_normal(self) -> bool:
        r = self.termination_reason
        return r is None or r is USER_REQUEST

    @property
    def waiting_for_children(self) -> bool:
        r = self.termination_reason
        return r is CREATION or isinstance(r, Recreation)

    # -- creation -----------------------------------------------------------------------------
    def attach_child(
        self: Self, props: PropsSPI, name: str | None, *, system_name: bool = False
    ) -> ActorRef:
        self.check_props(props)  # (ActorCell: a TypeError saying how to make a Props)
        if self.dead or self.termination_reason is TERMINATION:
            raise IllegalStateError(
                f"cannot create a child of {self.path}: it is "
                f"{'terminated' if self.dead else 'terminating'}"
            )
        if name is None:
            self.name_counter += 1
            name = _generated_name(self.name_counter)
        elif not system_name:
            validate_name(name)
        if name in self.child_cells:
            raise InvalidActorNameException(
                f"actor name {name!r} is not unique: {self.path}/{name} is still alive or "
                "still terminating"
            )
        if props.dispatcher != "default":
            raise ValueError(f"unknown dispatcher {props.dispatcher!r} (known: 'default')")
        child = self.new_child_cell(props, name)
        table = self.child_cells
        if table is EMPTY:
            table = self.child_cells = {}
        table[name] = child
        child.send_system(sm.CREATE)
        ref: ActorRef = child.ref
        return ref

    # -- stopping -----------------------------------------------------------------------------
    def stop_ref(self, ref: ActorRef) -> None:
        """context.stop(ref): children are marked as dying (their names stay reserved
        until they terminated); anything else just gets Terminate."""
        if not isinstance(ref, ActorRef):
            raise TypeError(f"stop() needs an ActorRef, not {type(ref).__name__}")
        if self.child_cell_of(ref) is not None:
            self.mark_dying(ref)
        ref._send_system(sm.TERMINATE)

    def mark_dying(self, ref: ActorRef) -> None:
        to_die = self.to_die
        if ref not in to_die:
            if to_die is EMPTY:
                to_die = self.to_die = {}
            to_die[ref] = None
            if self.termination_reason is None:
                self.termination_reason = USER_REQUEST

    def stop_all_children(self) -> None:
        pause = self.dispatcher.pause
        for n, c in enumerate(list(self.child_cells.values()), 1):
            self.mark_dying(c.ref)
            c.ref._send_system(sm.TERMINATE)
            if not n & 1023:
                # Hundreds of thousands of children: let the hub (and the children
                # already told) run meanwhile.
                pause()

    def set_children_termination_reason(self, reason: Any) -> bool:
        """If children are dying, wait for them for ``reason`` and return True."""
        if self.to_die:
            self.termination_reason = reason
            return True
        return False

    def remove_child_and_get_state_change(self, ref: ActorRef) -> Any:
        """Forget a terminated child; return the finished wait reason, if any."""
        child = self.child_cell_of(ref)
        if child is not None:
            del self.child_cells[child.name]
        if ref in self.to_die:
            del self.to_die[ref]
        if not self.to_die and self.termination_reason is not None:
            reason = self.termination_reason
            if reason is TERMINATION:
                # Stays TERMINATION: the cell is about to finish terminating.
                return reason
            self.termination_reason = None
            return None if reason is USER_REQUEST else reason
        return None

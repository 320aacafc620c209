"""What supervision decides and counts: :class:`Directive` and :class:`ChildRestartStats`.

Values below the strategies of ``gactors/_supervision.py`` (which re-exports both, as
:mod:`gactors` does): the cell's fault handling (``gactors/_dungeon``) keeps a
``ChildRestartStats`` per child and the event stream's ``LogEvent`` carries a
``Directive`` without either knowing the strategies, whose ``handle_failure`` is typed
against ``ActorContext`` (docs/internals.md, "Layers").
"""

from __future__ import annotations

import enum
from time import monotonic
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gactors._ref import ActorRef

__all__ = ["ChildRestartStats", "Directive"]


class Directive(enum.Enum):
    """What a supervisor does with a failed child."""

    RESUME = "resume"
    """Keep the child's state; drop the failing message; carry on."""
    RESTART = "restart"
    """Replace the child's instance with a fresh one; keep its mailbox."""
    STOP = "stop"
    """Stop the child permanently."""
    ESCALATE = "escalate"
    """Fail the supervisor itself with the same exception."""

    def __repr__(self) -> str:
        return f"Directive.{self.name}"


class ChildRestartStats:
    """Per-child bookkeeping of a supervisor: the child and its restart window."""

    __slots__ = ("cell", "child", "restart_count", "settled_seq", "uid", "window_start")

    def __init__(self, child: ActorRef, cell: Any) -> None:
        self.child = child
        self.cell = cell
        self.uid = child._uid
        self.restart_count = 0
        self.window_start: float | None = None
        # Failure reports up to this sequence number were settled by a restart of the
        # supervisor itself (the child was restarted as a survivor): not decided again.
        self.settled_seq = 0

    def request_restart_permission(self, max_retries: int | None, within: float | None) -> bool:
        """Count one restart; False when it goes over the limit."""
        if max_retries is None:
            return True
        if max_retries < 1:
            return False
        if within is None:
            self.restart_count += 1
            return self.restart_count <= max_retries
        now = monotonic()
        if self.window_start is None:
            self.window_start = now
        if now - self.window_start <= within:
            self.restart_count += 1
            return self.restart_count <= max_retries
        # The failure falls outside the window: a new window opens with this restart.
        self.restart_count = 1
        self.window_start = now
        return True

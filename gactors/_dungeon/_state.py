"""The state every concern of the cell shares, declared once for the type checker.

The attributes themselves are slots of ``gactors._cell.ActorCell``; each concern
module subclasses :class:`CellState` so that mypy knows what the others provide.
A child cell is a ``CellState`` too. The system, the actor, its props and its
strategy are typed by the protocols of ``gactors/_spi.py``: the concerns are below
``ActorCell``, ``ActorSystem`` and ``Actor`` in the layers (docs/internals.md), which
type themselves more narrowly where they need to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    import logging
    from collections import deque

    from typing_extensions import Self

    from gactors._decisions import ChildRestartStats
    from gactors._dispatch import Dispatcher
    from gactors._path import ActorPath
    from gactors._ref import ActorRef, LocalActorRef
    from gactors._spi import SystemSPI
    from gactors._stash import StashStore
    from gactors._sysmsg import Failed, SystemMessage
    from gactors._timers import TimerScheduler


EMPTY: Final[Any] = MappingProxyType({})
"""The shared, immutable empty mapping every cell starts with for its children,
watch and to-die tables: most actors never use them, and an empty dict per table per
actor is what an idle actor would otherwise cost. Code that adds to a table first
swaps ``EMPTY`` for a fresh dict (copy-on-write).

Typed ``Any`` so that it can stand in for each table's own dict type; a write that
forgot the swap fails at run time (a ``MappingProxyType`` is read-only)."""


class ActorSPI(Protocol):
    """An actor instance as the cell's concerns (``gactors/_dungeon``) see it: its
    lifecycle hooks and the sender they set (``Actor`` has it all)."""

    sender: ActorRef

    @property
    def supervisor_strategy(self) -> StrategySPI: ...
    def receive(self, message: Any) -> None: ...
    def pre_start(self) -> None: ...
    def post_stop(self) -> None: ...
    def pre_restart(self, reason: BaseException, message: Any) -> None: ...
    def post_restart(self, reason: BaseException) -> None: ...


class PropsSPI(Protocol):
    """A ``Props`` as the cell's concerns see it (they hand it on to ``ActorCell``)."""

    dispatcher: str
    mailbox_capacity: int | None


class StrategySPI(Protocol):
    """A supervisor strategy as the cell's fault handling calls it.

    ``context`` is the supervising cell's ``ActorContext``: ``Any`` here because the
    strategies' public signatures name ``ActorContext``, which this module, below it,
    cannot (a protocol's parameter must accept at least what the implementation does).
    """

    def handle_failure(
        self,
        context: Any,
        child: ActorRef,
        cause: BaseException,
        stats: ChildRestartStats,
        children: Sequence[ChildRestartStats],
    ) -> bool: ...
    def handle_child_terminated(
        self, context: Any, child: ActorRef, children: Iterable[ActorRef]
    ) -> None: ...


class CellState:
    if not TYPE_CHECKING:  # mypy would check every attribute against the empty slots
        __slots__ = ()

    if TYPE_CHECKING:
        # identity
        system: SystemSPI
        props: PropsSPI
        name: str
        uid: int
        ref: LocalActorRef
        parent: ActorRef
        parent_cell: Any
        context_obj: object | None  # an ActorContext (see ActorCell.context)
        dispatcher: Dispatcher
        tid: int
        # queues and dispatch
        mailbox: deque[Any]  # the messages; their senders are in `senders`, in step
        senders: deque[ActorRef | None]
        sysq: list[SystemMessage]
        sys_stash: list[SystemMessage]
        scheduled: bool
        open: bool
        dead: bool
        capacity: int | None
        # the instance
        actor: ActorSPI | None
        behavior: Any
        behavior_stack: list[Any] | None
        sender: ActorRef | None
        current_message: Any  # None: no message is being processed
        restarts: int
        timers_obj: TimerScheduler | None
        stash_obj: StashStore | None
        logger_obj: logging.LoggerAdapter[logging.Logger] | None
        # fault handling
        suspend_count: int
        failed: ActorRef | None
        failure_seq: int
        failed_message: Any
        current_sys: SystemMessage | None
        # children
        child_cells: dict[str, Self]  # (in ActorCell: dict[str, ActorCell])
        restart_stats: ChildRestartStats | None  # kept by the parent, made on first use
        to_die: dict[ActorRef, None]
        termination_reason: Any
        name_counter: int
        # death watch
        watching: dict[ActorRef, Any]
        watched_by: dict[ActorRef, None]
        terminated_queued: dict[ActorRef, Any]
        # receive timeout
        rt_seconds: float | None
        rt_timer: Any

        # provided by the concerns and by ActorCell
        @property
        def path(self) -> ActorPath: ...
        def send_system(self, message: SystemMessage) -> None: ...
        def system_dead_letter(self, message: SystemMessage) -> None: ...
        def new_child_cell(self, props: PropsSPI, name: str) -> Self: ...
        def check_props(self, props: object) -> None: ...
        # the handlers of system messages (gactors._dungeon.dispatch)
        def create(self) -> None: ...
        def fault_recreate(self, cause: BaseException, survivor: bool = False) -> None: ...
        def fault_suspend(self) -> None: ...
        def fault_resume(self, caused_by_failure: BaseException | None) -> None: ...
        def terminate(self) -> None: ...
        def add_watcher(self, watchee: ActorRef, watcher: ActorRef) -> None: ...
        def rem_watcher(self, watchee: ActorRef, watcher: ActorRef) -> None: ...
        def handle_failure(self, f: Failed) -> None: ...
        def watched_actor_terminated(
            self, actor: ActorRef, existence_confirmed: bool, address_terminated: bool
        ) -> None: ...
        def ensure_mailbox(self) -> deque[Any]: ...
        def enqueue(self, message: Any, sender: ActorRef | None) -> None: ...
        @property
        def context(self) -> object: ...  # handed to the strategy only
        def new_actor(self) -> ActorSPI: ...
        def install_actor(self, instance: ActorSPI) -> None: ...
        def receive_message(self, message: Any) -> None: ...
        def drain_to_dead_letters(self) -> None: ...
        def has_work(self) -> bool: ...
        def lifecycle_debug(self, what: str) -> None: ...
        def strategy(self) -> StrategySPI: ...
        def child_cell_of(self, ref: ActorRef) -> Self | None: ...
        def stats_for(self, ref: ActorRef) -> ChildRestartStats | None: ...
        def live_child_stats(self) -> list[ChildRestartStats]: ...
        def stop_all_children(self) -> None: ...
        def set_children_termination_reason(self, reason: Any) -> bool: ...
        def remove_child_and_get_state_change(self, ref: ActorRef) -> Any: ...
        def handle_invoke_failure(
            self, exc: BaseException, skip: tuple[ActorRef, ...] = ()
        ) -> None: ...
        def handle_child_terminated(self, ref: ActorRef) -> None: ...
        def unwatch_watched_actors(self) -> None: ...
        def tell_watchers_we_died(self) -> None: ...
        def cancel_receive_timeout(self) -> None: ...
        def check_receive_timeout(self) -> None: ...
        # (with these, a cell state is a CellSPI: the dispatcher schedules `self`)
        @property
        def sender_or_none(self) -> ActorRef | None: ...
        def user_failure(
            self, exc: BaseException, message: Any, sender: ActorRef | None
        ) -> None: ...
        def terminated_queued_for(self, actor: ActorRef) -> None: ...
        @property
        def children(self) -> tuple[ActorRef, ...]: ...
        @property
        def is_terminating(self) -> bool: ...
        @property
        def is_normal(self) -> bool: ...
        @property
        def waiting_for_children(self) -> bool: ...

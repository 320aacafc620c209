"""The state every concern of the cell shares, declared once for the type checker.

The attributes themselves are slots of ``gactors._cell.ActorCell``; each concern
module subclasses :class:`CellState` so that mypy knows what the others provide.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections import deque

    from gactors._actor import Actor, ActorLogger
    from gactors._cell import ActorCell
    from gactors._context import ActorContext
    from gactors._dispatch import Dispatcher
    from gactors._path import ActorPath
    from gactors._props import Props
    from gactors._ref import ActorRef, LocalActorRef
    from gactors._stash import StashStore
    from gactors._supervision import ChildRestartStats, SupervisorStrategy
    from gactors._sysmsg import Failed, SystemMessage
    from gactors._system import ActorSystem
    from gactors._timers import TimerScheduler


EMPTY: Final[Any] = MappingProxyType({})
"""The shared, immutable empty mapping every cell starts with for its children,
watch and to-die tables: most actors never use them, and an empty dict per table per
actor is what an idle actor would otherwise cost. Code that adds to a table first
swaps ``EMPTY`` for a fresh dict (copy-on-write).

Typed ``Any`` so that it can stand in for each table's own dict type; a write that
forgot the swap fails at run time (a ``MappingProxyType`` is read-only)."""


class CellState:
    if not TYPE_CHECKING:  # mypy would check every attribute against the empty slots
        __slots__ = ()

    if TYPE_CHECKING:
        # identity
        system: ActorSystem
        props: Props
        name: str
        uid: int
        ref: LocalActorRef
        parent: ActorRef
        parent_cell: Any
        context_obj: ActorContext | None
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
        actor: Actor | None
        behavior: Any
        behavior_stack: list[Any] | None
        sender: ActorRef | None
        current_message: Any  # None: no message is being processed
        restarts: int
        timers_obj: TimerScheduler | None
        stash_obj: StashStore | None
        logger_obj: ActorLogger | None
        # fault handling
        suspend_count: int
        failed: ActorRef | None
        failure_seq: int
        failed_message: Any
        current_sys: SystemMessage | None
        # children
        child_cells: dict[str, ActorCell]
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
        def new_child_cell(self, props: Props, name: str) -> ActorCell: ...
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
        def context(self) -> ActorContext: ...
        def new_actor(self) -> Actor: ...
        def install_actor(self, instance: Actor) -> None: ...
        def receive_message(self, message: Any) -> None: ...
        def drain_to_dead_letters(self) -> None: ...
        def has_work(self) -> bool: ...
        def lifecycle_debug(self, what: str) -> None: ...
        def strategy(self) -> SupervisorStrategy: ...
        def child_cell_of(self, ref: ActorRef) -> ActorCell | None: ...
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

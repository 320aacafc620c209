"""The internal API as the lower modules see it: protocols of the system and the cell.

The refs, the dispatcher, the scheduler, the event stream, selections, timers and the
stash type against :class:`SystemSPI` and :class:`CellSPI` rather than against
``ActorSystem`` (``gactors/_system.py``) and ``ActorCell`` (``gactors/_cell.py``):
they are below those modules in the layers of docs/internals.md, and naming the
concrete classes, even only for the type checker, tied every module of the core into
one import cycle. ``ActorSystem`` and ``ActorCell`` satisfy these protocols (mypy
checks it where they are passed in). Typing only: nothing here runs on a hot path.
:class:`RefProvider` (re-exported by ``gactors/_provider.py``) and :class:`SettingsSPI`
live here for the same reason: ``SystemSPI`` names them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from types import TracebackType

    from gactors._deadlines import AskDeadlines
    from gactors._dispatch import Dispatcher
    from gactors._path import ActorPath
    from gactors._ref import ActorRef, LocalActorRef
    from gactors._sysmsg import SystemMessage

__all__ = ["CellSPI", "RefProvider", "SettingsSPI", "SystemSPI"]

T = TypeVar("T")
P = ParamSpec("P")


class SettingsSPI(Protocol):
    """The settings the modules below the actor system read (``Settings`` has them all)."""

    @property
    def default_ask_timeout(self) -> float: ...
    @property
    def stash_capacity(self) -> int | None: ...


class RefProvider(Protocol):
    """What the actor system needs of whatever reaches other nodes."""

    @property
    def node_id(self) -> str | None:
        """The node part of the system's address; None: a system without nodes."""
        ...

    def start(self) -> None:
        """Called once the guardians exist; returns when other nodes can be reached
        (a failure fails the ``ActorSystem`` constructor, after :meth:`close`)."""
        ...

    def close(self) -> None:
        """Release what :meth:`start` acquired when the system cannot start."""
        ...

    def remote_ref(self, path: ActorPath, uid: int) -> ActorRef:
        """A ref to the actor at ``path`` (another node's) with incarnation ``uid``
        (0: whatever lives there)."""
        ...


class SystemSPI(Protocol):
    """What the modules below the actor system use of it (``ActorSystem`` has it all)."""

    name: str

    @property
    def settings(self) -> SettingsSPI: ...  # (read-only: ActorSystem's is a Settings)

    _hub: Any
    _tid: int
    forked: bool
    thread_alive: Callable[[], object | None]
    temp_path: ActorPath
    dead_letters: ActorRef
    ask_deadlines: AskDeadlines
    provider: RefProvider
    failure_tb: tuple[BaseException, TracebackType | None] | None

    def publish_dead_letter(
        self, message: Any, sender: ActorRef | None, recipient: ActorRef
    ) -> None: ...
    def run_in_hub(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...
    def run_in_hub_async(self, fn: Callable[..., Any], *args: Any) -> None: ...
    def tell_from_thread(self, ref: ActorRef, message: Any, sender: ActorRef | None) -> None: ...
    def check_thread_alive(self, what: str) -> None: ...
    def fork_error(self) -> Exception: ...
    def lookup(self, path: ActorPath | str) -> ActorRef | None: ...
    def publish_log(
        self,
        level: int,
        source: str,
        message: str,
        cause: BaseException | None = None,
        logger_class: type | None = None,
        *,
        category: str = "supervision",
    ) -> None: ...


class CellSPI(Protocol):
    """What the refs, the dispatcher, timers and the stash use of an actor cell."""

    system: Any  # the ActorSystem (typed as SystemSPI where it is used)
    name: str
    uid: int
    tid: int
    ref: LocalActorRef
    parent_cell: Any
    dispatcher: Dispatcher
    mailbox: deque[Any]
    senders: deque[ActorRef | None]
    sysq: list[SystemMessage]
    scheduled: bool
    open: bool
    dead: bool
    actor: Any
    behavior: Any
    sender: ActorRef | None
    current_message: Any
    suspend_count: int
    rt_seconds: float | None
    timers_obj: Any  # TimerScheduler | None (gactors/_timers.py types it)
    stash_obj: Any  # StashStore | None (gactors/_stash.py types it)

    @property
    def path(self) -> ActorPath: ...
    @property
    def sender_or_none(self) -> ActorRef | None: ...
    def send_system(self, message: SystemMessage) -> None: ...
    def enqueue_closed(self, message: Any, sender: ActorRef | None) -> None: ...
    def enqueue_foreign(self, message: Any, sender: ActorRef | None) -> None: ...
    def ensure_mailbox(self) -> deque[Any]: ...
    def has_work(self) -> bool: ...
    def process_system(self) -> None: ...
    def check_receive_timeout(self) -> None: ...
    def user_failure(self, exc: BaseException, message: Any, sender: ActorRef | None) -> None: ...
    def terminated_queued_for(self, actor: ActorRef) -> None: ...

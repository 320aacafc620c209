"""System messages: the cell's private control protocol.

They travel through each cell's system queue, which is always drained before the
user mailbox. Two class flags say which of them wait (are stashed) while the cell
is suspended after a failure or is waiting for children to stop during a restart,
exactly as Akka's ``StashWhenFailed`` / ``StashWhenWaitingForChildren``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

    from gactors._ref import ActorRef


class SystemMessage:
    __slots__ = ()
    stash_when_failed = False
    stash_when_waiting = False

    def __repr__(self) -> str:
        names: tuple[str, ...] = self.__slots__
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{type(self).__name__}({fields})"


class Create(SystemMessage):
    __slots__ = ()


CREATE = Create()
"""Create carries nothing: one shared instance serves every new actor."""


class Recreate(SystemMessage):
    """Restart. ``survivor``: restarted because the parent restarted (docs/concepts/restart.md), so
    ``pre_restart`` gets ``message=None`` even if this actor's own message failed."""

    __slots__ = ("cause", "survivor")
    stash_when_waiting = True

    def __init__(self, cause: BaseException, survivor: bool = False):
        self.cause = cause
        self.survivor = survivor


class Suspend(SystemMessage):
    __slots__ = ()
    stash_when_waiting = True


class Resume(SystemMessage):
    __slots__ = ("caused_by_failure",)
    stash_when_waiting = True

    def __init__(self, caused_by_failure: BaseException | None):
        self.caused_by_failure = caused_by_failure


class Terminate(SystemMessage):
    __slots__ = ()


TERMINATE = Terminate()
"""The one Terminate needed (it carries nothing): stopping 200,000 actors makes no
200,000 objects."""


class Watch(SystemMessage):
    __slots__ = ("watchee", "watcher")

    def __init__(self, watchee: ActorRef, watcher: ActorRef):
        self.watchee = watchee
        self.watcher = watcher


class Unwatch(SystemMessage):
    __slots__ = ("watchee", "watcher")

    def __init__(self, watchee: ActorRef, watcher: ActorRef):
        self.watchee = watchee
        self.watcher = watcher


class Failed(SystemMessage):
    """A child reports a failure. ``uid`` and ``seq`` identify the incarnation and the
    failure, so stale reports are dropped."""

    __slots__ = ("cause", "child", "seq", "tb", "uid")
    stash_when_failed = True
    stash_when_waiting = True

    def __init__(
        self,
        child: ActorRef,
        cause: BaseException,
        uid: int,
        seq: int,
        tb: TracebackType | None = None,
    ):
        self.child = child
        self.cause = cause
        self.uid = uid
        self.seq = seq
        # The cause's traceback when the child failed: an asker re-raising the same
        # exception object extends ``cause.__traceback__`` with its own frames.
        self.tb = tb


class DeathWatchNotification(SystemMessage):
    __slots__ = ("actor", "address_terminated", "existence_confirmed")

    def __init__(
        self, actor: ActorRef, existence_confirmed: bool, address_terminated: bool = False
    ):
        self.actor = actor
        self.existence_confirmed = existence_confirmed
        self.address_terminated = address_terminated

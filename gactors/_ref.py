"""Actor references: the only handle user code has on an actor.

``LocalActorRef.tell`` is the hot path of the whole framework: it never blocks and
never switches greenlets. In the hub thread it appends ``(message, sender)`` to the
cell's mailbox and, when the cell is idle, hands the cell to the dispatcher; from any
other OS thread it goes through the system's thread-safe inbox instead.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Literal, cast, overload

from greenlet import getcurrent

from gactors._dispatch import Worker
from gactors._duration import MAX_SECONDS as _MAX_SECONDS
from gactors._duration import seconds as _seconds
from gactors._future import Future
from gactors._messages import ActorIdentity, Identify, Status
from gactors._path import ActorPath
from gactors._threads import get_ident
from gactors.exceptions import AskTimeoutError, IllegalStateError, InvalidMessageException

if TYPE_CHECKING:
    from gactors._spi import CellSPI, SystemSPI
    from gactors._sysmsg import SystemMessage

__all__ = ["ActorRef", "DeadLettersRef", "EmptyLocalActorRef", "LocalActorRef", "PromiseRef"]


class _Implicit:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<implicit sender>"


IMPLICIT: Final = _Implicit()
_NONE_ERROR = "None is not a valid message (use a sentinel object instead)"


def current_sender_ref() -> ActorRef | None:
    """The actor running in the current greenlet, if any (the implicit sender)."""
    g = getcurrent()
    return g.cell.ref if type(g) is Worker else None  # type: ignore[union-attr]


def bad_sender(sender: object) -> TypeError:
    """The error of a ``tell`` whose sender is neither an ActorRef nor None.

    Refused at the ``tell``: accepted, it would make the receiving actor fail later
    (and be restarted) at ``self.sender.tell``, far from the mistake.
    """
    return TypeError(
        f"tell(): sender must be an ActorRef or None, not {type(sender).__name__} {sender!r}"
    )


class ActorRef:
    """An immutable, shareable handle to an actor.

    Equal and hashed by path and incarnation uid: a child re-created under the same
    name is a different ref.
    """

    __slots__ = ("__weakref__", "_path", "_system", "_uid")

    def __init__(self, system: SystemSPI, path: ActorPath | None, uid: int) -> None:
        # None: LocalActorRef and PromiseRef make their paths on first use (their own
        # path property); every other ref is given its path here.
        self._system = system
        self._path = path
        self._uid = uid

    @property
    def path(self) -> ActorPath:
        """The actor's :class:`ActorPath`."""
        return cast(ActorPath, self._path)  # given to __init__ (see there)

    @property
    def name(self) -> str:
        """The last element of the path."""
        return self.path.name

    def tell(self, message: Any, sender: ActorRef | _Implicit | None = IMPLICIT) -> None:
        """Send ``message`` without waiting. Inside an actor the sender defaults to it."""
        raise NotImplementedError(f"{type(self).__name__} does not implement tell")

    def forward(self, message: Any) -> None:
        """Inside an actor: tell, keeping the sender of the message being processed."""
        g = getcurrent()
        if type(g) is not Worker or g.cell is None:
            raise IllegalStateError("forward() can only be used inside an actor")
        self.tell(message, g.cell.sender_or_none)

    @overload
    def ask(
        self,
        message: Any,
        *,
        timeout: float | timedelta | None = None,
        block: Literal[True] = True,
    ) -> Any: ...
    @overload
    def ask(
        self, message: Any, *, timeout: float | timedelta | None = None, block: Literal[False]
    ) -> Future[Any]: ...
    @overload
    def ask(
        self, message: Any, *, timeout: float | timedelta | None = None, block: bool
    ) -> Any: ...
    def ask(
        self, message: Any, *, timeout: float | timedelta | None = None, block: bool = True
    ) -> Any:
        """Send ``message`` and wait for the reply (``block=False``: return a Future).

        A ``Status.Failure(exc)`` reply raises ``exc``; ``Status.Success(v)`` returns
        ``v``. If the actor raises while processing the message before replying, the ask
        raises that exception. No reply within ``timeout`` seconds (float or timedelta;
        ``None``: the ``default_ask_timeout`` setting) raises :class:`AskTimeoutError`.
        The timeout counts from this call, even right after the hub was blocked, and
        from another OS thread it is measured in that thread.
        """
        system = self._system
        if message is None:
            raise InvalidMessageException(_NONE_ERROR)
        if system.forked:
            raise system.fork_error()
        # Checked first: a thread started after the system's thread exited may get its
        # thread id, and would then be taken for the hub's thread.
        if system.thread_alive() is None:
            system.check_thread_alive("ask")  # raises
        # None means the default, as in pattern.ask: no ask waits without end
        # (docs/reliability.md, "Bad inputs").
        t: float
        if timeout is None:
            t = system.settings.default_ask_timeout
        elif type(timeout) is float and 0.0 < timeout <= _MAX_SECONDS:
            t = timeout  # the common case, as _seconds would return it (a call less)
        else:
            t = _seconds(timeout, "ask timeout")
        fut: Future[Any] = Future(system._hub, system._tid)
        promise = PromiseRef(system, fut, self, message)
        if get_ident() == system._tid:
            if block:
                g = getcurrent()
                if type(g) is Worker:
                    if g.cell.ref == self:  # type: ignore[union-attr]
                        raise IllegalStateError(
                            f"actor {self.path} cannot block asking itself: it would never "
                            "reply (use ask(..., block=False) or tell)"
                        )
                elif type(self) is LocalActorRef:
                    # A plain greenlet asks a local actor and a worker lingers: hand the
                    # CPU straight to that worker, which runs the question, instead of
                    # waking it through a hub callback and then switching to the hub to
                    # wait (a switch and a callback less per ask; the hub still runs
                    # when the worker parks, before this greenlet is woken).
                    cell = self._cell
                    d = cell.dispatcher
                    w = d.parked
                    if w is not None and cell.open and not cell.scheduled:
                        system.ask_deadlines.add(promise, t)  # promise.start, written out
                        cell.mailbox.append(message)
                        cell.senders.append(promise)
                        # Dispatcher.schedule and kick, written out, without the callback.
                        cell.scheduled = True
                        d.ready.append(cell)
                        d.parked = None
                        return fut._get_running(w)  # noqa: SLF001  the ask's own future
                promise.start(t)
                self.tell(message, promise)
                # Future.get() without its timeout argument's checks (two calls less):
                # the ask's own timer ends the wait.
                return fut._get_in_hub_thread()  # noqa: SLF001  the ask's own future
            promise.start(t)
            self.tell(message, promise)
            return fut
        system.run_in_hub_async(self._ask_from_thread, promise, message, t)
        if not block:
            return fut
        # Timed here, in the calling thread: while unpatched code blocks the hub, the
        # hub's timer cannot fire, and this thread must not wait for it (docs/howto/threads.md).
        try:
            return fut.get(t)
        except TimeoutError:
            if fut.done():
                # The actor's own TimeoutError (socket.timeout is one), or a reply that
                # came just now: the future's outcome, not ours.
                return fut.get(0)
            # Completing the promise is the hub's job; a reply that arrives after this
            # goes to dead letters, as for any late reply.
            system.run_in_hub_async(promise.abandon, t)
            raise promise.timeout_error(t) from None

    def _ask_from_thread(self, promise: PromiseRef, message: Any, timeout: float) -> None:
        promise.start(timeout)
        self.tell(message, promise)

    def _send_system(self, message: SystemMessage) -> None:
        """Deliver a system message (ignored by refs that are not actors)."""

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, ActorRef):
            return NotImplemented
        return self._uid == other._uid and self.path == other.path

    def __hash__(self) -> int:
        # Equal refs have equal uids: hashing the uid alone is consistent with __eq__
        # and does not make the (lazily built) path of every ref put in a dict.
        return hash(self._uid)

    def __lt__(self, other: ActorRef) -> bool:
        return (str(self.path), self._uid) < (str(other.path), other._uid)

    def __repr__(self) -> str:
        return f"ActorRef({self.path}#{self._uid})"

    def __str__(self) -> str:
        return str(self.path)


class LocalActorRef(ActorRef):
    """The ref of an actor living in this process."""

    __slots__ = ("_cell",)

    def __init__(self, cell: CellSPI, path: ActorPath | None) -> None:
        # path None: made on first use (see the property).
        ActorRef.__init__(self, cell.system, path, cell.uid)
        self._cell = cell

    @property
    def path(self) -> ActorPath:
        p = self._path
        if p is None:
            # Most actors' paths are never looked at; one object less per actor.
            p = self._path = _build_path(self._cell)
        return p

    def tell(self, message: Any, sender: ActorRef | _Implicit | None = IMPLICIT) -> None:
        if message is None:
            raise InvalidMessageException(_NONE_ERROR)
        cell = self._cell
        d = cell.dispatcher
        # Each branch decides whether this runs in the cell's thread, with as few
        # stores and tests as it takes (this is the hottest method of the runtime).
        if sender is IMPLICIT:
            g = getcurrent()
            if g is d.home:
                # The plain greenlet that told last in the hub's thread (see
                # Dispatcher.home): no sender, and no question about its thread.
                snd: Any = None
            elif type(g) is Worker:
                # A worker's cell is always set while code runs in it. A worker of the
                # same dispatcher runs in the cell's thread: no need to ask for the
                # thread's identity (that call costs as much as the rest of the test).
                snd = g.cell.ref  # type: ignore[union-attr]
                if g.dispatcher is not d and cell.tid != get_ident():
                    cell.enqueue_foreign(message, snd)
                    return
            else:
                snd = None
                if cell.tid != get_ident():
                    cell.enqueue_foreign(message, None)
                    return
                d.home = g
        else:
            snd = sender
            if snd is not None and not isinstance(snd, ActorRef):
                raise bad_sender(snd)
            if cell.tid != get_ident():
                cell.enqueue_foreign(message, snd)
                return
        if cell.open:
            cell.mailbox.append(message)
            cell.senders.append(snd)
            if not cell.scheduled:
                # Dispatcher.schedule, inlined.
                cell.scheduled = True
                d.ready.append(cell)
                if not d.armed:
                    d.kick()
        else:
            cell.enqueue_closed(message, snd)

    def _send_system(self, message: SystemMessage) -> None:
        self._cell.send_system(message)


def _build_path(cell: CellSPI) -> ActorPath:
    """The path of ``cell``, made along with its ancestors' that were not made yet.

    A loop, not a recursion through the parents' ``path``: a tree thousands of levels
    deep must not hit the interpreter's recursion limit.
    """
    pending = [cell]
    up = cell.parent_cell
    while up.ref._path is None:  # noqa: SLF001  LocalActorRef's lazily built path, set here
        pending.append(up)
        up = up.parent_cell
    path: ActorPath = up.ref._path  # noqa: SLF001  LocalActorRef's lazily built path, set here
    for c in reversed(pending):
        path = c.ref._path = path.child(c.name)  # noqa: SLF001  LocalActorRef's lazily built path, set here
    return path


class DeadLettersRef(ActorRef):
    """``system.dead_letters``: whatever is told to it is published as a ``DeadLetter``."""

    __slots__ = ()

    def tell(self, message: Any, sender: ActorRef | _Implicit | None = IMPLICIT) -> None:
        if message is None:
            raise InvalidMessageException(_NONE_ERROR)
        if isinstance(sender, _Implicit):  # (narrows the type, unlike `is IMPLICIT`)
            sender = current_sender_ref()
        elif sender is not None and not isinstance(sender, ActorRef):
            raise bad_sender(sender)
        self._system.publish_dead_letter(message, sender, self)

    def __repr__(self) -> str:
        return f"DeadLetters({self._system.name})"


class EmptyLocalActorRef(ActorRef):
    """A ref to a path of this system where no actor lives (an unresolved selection, a
    ref from another node naming an actor that is gone): messages are dead letters, and
    watching it delivers ``Terminated(ref, existence_confirmed=False)`` at once."""

    __slots__ = ()

    def tell(self, message: Any, sender: ActorRef | _Implicit | None = IMPLICIT) -> None:
        if message is None:
            raise InvalidMessageException(_NONE_ERROR)
        if isinstance(sender, _Implicit):  # (narrows the type, unlike `is IMPLICIT`)
            sender = current_sender_ref()
        elif sender is not None and not isinstance(sender, ActorRef):
            raise bad_sender(sender)
        self._system.publish_dead_letter(message, sender, self)

    def _send_system(self, message: SystemMessage) -> None:
        from gactors import _sysmsg as sm

        if type(message) is sm.Watch and message.watchee == self:
            message.watcher._send_system(sm.DeathWatchNotification(self, False, False))

    def __repr__(self) -> str:
        return f"EmptyLocalActorRef({self.path}#{self._uid})"


_promise_ids = itertools.count(1)
# Looked up once, not on every reply.
_SUCCESS: Final = Status.Success
_FAILURE: Final = Status.Failure


class PromiseRef(ActorRef):
    """The temporary reply-to ref of an ask (also used to watch in graceful_stop).

    The first message told to it completes the future; later ones go to dead letters.
    Internal class: its unprefixed members (``start``, ``complete``, ``complete_exc``,
    ``abandon``, ``expire``, ``timeout_error``, ``fail_from_target``, ``on_system``,
    ``queue``, ``deadline``) are the API that ``ActorRef.ask``, ``gactors.pattern``, the
    cell, the system's ``AskDeadlines`` and the cluster's remote refs use, not an
    application's.
    """

    __slots__ = ("_future", "_message", "_target", "deadline", "on_system", "queue")

    def __init__(
        self, system: SystemSPI, future: Future[Any], target: ActorRef | None, message: Any
    ) -> None:
        # ActorRef.__init__, written out (a call less per ask). The path is only built if
        # somebody looks at it: most asks never do.
        self._system = system
        self._path = None
        self._uid = next(_promise_ids)
        self._future = future
        self._target = target
        self._message = message
        self.queue: Any = None
        """The system's deadline queue this promise waits in, once started (AskDeadlines)."""
        self.deadline = 0.0
        """The monotonic time of the timeout, once started."""
        self.on_system: Any = None
        """Called with each system message sent to this ref (graceful_stop's watch)."""

    @property
    def path(self) -> ActorPath:
        p = self._path
        if p is None:
            p = self._path = self._system.temp_path.child(f"${self._uid}")
        return p

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def start(self, timeout: float) -> None:
        """Start counting the timeout (hub thread), just before the question is sent."""
        if not self._future._state:  # noqa: SLF001  done(), without the call: pending is 0
            self._system.ask_deadlines.add(self, timeout)

    def timeout_error(self, timeout: float) -> AskTimeoutError:
        """The exception of an ask that got no reply within ``timeout`` seconds."""
        return AskTimeoutError(
            f"ask timed out on {self._target} after {timeout} s "
            f"(message of type {type(self._message).__name__})"
        )

    def expire(self, timeout: float) -> None:
        """No reply within ``timeout`` seconds (the system's AskDeadlines calls this)."""
        self.complete_exc(self.timeout_error(timeout))

    def abandon(self, timeout: float) -> None:
        """The asking thread gave up after ``timeout`` s (its own clock; hub thread)."""
        fut = self._future
        if not fut.done():
            self.expire(timeout)
        elif fut.exception(0) is None:
            # The reply won the race with the asker's timeout: nobody will read it, so
            # it is a late reply like any other.
            self._system.publish_dead_letter(fut.get(0), None, self)

    def complete(self, value: Any) -> None:
        """The reply arrived: complete the future with ``value`` (first outcome wins)."""
        # The deadline goes first: completing may switch to the asker, which may ask
        # again before this returns (its promise then queues behind this one).
        queue = self.queue
        if queue is not None:
            if queue[-1] is self and len(queue) > 1:
                # AskDeadlines.discard's common case, written out (a call less per
                # reply); the last pending ask goes through discard (it may close the
                # timer of a terminated system).
                self.queue = None
                queue.pop()
            else:
                self._system.ask_deadlines.discard(self)
        self._future._set_result(value)

    def complete_exc(self, exc: BaseException) -> None:
        """Fail the future with ``exc`` (first outcome wins)."""
        if self.queue is not None:
            self._system.ask_deadlines.discard(self)
        self._future._set_exception(exc)

    def tell(self, message: Any, sender: ActorRef | _Implicit | None = IMPLICIT) -> None:
        if message is None:
            raise InvalidMessageException(_NONE_ERROR)
        if sender is not None and sender is not IMPLICIT and not isinstance(sender, ActorRef):
            raise bad_sender(sender)
        if get_ident() != self._system._tid:
            self._system.run_in_hub_async(self.tell, message, sender)
            return
        if self._future._state:  # noqa: SLF001  done(), without the call: pending is 0
            if isinstance(sender, _Implicit):  # (narrows the type, unlike `is IMPLICIT`)
                sender = current_sender_ref()
            self._system.publish_dead_letter(message, sender, self)
            return
        cls = type(message)
        if cls is _SUCCESS:
            self.complete(message.value)
        elif cls is _FAILURE:
            self.complete_exc(message.cause)
        elif cls is Identify:
            # Like every actor ref, a promise identifies itself.
            if sender is IMPLICIT:
                sender = current_sender_ref()
            if isinstance(sender, ActorRef):
                sender.tell(ActorIdentity(message.message_id, self), self)
        else:
            self.complete(message)

    def fail_from_target(self, exc: BaseException) -> None:
        """The asked actor raised while processing the asked message."""
        self.complete_exc(exc)

    def _send_system(self, message: SystemMessage) -> None:
        handler = self.on_system
        if handler is not None:
            handler(message)

    def __repr__(self) -> str:
        return f"PromiseRef({self.path})"

"""``gactors.Future``: the result of an ask, a graceful stop or a termination.

A future is completed in the hub thread of its actor system. Waiting works from a
greenlet of that thread (the greenlet parks on the hub, other greenlets run) and from
any other OS thread (that thread blocks on a real lock; nothing else is held up).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Generic, TypeVar

from gevent.hub import Hub, Waiter, get_hub
from greenlet import getcurrent

from gactors._duration import seconds
from gactors._threads import allocate_lock, get_ident
from gactors.exceptions import IllegalStateError

__all__ = ["Future"]

T = TypeVar("T")
_log = logging.getLogger("gactors.future")

_PENDING = 0
_OK = 1
_FAILED = 2
_TIMEOUT = object()


class _Wake:
    """What :meth:`Future._get_running` waits with: like gevent's ``Waiter``, switched
    to from the hub once, and harmless if that comes after the wait ended."""

    __slots__ = ("greenlet",)

    def __init__(self, greenlet: Any) -> None:
        self.greenlet = greenlet

    def switch(self, value: Any) -> None:
        g = self.greenlet
        if g is not None:
            self.greenlet = None
            g.switch(value)


class Future(Generic[T]):
    """A value that becomes available later.

    Futures are created by gactors (``ask(block=False)``, ``gactors.pattern``,
    ``ActorSystem.terminate()``); user code waits on them or chains callbacks.
    """

    __slots__ = ("_callbacks", "_hub", "_lock_waiters", "_state", "_tid", "_value", "_waiters")

    def __init__(self, hub: Hub | None = None, tid: int | None = None) -> None:
        self._state = _PENDING
        self._value: Any = None
        self._callbacks: list[Callable[[Future[T]], Any]] | None = None
        self._waiters: list[Waiter | _Wake] | None = None
        self._lock_waiters: list[Any] | None = None
        self._hub: Hub = hub if hub is not None else get_hub()
        self._tid: int = tid if tid is not None else get_ident()

    # -- reading ---------------------------------------------------------------------------
    def done(self) -> bool:
        """True once a result or an exception is set."""
        return self._state != _PENDING

    def get(self, timeout: float | timedelta | None = None) -> T:
        """Wait for the result and return it, or raise the exception it failed with.

        Raises :class:`TimeoutError` if ``timeout`` seconds (float or timedelta) pass
        first (the future stays pending and may still complete later). ``None`` waits
        as long as it takes: the future of an ask is bounded by the ask's own timeout.
        """
        if self._state == _PENDING:
            self._wait(timeout)
        if self._state == _OK:
            value: T = self._value  # _OK: the result (else the exception)
            return value
        raise self._value

    def _get_in_hub_thread(self) -> T:
        """:meth:`get` without a timeout, for a greenlet of the hub's thread (an ask
        waiting for its own future, which its timer completes): two calls less."""
        if self._state == _PENDING:
            self._wait_greenlet(None)
            if self._state == _PENDING:
                raise TimeoutError("future not completed")  # (a spurious wake-up)
        if self._state == _OK:
            value: T = self._value  # _OK: the result (else the exception)
            return value
        raise self._value

    def _get_running(self, worker: Any) -> T:
        """:meth:`_get_in_hub_thread`, switching straight to ``worker`` (a parked
        dispatcher worker, which then runs the ask's question) instead of to the hub.
        The worker goes back to the hub when it parks; the hub wakes this greenlet as
        it would a :class:`Waiter`'s."""
        wake = _Wake(getcurrent())
        waiters = self._waiters
        if waiters is None:
            self._waiters = [wake]
        else:
            waiters.append(wake)
        try:
            worker.switch(True)
        finally:
            wake.greenlet = None  # a wake-up that comes later does nothing
        if self._state == _PENDING:
            # Woken by something else (a kill is raised instead): wait the usual way.
            waiters = self._waiters
            if waiters is not None and wake in waiters:
                waiters.remove(wake)
            return self._get_in_hub_thread()
        if self._state == _OK:
            value: T = self._value  # _OK: the result (else the exception)
            return value
        raise self._value

    def exception(self, timeout: float | timedelta | None = None) -> BaseException | None:
        """Wait like :meth:`get`; return the exception, or ``None`` on success."""
        if self._state == _PENDING:
            self._wait(timeout)
        return self._value if self._state == _FAILED else None

    def add_done_callback(self, fn: Callable[[Future[T]], Any]) -> None:
        """Call ``fn(future)`` in the hub's thread once the future is done."""
        if not callable(fn):
            raise TypeError(f"callback must be callable, not {type(fn).__name__}")
        if self._state == _PENDING:
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(fn)
        elif get_ident() == self._tid:
            self._run_callback(fn)
        else:
            self._hub.loop.run_callback_threadsafe(self._run_callback, fn)

    def __repr__(self) -> str:
        state = {_PENDING: "pending", _OK: "done", _FAILED: "failed"}[self._state]
        return f"<gactors.Future {state}>"

    # -- waiting ---------------------------------------------------------------------------
    def _wait(self, timeout: float | timedelta | None) -> None:
        t = None if timeout is None else seconds(timeout, "timeout", zero_ok=True)
        if get_ident() == self._tid:
            self._wait_greenlet(t)
        else:
            self._wait_thread(t)
        if self._state == _PENDING:
            raise TimeoutError(f"future not completed within {timeout} s")

    def _wait_greenlet(self, timeout: float | None) -> None:
        hub = self._hub
        if getcurrent() is hub:
            raise IllegalStateError("cannot wait for a future inside the gevent hub")
        waiter = Waiter(hub)
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        timer = None
        if timeout is not None:
            loop = hub.loop
            timer = loop.timer(timeout)
            # Count from now, not from the loop's clock, which lags after the hub was
            # blocked (the wait would end early).
            loop.update_now()
            timer.start(waiter.switch, _TIMEOUT)
        try:
            waiter.get()
        finally:
            if timer is not None:
                timer.close()
            waiters = self._waiters
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)

    def _wait_thread(self, timeout: float | None) -> None:
        lock = allocate_lock()
        lock.acquire()
        if self._lock_waiters is None:
            self._lock_waiters = []
        self._lock_waiters.append(lock)
        # Completion sets the state before it releases the waiters: re-checking after
        # registering closes the window where we would wait for a release already done.
        if self._state == _PENDING:
            lock.acquire(True, -1 if timeout is None else timeout)
        waiters = self._lock_waiters
        if waiters is not None and lock in waiters:
            waiters.remove(lock)

    # -- completing (hub thread) -------------------------------------------------------------
    def _set_result(self, value: T) -> bool:
        if self._state != _PENDING:
            return False
        self._value = value
        self._state = _OK
        self._wake()
        return True

    def _set_exception(self, exc: BaseException) -> bool:
        if self._state != _PENDING:
            return False
        self._value = exc
        self._state = _FAILED
        self._wake()
        return True

    def _wake(self) -> None:
        waiters = self._waiters
        if waiters:
            self._waiters = None
            hub = self._hub
            if getcurrent() is hub:
                for w in waiters:
                    w.switch(None)
            else:
                run_callback = hub.loop.run_callback
                for w in waiters:
                    run_callback(w.switch, None)
        locks = self._lock_waiters
        if locks:
            self._lock_waiters = None
            for lock in locks:
                lock.release()
        callbacks = self._callbacks
        if callbacks:
            self._callbacks = None
            for fn in callbacks:
                self._run_callback(fn)

    def _run_callback(self, fn: Callable[[Future[T]], Any]) -> None:
        try:
            fn(self)
        except Exception:
            _log.exception("exception in future callback %r", fn)

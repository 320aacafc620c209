"""Patterns on top of ``tell``: ask, pipe_to, graceful_stop."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from gactors import _sysmsg as sm
from gactors._duration import seconds
from gactors._future import Future
from gactors._messages import PoisonPill, Status
from gactors._ref import ActorRef, PromiseRef
from gactors._threads import get_ident
from gactors.exceptions import AskTimeoutError

__all__ = ["ask", "graceful_stop", "pipe_to"]


def ask(ref: ActorRef, message: Any, timeout: float | timedelta | None = None) -> Future[Any]:
    """Send ``message`` to ``ref``; return a :class:`~gactors.Future` of the reply.

    ``timeout=None`` uses the system's ``default_ask_timeout``, as ``ActorRef.ask`` does.
    """
    if not isinstance(ref, ActorRef):
        raise TypeError(f"ask() needs an ActorRef, not {type(ref).__name__}")
    return ref.ask(message, timeout=timeout, block=False)


def pipe_to(future: Future[Any], ref: ActorRef, sender: ActorRef | None = None) -> Future[Any]:
    """When ``future`` completes, tell its value to ``ref`` (a failure as
    ``Status.Failure(exc)``). Returns ``future``."""
    if not isinstance(future, Future):
        raise TypeError(f"pipe_to() needs a gactors.Future, not {type(future).__name__}")
    if not isinstance(ref, ActorRef):
        raise TypeError(f"pipe_to() needs an ActorRef target, not {type(ref).__name__}")

    def deliver(f: Future[Any]) -> None:
        exc = f.exception(0)
        ref.tell(Status.Failure(exc) if exc is not None else f.get(0), sender)

    future.add_done_callback(deliver)
    return future


def graceful_stop(
    ref: ActorRef, timeout: float | timedelta, stop_message: Any = PoisonPill
) -> Future[bool]:
    """Tell ``ref`` ``stop_message`` and return a Future that resolves to True once it
    terminated, or fails with :class:`AskTimeoutError` if it did not within ``timeout``
    seconds (float or timedelta)."""
    if not isinstance(ref, ActorRef):
        raise TypeError(f"graceful_stop() needs an ActorRef, not {type(ref).__name__}")
    timeout = seconds(timeout, "graceful_stop timeout")
    system = ref._system
    fut: Future[bool] = Future(system._hub, system._tid)
    watcher = PromiseRef(system, fut, ref, stop_message)

    def on_system(msg: sm.SystemMessage) -> None:
        if type(msg) is sm.DeathWatchNotification and msg.actor == ref:
            watcher.complete(True)

    watcher.on_system = on_system

    def start() -> None:
        loop = system._hub.loop
        # A timer of its own, not the system's ask deadlines: its error says what did
        # not happen in time (a stop, not a reply). Closed once the future is done.
        timer = loop.timer(timeout)
        # count from now, even after the hub was blocked (docs/howto/threads.md)
        loop.update_now()
        timer.start(
            watcher.complete_exc,
            AskTimeoutError(f"{ref.path} did not stop within {timeout} s"),
        )
        fut.add_done_callback(lambda _: timer.close())
        ref._send_system(sm.Watch(ref, watcher))
        ref.tell(stop_message, None)

    if get_ident() == system._tid:
        start()
    else:
        system.run_in_hub_async(start)
    return fut

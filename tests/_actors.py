"""The suite's shared test actors and event subscriber (``from _actors import Echo``).

``tests/`` is on ``sys.path`` while the suite runs (pytest's default ``prepend`` import
mode puts the first directory without an ``__init__.py`` there, and ``tests/`` has
none), so every test module, in a sub-package too, imports this as ``_actors``.

Only actors several modules use as they are belong here; an actor with behaviour
specific to one module's tests stays in that module.
"""

from __future__ import annotations

from typing import Any

import gevent
from gevent.queue import Queue

from gactors import Actor, AskTimeoutError, IllegalStateError, pattern

__all__ = ["Collector", "Echo", "Recorder", "ReentrantEcho"]

WAIT = 5.0
"""Seconds ``ReentrantEcho`` waits for the replies it asks for itself."""


class Echo(Actor):
    """Replies every message to its sender, unchanged."""

    def receive(self, message: Any) -> None:
        self.sender.tell(message)


class Recorder(Actor):
    """Puts every message it gets into a gevent queue given to its constructor."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def receive(self, message: Any) -> None:
        self.queue.put(message)


class ReentrantEcho(Echo):
    """An ``Echo`` whose special requests exercise re-entrancy and late replies:

    ``"ask myself"`` (blocking: refused, replies ``("refused", text)``), ``"ask myself
    later"`` (non-blocking: the reply is piped to the sender), ``"await termination"``
    (refused inside an actor), ``("ask", ref, message, timeout)`` (asks another actor
    and replies ``("answer", reply)`` or ``("timed out", text)``), ``"slow"`` (replies
    after 0.3 s), ``"twice"`` (replies twice). Anything else is echoed.
    """

    def receive(self, message: Any) -> None:
        if message == "ask myself":
            try:
                self.ref.ask("hello", timeout=1.0)
            except IllegalStateError as e:
                self.sender.tell(("refused", str(e)))
        elif message == "ask myself later":
            # Not blocking: the reply arrives once this message is done.
            fut = self.ref.ask("hello", timeout=WAIT, block=False)
            pattern.pipe_to(fut, self.sender)
        elif message == "await termination":
            try:
                self.context.system.await_termination(1.0)
            except IllegalStateError as e:
                self.sender.tell(("refused", str(e)))
        elif isinstance(message, tuple) and message[0] == "ask":
            # Ask another actor and pass the outcome on.
            try:
                self.sender.tell(("answer", message[1].ask(message[2], timeout=message[3])))
            except AskTimeoutError as e:
                self.sender.tell(("timed out", str(e)))
        elif message == "slow":
            gevent.sleep(0.3)
            self.sender.tell("slow reply")
        elif message == "twice":
            self.sender.tell("first")
            self.sender.tell("second")
        else:
            super().receive(message)


class Collector:
    """An event-stream subscriber (a plain callable): ``events`` lists everything it
    got; ``get()`` waits for the next one, ``drain()`` takes the ones not yet got."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.queue: Queue = Queue()

    def __call__(self, event: Any) -> None:
        self.events.append(event)
        self.queue.put(event)

    def get(self, timeout: float = 3.0) -> Any:
        return self.queue.get(timeout=timeout)

    def drain(self) -> list[Any]:
        out = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out

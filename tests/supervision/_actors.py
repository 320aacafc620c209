"""Actors shared by several modules of the supervision suite."""

from __future__ import annotations

from typing import Any

from gactors import Actor, ActorRef, Props, SupervisorStrategy


class Boom(Exception):
    """The failure the tests inject."""


class Fail:
    """Tell an actor to raise ``exc`` (or a fresh ``Boom``) while processing this."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException | None = None) -> None:
        self.exc = exc if exc is not None else Boom("expected failure")

    def __repr__(self) -> str:
        return f"Fail({self.exc!r})"


class Supervisor(Actor):
    """Creates children on request with the strategy it was given (Akka's test Supervisor).

    ``Props`` → replies with the new child; ``(Props, name)`` → the same, named.
    """

    def __init__(self, strategy: SupervisorStrategy, keep_children: bool = False) -> None:
        self._strategy = strategy
        self._keep_children = keep_children

    @property  # type: ignore[override]
    def supervisor_strategy(self) -> SupervisorStrategy:
        return self._strategy

    def receive(self, message: Any) -> None:
        if isinstance(message, Props):
            self.sender.tell(self.context.actor_of(message))
        elif isinstance(message, tuple) and len(message) == 2 and isinstance(message[0], Props):
            self.sender.tell(self.context.actor_of(message[0], message[1]))
        elif isinstance(message, Fail):
            raise message.exc
        else:
            self.unhandled(message)

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        if not self._keep_children:
            super().pre_restart(reason, message)


class Worker(Actor):
    """A counter that reports its lifecycle to ``report`` as ``(tag, event, generation)``.

    ``"ping"`` → ``"pong"``; ``"inc"``; ``"get"`` → the count; ``Fail`` → raises.
    """

    generations: dict[str, int] = {}

    def __init__(self, report: ActorRef | None = None, tag: str = "w", start: int = 0) -> None:
        self.report = report
        self.tag = tag
        self.count = start
        self.gen = Worker.generations.get(tag, 0)
        Worker.generations[tag] = self.gen + 1

    def _tell(self, event: str, *extra: Any) -> None:
        if self.report is not None:
            self.report.tell((self.tag, event, self.gen, *extra))

    def pre_start(self) -> None:
        self._tell("pre_start")

    def post_stop(self) -> None:
        self._tell("post_stop")

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        self._tell("pre_restart", reason, message)
        super().pre_restart(reason, message)

    def post_restart(self, reason: BaseException) -> None:
        self._tell("post_restart", reason)
        # deliberately not calling pre_start: reports stay unambiguous

    def receive(self, message: Any) -> None:
        if message == "ping":
            self.sender.tell("pong")
        elif message == "inc":
            self.count += 1
        elif message == "get":
            self.sender.tell(self.count)
        elif message == "gen":
            self.sender.tell(self.gen)
        elif isinstance(message, Fail):
            raise message.exc
        else:
            self.unhandled(message)


def worker_props(report: ActorRef | None = None, tag: str = "w", start: int = 0) -> Props:
    return Props(Worker, report, tag, start)

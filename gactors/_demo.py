"""The demo behind ``python -m gactors demo``: a small supervised tree at work while
failures are injected, with the live tree printed after each step."""

from __future__ import annotations

import logging
from typing import Any

import gevent

from gactors import (
    Actor,
    ActorSystem,
    Directive,
    OneForOneStrategy,
    Props,
    Terminated,
)


class Worker(Actor):
    """Counts the jobs it did; fails on request."""

    def __init__(self) -> None:
        self.done = 0

    def receive(self, message: Any) -> None:
        if message == "fail-transient":
            raise TimeoutError("the backend was slow")
        if message == "fail-bug":
            raise ValueError("a bug in the worker")
        if message == "fail-fatal":
            raise PermissionError("credentials revoked")
        if message == "count":
            self.sender.tell(self.done)
            return
        gevent.sleep(0.01)  # monkey-patched I/O stand-in: other actors keep running
        self.done += 1


def _decide(exc: BaseException) -> Directive:
    if isinstance(exc, TimeoutError):
        return Directive.RESUME  # transient: keep the state, drop the message
    if isinstance(exc, PermissionError):
        return Directive.STOP  # no point in retrying
    return Directive.RESTART  # a bug: start again from a clean state


class Supervisor(Actor):
    supervisor_strategy = OneForOneStrategy(_decide, max_retries=3, within=10.0)

    def __init__(self, workers: int) -> None:
        for i in range(workers):
            self.context.watch(self.context.actor_of(Props(Worker), f"worker-{i}"))

    def receive(self, message: Any) -> None:
        if isinstance(message, Terminated):
            print(f"   supervisor saw {message.actor.path.name} terminate")
        elif isinstance(message, tuple):
            name, job = message
            child = self.context.child(name)
            if child is not None:
                child.tell(job)
        else:
            self.unhandled(message)


def run(fast: bool = False) -> int:
    pause = 0.05 if fast else 1.0
    logging.basicConfig(level=logging.CRITICAL)  # the tour narrates; keep logs quiet
    with ActorSystem("demo") as system:
        sup = system.actor_of(Props(Supervisor, 3), "supervisor")

        def step(title: str) -> None:
            gevent.sleep(pause)
            print(f"\n== {title}\n{system.tree()}")

        for i in range(30):
            sup.tell((f"worker-{i % 3}", f"job-{i}"))
        step("30 jobs spread over three workers")
        sup.tell(("worker-0", "fail-transient"))
        step("worker-0 timed out: RESUME keeps its count, restarts=0")
        sup.tell(("worker-1", "fail-bug"))
        step("worker-1 hit a bug: RESTART gives it a fresh instance, restarts=1")
        sup.tell(("worker-2", "fail-fatal"))
        step("worker-2 lost its credentials: STOP removes it for good")
        counts = {
            name: ref.ask("count", timeout=2.0)
            for name in ("worker-0", "worker-1")
            if (ref := system.lookup(f"/user/supervisor/{name}")) is not None
        }
        print(f"\njobs counted by the survivors: {counts}")
        print("worker-0 kept its 10 jobs (resumed); worker-1 starts from 0 (restarted).")
    print(f"\nsystem terminated: {system.is_terminated}")
    return 0

"""Thespian peer for the cluster section: ``multiprocTCPBase``, an actor per process.

Run as ``python worker_thespian.py WORKLOAD N [--per K]`` inside the ``thespian``
virtual environment; prints one JSON line. Thespian's multiprocess bases do their own
process and socket management, so this worker does not monkey-patch (under
``patch_all()`` its admin process does not start); every actor below runs in a process
of its own and talks to the others over TCP, which is what "remote" means here.

The workloads mirror the gactors ones in ``remote_gactors.py``:

* ``remote_tell``: a Sender actor tells N messages to a Sink actor (another process)
  under a credit window (the sink acknowledges every CHUNK messages; the sender keeps
  at most WINDOW chunks unacknowledged), tuned for Thespian below.
* ``remote_ask``: N sequential ``ActorSystem.ask`` calls to an Echo actor.
* ``remote_ask_100``: an Asker actor keeps PER asks outstanding to an Echo actor (the
  Thespian ``ActorSystem`` handle is not for concurrent use from many threads, so the
  concurrency lives in an actor): N answers in all.

Each run uses its own admin port and shuts its actor system down before exiting.
"""

from __future__ import annotations

import argparse
import socket
import time
from typing import Any

from _worker_common import Result, latency_result, rate_result, report, run_worker
from thespian.actors import Actor, ActorSystem

BASE = "multiprocTCPBase"
# Thespian's best of the credit windows tried on the 2-core machine (messages per chunk x
# chunks outstanding: 1000x20 263/s, 10x10 499/s, 1000x1 407/s, 50x4 657/s, 100x2 841/s,
# 100x1 1,017/s): larger windows fill its transmit queues and it slows down.
CHUNK = 100
WINDOW = 1
ASK_TIMEOUT = 60.0


class Sink(Actor):  # type: ignore[misc]
    """Counts messages, acknowledges every CHUNK to their sender, reports the last."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count = 0

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, int):
            self.count += 1
            if self.count % CHUNK == 0:
                self.send(sender, ("ack", self.count))


class Sender(Actor):  # type: ignore[misc]
    """Sends N messages to a sink in chunks, keeping at most WINDOW chunks unacknowledged."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sink: Any = None
        self.n = self.sent = 0
        self.requester: Any = None

    def _chunk(self) -> None:
        k = min(CHUNK, self.n - self.sent)
        for i in range(k):
            self.send(self.sink, self.sent + i)
        self.sent += k

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, tuple) and message[0] == "go":
            _, self.sink, self.n = message
            self.requester = sender
            for _ in range(WINDOW):
                if self.sent < self.n:
                    self._chunk()
        elif isinstance(message, tuple) and message[0] == "ack":
            if message[1] >= self.n:
                self.send(self.requester, "done")
            elif self.sent < self.n:
                self._chunk()


class Echo(Actor):  # type: ignore[misc]
    """Answers every message with itself."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if not isinstance(message, str | int | tuple):
            return  # Thespian's own system messages (ChildActorExited, ...)
        self.send(sender, message)


class Asker(Actor):  # type: ignore[misc]
    """Keeps PER requests outstanding to an echo until N answers came back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.left = self.to_send = 0
        self.echo: Any = None
        self.requester: Any = None

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, tuple) and message[0] == "go":
            _, self.echo, n, per = message
            self.requester = sender
            self.left = self.to_send = n
            for _ in range(min(per, n)):
                self.to_send -= 1
                self.send(self.echo, self.to_send)
        elif isinstance(message, int):
            self.left -= 1
            if self.left == 0:
                self.send(self.requester, "done")
            elif self.to_send > 0:
                self.to_send -= 1
                self.send(self.echo, self.to_send)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _system() -> Any:
    return ActorSystem(BASE, {"Admin Port": _free_port()})


def remote_tell(args: argparse.Namespace) -> Result:
    """Actor-to-actor one-way tells between two processes, credit-windowed."""
    asys = _system()
    try:
        sink, sender = asys.createActor(Sink), asys.createActor(Sender)
        t0 = time.perf_counter()
        answer = asys.ask(sender, ("go", sink, args.n), ASK_TIMEOUT * 10)
        seconds = time.perf_counter() - t0
        if answer != "done":
            raise RuntimeError(f"no completion: {answer!r}")
        return report(rate_result(args.n, seconds))
    finally:
        asys.shutdown()


def remote_ask(args: argparse.Namespace) -> Result:
    """N sequential asks from the ActorSystem handle to an echo actor (its own process)."""
    asys = _system()
    try:
        echo = asys.createActor(Echo)
        asys.ask(echo, -1, ASK_TIMEOUT)  # the echo's process is up
        samples = []
        t_all = time.perf_counter()
        for i in range(args.n):
            t0 = time.perf_counter()
            if asys.ask(echo, i, ASK_TIMEOUT) != i:
                raise RuntimeError(f"ask {i}: wrong or no answer")
            samples.append(time.perf_counter() - t0)
        total = time.perf_counter() - t_all
        result = latency_result(samples)
        result["metrics"]["rate"] = args.n / total
        return report(result)
    finally:
        asys.shutdown()


def remote_ask_100(args: argparse.Namespace) -> Result:
    """An asker actor keeps PER requests outstanding to an echo actor: N answers."""
    asys = _system()
    try:
        echo, asker = asys.createActor(Echo), asys.createActor(Asker)
        asys.ask(echo, -1, ASK_TIMEOUT)
        t0 = time.perf_counter()
        answer = asys.ask(asker, ("go", echo, args.n, args.per or 100), ASK_TIMEOUT * 10)
        seconds = time.perf_counter() - t0
        if answer != "done":
            raise RuntimeError(f"no completion: {answer!r}")
        return report(rate_result(args.n, seconds))
    finally:
        asys.shutdown()


WORKLOADS = {
    "remote_tell": remote_tell,
    "remote_ask": remote_ask,
    "remote_ask_100": remote_ask_100,
}


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {"thespian": version("thespian"), "base": BASE}


if __name__ == "__main__":
    run_worker("thespian", WORKLOADS, _versions)

"""Ctrl-C inside ``with ActorSystem(...)``: the first interrupt waits for the actors
to stop (up to ``shutdown_timeout``) and says so; a second one stops waiting and
says what is left behind. Run in a subprocess, with real SIGINTs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")

SCRIPT = r"""
import signal
# Ctrl-C as in a terminal, however pytest was started: a process started with SIGINT
# ignored (a CI runner started in the background by a shell without job control, nohup)
# passes SIG_IGN on through fork and exec, and Python then installs no KeyboardInterrupt
# handler (a blocked SIGINT is inherited the same way).
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
from gevent import monkey
monkey.patch_all()
import logging, sys, gevent
from gactors import Actor, ActorSystem, Props

logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")

class Busy(Actor):
    def receive(self, message):
        self.sender.tell("busy")
        gevent.sleep(1000)  # e.g. a request to a server that never answers

try:
    with ActorSystem("interrupted", {"shutdown_timeout": 60}) as system:
        busy = system.actor_of(Props(Busy), "busy")
        assert busy.ask("work", timeout=10) == "busy"
        gevent.sleep(0.2)  # the actor is parked in its sleep: the process is idle
        print("BUSY", flush=True)
        gevent.sleep(1000)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
"""


def test_a_second_interrupt_abandons_the_wait_for_a_busy_actor(tmp_path: Path) -> None:
    script = tmp_path / "interrupt.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    stderr = proc.stderr
    err_lines: list[str] = []
    waiting = threading.Event()

    def read_stderr() -> None:
        for line in stderr:
            err_lines.append(line)
            if "interrupt again to stop waiting" in line:
                waiting.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert proc.stdout.readline().strip() == "BUSY"
        # Sent while every greenlet waits (a signal landing in the actor's own code
        # would be a fatal failure of that actor instead, another story).
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        # The first interrupt waits for the busy actor (up to shutdown_timeout), and
        # says so; a child that never got the signal would still be running as well.
        assert waiting.wait(20), f"no wait announced after the first SIGINT:\n{''.join(err_lines)}"
        time.sleep(1.0)  # the announcement is written just before the wait begins
        assert proc.poll() is None
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        elapsed = time.monotonic() - started
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
    err = "".join(err_lines)
    assert "INTERRUPTED" in out, (out, err)
    assert elapsed < 20, f"the second interrupt took {elapsed:.1f} s to end the wait"
    assert "interrupted: waiting up to 60" in err and "interrupt again to stop waiting" in err
    assert "no longer waiting for actor system 'interrupted' to terminate" in err, err
    assert "busy  [" in err, err  # what was left behind

"""Ctrl-C inside ``with ActorSystem(...)``: the first interrupt waits for the actors
to stop (up to ``shutdown_timeout``) and says so; a second one stops waiting and
says what is left behind. Run in a subprocess, with real SIGINTs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")

SCRIPT = r"""
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
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "BUSY"
        # Sent while every greenlet waits (a signal landing in the actor's own code
        # would be a fatal failure of that actor instead, another story).
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        # The first interrupt waits for the busy actor (up to shutdown_timeout).
        assert proc.poll() is None
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "INTERRUPTED" in out, (out, err)
    assert elapsed < 20, f"the second interrupt took {elapsed:.1f} s to end the wait"
    assert "interrupted: waiting up to 60" in err and "interrupt again to stop waiting" in err
    assert "no longer waiting for actor system 'interrupted' to terminate" in err, err
    assert "busy  [" in err, err  # what was left behind

"""Project-wide test configuration.

* The whole run is monkey-patched first thing, like the applications gactors serves.
* The project's own suite uses the gactors pytest plugin (fixtures ``actor_system`` and
  ``probe``). Installed packages register it through the ``pytest11`` entry point; an
  older editable install may not have that entry point yet, so it is loaded here in
  that case only (loading it twice would make pytest refuse the second registration).
* The fixtures every area shares: ``system`` (a fresh ``ActorSystem`` named after the
  test, terminated after it), ``dead_letters`` (a ``_actors.Collector`` of its dead
  letters) and ``echo`` (a ``_actors.ReentrantEcho`` named ``echo``). The shared actors
  are in ``tests/_actors.py``, the bad-input values in ``tests/_inputs.py``.
* A hard per-test watchdog on a real OS thread. pytest-timeout cannot be relied on
  here: under ``patch_all()`` its timer thread is a greenlet (silent when the hub is
  blocked), and its SIGALRM exception may be raised inside an actor, where it is
  supervised like any other failure. The watchdog dumps every thread's and greenlet's
  stack and ends the run, so a hang always becomes a visible failure.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402  (the patch must come before anything imports what it patches)
import faulthandler
import gc
import os
import sys
import traceback
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

import greenlet
import pytest
from _actors import Collector, ReentrantEcho

from gactors import ActorRef, ActorSystem, DeadLetter, Props

_PLUGIN = "gactors.testkit._pytest_plugin"

if not any(ep.value == _PLUGIN for ep in entry_points(group="pytest11")):
    pytest_plugins = [_PLUGIN]

_start_new_thread = monkey.get_original("_thread", "start_new_thread")
_allocate_lock = monkey.get_original("_thread", "allocate_lock")
HARD_TIMEOUT = float(os.environ.get("GACTORS_TEST_HARD_TIMEOUT", "120"))


def _dump_and_exit(nodeid: str) -> None:
    sys.stderr.write(f"\n!!! {nodeid} ran for more than {HARD_TIMEOUT} s: stacks follow\n")
    faulthandler.dump_traceback(all_threads=True)
    for obj in gc.get_objects():
        if isinstance(obj, greenlet.greenlet) and obj.gr_frame is not None:
            sys.stderr.write(f"--- greenlet {obj!r}\n")
            traceback.print_stack(obj.gr_frame, file=sys.stderr)
    sys.stderr.flush()
    os._exit(3)


@pytest.fixture
def system(request: pytest.FixtureRequest) -> Iterator[ActorSystem]:
    """A fresh system per test; the test fails if it does not terminate in time."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40].strip("-") or "t"
    s = ActorSystem(name)
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10.0), f"system did not terminate:\n{s.tree()}"


@pytest.fixture
def dead_letters(system: ActorSystem) -> Collector:
    """Every ``DeadLetter`` of ``system``, from the start of the test."""
    c = Collector()
    system.event_stream.subscribe(c, DeadLetter)
    return c


@pytest.fixture
def echo(system: ActorSystem) -> ActorRef:
    return system.actor_of(Props(ReentrantEcho), "echo")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    done = _allocate_lock()
    done.acquire()
    pid = os.getpid()

    def watchdog() -> None:
        if not done.acquire(True, HARD_TIMEOUT) and os.getpid() == pid:
            _dump_and_exit(item.nodeid)

    _start_new_thread(watchdog, ())
    try:
        yield
    finally:
        done.release()

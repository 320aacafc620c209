"""ActorSystem: guardians, creation, lookup, tree, termination (SPEC section 5)."""

from __future__ import annotations

from typing import Any

import gevent
import pytest
from _actors import Echo, Recorder
from gevent.queue import Queue

import gactors
from gactors import Actor, ActorPath, ActorSystem, IllegalStateError, Props


def test_three_guardians_exist(system: ActorSystem) -> None:
    root = system.lookup("/")
    user = system.lookup("/user")
    sysg = system.lookup("/system")
    assert root is not None and user is not None and sysg is not None
    assert str(user.path) == f"gactors://{system.name}/user"
    assert str(sysg.path) == f"gactors://{system.name}/system"
    assert user.path.parent == root.path


def test_actor_of_lives_under_user(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo), "echo")
    assert str(ref.path) == f"gactors://{system.name}/user/echo"
    assert ref.path.elements == ("user", "echo")
    assert ref.ask("hi", timeout=2) == "hi"


def test_lookup_accepts_path_forms(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo), "a")
    assert system.lookup("/user/a") == ref
    assert system.lookup(f"gactors://{system.name}/user/a") == ref
    assert system.lookup(ref.path) == ref
    assert system.lookup("/user/nobody") is None
    with pytest.raises(ValueError):
        system.lookup("user/a")


def test_lookup_nested_child(system: ActorSystem) -> None:
    class Parent(Actor):
        def __init__(self) -> None:
            self.kid = self.context.actor_of(Props(Echo), "kid")

        def receive(self, message: Any) -> None:
            self.sender.tell(self.kid)

    p = system.actor_of(Props(Parent), "p")
    kid = p.ask("kid?", timeout=2)
    assert system.lookup("/user/p/kid") == kid


def test_tree_shows_path_state_mailbox_and_restarts(system: ActorSystem) -> None:
    class Failing(Actor):
        def receive(self, message: Any) -> None:
            if message == "boom":
                raise ValueError("boom")
            self.sender.tell(message)

    ref = system.actor_of(Props(Failing), "failing")
    ref.tell("boom")
    assert ref.ask("ping", timeout=2) == "ping"
    text = system.tree()
    line = next(line for line in text.splitlines() if "failing" in line)
    assert "[running]" in line and "mailbox=0" in line and "restarts=1" in line
    assert text.splitlines()[0].startswith("/")
    assert any(line.strip().startswith("user") for line in text.splitlines())
    assert any(line.strip().startswith("system") for line in text.splitlines())


def test_stop_top_level_actor(system: ActorSystem) -> None:
    q: Queue = Queue()

    class Stops(Actor):
        def post_stop(self) -> None:
            q.put("stopped")

    ref = system.actor_of(Props(Stops), "s")
    system.stop(ref)
    assert q.get(timeout=2) == "stopped"
    gevent.sleep(0.01)
    assert system.lookup("/user/s") is None


def test_terminate_is_idempotent_and_stops_everything() -> None:
    q: Queue = Queue()

    class Stops(Actor):
        def post_stop(self) -> None:
            q.put(self.ref.name)

    system = ActorSystem("idem")
    system.actor_of(Props(Stops), "a")
    system.actor_of(Props(Stops), "b")
    f1 = system.terminate()
    f2 = system.terminate()
    assert f1 is f2 is system.when_terminated
    assert system.await_termination(5)
    assert system.is_terminated
    assert sorted([q.get(timeout=1), q.get(timeout=1)]) == ["a", "b"]


def test_await_termination_times_out_while_running(system: ActorSystem) -> None:
    assert system.await_termination(0.05) is False
    assert not system.is_terminated


def test_context_manager_terminates_on_exit() -> None:
    with ActorSystem("ctx") as system:
        ref = system.actor_of(Props(Echo))
        assert ref.ask(1, timeout=2) == 1
    assert system.is_terminated


def test_actor_of_after_termination_is_a_clear_error() -> None:
    system = ActorSystem("closed")
    system.terminate()
    with pytest.raises(IllegalStateError, match="terminat"):
        system.actor_of(Props(Echo))
    assert system.await_termination(5)
    with pytest.raises(IllegalStateError, match="terminated"):
        system.actor_of(Props(Echo))


def test_termination_hooks_run_after_all_actors_in_reverse_order() -> None:
    order: list[str] = []

    class Stops(Actor):
        def post_stop(self) -> None:
            order.append("actor stopped")

    system = ActorSystem("hooks")
    system.actor_of(Props(Stops))
    system.register_on_termination(lambda: order.append("first registered"))
    system.register_on_termination(lambda: order.append("second registered"))
    system.terminate()
    assert system.await_termination(5)
    assert order == ["actor stopped", "second registered", "first registered"]
    with pytest.raises(IllegalStateError):
        system.register_on_termination(lambda: None)
    with pytest.raises(TypeError):
        ActorSystem("x").register_on_termination("not callable")  # type: ignore[arg-type]


def test_failing_termination_hook_does_not_stop_others() -> None:
    ran: list[int] = []
    system = ActorSystem("hookfail")
    system.register_on_termination(lambda: ran.append(1))
    system.register_on_termination(lambda: 1 / 0)
    system.terminate()
    assert system.await_termination(5)
    assert ran == [1]


def test_invalid_system_name() -> None:
    for bad in ["", "a/b", "$x", "has space", 3]:
        with pytest.raises(ValueError, match="invalid actor system name"):
            ActorSystem(bad)  # type: ignore[arg-type]


def test_system_paths_and_dead_letters_ref(system: ActorSystem) -> None:
    assert isinstance(system.dead_letters, gactors.ActorRef)
    assert system.name in repr(system)
    assert isinstance(ActorPath.parse("/user/a", system.name), ActorPath)


def test_recorder_receives_in_send_order(system: ActorSystem) -> None:
    q: Queue = Queue()
    ref = system.actor_of(Props(Recorder, q))
    for i in range(1000):
        ref.tell(i)
    assert [q.get(timeout=2) for _ in range(1000)] == list(range(1000))


def test_import_never_patches_nor_starts_greenlets_or_threads() -> None:
    import subprocess
    import sys

    code = (
        "import gc, threading, greenlet\n"
        "from gevent import monkey\n"
        "before = threading.active_count()\n"
        "import gactors, gactors.testkit, gactors.routing, gactors.backoff, gactors.plugins\n"
        "import gactors.contrib.wsgi\n"
        "assert not monkey.is_anything_patched(), 'import patched something'\n"
        "live = [g for g in gc.get_objects() if isinstance(g, greenlet.greenlet) and not g.dead]\n"
        "assert len(live) <= 1, live  # at most the main greenlet\n"
        "assert threading.active_count() == before\n"
        "print('clean')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean"

"""ActorSystem: guardians, creation, lookup, tree, termination (SPEC section 5)."""

from __future__ import annotations

from typing import Any

import gevent
import pytest
from _actors import Collector, Echo, Recorder
from _inputs import WAIT
from gevent.queue import Queue

import gactors
from gactors import (
    Actor,
    ActorPath,
    ActorRef,
    ActorSystem,
    AskTimeoutError,
    IllegalStateError,
    InvalidActorNameException,
    Props,
)


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


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
@pytest.mark.parametrize("name", ["", "a b", "-x", "x/y", "é", None, 5, "$sys"])
def test_invalid_system_names(name: Any) -> None:
    with pytest.raises(ValueError, match="invalid actor system name"):
        ActorSystem(name)


@pytest.mark.parametrize("name", ["", "a/b", "$reserved", "a b", "ü", 5, b"bytes"], ids=repr)
def test_invalid_actor_names(system: ActorSystem, name: Any) -> None:
    with pytest.raises(InvalidActorNameException):
        system.actor_of(Props(Echo), name)


def test_actor_of_refuses_what_is_not_props_and_taken_names(system: ActorSystem) -> None:
    with pytest.raises(TypeError, match="needs a Props"):
        system.actor_of(Echo)  # type: ignore[arg-type]
    system.actor_of(Props(Echo), "taken")
    with pytest.raises(InvalidActorNameException, match="not unique"):
        system.actor_of(Props(Echo), "taken")
    with pytest.raises(ValueError, match="unknown dispatcher"):
        system.actor_of(Props(Echo).with_dispatcher("other"))


def test_await_termination_inside_an_actor_is_refused(echo: ActorRef) -> None:
    kind, text = echo.ask("await termination", timeout=WAIT)
    assert kind == "refused" and "cannot wait for the termination of its own system" in text


def test_terminate_from_inside_an_actor(system: ActorSystem) -> None:
    class Quitter(Actor):
        def receive(self, message: Any) -> None:
            self.context.system.terminate()

    system.actor_of(Props(Quitter), "q").tell("quit")
    assert system.await_termination(WAIT)


def test_invalid_system_method_arguments(system: ActorSystem) -> None:
    with pytest.raises(TypeError, match="stop"):
        system.stop("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        system.register_on_termination(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        system.lookup(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        system.lookup("not a path")
    assert system.lookup("/user/nobody") is None
    with pytest.raises(ValueError, match="belongs to system 'other-system'"):
        system.lookup("gactors://other-system/user/x")
    system.stop(system.dead_letters)  # not an actor: nothing happens


def test_everything_on_a_terminated_system(system: ActorSystem, dead_letters: Collector) -> None:
    ref = system.actor_of(Props(Echo), "e")
    probe_events = Collector()
    system.event_stream.subscribe(probe_events, str)
    fut = system.terminate()
    assert system.await_termination(WAIT)
    assert system.terminate() is fut  # idempotent
    assert system.is_terminated
    with pytest.raises(IllegalStateError, match="terminated"):
        system.actor_of(Props(Echo))
    with pytest.raises(IllegalStateError, match="terminated"):
        system.register_on_termination(lambda: None)
    with pytest.raises(IllegalStateError, match="closed"):
        system.scheduler.schedule_once(0.1, ref, "x")
    ref.tell("after the end")  # never raises: a dead letter
    assert [e.message for e in dead_letters.events] == ["after the end"]
    with pytest.raises(AskTimeoutError):
        ref.ask("anyone?", timeout=0.1)
    assert system.lookup("/user/e") is None
    system.stop(ref)  # nothing to stop
    system.event_stream.publish("still delivered")
    assert probe_events.events == ["still delivered"]
    assert "[dead]" in system.tree()


def test_actor_of_while_terminating(system: ActorSystem) -> None:
    class Slow(Actor):
        def receive(self, message: Any) -> None:
            gevent.sleep(0.2)

    system.actor_of(Props(Slow), "slow").tell("work")
    gevent.sleep(0.01)
    system.terminate()
    with pytest.raises(IllegalStateError, match="terminat"):
        system.actor_of(Props(Echo))
    assert system.await_termination(WAIT)


class Stopper(Actor):
    """Stops the ref it is sent, answering "stopped" or the error's text."""

    def receive(self, message: Any) -> None:
        try:
            self.context.stop(message)
            self.sender.tell("stopped")
        except ValueError as e:
            self.sender.tell(str(e))


def test_stop_refuses_a_ref_of_another_system(system: ActorSystem, echo: ActorRef) -> None:
    with ActorSystem("other") as other:
        foreign = other.actor_of(Props(Echo), "foreign")

        with pytest.raises(ValueError, match="belongs to actor system 'other'"):
            system.stop(foreign)
        stopper = system.actor_of(Props(Stopper))
        assert "belongs to actor system 'other'" in stopper.ask(foreign, timeout=5)
        assert foreign.ask("still here", timeout=5) == "still here"
        with pytest.raises(ValueError, match=f"belongs to actor system '{system.name}'"):
            other.stop(echo)
    assert echo.ask("alive", timeout=5) == "alive"


def test_stop_tells_two_systems_of_the_same_name_apart(system: ActorSystem) -> None:
    # Issue 29: it said "belongs to actor system 'same', not 'same'".
    with ActorSystem(system.name) as twin:
        foreign = twin.actor_of(Props(Echo), "foreign")
        with pytest.raises(ValueError) as info:
            system.stop(foreign)
        text = str(info.value)
        assert f"another system of that name, id {id(twin):#x}" in text
        assert f"(id {id(system):#x})" in text


def test_stop_refuses_the_guardians(system: ActorSystem, echo: ActorRef) -> None:
    user = system.lookup("/user")
    root = system.lookup("/")
    sysg = system.lookup("/system")
    assert user is not None and root is not None and sysg is not None
    for guardian in (user, sysg, root):
        with pytest.raises(ValueError, match="use terminate"):
            system.stop(guardian)

    stopper = system.actor_of(Props(Stopper))
    for guardian in (user, sysg, root):
        assert "use terminate()" in stopper.ask(guardian, timeout=5)
    gevent.sleep(0.05)
    assert not system.is_terminated
    assert echo.ask("alive", timeout=5) == "alive"
    # An actor may still stop itself, and system.stop a top-level actor.
    system.stop(stopper)
    system.terminate()
    assert system.await_termination(10)


class _Pair:
    """A wrapper an extension sends around two messages (a carrier)."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


def test_a_carrier_is_dead_lettered_as_the_messages_it_carries(
    system: ActorSystem, dead_letters: Collector
) -> None:
    from gactors._messages import _CARRIERS, register_carrier

    other = system.actor_of(Props(Echo))
    register_carrier(_Pair, lambda pair, sender: [(pair.a, sender), (pair.b, other)])
    try:
        stopped = system.actor_of(Props(Echo))
        system.stop(stopped)
        gevent.sleep(0.05)
        stopped.tell(_Pair("first", "second"), None)  # to a stopped actor: dead letters
        got = [dead_letters.get(), dead_letters.get()]
        assert [(d.message, d.sender, d.recipient) for d in got] == [
            ("first", None, stopped),
            ("second", other, stopped),
        ]
        assert not any(isinstance(d.message, _Pair) for d in dead_letters.events)
    finally:
        del _CARRIERS[_Pair]


class Named(Actor):
    def __init__(self, tag: str) -> None:
        self.tag = tag

    def receive(self, message: Any) -> None:
        self.sender.tell(self.tag)


def test_actor_of_a_class_says_to_wrap_it_in_props(system: ActorSystem) -> None:
    # Issue 28: a newcomer's first mistake; the error shows the fix.
    with pytest.raises(TypeError, match=r"not the class Named: pass Props\(Named\)"):
        system.actor_of(Named)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Props\(Named, arg, key=value\)"):
        system.actor_of(Named, "named")  # type: ignore[arg-type]
    parent = system.actor_of(Props(Echo), "parent")
    assert parent.ask("alive", timeout=WAIT) == "alive"
    with pytest.raises(TypeError, match="actor_of needs a Props, not str"):
        system.actor_of("Named")  # type: ignore[arg-type]
    assert system.actor_of(Props(Named, "ok")).ask("tag?", timeout=WAIT) == "ok"


_UNPATCHED = """
import sys, threading, time
{patch}
from gactors import Actor, ActorSystem, Props

class Sleeper(Actor):
    def receive(self, message):
        time.sleep(0.05)
        self.sender.tell("slept")

def two_systems():
    for name in ("first", "second"):
        system = ActorSystem(name)
        refs = [system.actor_of(Props(Sleeper)) for _ in range(2)]
        futures = [ref.ask("sleep", timeout=10, block=False) for ref in refs]
        assert [f.get(10) for f in futures] == ["slept", "slept"]
        system.terminate().get(10)

{run}
print("done", file=sys.stderr)
"""
_IN_MAIN = "two_systems()"
# docs/howto/threads.md: a system in a thread of its own, in an unpatched program on purpose
_IN_THREAD = "t = threading.Thread(target=two_systems); t.start(); t.join()"


def _stderr_of(tmp_path: Any, patch: str, run: str) -> str:
    import subprocess
    import sys

    script = tmp_path / "unpatched.py"
    script.write_text(_UNPATCHED.format(patch=patch, run=run))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.rstrip().endswith("done"), proc.stderr  # the script ran to its end
    return proc.stderr


def test_a_system_in_an_unpatched_process_warns_once(tmp_path: Any) -> None:
    # Issue 28: four actors sleeping 0.5 s took 2 s in silence.
    stderr = _stderr_of(tmp_path, patch="", run=_IN_MAIN)
    assert stderr.count("gevent has not monkey-patched this process") == 1, stderr
    assert "(time, socket, select not patched)" in stderr
    assert "from gevent import monkey; monkey.patch_all()" in stderr


@pytest.mark.parametrize(
    "patch",
    [
        "from gevent import monkey; monkey.patch_all()",
        "import gevent.monkey; gevent.monkey.patch_all(thread=False)",
    ],
    ids=["patch_all", "thread=False"],
)
def test_a_system_in_a_patched_process_does_not_warn(tmp_path: Any, patch: str) -> None:
    stderr = _stderr_of(tmp_path, patch=patch, run=_IN_MAIN)
    assert "monkey-patched" not in stderr, stderr


def test_a_system_in_a_thread_of_its_own_does_not_warn(tmp_path: Any) -> None:
    # The thread's systems say nothing; the main thread's, created after, still warn.
    run = f"{_IN_THREAD}\nprint('thread done', file=sys.stderr, flush=True)\n{_IN_MAIN}"
    stderr = _stderr_of(tmp_path, patch="", run=run)
    before, _, after = stderr.partition("thread done")
    assert "monkey-patched" not in before, stderr
    assert after.count("monkey-patched") == 1, stderr

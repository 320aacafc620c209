"""A system created before ``os.fork()`` is unusable in the child, and says so.

The forks here run a few lines in the child and report back through a pipe; the child
always leaves with ``os._exit`` so that it never runs pytest's own code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
from gevent import monkey

from gactors import Actor, ActorSystem, IllegalStateError, Props
from gactors._threads import allocate_lock, start_new_thread

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()"),
    # Other tests may have left idle helper threads (gevent's thread pool) behind.
    pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning"),
]

# gevent >= 25.8 patches os.close to close pipes only once the hub runs: the parent's
# plain blocking read below would then never see the end of the pipe.
_close: Callable[[int], None] = monkey.get_original("os", "close")

RAN: list[tuple[int, str]] = []
"""(pid, what) for every constructor and message run by Recorder, in any process."""


class Recorder(Actor):
    def __init__(self) -> None:
        RAN.append((os.getpid(), "init"))

    def receive(self, message: Any) -> None:
        RAN.append((os.getpid(), str(message)))
        self.sender.tell(("got", message))


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("forked")
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10), s.tree()


def in_child(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a forked child; return what it returned (JSON) or raise its error."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            _close(read_fd)
            try:
                payload = {"ok": fn()}
            except BaseException:
                payload = {"error": traceback.format_exc()}
                code = 1
            with os.fdopen(write_fd, "w") as out:
                json.dump(payload, out)
        finally:
            os._exit(code)
    _close(write_fd)
    with os.fdopen(read_fd) as src:
        data = src.read()  # the child closes its end when done
    _, status = os.waitpid(pid, 0)
    result = json.loads(data) if data else {"error": f"child died, status {status}"}
    if "error" in result:
        raise AssertionError(f"in the child:\n{result['error']}")
    return result["ok"]


def attempt(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except IllegalStateError as e:
        return f"IllegalStateError: {e}"
    except BaseException as e:
        return f"{type(e).__name__}: {e}"
    return "no error"


def test_system_created_before_fork_raises_in_the_child(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Recorder), "rec")
    assert ref.ask("before", timeout=5) == ("got", "before")
    parent_pid = os.getpid()

    def child() -> dict[str, str]:
        def tell_from_thread() -> str:
            box: list[str] = []
            done = allocate_lock()
            done.acquire()

            def run() -> None:
                box.append(attempt(lambda: ref.tell("from a thread")))
                done.release()

            start_new_thread(run, ())
            done.acquire(True, 10)
            return box[0] if box else "thread did not finish"

        return {
            "tell": attempt(lambda: ref.tell("hello")),
            "tell-thread": tell_from_thread(),
            "ask": attempt(lambda: ref.ask("hello", timeout=1)),
            "actor_of": attempt(lambda: system.actor_of(Props(Recorder))),
            "stop": attempt(lambda: system.stop(ref)),
            "lookup": attempt(lambda: system.lookup("/user/rec")),
            "tree": attempt(system.tree),
            "terminate": attempt(system.terminate),
            "await_termination": attempt(lambda: system.await_termination(1)),
            "is_terminated": attempt(lambda: system.is_terminated),
            "register_on_termination": attempt(lambda: system.register_on_termination(print)),
            "exit": attempt(lambda: system.__exit__(None, None, None)),
        }

    outcomes = in_child(child)
    for what, outcome in outcomes.items():
        assert outcome.startswith(
            "IllegalStateError: actor system 'forked' was created before os.fork()"
        ), (what, outcome)
        assert f"(in process {parent_pid})" in outcome, (what, outcome)
        assert "post_worker_init" in outcome
    # The parent's system is untouched.
    assert ref.ask("after", timeout=5) == ("got", "after")
    assert system.lookup("/user/rec") == ref


def test_parent_work_does_not_run_in_the_child(system: ActorSystem) -> None:
    # Created and told, but the hub has not run yet: everything is still queued when
    # the process forks.
    ref = system.actor_of(Props(Recorder), "pending")
    ref.tell("queued-1")
    ref.tell("queued-2")

    def child() -> list[Any]:
        gevent.reinit()  # an unpatched os.fork(): the child's loop needs this
        gevent.sleep(0.2)  # let the child's hub run whatever it inherited
        return [what for pid, what in RAN if pid == os.getpid()]

    assert in_child(child) == []
    assert ref.ask("after", timeout=5) == ("got", "after")
    mine = [what for pid, what in RAN if pid == os.getpid() and what != "before"]
    assert mine[-4:] == ["init", "queued-1", "queued-2", "after"]


def test_a_new_system_in_the_child_works(system: ActorSystem) -> None:
    system.actor_of(Props(Recorder), "parent-side")

    def child() -> list[Any]:
        gevent.reinit()
        with ActorSystem("child") as fresh:
            ref = fresh.actor_of(Props(Recorder), "rec")
            reply = ref.ask("in-child", timeout=5)
        return [list(reply), fresh.is_terminated]

    assert in_child(child) == [["got", "in-child"], True]


SCRIPT = r"""
from gevent import monkey
monkey.patch_all()
import os, sys
from gactors import Actor, ActorSystem, IllegalStateError, Props

class Echo(Actor):
    def receive(self, message):
        self.sender.tell(message)

system = ActorSystem("app")
echo = system.actor_of(Props(Echo), "echo")
assert echo.ask("parent", timeout=5) == "parent"
pid = os.fork()  # gevent's fork: the child's hub is re-initialised for us
if pid == 0:
    code = 0
    try:
        try:
            echo.ask("child", timeout=2)
            print("CHILD no error", flush=True)
            code = 1
        except IllegalStateError as e:
            print("CHILD", e, flush=True)
        with ActorSystem("fresh") as fresh:
            ref = fresh.actor_of(Props(Echo), "echo")
            print("CHILD fresh", ref.ask("works", timeout=5), flush=True)
    except BaseException as e:
        print("CHILD failed", repr(e), flush=True)
        code = 2
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
print("PARENT child exit", os.waitstatus_to_exitcode(status), echo.ask("still", timeout=5))
system.terminate()
print("PARENT terminated", system.await_termination(5))
"""


def test_fork_under_patch_all_in_a_fresh_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "fork_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    out = proc.stdout
    assert proc.returncode == 0, (out, proc.stderr)
    assert "CHILD actor system 'app' was created before os.fork()" in out, (out, proc.stderr)
    assert "CHILD fresh works" in out, (out, proc.stderr)
    assert "PARENT child exit 0 still" in out, (out, proc.stderr)
    assert "PARENT terminated True" in out, (out, proc.stderr)


IN_FLIGHT_SCRIPT = r"""
from gevent import monkey
monkey.patch_all()
import json, multiprocessing, os, socket, sys
import gevent
from gevent.server import StreamServer
from gactors import Actor, ActorSystem, Props

method, log = sys.argv[1], sys.argv[2]

def slow_echo(sock, addr):
    sock.recv(16)
    gevent.sleep(0.2)
    sock.sendall(b"ok")

server = StreamServer(("127.0.0.1", 0), slow_echo)
server.start()

def record(what):
    with open(log, "a") as out:
        out.write(json.dumps([os.getpid(), what]) + "\n")

class Jobber(Actor):
    # Each job is a side effect in two halves around monkey-patched I/O (a socket
    # round trip and a sleep), like a web call followed by a database write.
    def receive(self, message):
        record("start " + message)
        try:
            with socket.create_connection(server.address) as s:
                s.sendall(b"x")
                s.recv(16)
            gevent.sleep(0.1)
        finally:
            record("end " + message)

def child_main():
    gevent.sleep(1.5)  # the child's hub runs whatever it inherited

system = ActorSystem("app")
ref = system.actor_of(Props(Jobber), "jobber")
for i in range(3):
    ref.tell("job%d" % i)
gevent.sleep(0.05)  # job0 is in progress, job1 and job2 are queued
if method == "mp":
    proc = multiprocessing.get_context("fork").Process(target=child_main)
    proc.start()
    proc.join(30)
    code = proc.exitcode
else:
    pid = gevent.fork() if method == "gevent" else os.fork()
    if pid == 0:
        try:
            child_main()
        finally:
            os._exit(0)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
gevent.sleep(0.8)  # the parent finishes its own jobs
system.terminate()
ok = system.await_termination(5)
print(json.dumps({"exit": code, "terminated": ok, "parent": os.getpid()}))
"""


@pytest.mark.parametrize("method", ["os", "gevent", "mp"])
def test_work_in_flight_at_the_fork_never_runs_in_the_child(tmp_path: Path, method: str) -> None:
    # SPEC 13: nothing the parent had queued or was running may run in the child. The
    # worker copied mid-message (parked in a socket wait) and the queued jobs used to
    # run again in the child once its hub ran: duplicate side effects.
    script = tmp_path / "in_flight.py"
    script.write_text(IN_FLIGHT_SCRIPT)
    log = tmp_path / "log.jsonl"
    proc = subprocess.run(
        [sys.executable, str(script), method, str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["exit"] == 0 and summary["terminated"], (summary, proc.stderr)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    in_parent = [what for pid, what in events if pid == summary["parent"]]
    in_child = [what for pid, what in events if pid != summary["parent"]]
    assert in_child == [], (in_child, proc.stderr)
    assert in_parent == [f"{half} job{i}" for i in range(3) for half in ("start", "end")]


def test_scheduled_tasks_and_receive_timeouts_do_not_fire_in_the_child(
    system: ActorSystem,
) -> None:
    class Idle(Actor):
        def pre_start(self) -> None:
            self.context.set_receive_timeout(0.1)

        def receive(self, message: Any) -> None:
            RAN.append((os.getpid(), f"idle got {type(message).__name__}"))

    system.actor_of(Props(Idle), "idle")
    system.scheduler.schedule_once(0.1, lambda: RAN.append((os.getpid(), "scheduled")))

    def child() -> list[Any]:
        gevent.reinit()
        gevent.sleep(0.4)
        return [what for pid, what in RAN if pid == os.getpid()]

    assert in_child(child) == []
    gevent.sleep(0.3)
    mine = [what for pid, what in RAN if pid == os.getpid()]
    assert "scheduled" in mine and "idle got _ReceiveTimeout" in mine


WAITS_SCRIPT = r"""
from gevent import monkey
monkey.patch_all()
import json, os, sys
import gevent, gevent.event, gevent.lock, gevent.queue
from gactors import Actor, ActorSystem, Props

kind, log = sys.argv[1], sys.argv[2]
event = gevent.event.Event()
result = gevent.event.AsyncResult()
lock = gevent.lock.Semaphore()
queue = gevent.queue.Queue()

def record(what):
    with open(log, "a") as out:
        out.write(json.dumps([os.getpid(), what]) + "\n")

class Waiting(Actor):
    # Waits inside the message on a gevent primitive that is released after the fork
    # (in the parent and in the child alike, by code that goes on running there).
    def receive(self, message):
        record("start " + message)
        if kind == "event":
            event.wait()
        elif kind == "result":
            result.get()
        elif kind == "join":
            gevent.spawn(gevent.sleep, 0.3).join()
        elif kind == "lock":
            with lock:
                pass
        elif kind == "queue":
            queue.get()
        record("end " + message)

def release():
    event.set()
    result.set(1)
    if kind == "lock":
        lock.release()
    queue.put(1)
    queue.put(2)

if kind == "lock":
    lock.acquire()
system = ActorSystem("app")
ref = system.actor_of(Props(Waiting), "waiting")
ref.tell("job0")
ref.tell("job1")
gevent.sleep(0.1)  # job0 waits
pid = gevent.fork()
gevent.spawn_later(0.2, release)
if pid == 0:
    try:
        gevent.sleep(1.0)
    finally:
        os._exit(0)
os.waitpid(pid, 0)
gevent.sleep(0.5)
system.terminate()
print(json.dumps({"terminated": system.await_termination(5), "parent": os.getpid()}))
"""


@pytest.mark.parametrize("kind", ["event", "result", "join", "lock", "queue"])
def test_a_worker_waiting_on_a_gevent_primitive_stays_frozen_in_the_child(
    tmp_path: Path, kind: str
) -> None:
    # gevent wakes these waits through a switch method bound before the fork: the
    # child's own code releasing them must not resume the parent's message.
    script = tmp_path / "waits.py"
    script.write_text(WAITS_SCRIPT)
    log = tmp_path / "log.jsonl"
    proc = subprocess.run(
        [sys.executable, str(script), kind, str(log)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["terminated"], proc.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [what for pid, what in events if pid != summary["parent"]] == [], proc.stderr
    assert [what for pid, what in events if pid == summary["parent"]] == [
        "start job0",
        "end job0",
        "start job1",
        "end job1",
    ]

"""Foreign OS threads: tell/ask from any thread, system calls carried to the hub thread.

The threads here are real OS threads (started with the original ``_thread`` primitives,
which patching cannot replace), whether or not the test process is monkey-patched; the
same scenarios also run in fresh interpreters with and without ``patch_all()``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import gevent
import pytest
from _actors import Collector, Echo
from _inputs import WAIT, in_thread
from gevent import monkey
from gevent.threadpool import ThreadPool

from gactors import (
    Actor,
    ActorRef,
    ActorSystem,
    AskTimeoutError,
    DeadLetter,
    IllegalStateError,
    InvalidActorNameException,
    InvalidMessageException,
    Props,
    Status,
    pattern,
)
from gactors._threads import allocate_lock, get_ident, start_new_thread
from gactors.testkit import await_condition

real_sleep: Callable[[float], None] = monkey.get_original("time", "sleep")

THREADS = 8
PER_THREAD = 500


class RealThread:
    """A real OS thread even under ``patch_all()``.

    (``monkey.get_original("threading", "Thread")`` is not enough: that class still finds
    the patched lock and start functions in the ``threading`` module.)
    """

    def __init__(self, target: Callable[..., Any], args: tuple[Any, ...] = ()) -> None:
        self.target = target
        self.args = args
        self.done = allocate_lock()
        self.done.acquire()

    def start(self) -> None:
        start_new_thread(self.run, ())

    def run(self) -> None:
        try:
            self.target(*self.args)
        finally:
            self.done.release()

    def join(self, timeout: float) -> None:
        # Only called once the thread has reported its result: a short real wait.
        if self.done.acquire(True, timeout):
            self.done.release()

    def is_alive(self) -> bool:
        return bool(self.done.locked())


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("threads")
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10), s.tree()


class Recorder(Actor):
    """Counts messages per sending thread and checks each thread's FIFO order."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}
        self.out_of_order: list[tuple[int, int, int]] = []
        self.hub_tids: set[int] = set()

    def receive(self, message: Any) -> None:
        self.hub_tids.add(get_ident())
        if isinstance(message, tuple) and message[0] == "n":
            _, thread, seq = message
            expected = self.seen.get(thread, 0)
            if seq != expected:
                self.out_of_order.append((thread, seq, expected))
            self.seen[thread] = expected + 1
        elif isinstance(message, tuple) and message[0] == "count":
            self.sender.tell(self.seen.get(message[1], 0))
        elif message == "report":
            self.sender.tell(
                (sum(self.seen.values()), dict(self.seen), self.out_of_order, self.hub_tids)
            )
        else:
            self.unhandled(message)


class Latch(Actor):
    """Replies to ``"wait"`` once ``n`` other messages arrived (from any thread).

    ``("done", result)`` counts as ``result``; any other message counts as itself.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.waiters: list[Any] = []
        self.results: list[Any] = []

    def receive(self, message: Any) -> None:
        if isinstance(message, str) and message == "wait":
            if len(self.results) >= self.n:
                self.sender.tell(list(self.results))
            else:
                self.waiters.append(self.sender)
            return
        is_done = isinstance(message, tuple) and len(message) == 2 and message[0] == "done"
        self.results.append(message[1] if is_done else message)
        if len(self.results) == self.n:
            for w in self.waiters:
                w.tell(list(self.results))


class CueEcho(Echo):
    """The shared Echo, with cues: "boom" fails, "fail-status" replies a Status.Failure,
    "silent" replies nothing, ("slow", s) replies ("slow-done", s) after s seconds."""

    def receive(self, message: Any) -> None:
        if message == "boom":
            raise ValueError("boom from echo")
        if message == "fail-status":
            self.sender.tell(Status.Failure(KeyError("by status")))
        elif message == "silent":
            pass
        elif isinstance(message, tuple) and message[0] == "slow":
            gevent.sleep(message[1])
            self.sender.tell(("slow-done", message[1]))
        else:
            super().receive(message)


def run_in_threads(system: ActorSystem, n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` in ``n`` real threads; the hub keeps running while we wait."""
    latch = system.actor_of(Props(Latch, n))

    def body(i: int) -> None:
        try:
            result: Any = ("ok", i, fn(i))
        except BaseException as e:  # reported to the test, never lost in a thread
            result = ("error", i, e)
        latch.tell(("done", result))

    threads = [RealThread(body, (i,)) for i in range(n)]
    for t in threads:
        t.start()
    results = latch.ask("wait", timeout=30)
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    errors = [r for r in results if r[0] == "error"]
    assert not errors, errors
    return [r[2] for r in sorted(results, key=lambda r: r[1])]


def test_eight_threads_tell_and_ask_nothing_lost(system: ActorSystem) -> None:
    recorder = system.actor_of(Props(Recorder), "recorder")

    def work(i: int) -> int:
        assert get_ident() != system._tid
        for seq in range(PER_THREAD):
            recorder.tell(("n", i, seq))
        # The ask is queued behind this thread's own tells: it sees all of them.
        count: int = recorder.ask(("count", i), timeout=10)
        return count

    counts = run_in_threads(system, THREADS, work)
    assert counts == [PER_THREAD] * THREADS
    total, seen, out_of_order, hub_tids = recorder.ask("report", timeout=5)
    assert total == THREADS * PER_THREAD
    assert seen == dict.fromkeys(range(THREADS), PER_THREAD)
    assert out_of_order == []
    assert hub_tids == {system._tid}  # the actor only ever ran in the hub's thread


def test_threads_from_gevent_threadpool(system: ActorSystem) -> None:
    echo = system.actor_of(Props(CueEcho), "echo")
    pool = ThreadPool(4)
    try:
        results = [
            pool.spawn(lambda i: [echo.ask((i, j), timeout=5) for j in range(50)], i)
            for i in range(4)
        ]
        # AsyncResult.get waits cooperatively: the hub (and the actor) keep running.
        for i, r in enumerate(results):
            assert r.get(timeout=20) == [(i, j) for j in range(50)]
    finally:
        pool.kill()


def test_ask_from_a_thread_blocks_only_that_thread(system: ActorSystem) -> None:
    slow = system.actor_of(Props(CueEcho), "slow")
    fast = system.actor_of(Props(CueEcho), "fast")
    latch = system.actor_of(Props(Latch, 1))
    returned_at: list[float] = []

    def asker() -> None:
        reply = slow.ask(("slow", 0.5), timeout=10)
        returned_at.append(time.monotonic())
        latch.tell(("done", reply))

    t = RealThread(asker)
    t.start()
    # While the thread waits for its reply, the hub thread goes on with other work.
    for i in range(20):
        assert fast.ask(i, timeout=5) == i
    pings_done_at = time.monotonic()
    assert latch.ask("wait", timeout=10) == [("slow-done", 0.5)]
    t.join(5)
    assert returned_at and pings_done_at < returned_at[0]


def test_ask_from_a_thread_times_out_or_raises(system: ActorSystem) -> None:
    echo = system.actor_of(Props(CueEcho), "echo")

    def work(i: int) -> list[str]:
        outcomes = []
        for message, timeout in (("silent", 0.2), ("boom", 5.0), ("fail-status", 5.0)):
            try:
                echo.ask(message, timeout=timeout)
            except AskTimeoutError:
                outcomes.append("timeout")
            except ValueError as e:
                outcomes.append(f"ValueError: {e}")
            except KeyError as e:
                outcomes.append(f"KeyError: {e}")
        outcomes.append(echo.ask("still-alive", timeout=5))  # restarted after "boom"
        return outcomes

    (outcomes,) = run_in_threads(system, 1, work)
    assert outcomes == [
        "timeout",
        "ValueError: boom from echo",
        "KeyError: 'by status'",
        "still-alive",
    ]


def test_system_methods_from_a_thread_are_carried_to_the_hub(system: ActorSystem) -> None:
    hooks: list[int] = []

    def work(i: int) -> Any:
        ref = system.actor_of(Props(CueEcho), "made-in-thread")
        assert ref.ask("hi", timeout=5) == "hi"
        assert system.lookup("/user/made-in-thread") == ref
        tree = system.tree()
        system.register_on_termination(lambda: hooks.append(get_ident()))
        system.stop(ref)
        return tree

    (tree,) = run_in_threads(system, 1, work)
    assert "made-in-thread" in tree
    system.terminate()
    assert system.await_termination(10)
    assert hooks == [system._tid]  # registered from the thread, run in the hub thread


def test_terminate_and_await_from_a_thread(system: ActorSystem) -> None:
    echo = system.actor_of(Props(CueEcho), "echo")
    outcome: list[Any] = []

    def stopper() -> None:
        outcome.append(echo.ask("x", timeout=5))
        system.terminate()
        outcome.append(system.await_termination(10))

    t = RealThread(stopper)
    t.start()
    assert system.await_termination(20)
    t.join(10)
    assert not t.is_alive()
    assert outcome == ["x", True]


def test_tell_from_a_thread_to_a_stopped_actor_is_a_dead_letter(system: ActorSystem) -> None:
    echo = system.actor_of(Props(CueEcho), "gone")
    assert echo.ask("ping", timeout=5) == "ping"
    run_in_threads(system, 1, lambda i: system.stop(echo))
    # Wait until it is gone (lookup runs in the hub after the stop completed).
    await_condition(lambda: system.lookup("/user/gone") is None, timeout=10)
    dead_letters = system.actor_of(Props(Latch, 1))
    system.event_stream.subscribe(dead_letters, DeadLetter)
    run_in_threads(system, 1, lambda i: echo.tell("lost in a thread"))
    (dead,) = dead_letters.ask("wait", timeout=5)
    assert (dead.message, dead.sender, dead.recipient) == ("lost in a thread", None, echo)


@pytest.mark.timeout(30)
def test_no_loop_exit_when_work_only_comes_from_threads(system: ActorSystem) -> None:
    """The main greenlet waits with no timeout while only a thread has work for actors."""
    recorder = system.actor_of(Props(Recorder), "recorder")
    box: list[Any] = []

    def late_worker() -> None:
        real_sleep(0.3)  # the hub has nothing scheduled meanwhile
        for seq in range(100):
            recorder.tell(("n", 0, seq))
        box.append(recorder.ask(("count", 0), timeout=5))
        system.terminate()

    t = RealThread(late_worker)
    t.start()
    assert system.await_termination() is True  # no timeout: a LoopExit would raise here
    t.join(10)
    assert box == [100]


SCRIPT = r"""
import sys
if sys.argv[1] == "patched":
    from gevent import monkey
    monkey.patch_all()
from gevent import monkey
from gactors import Actor, ActorSystem, Props

from gactors._threads import allocate_lock, start_new_thread
real_sleep = monkey.get_original("time", "sleep")

class Thread:  # a real OS thread even under patch_all()
    def __init__(self, target):
        self.target, self.done = target, allocate_lock()
        self.done.acquire()
    def start(self):
        start_new_thread(self.run, ())
    def run(self):
        try:
            self.target()
        finally:
            self.done.release()
    def join(self, timeout):
        if self.done.acquire(True, timeout):
            self.done.release()

class Counter(Actor):
    def __init__(self):
        self.n = 0
    def receive(self, message):
        if message == "get":
            self.sender.tell(self.n)
        else:
            self.n += 1

system = ActorSystem("sub")
counter = system.actor_of(Props(Counter), "counter")
errors, asks = [], []

def work():
    try:
        real_sleep(0.2)
        for _ in range(1000):
            counter.tell(1)
        asks.append(counter.ask("get", timeout=10))
    except BaseException as e:
        errors.append(repr(e))

threads = [Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()

def finisher():
    for t in threads:
        t.join(20)
    try:
        made = system.actor_of(Props(Counter), "from-thread")
        assert system.lookup("/user/from-thread") == made
        asks.append(counter.ask("get", timeout=10))
    except BaseException as e:
        errors.append(repr(e))
    system.terminate()

Thread(target=finisher).start()
# Only threads give the actors work, and nothing else is scheduled: no LoopExit.
ok = system.await_termination()
print("RESULT", ok, max(asks[:8]) <= 8000, asks[-1], errors)
"""


@pytest.mark.parametrize("mode", ["patched", "unpatched"])
def test_threads_in_a_fresh_interpreter(mode: str, tmp_path: Any) -> None:
    script = tmp_path / "threads_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run(
        [sys.executable, str(script), mode], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "RESULT True True 8000 []" in proc.stdout, (proc.stdout, proc.stderr)


def test_ask_from_a_thread_is_timed_in_that_thread_while_the_hub_is_blocked(
    system: ActorSystem,
) -> None:
    echo = system.actor_of(Props(CueEcho), "echo")
    assert echo.ask("warm-up", timeout=5) == "warm-up"
    box: list[Any] = []

    def asker() -> None:
        started = time.monotonic()
        try:
            box.append(echo.ask("silent", timeout=1.0))
        except BaseException as e:
            box.append(e)
        box.append(time.monotonic() - started)

    thread = RealThread(asker)
    thread.start()
    real_sleep(3.0)  # the hub is held: its timers cannot fire meanwhile
    thread.join(10)
    assert not thread.is_alive()
    error, waited = box
    assert isinstance(error, AskTimeoutError)
    # Before the fix the thread waited for the hub's timer: the 3 s block plus 1 s.
    assert 0.9 <= waited < 2.5


def test_a_late_reply_to_a_thread_that_gave_up_goes_to_dead_letters(system: ActorSystem) -> None:
    echo = system.actor_of(Props(CueEcho), "echo")
    dead: list[Any] = []
    system.event_stream.subscribe(dead.append, DeadLetter)
    box: list[Any] = []

    def asker() -> None:
        try:
            box.append(echo.ask(("slow", 0.5), timeout=0.2))
        except BaseException as e:
            box.append(e)

    thread = RealThread(asker)
    thread.start()
    await_condition(
        lambda: any(d.message == ("slow-done", 0.5) for d in dead), timeout=10, interval=0.05
    )
    thread.join(10)
    assert isinstance(box[0], AskTimeoutError)


def test_when_the_systems_thread_is_gone_foreign_calls_fail_at_once() -> None:
    made = allocate_lock()
    made.acquire()
    box: list[Any] = []

    def owner() -> None:
        # A system left running by a thread that then ends.
        s = ActorSystem("orphaned")
        box.append((s, s.actor_of(Props(CueEcho), "echo")))
        made.release()

    start_new_thread(owner, ())
    assert made.acquire(True, 10)
    orphaned, echo = box[0]
    real_sleep(0.2)  # let the owner thread finish exiting
    results: list[Any] = []

    def caller() -> None:
        for call in (
            lambda: echo.ask("x", timeout=5),
            orphaned.tree,
            lambda: orphaned.await_termination(5),
        ):
            started = time.monotonic()
            try:
                results.append(call())
            except BaseException as e:
                results.append(e)
            results.append(time.monotonic() - started)

    # In a thread of its own: before the fix the ask waited forever (and tree() 60 s).
    thread = RealThread(caller)
    thread.start()
    thread.join(8)
    assert not thread.is_alive(), "a call to a system whose thread is gone did not return"
    errors, took = results[0::2], results[1::2]
    for error in errors:
        assert isinstance(error, IllegalStateError)
        assert "thread of actor system 'orphaned'" in str(error)
        assert "has exited" in str(error)
    assert max(took) < 1, took


class RaisesTimeoutError(Actor):
    def receive(self, message: Any) -> None:
        raise TimeoutError("the actor's own timeout (socket.timeout is one)")


def test_an_actors_own_timeout_error_reaches_a_thread_asker_as_is(system: ActorSystem) -> None:
    ref = system.actor_of(Props(RaisesTimeoutError), "raises")
    box: list[Any] = []

    def asker() -> None:
        try:
            ref.ask("x", timeout=5)
        except BaseException as e:
            box.append(e)

    thread = RealThread(asker)
    thread.start()
    await_condition(lambda: box, timeout=10, interval=0.02)
    thread.join(5)
    assert type(box[0]) is TimeoutError and "the actor's own" in str(box[0])


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
def test_foreign_thread_calls(system: ActorSystem, echo: ActorRef) -> None:
    def work() -> list[Any]:
        out: list[Any] = [echo.ask("from a thread", timeout=WAIT)]
        try:
            echo.ask(None, timeout=1.0)
        except InvalidMessageException:
            out.append("None refused")
        child = system.actor_of(Props(CueEcho), "made-in-a-thread")
        out.append(child.ask("hi", timeout=WAIT))
        try:
            system.actor_of(Props(CueEcho), "made-in-a-thread")
        except InvalidActorNameException:
            out.append("duplicate refused")
        silent = system.actor_of(Props(Actor), "silent")  # never replies
        try:
            silent.ask("anyone?", timeout=0.2)
        except AskTimeoutError:
            out.append("timed out")
        out.append(system.await_termination(0.05))
        return out

    assert in_thread(work) == [
        "from a thread",
        "None refused",
        "hi",
        "duplicate refused",
        "timed out",
        False,
    ]


def test_terminate_and_await_from_a_foreign_thread(system: ActorSystem) -> None:
    def work() -> bool:
        system.terminate()
        return system.await_termination(WAIT)

    assert in_thread(work) is True


def test_tell_from_a_foreign_thread_to_a_stopped_actor(
    system: ActorSystem, dead_letters: Collector
) -> None:
    ref = system.actor_of(Props(CueEcho), "e")
    assert pattern.graceful_stop(ref, WAIT).get(WAIT) is True
    in_thread(ref.tell, "too late")
    assert system.actor_of(Props(CueEcho), "sync").ask("sync", timeout=WAIT) == "sync"
    assert [e.message for e in dead_letters.events] == ["too late"]

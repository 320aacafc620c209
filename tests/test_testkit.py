"""gactors.testkit: TestProbe, event_filter, time dilation, and the pytest plugin."""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import gevent
import pytest
from _actors import Echo
from gevent import monkey

from gactors import (
    Actor,
    ActorSystem,
    DeadLetter,
    LogEvent,
    PoisonPill,
    Props,
    Terminated,
)
from gactors.testkit import TestProbe, await_condition, dilated, event_filter, time_factor

# A real OS thread whether or not the run is monkey-patched.
start_new_thread: Callable[..., int] = monkey.get_original("_thread", "start_new_thread")

pytest_plugins = ["pytester"]


class Forwarder(Actor):
    """Tells everything it gets to ``target``, keeping itself as the sender."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def receive(self, message: Any) -> None:
        self.target.tell(message)


class Failing(Actor):
    def receive(self, message: Any) -> None:
        raise ValueError(f"bad {message}")


class FailOnInt(Actor):
    """Fails on ints, echoes anything else: an echo proves earlier failures were handled
    (the parent logs a failure before it restarts the child)."""

    def receive(self, message: Any) -> None:
        if isinstance(message, int):
            raise ValueError(f"bad {message}")
        self.sender.tell(message)


# -- TestProbe ------------------------------------------------------------------------------------
def test_probe_ref_is_an_actor_under_system(probe: TestProbe) -> None:
    assert probe.ref.path.elements[0] == "system"
    assert probe.ref.path.name.startswith("testProbe-")


def test_expect_msg_returns_the_message_and_records_sender(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    echo = actor_system.actor_of(Props(Echo), "echo")
    probe.send(echo, "hello")
    assert probe.expect_msg("hello") == "hello"
    assert probe.last_sender == echo
    assert probe.last_message == "hello"


def test_expect_msg_mismatch_fails_with_both_values(probe: TestProbe) -> None:
    probe.ref.tell("actual")
    with pytest.raises(AssertionError, match=r"expected 'wanted', found 'actual'"):
        probe.expect_msg("wanted")


def test_expect_msg_timeout_fails(probe: TestProbe) -> None:
    with pytest.raises(AssertionError, match=r"timeout \(0\.05 s\) during expect_msg"):
        probe.expect_msg("never", timeout=0.05)


def test_expect_msg_type(probe: TestProbe) -> None:
    probe.ref.tell(42)
    assert probe.expect_msg_type(int) == 42
    probe.ref.tell("text")
    with pytest.raises(AssertionError, match=r"expected a int, found str 'text'"):
        probe.expect_msg_type(int)
    probe.ref.tell(1.5)
    assert probe.expect_msg_type((int, float)) == 1.5


def test_expect_msg_any_of(probe: TestProbe) -> None:
    probe.ref.tell("b")
    assert probe.expect_msg_any_of("a", "b") == "b"
    probe.ref.tell("c")
    with pytest.raises(AssertionError, match="expected one of"):
        probe.expect_msg_any_of("a", "b")


def test_expect_no_message(probe: TestProbe) -> None:
    probe.expect_no_message(0.05)
    probe.ref.tell("surprise")
    with pytest.raises(AssertionError, match=r"expected no message .* received 'surprise'"):
        probe.expect_no_message(0.05)


def test_receive_n_in_order_and_partial_timeout(probe: TestProbe) -> None:
    for i in range(5):
        probe.ref.tell(i)
    assert probe.receive_n(5) == [0, 1, 2, 3, 4]
    probe.ref.tell("only")
    with pytest.raises(AssertionError, match=r"waiting for 2 messages \(got 1: \['only'\]\)"):
        probe.receive_n(2, timeout=0.1)


def test_fish_for_message_skips_until_predicate(probe: TestProbe) -> None:
    for m in ["a", 1, "b", 2, "c"]:
        probe.ref.tell(m)
    assert probe.fish_for_message(lambda m: isinstance(m, int) and m > 1) == 2
    assert probe.receive_one() == "c"  # what follows the fish is still there
    with pytest.raises(AssertionError, match=r"fish_for_message; 1 message\(s\) did not match"):
        probe.ref.tell("x")
        probe.fish_for_message(lambda m: False, timeout=0.1)


def test_reply_goes_to_last_sender(actor_system: ActorSystem, probe: TestProbe) -> None:
    other = TestProbe(actor_system)
    forwarder = actor_system.actor_of(Props(Forwarder, other.ref))
    forwarder.tell("ping")
    other.expect_msg("ping")
    assert other.last_sender == forwarder

    probe.send(other.ref, "question")
    other.expect_msg("question")
    other.reply("answer")
    probe.expect_msg("answer")
    assert probe.last_sender == other.ref


def test_reply_without_sender_fails(probe: TestProbe) -> None:
    probe.ref.tell("anonymous", None)
    probe.expect_msg("anonymous")
    with pytest.raises(AssertionError, match="no sender"):
        probe.reply("nobody")


def test_forward_keeps_original_sender(actor_system: ActorSystem, probe: TestProbe) -> None:
    middle = TestProbe(actor_system)
    echo = actor_system.actor_of(Props(Echo))
    probe.send(middle.ref, "hop")
    middle.expect_msg("hop")
    middle.forward(echo)  # echo answers the original sender: probe
    probe.expect_msg("hop")
    assert probe.last_sender == echo


def test_watch_and_expect_terminated(actor_system: ActorSystem, probe: TestProbe) -> None:
    echo = actor_system.actor_of(Props(Echo))
    assert probe.watch(echo) == echo
    echo.tell(PoisonPill)
    t = probe.expect_terminated(echo)
    assert isinstance(t, Terminated) and t.actor == echo and t.existence_confirmed


def test_expect_terminated_of_another_actor_fails(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    a = actor_system.actor_of(Props(Echo))
    b = actor_system.actor_of(Props(Echo))
    probe.watch(a)
    a.tell(PoisonPill)
    with pytest.raises(AssertionError, match=r"expected Terminated\(.*\), found Terminated"):
        probe.expect_terminated(b)


def test_unwatch_prevents_terminated(actor_system: ActorSystem, probe: TestProbe) -> None:
    echo = actor_system.actor_of(Props(Echo))
    probe.watch(echo)
    probe.unwatch(echo)
    actor_system.stop(echo)
    other = TestProbe(actor_system)
    other.watch(echo)  # a second watcher proves the stop happened
    other.expect_terminated(echo)
    probe.expect_no_message(0.1)


def test_watch_dead_actor_gets_unconfirmed_terminated(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    echo = actor_system.actor_of(Props(Echo))
    probe.watch(echo)
    echo.tell(PoisonPill)
    probe.expect_terminated(echo)
    late = TestProbe(actor_system)
    late.watch(echo)
    assert late.expect_terminated(echo).existence_confirmed is False


def test_probe_works_from_a_foreign_thread(actor_system: ActorSystem, probe: TestProbe) -> None:
    echo = actor_system.actor_of(Props(Echo))
    result: list[Any] = []

    def run() -> None:
        try:
            probe.send(echo, "from-thread")
            result.append(probe.expect_msg("from-thread", timeout=5))
        except BaseException as e:  # reported to the test below
            result.append(e)

    start_new_thread(run, ())
    # The test greenlet must let the hub run while the thread waits (join() would not).
    await_condition(lambda: result, timeout=10)
    assert result == ["from-thread"]


def test_invalid_timeouts(probe: TestProbe) -> None:
    with pytest.raises(ValueError):
        probe.expect_msg("x", timeout=-1)
    with pytest.raises(ValueError):
        probe.receive_n(-1)


# -- time factor ----------------------------------------------------------------------------------
def test_time_factor_scales_timeouts(monkeypatch: pytest.MonkeyPatch, probe: TestProbe) -> None:
    monkeypatch.setenv("GACTORS_TEST_TIMEFACTOR", "2.5")
    assert time_factor() == 2.5
    assert dilated(2) == 5.0
    with pytest.raises(AssertionError, match=r"timeout \(0\.1 s\)"):
        probe.receive_one(timeout=0.04)
    monkeypatch.setenv("GACTORS_TEST_TIMEFACTOR", "0.05")
    with pytest.raises(AssertionError, match=r"timeout \(0\.1 s\) during expect_msg"):
        probe.expect_msg("x", timeout=2.0)
    with pytest.raises(AssertionError, match=r"timeout \(0\.15 s\)"):
        probe.receive_one()  # the default, 3 s, is scaled too


def test_time_factor_default_and_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GACTORS_TEST_TIMEFACTOR", raising=False)
    assert time_factor() == 1.0
    for bad in ["zero", "0", "-1", "inf"]:
        monkeypatch.setenv("GACTORS_TEST_TIMEFACTOR", bad)
        with pytest.raises(ValueError, match="GACTORS_TEST_TIMEFACTOR"):
            time_factor()


# -- await_condition ------------------------------------------------------------------------------
class Flag(Actor):
    """Sets ``state["seen"]`` to the message it receives (state no message reports)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def receive(self, message: Any) -> None:
        self.state["seen"] = message


def test_await_condition_returns_the_true_value_once_actors_made_it_true(
    actor_system: ActorSystem,
) -> None:
    state: dict[str, Any] = {}
    flag = actor_system.actor_of(Props(Flag, state))
    flag.tell("hello")  # processed while await_condition sleeps between checks
    assert await_condition(lambda: state.get("seen"), timeout=5) == "hello"


def test_await_condition_true_at_once_does_not_sleep() -> None:
    calls: list[int] = []

    def predicate() -> list[int]:
        calls.append(1)
        return calls

    start = time.monotonic()
    assert await_condition(predicate, timeout=0) == [1]
    assert time.monotonic() - start < 0.5
    assert len(calls) == 1


def test_await_condition_timeout_names_the_lambda_the_time_and_last_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GACTORS_TEST_TIMEFACTOR", raising=False)
    box: list[int] = []
    start = time.monotonic()
    with pytest.raises(AssertionError) as info:
        await_condition(lambda: len(box) == 3, timeout=0.2, interval=0.02)
    elapsed = time.monotonic() - start
    text = str(info.value)
    assert "lambda: len(box) == 3" in text  # what was awaited
    assert "not met within 0.2 s" in text  # for how long
    assert "last value False" in text
    assert re.search(r"\((\d+) checks, every 0\.02 s", text)
    assert 0.2 <= elapsed < 2.0


def test_await_condition_timeout_uses_the_message_and_a_function_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GACTORS_TEST_TIMEFACTOR", raising=False)
    with pytest.raises(AssertionError, match=r"^await_condition: the cache is warm not met within"):
        await_condition(lambda: None, timeout=0.05, message="the cache is warm")

    def cache_is_warm() -> bool:
        return False

    with pytest.raises(AssertionError, match=r"cache_is_warm not met within 0\.05 s"):
        await_condition(cache_is_warm, timeout=timedelta(milliseconds=50))


def test_await_condition_timeout_is_dilated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GACTORS_TEST_TIMEFACTOR", "3")
    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"within 0\.3 s, GACTORS_TEST_TIMEFACTOR=3 "):
        await_condition(lambda: False, timeout=0.1)
    assert time.monotonic() - start >= 0.3


def test_await_condition_lets_an_exception_of_the_predicate_through() -> None:
    def broken() -> bool:
        raise KeyError("inside the predicate")

    with pytest.raises(KeyError, match="inside the predicate"):
        await_condition(broken, timeout=5)


def test_await_condition_works_from_a_foreign_thread() -> None:
    state: dict[str, Any] = {}

    def other_thread() -> None:
        try:
            state["result"] = await_condition(lambda: state.get("go"), timeout=10)
        except BaseException as e:  # reported to the test below
            state["result"] = e

    start_new_thread(other_thread, ())
    gevent.sleep(0.05)
    state["go"] = "went"
    await_condition(lambda: "result" in state, timeout=10)
    assert state["result"] == "went"


AWAIT_CONDITION_BAD_ARGUMENTS = [
    ({"timeout": "1"}, TypeError, "timeout must be a number of seconds or a timedelta"),
    ({"timeout": True}, TypeError, "timeout must be a number of seconds"),
    ({"timeout": -1}, ValueError, r"timeout must be >= 0 seconds"),
    ({"timeout": math.nan}, ValueError, "timeout must be a number of seconds, not NaN"),
    ({"timeout": math.inf}, ValueError, "timeout is too large"),
    ({"interval": 0}, ValueError, r"interval must be > 0 seconds"),
    ({"interval": None}, TypeError, "interval must be a number of seconds"),
    ({"message": 5}, TypeError, "message must be a str or None, not int"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    AWAIT_CONDITION_BAD_ARGUMENTS,
    ids=[repr(kwargs) for kwargs, _, _ in AWAIT_CONDITION_BAD_ARGUMENTS],
)
def test_await_condition_bad_arguments(kwargs: dict[str, Any], error: type, match: str) -> None:
    calls: list[int] = []
    with pytest.raises(error, match=match):
        await_condition(lambda: calls.append(1), **kwargs)
    assert calls == []  # refused before the first check


def test_await_condition_needs_a_callable() -> None:
    with pytest.raises(TypeError, match="predicate must be callable, not bool"):
        await_condition(True)  # type: ignore[arg-type]


# -- event_filter ---------------------------------------------------------------------------------
def _collect_logs(system: ActorSystem) -> list[LogEvent]:
    seen: list[LogEvent] = []
    system.event_stream.subscribe(seen.append, LogEvent)
    return seen


def test_event_filter_swallows_matching_events(actor_system: ActorSystem) -> None:
    seen = _collect_logs(actor_system)
    failing = actor_system.actor_of(Props(Failing), "failing")
    with event_filter(actor_system, ValueError, occurrences=2) as f:
        failing.tell(1)
        failing.tell(2)
    assert [type(e.cause) for e in f.events] == [ValueError, ValueError]
    assert all(e.source == str(failing.path) for e in f.events)
    assert [e for e in seen if isinstance(e.cause, ValueError)] == []


def test_event_filter_lets_other_events_through(
    actor_system: ActorSystem, probe: TestProbe
) -> None:
    seen = _collect_logs(actor_system)
    a = actor_system.actor_of(Props(FailOnInt))
    with (
        pytest.raises(AssertionError, match="timeout waiting for 1 log event"),
        event_filter(actor_system, KeyError, timeout=0.2),
    ):
        a.tell(1)
        probe.send(a, "sync")
        probe.expect_msg("sync")
    assert [str(e.cause) for e in seen if isinstance(e.cause, ValueError)] == ["bad 1"]


def test_event_filter_fails_on_excess(actor_system: ActorSystem, probe: TestProbe) -> None:
    a = actor_system.actor_of(Props(FailOnInt))
    with (
        pytest.raises(AssertionError, match=r"expected 1 log event\(s\).*got 2 \(excess\)"),
        event_filter(actor_system, ValueError, occurrences=1),
    ):
        a.tell(1)
        a.tell(2)
        probe.send(a, "sync")
        probe.expect_msg("sync")  # both failures have been logged by now


def test_event_filter_by_message_level_and_source(actor_system: ActorSystem) -> None:
    a = actor_system.actor_of(Props(Failing), "a")
    b = actor_system.actor_of(Props(Failing), "b")
    with event_filter(actor_system, message="bad 7", level="ERROR", source=a) as f:
        b.tell(7)  # other source: passes through
        a.tell(7)
    assert len(f.events) == 1 and f.events[0].source == str(a.path)
    with event_filter(actor_system, message=re.compile(r"bad \d+"), level=logging.ERROR):
        a.tell(8)
    # a level that does not match is not counted:
    with (
        pytest.raises(AssertionError),
        event_filter(actor_system, ValueError, level=logging.WARNING, timeout=0.2),
    ):
        a.tell(9)


def test_event_filter_occurrences_none_swallows_any_number(actor_system: ActorSystem) -> None:
    seen = _collect_logs(actor_system)
    failing = actor_system.actor_of(Props(Failing))
    probe = TestProbe(actor_system)
    with event_filter(actor_system, ValueError, occurrences=None) as f:
        for i in range(3):
            failing.tell(i)
        probe.send(failing, PoisonPill)
        probe.watch(failing)
        probe.expect_terminated(failing)
    assert len(f.events) == 3
    assert not [e for e in seen if isinstance(e.cause, ValueError)]


def test_event_filter_is_removed_after_an_exception(actor_system: ActorSystem) -> None:
    with pytest.raises(RuntimeError), event_filter(actor_system, ValueError):
        raise RuntimeError("inside")
    assert actor_system.log_filters == []


def test_event_filter_dead_letters(actor_system: ActorSystem) -> None:
    seen: list[Any] = []
    actor_system.event_stream.subscribe(seen.append, DeadLetter)
    echo = actor_system.actor_of(Props(Echo))
    probe = TestProbe(actor_system)
    probe.watch(echo)
    echo.tell(PoisonPill)
    probe.expect_terminated(echo)
    with event_filter(actor_system, message="was not delivered", level="INFO"):
        echo.tell("late")
    # The log record is swallowed, the DeadLetter event itself is still published.
    assert [d.message for d in seen] == ["late"]


# -- the pytest plugin ----------------------------------------------------------------------------
_CONFTEST = """
from importlib.metadata import entry_points
_PLUGIN = "gactors.testkit._pytest_plugin"
if not any(ep.value == _PLUGIN for ep in entry_points(group="pytest11")):
    pytest_plugins = [_PLUGIN]
"""


def test_plugin_fixtures_in_a_user_project(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(
        """
        import pytest
        from gactors import Actor, ActorSystem, Props
        from gactors.testkit import TestProbe

        seen = []

        class Echo(Actor):
            def receive(self, message):
                self.sender.tell(message)

        def test_first(actor_system, probe):
            seen.append(actor_system)
            assert isinstance(actor_system, ActorSystem)
            assert actor_system.name == "test_first"
            assert isinstance(probe, TestProbe) and probe.system is actor_system
            probe.send(actor_system.actor_of(Props(Echo)), "hi")
            probe.expect_msg("hi")

        def test_second(actor_system):
            assert seen[0].is_terminated
            assert actor_system is not seen[0] and not actor_system.is_terminated

        @pytest.mark.gactors_config(stash_capacity=7)
        def test_marker(actor_system):
            assert actor_system.settings.stash_capacity == 7

        @pytest.mark.parametrize("n", [1])
        def test_odd_name(actor_system, n):
            assert actor_system.name == "test_odd_name-1"
        """
    )
    # A directory whose conftest overrides the settings fixture.
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def actor_system_config():\n"
        "    return {'default_ask_timeout': 1.5, 'stash_capacity': 3}\n"
    )
    (sub / "test_sub.py").write_text(
        "import pytest\n\n"
        "def test_config(actor_system):\n"
        "    assert actor_system.settings.default_ask_timeout == 1.5\n"
        "    assert actor_system.settings.stash_capacity == 3\n\n"
        "@pytest.mark.gactors_config({'stash_capacity': 9})\n"
        "def test_marker_wins(actor_system):\n"
        "    assert actor_system.settings.stash_capacity == 9\n"
        "    assert actor_system.settings.default_ask_timeout == 1.5\n"
    )
    # The user project of docs/testing.md, verbatim.
    for path, code in _doc_files().items():
        target = pytester.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code)
    (pytester.path / "myapp" / "__init__.py").write_text("")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=9)


def _doc_files() -> dict[str, str]:
    """The files of the "A first test" example in docs/testing.md, by path."""
    text = (Path(__file__).parent.parent / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n# (\S+\.py)\n(.*?)```", text, re.S)
    files = {path: code for path, code in blocks}
    assert set(files) == {"myapp/actors.py", "tests/test_greeter.py"}
    return files


def test_plugin_fails_test_whose_system_cannot_terminate(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(
        """
        import gevent
        import pytest
        from gactors import Actor, Props

        class Stubborn(Actor):
            def receive(self, message):
                pass

            def post_stop(self):
                gevent.sleep(30)  # the stop never finishes in time

        @pytest.mark.gactors_config(shutdown_timeout=0.3)
        def test_hangs(actor_system):
            actor_system.actor_of(Props(Stubborn), "stubborn")
        """
    )
    # A subprocess: the stuck actor must not outlive this test in our own hub.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*actor system 'test_hangs' did not terminate within 0.3 s*actors still alive:*",
            # The real state of an actor stuck in post_stop (fnmatch: "?" for "[" and "]").
            "*stubborn  ?stopping? mailbox=*",
        ]
    )


_STRICT_TESTS = """
import pytest
from gactors import Actor, Props
from gactors.testkit import event_filter

class Crashing(Actor):
    def receive(self, message):
        if message == "crash":
            raise ValueError("crashed on purpose")
        self.sender.tell(message)

def crash_and_wait(system):
    ref = system.actor_of(Props(Crashing), "crashing")
    ref.tell("crash")
    assert ref.ask("after", timeout=5) == "after"  # the failure was handled meanwhile

def test_unexpected_failure(actor_system):
    crash_and_wait(actor_system)

def test_expected_failure(actor_system):
    with event_filter(actor_system, ValueError, "crashed on purpose"):
        crash_and_wait(actor_system)

def test_no_failure(actor_system, probe):
    probe.send(actor_system.actor_of(Props(Crashing)), "hi")
    probe.expect_msg("hi")

@pytest.mark.gactors_strict(False)
def test_opted_out(actor_system):
    crash_and_wait(actor_system)

def test_failing_post_stop(actor_system):
    class BadStop(Actor):
        def receive(self, message):
            self.sender.tell(message)
        def post_stop(self):
            raise RuntimeError("post_stop broke")
    assert actor_system.actor_of(Props(BadStop), "badstop").ask("x", timeout=5) == "x"
"""


def test_plugin_strict_mode_by_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_CONFTEST)
    pytester.makeini("[pytest]\ngactors_strict = true\n")
    pytester.makepyfile(_STRICT_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=4, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_unexpected_failure*",
            "*gactors strict mode: 1 unexpected actor error(s) during the test*",
            "*crashing*(ValueError: crashed on purpose)*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_failing_post_stop*",
            "*unexpected actor error(s) while the system terminated*",
            "*badstop: post_stop failed*RuntimeError: post_stop broke*",
        ]
    )


def test_plugin_strict_mode_by_marker_and_off_by_default(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(
        _STRICT_TESTS
        + """
@pytest.mark.gactors_strict
def test_marked(actor_system):
    crash_and_wait(actor_system)
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    # Without the option only the marked test is strict.
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*FAILED*test_marked*"])

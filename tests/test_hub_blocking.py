"""Hub-blocking detection: ``blocking_threshold`` and the ``HubBlocked`` event."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import greenlet
import pytest
from gevent import monkey
from gevent.events import EventLoopBlocked

from gactors import Actor, ActorSystem, ConfigError, HubBlocked, LogEvent, Props, _monitor
from gactors._threads import allocate_lock, start_new_thread
from gactors.testkit import await_condition

real_sleep: Callable[[float], None] = monkey.get_original("time", "sleep")

THRESHOLD = 0.1


class Blocker(Actor):
    """Blocks the hub with a sleep gevent cannot make cooperative."""

    def receive(self, message: Any) -> None:
        seconds = message[1]
        real_sleep(seconds)
        self.sender.tell(time.time())


class Polite(Actor):
    """Waits cooperatively: never blocks the hub."""

    def receive(self, message: Any) -> None:
        gevent.sleep(message)
        self.sender.tell("rested")


def by_actors(event: Any) -> bool:
    """Only reports that name an actor.

    On a loaded machine the test process itself may hold the hub for longer than the
    threshold outside any actor (pytest's own work, a garbage collection): those are
    true reports, but not the ones a test is about.
    """
    if isinstance(event, HubBlocked):
        return event.actor_path is not None
    return bool(event.source != "gevent-hub")


class Collector:
    """Event-stream subscriber (a plain callable, called in the hub's thread)."""

    def __init__(self, wanted: int = 1, keep: Callable[[Any], bool] = by_actors) -> None:
        self.events: list[Any] = []
        self.wanted = wanted
        self.keep = keep
        self.enough = gevent.event.Event()

    def __call__(self, event: Any) -> None:
        if not self.keep(event):
            return
        self.events.append(event)
        if len(self.events) >= self.wanted:
            self.enough.set()


def make_system(name: str, threshold: float | None) -> ActorSystem:
    return ActorSystem(name, config={"blocking_threshold": threshold})


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = make_system("blocking", THRESHOLD)
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10), s.tree()


def test_unpatched_sleep_in_an_actor_is_reported_naming_the_actor(
    system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gactors.hub")
    blocked = Collector()
    logged = Collector()
    system.event_stream.subscribe(blocked, HubBlocked)
    system.event_stream.subscribe(logged, LogEvent)
    polite = system.actor_of(Props(Polite), "polite")
    blocker = system.actor_of(Props(Blocker), "blocker")
    assert polite.ask(0.3, timeout=5) == "rested"  # cooperative waiting is not blocking

    block_ended_at = blocker.ask(("block", 1.0), timeout=10)
    assert blocked.enough.wait(timeout=10)

    (event,) = blocked.events
    assert event.actor_path == str(blocker.path) == "gactors://blocking/user/blocker"
    # A lower bound of the real 1 s (gevent only tells at the end of a whole period that
    # no switch happened during it); generous for a loaded machine.
    assert 0.3 <= event.seconds <= 5.0
    assert "real_sleep(seconds)" in event.stack
    assert "in receive" in event.stack
    assert "_dispatch.py" not in event.stack  # the dispatcher's frames are cut off

    # Logged at WARNING on gactors.hub, from the monitoring thread, while still blocked.
    records = [
        r
        for r in caplog.records
        if r.name == "gactors.hub" and "[gevent-hub]" not in r.getMessage()
    ]
    assert len(records) == 1
    record = records[0]
    assert record.levelno == logging.WARNING
    assert str(blocker.path) in record.getMessage()
    assert "real_sleep(seconds)" in record.getMessage()
    assert record.created < block_ended_at
    # ... and published on the event stream as a LogEvent with the actor as source.
    warnings = [e for e in logged.events if e.level == logging.WARNING]
    assert [e.source for e in warnings] == [str(blocker.path)]


def test_back_to_back_blocking_actors_are_told_apart(system: ActorSystem) -> None:
    blocked = Collector(wanted=2)
    system.event_stream.subscribe(blocked, HubBlocked)
    first = system.actor_of(Props(Blocker), "first")
    second = system.actor_of(Props(Blocker), "second")
    # One worker runs both without ever switching to the hub: one long block of the hub,
    # reported as two episodes, one per actor. Each block is long compared with the
    # monitor's period, so that a monitor thread starved by a loaded CI machine still
    # samples both (0.5 s was seen to be too short there on gevent 24.2.1).
    first.tell(("block", 1.0))
    second.tell(("block", 1.0))
    assert blocked.enough.wait(timeout=10)
    assert [e.actor_path for e in blocked.events] == [str(first.path), str(second.path)]
    assert all(0.1 <= e.seconds <= 5.0 for e in blocked.events)


class NestedBlocker(Actor):
    """Blocks inside a greenlet of its own, started from its receive."""

    def receive(self, message: Any) -> None:
        inner = greenlet.greenlet(lambda: real_sleep(0.5))
        inner.switch()
        self.sender.tell("done")


def test_blocking_in_a_greenlet_started_by_an_actor_names_that_actor(
    system: ActorSystem,
) -> None:
    blocked = Collector()
    system.event_stream.subscribe(blocked, HubBlocked)
    nested = system.actor_of(Props(NestedBlocker), "nested")
    assert nested.ask("go", timeout=10) == "done"
    assert blocked.enough.wait(timeout=10)
    (event,) = blocked.events
    assert event.actor_path == str(nested.path)
    assert "real_sleep(0.5)" in event.stack


def test_blocking_outside_any_actor_is_reported_without_a_path(system: ActorSystem) -> None:
    blocked = Collector(keep=lambda e: "real_sleep(0.5)" in e.stack)
    system.event_stream.subscribe(blocked, HubBlocked)
    # gevent's tracer only knows which greenlet runs once one was switched to since the
    # monitor started: switch once, as any running application constantly does.
    gevent.sleep(0)
    real_sleep(0.5)  # the test's own greenlet holds the hub
    assert blocked.enough.wait(timeout=10)
    (event,) = blocked.events
    assert event.actor_path is None
    assert 0.1 <= event.seconds <= 5.0
    assert "real_sleep(0.5)" in event.stack


def test_reports_from_a_stopped_monitor_are_ignored(system: ActorSystem) -> None:
    """A monitor stopped with an earlier system may finish a report after a new monitor
    took over the hub: its tracer is gone, what it says is stale, it must be ignored."""
    watch = _monitor._watches[id(system._hub)]
    events = Collector(keep=lambda e: True)
    system.event_stream.subscribe(events, HubBlocked)

    class StoppedMonitor:
        hub = system._hub
        should_run = False

    def report_from(monitor: Any) -> None:
        # As gevent's monitoring thread does: its greenlet names the monitor it runs.
        done = allocate_lock()
        done.acquire()

        def run() -> None:
            try:
                greenlet.getcurrent().gevent_monitoring_thread = weakref.ref(monitor)
                _monitor._on_zope_event(EventLoopBlocked(greenlet.getcurrent(), 0.1, []))
            finally:
                done.release()

        start_new_thread(run, ())
        assert done.acquire(True, 10)

    stopped = StoppedMonitor()
    report_from(stopped)
    assert watch.episode is None
    report_from(watch.thread)  # the same report from the live monitor counts
    assert watch.episode is not None
    assert events.enough.wait(timeout=10)
    assert [e.actor_path for e in events.events] == [None]


def test_monitoring_follows_the_lifetime_of_the_systems_that_want_it() -> None:
    hub = gevent.get_hub()
    config = gevent.config
    if config.monitor_thread or hub.periodic_monitoring_thread is not None:
        pytest.skip("gevent's monitoring thread is enabled by the environment")
    before = config.max_blocking_time

    plain = make_system("plain", None)
    try:
        assert not _monitor.is_monitoring(plain)
        assert hub.periodic_monitoring_thread is None

        slow = make_system("slow", 2.0)
        fast = make_system("fast", 0.25)
        assert _monitor.is_monitoring(slow) and _monitor.is_monitoring(fast)
        assert hub.periodic_monitoring_thread is not None
        assert config.max_blocking_time == 0.25  # the smallest live threshold

        fast.terminate()
        assert fast.await_termination(10)
        assert not _monitor.is_monitoring(fast)
        assert config.max_blocking_time == 2.0
        assert hub.periodic_monitoring_thread is not None  # "slow" still wants it

        slow.terminate()
        assert slow.await_termination(10)
        assert hub.periodic_monitoring_thread is None
        assert config.max_blocking_time == before
    finally:
        for s in (plain,):
            s.terminate()
            assert s.await_termination(10)


def test_each_system_reports_against_its_own_threshold() -> None:
    strict = make_system("strict", 0.1)
    lenient = make_system("lenient", 3.0)
    try:
        strict_events = Collector()
        lenient_events = Collector()
        strict.event_stream.subscribe(strict_events, HubBlocked)
        lenient.event_stream.subscribe(lenient_events, HubBlocked)
        blocker = lenient.actor_of(Props(Blocker), "blocker")
        blocker.ask(("block", 0.6), timeout=10)
        # Both systems share the blocked hub; only the strict one's threshold was passed.
        assert strict_events.enough.wait(timeout=10)
        assert [e.actor_path for e in strict_events.events] == [str(blocker.path)]
        assert lenient_events.events == []
    finally:
        for s in (strict, lenient):
            s.terminate()
            assert s.await_termination(10)


def test_no_report_without_a_threshold() -> None:
    plain = make_system("unwatched", None)
    try:
        events = Collector()
        plain.event_stream.subscribe(events, HubBlocked)
        blocker = plain.actor_of(Props(Blocker), "blocker")
        blocker.ask(("block", 0.3), timeout=10)
        # Give a report every chance to arrive: a round trip through the hub, twice.
        assert plain.actor_of(Props(Polite)).ask(0.2, timeout=5) == "rested"
        assert events.events == []
        assert not _monitor.is_monitoring(plain)
    finally:
        plain.terminate()
        assert plain.await_termination(10)


SCRIPT = r"""
from gevent import monkey
monkey.patch_all()
import time
import gevent
from gactors import Actor, ActorSystem, HubBlocked, Props

real_sleep = monkey.get_original("time", "sleep")

class Sleeper(Actor):
    def receive(self, message):
        if message == "patched":
            time.sleep(0.5)  # patched: cooperative, not a block
        else:
            real_sleep(0.5)
        self.sender.tell(message)

events = []
with ActorSystem("patched", config={"blocking_threshold": 0.1}) as system:
    system.event_stream.subscribe(events.append, HubBlocked)
    sleeper = system.actor_of(Props(Sleeper), "sleeper")
    sleeper.ask("patched", timeout=5)
    gevent.sleep(0.3)
    print("AFTER PATCHED", [e.actor_path for e in events], flush=True)
    sleeper.ask("unpatched", timeout=5)
    deadline = time.monotonic() + 5
    while not events and time.monotonic() < deadline:
        gevent.sleep(0.05)
    print("AFTER UNPATCHED", [e.actor_path for e in events], flush=True)
"""


def test_under_patch_all_in_a_fresh_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "blocking_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "AFTER PATCHED []" in proc.stdout, (proc.stdout, proc.stderr)
    assert "AFTER UNPATCHED ['gactors://patched/user/sleeper']" in proc.stdout, proc.stdout
    # Our warning replaced gevent's own printed report.
    assert "[gactors://patched/user/sleeper] actor gactors://patched/user/sleeper" in proc.stderr
    assert "appears to be blocked" not in proc.stderr


def test_the_dashboard_names_the_blocking_actor() -> None:
    """The dashboard's hub-blocking list (gactors.contrib.dashboard) shows a real block."""
    import json

    from gactors.contrib.dashboard import DashboardApp

    with ActorSystem("blocky", config={"blocking_threshold": THRESHOLD}) as s:
        app = DashboardApp(s)
        s.actor_of(Props(Blocker), "blocker").tell(("block", 4 * THRESHOLD))
        deadline = time.monotonic() + 20
        while True:
            body = b"".join(
                app({"REQUEST_METHOD": "GET", "PATH_INFO": "/api/state"}, lambda *a: None)
            )
            recent = json.loads(body)["hub_blocked"]["recent"]
            if "/user/blocker" in [b["path"] for b in recent]:
                break
            assert time.monotonic() < deadline, recent
            gevent.sleep(0.05)


def test_the_warning_reports_how_long_the_hub_was_blocked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A small threshold: gevent notices after about one period, long before the block
    # ends. The warning used to report that moment ("0.010 s") for a 300 ms block.
    caplog.set_level(logging.WARNING, logger="gactors.hub")
    system = make_system("blocking-duration", 0.01)
    try:
        blocked = Collector()
        system.event_stream.subscribe(blocked, HubBlocked)
        blocker = system.actor_of(Props(Blocker), "blocker")
        blocker.ask(("block", 0.3), timeout=10)
        assert blocked.enough.wait(timeout=10)
        assert 0.25 <= blocked.events[0].seconds <= 5.0
        records: list[logging.LogRecord] = await_condition(
            lambda: [r for r in caplog.records if str(blocker.path) in r.getMessage()],
            timeout=5,
            interval=0.02,
        )
        assert len(records) == 1
        message = records[0].getMessage()
        seconds = float(message.split("the gevent hub for ")[1].split(" s")[0])
        assert 0.25 <= seconds <= 5.0, message
    finally:
        system.terminate()
        assert system.await_termination(10)


class Spinner(Actor):
    """Holds the hub (and the GIL) in a pure-Python loop for ``message`` seconds."""

    def receive(self, message: float) -> None:
        end = time.perf_counter() + message
        while time.perf_counter() < end:
            pass
        self.sender.tell("spun")


def test_every_block_over_the_threshold_plus_the_resolution_is_reported() -> None:
    # Issue 29: blocks of 1.5x the threshold were missed (gevent's check only noticed a
    # block that held a whole period of its own, i.e. often only blocks of twice the
    # threshold), and more so for code holding the GIL: 3-4 of ten 60 ms sleeps and 1
    # of ten 80 ms busy loops were reported at a 40 ms threshold. The resolution (a
    # quarter of the threshold, plus the 5 ms switch interval for code holding the
    # GIL) is documented in docs/settings.md; these blocks are beyond it with a margin
    # for a loaded machine (the monitoring thread may be scheduled late).
    threshold = 0.04
    system = make_system("resolution", threshold)
    try:
        events = Collector(wanted=10**6)
        system.event_stream.subscribe(events, HubBlocked)
        sleeper = system.actor_of(Props(Blocker), "sleeper")
        spinner = system.actor_of(Props(Spinner), "spinner")
        short_sleeper = system.actor_of(Props(Blocker), "short-sleeper")
        short_spinner = system.actor_of(Props(Spinner), "short-spinner")
        for _ in range(10):
            sleeper.ask(("block", 0.07), timeout=10)
            gevent.sleep(0.03)  # the hub runs between two blocks
            spinner.ask(0.1, timeout=10)
            gevent.sleep(0.03)
            # Shorter than the threshold: never reported (a block is never reported
            # longer than it was).
            short_sleeper.ask(("block", 0.02), timeout=10)
            gevent.sleep(0.03)
            short_spinner.ask(0.03, timeout=10)
            gevent.sleep(0.03)
        gevent.sleep(0.2)  # the last episode is published once the hub ran
        by_path: dict[str, list[float]] = {}
        for e in events.events:
            by_path.setdefault(e.actor_path, []).append(e.seconds)
        assert len(by_path.get(str(sleeper.path), [])) == 10, sorted(by_path.items())
        assert len(by_path.get(str(spinner.path), [])) == 10, sorted(by_path.items())
        assert str(short_sleeper.path) not in by_path, by_path
        assert str(short_spinner.path) not in by_path, by_path
        assert all(threshold <= s <= 0.5 for s in by_path[str(sleeper.path)]), by_path
        assert all(threshold <= s <= 0.5 for s in by_path[str(spinner.path)]), by_path
    finally:
        system.terminate()
        assert system.await_termination(10)


@pytest.mark.parametrize("threshold", [0.005, 1e-9, 0.0099])
def test_a_threshold_below_the_resolution_is_refused(threshold: float) -> None:
    # Issue 29: 0.005 s (or 1e-9) was accepted, and ten 10 ms blocks gave no event.
    with pytest.raises(ConfigError, match=r"must be at least 0\.01 s"):
        make_system("too-fine", threshold)

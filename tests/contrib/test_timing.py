"""Per-class processing time, ask latency and mailbox wait (gactors._timing), and their
Prometheus histograms: only the classes named in ``metrics.timed_actors`` are timed, the
others run their own ``receive`` untouched, and the number of labels is bounded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gevent
import pytest

prometheus_client = pytest.importorskip(
    "prometheus_client", reason="needs prometheus_client: pip install 'gactors[prometheus]'"
)
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from gactors import Actor, ActorSystem, ConfigError, Props  # noqa: E402
from gactors._timing import BOUNDS, Histo, percentile, timing_for  # noqa: E402
from gactors.contrib.prometheus import ActorSystemMetrics  # noqa: E402

from .test_prometheus import parse, value  # noqa: E402


class Slow(Actor):
    """Answers after ``message`` seconds of (cooperative) work."""

    def receive(self, message: Any) -> None:
        gevent.sleep(message)
        self.sender.tell(message)


class Fast(Actor):
    def receive(self, message: Any) -> None:
        self.sender.tell(message)


class Switcher(Actor):
    """Becomes another behavior: that one is timed too."""

    def receive(self, message: Any) -> None:
        self.context.become(self.other)
        self.sender.tell("became")

    def other(self, message: Any) -> None:
        gevent.sleep(0.02)
        self.sender.tell("other")


@pytest.fixture
def timed() -> Iterator[ActorSystem]:
    s = ActorSystem("timed", config={"metrics": {"timed_actors": ["Slow", "Switcher"]}})
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10)


def test_only_the_named_classes_are_timed(timed: ActorSystem) -> None:
    slow = timed.actor_of(Props(Slow))
    fast = timed.actor_of(Props(Fast))
    for _ in range(5):
        assert slow.ask(0.01) == 0.01
        assert fast.ask(0) == 0
    timing = timing_for(timed)
    assert set(timing.classes) == {"Slow"}
    times = timing.classes["Slow"]
    assert times.processing.count == 5
    # Each receive slept 10 ms: no bucket at or below 5 ms has any of them.
    assert sum(times.processing.counts[: BOUNDS.index(0.005) + 1]) == 0
    assert 0.05 <= times.processing.sum < 1.0
    assert times.ask.count == 5 and times.ask.sum >= times.processing.sum
    assert times.wait.count == 5
    # The untimed actor's receive is its class's, unwrapped.
    cell: Any = fast._cell  # type: ignore[attr-defined]
    assert "receive" not in vars(cell.actor)


def test_a_restarted_actor_and_a_become_stay_timed(timed: ActorSystem) -> None:
    sw = timed.actor_of(Props(Switcher))
    assert sw.ask("x") == "became"
    assert sw.ask("x") == "other"
    times = timing_for(timed).classes["Switcher"]
    assert times.processing.count == 2
    assert times.processing.sum >= 0.02  # the behavior's sleep was measured
    # A restart makes a new instance: its receive is timed too.
    slow = timed.actor_of(Props(Slow))
    slow.tell("not a number")  # gevent.sleep raises: restarted
    assert slow.ask(0.0) == 0.0
    cell: Any = slow._cell  # type: ignore[attr-defined]
    assert cell.restarts == 1 and "receive" in vars(cell.actor)
    assert timing_for(timed).classes["Slow"].processing.count == 2  # the failed one too


def test_actors_that_exist_before_are_timed_from_their_next_message() -> None:
    with ActorSystem("late") as s:
        fast = s.actor_of(Props(Fast))
        assert fast.ask(1) == 1
        timing = timing_for(s)
        assert not timing.enabled and not timing.classes
        timing.time_classes([f"{Fast.__module__}.Fast"])
        assert fast.ask(2) == 2
        assert timing.classes["Fast"].processing.count == 1


class OwnReceive(Actor):
    """Assigns its receive in its constructor: that one is timed (and kept)."""

    def __init__(self) -> None:
        self.receive = self.answer  # type: ignore[method-assign]

    def answer(self, message: Any) -> None:
        self.sender.tell(("own", message))


def test_a_receive_assigned_in_the_constructor_is_kept_and_timed() -> None:
    with ActorSystem("own", config={"metrics": {"timed_actors": ["OwnReceive"]}}) as s:
        ref = s.actor_of(Props(OwnReceive))
        assert ref.ask(1) == ("own", 1)
        timing = timing_for(s)
        timing.time_classes(["OwnReceive"])  # again: not wrapped twice
        assert ref.ask(2) == ("own", 2)
        assert timing.classes["OwnReceive"].processing.count == 2


def test_labels_are_bounded() -> None:
    classes = [type(f"K{i}", (Fast,), {}) for i in range(5)]
    with ActorSystem("bounded", config={"metrics": {"timed_actors": ["*"], "max_classes": 2}}) as s:
        for k in classes:
            assert s.actor_of(Props(k)).ask(1) == 1
        timing = timing_for(s)
        assert len(timing.classes) == 3  # two classes, then "other"
        assert timing.classes["other"].processing.count >= 3


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="timed_actors"):
        ActorSystem("bad", config={"metrics": {"timed_actors": [""]}})
    with pytest.raises(ConfigError, match="max_classes"):
        ActorSystem("bad", config={"metrics": {"max_classes": 0}})
    with pytest.raises(ConfigError, match=r"metrics\.timed_actor"):
        ActorSystem("bad", config={"metrics": {"timed_actor": ["X"]}})


def test_percentiles_from_buckets() -> None:
    h = Histo()
    assert percentile(h.counts, 0.5) is None
    for _ in range(90):
        h.add(0.0008)  # bucket (0.0005, 0.001]
    for _ in range(10):
        h.add(0.2)  # bucket (0.1, 0.25]
    p50 = percentile(h.counts, 0.5)
    p99 = percentile(h.counts, 0.99)
    assert p50 is not None and 0.0005 < p50 <= 0.001
    assert p99 is not None and 0.1 < p99 <= 0.25


def test_prometheus_histograms_per_class(timed: ActorSystem) -> None:
    registry = CollectorRegistry()
    ActorSystemMetrics(timed, registry=registry, interval=None)
    before = parse(generate_latest(registry).decode())
    assert not any(name.startswith("gactors_message_processing") for name, _ in before)
    slow = timed.actor_of(Props(Slow))
    for _ in range(3):
        slow.ask(0.01)
    samples = parse(generate_latest(registry).decode())
    labels = {"system": "timed", "actor_class": "Slow"}
    assert value(samples, "gactors_message_processing_seconds_count", **labels) == 3
    assert value(samples, "gactors_message_processing_seconds_bucket", le="0.005", **labels) == 0
    assert value(samples, "gactors_message_processing_seconds_bucket", le="+Inf", **labels) == 3
    assert value(samples, "gactors_message_processing_seconds_sum", **labels) >= 0.03
    assert value(samples, "gactors_ask_seconds_count", **labels) == 3
    assert value(samples, "gactors_mailbox_wait_seconds_count", **labels) == 3
    # A second scrape adds only what is new.
    slow.ask(0.0)
    samples = parse(generate_latest(registry).decode())
    assert value(samples, "gactors_message_processing_seconds_count", **labels) == 4

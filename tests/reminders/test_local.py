"""Reminders of a single process on the SQLite store (SPEC section 20): the API, its
errors, firing times, periods, ``self.context.reminders``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("msgspec")

from gactors import Actor, ActorSystem, ConfigError, DeadLetter, Props
from gactors.reminders import Reminders
from gactors.reminders._model import plan

pytestmark = [pytest.mark.timeout(60)]

TICK = 0.2


class Recorder(Actor):
    """Keeps (wall time, message) of everything it gets; ``"log"`` answers them."""

    def __init__(self) -> None:
        self.got: list[tuple[float, Any]] = []

    def receive(self, m: Any) -> None:
        if m == "log":
            self.sender.tell(list(self.got))
        elif isinstance(m, tuple) and m and m[0] == "self-register":
            r = self.context.reminders
            r.register(m[1], ("ping", m[1]), due=m[2], period=m[3])
            self.sender.tell(r.names())
        elif m == "self-unregister":
            self.sender.tell(self.context.reminders.unregister("mine"))
        else:
            self.got.append((time.time(), m))


def local_system(tmp_path: Path, **reminders: Any) -> ActorSystem:
    return ActorSystem(
        "solo",
        config={
            "persistence": {"path": str(tmp_path / "p.sqlite3")},
            "reminders": {"tick": TICK, **reminders},
        },
    )


@pytest.fixture
def solo(tmp_path: Path) -> Iterator[ActorSystem]:
    system = local_system(tmp_path)
    try:
        yield system
    finally:
        system.terminate()
        system.await_termination(10)


def wait_log(ref: Any, n: int, limit: float) -> list[tuple[float, Any]]:
    deadline = time.monotonic() + limit
    while True:
        got = ref.ask("log", timeout=5)
        if len(got) >= n or time.monotonic() > deadline:
            return got  # type: ignore[no-any-return]
        time.sleep(0.05)


def test_same_object_register_names_unregister_replace(solo: ActorSystem) -> None:
    r = Reminders(solo)
    assert Reminders(solo) is r
    r.register("b", "x", path="/user/a", due=60)
    r.register("a", "x", path="/user/a", due=60, period=5)
    r.register("a", "y", path="/user/a", due=timedelta(minutes=2))  # replaced
    r.register("c", "x", path="/user/other", due=60)
    assert r.names(path="/user/a") == ["a", "b"]
    assert r.names(path="/user/other") == ["c"]
    assert r.unregister("a", path="/user/a") is True
    assert r.unregister("a", path="/user/a") is False
    assert r.names(path="/user/a") == ["b"]


def test_bad_input_raises_clear_errors(solo: ActorSystem) -> None:
    r = Reminders(solo)
    with pytest.raises(ValueError, match="exactly one of"):
        r.register("n", "m", due=1)
    with pytest.raises(ValueError, match="entity and singleton"):
        r.register("n", "m", entity=("cart", "1"), singleton="s", due=1)
    with pytest.raises(ValueError, match="naive datetime"):
        r.register("n", "m", path="/user/a", due=datetime.now())
    with pytest.raises(ValueError, match="period must be > 0"):
        r.register("n", "m", path="/user/a", due=1, period=-1)
    with pytest.raises(ValueError, match="misfire must be one of"):
        r.register("n", "m", path="/user/a", due=1, misfire="twice")
    with pytest.raises(ValueError, match="due must be >= 0"):
        r.register("n", "m", path="/user/a", due=-5)
    with pytest.raises(TypeError, match="due must be seconds"):
        r.register("n", "m", path="/user/a", due="soon")
    with pytest.raises(ValueError, match="reminder name"):
        r.register("", "m", path="/user/a", due=1)
    with pytest.raises(ValueError, match="absolute actor path"):
        r.register("n", "m", path="user/a", due=1)
    with pytest.raises(ValueError, match="needs a cluster"):
        r.register("n", "m", entity=("cart", "1"), due=1)
    with pytest.raises(ValueError, match="needs a cluster"):
        r.names(singleton="alloc")
    assert r.names(path="/user/a") == []  # nothing was stored by the refused calls


def test_settings_table_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"reminders\.tick"):
        local_system(tmp_path, tick=0)
    with pytest.raises(ConfigError, match=r"reminders\.tick"):
        local_system(tmp_path, tick="1")
    with pytest.raises(ConfigError, match=r"unknown setting 'reminders.tik'"):
        ActorSystem("x", config={"reminders": {"tik": 1.0}})


def test_fires_within_a_tick_after_due_never_before(solo: ActorSystem) -> None:
    rec = solo.actor_of(Props(Recorder), "rec")
    r = Reminders(solo)
    due_at = datetime.now(timezone.utc) + timedelta(seconds=1.0)
    r.register("once", "wake", path="/user/rec", due=due_at)
    got = wait_log(rec, 1, 5)
    assert [m for _, m in got] == ["wake"]
    at = got[0][0]
    late = at - due_at.timestamp()
    assert late >= 0, f"fired {-late:.3f} s before its due time"
    assert late <= TICK + 0.3, f"fired {late:.3f} s after its due time (tick {TICK})"
    time.sleep(3 * TICK)
    assert len(rec.ask("log", timeout=5)) == 1  # a one-shot fires once
    assert r.names(path="/user/rec") == []  # and is gone


def test_periodic_fires_every_period(solo: ActorSystem) -> None:
    rec = solo.actor_of(Props(Recorder), "rec")
    r = Reminders(solo)
    start = time.time()
    r.register("tick", "beat", path="/user/rec", due=0.5, period=0.5)
    got = wait_log(rec, 5, 10)
    assert len(got) >= 5
    times = [t - start for t, _ in got[:5]]
    for k, t in enumerate(times):
        assert t >= 0.5 * (k + 1) - 0.01, times  # never before its due time
        assert t <= 0.5 * (k + 1) + TICK + 0.4, times
    r.unregister("tick", path="/user/rec")
    n = len(rec.ask("log", timeout=5))
    time.sleep(1.0)
    assert len(rec.ask("log", timeout=5)) <= n + 1  # at most one firing was on its way


def test_no_actor_at_the_path_is_a_dead_letter(solo: ActorSystem) -> None:
    dead: list[Any] = []
    solo.event_stream.subscribe(lambda e: dead.append(e.message), DeadLetter)
    Reminders(solo).register("lost", "nobody", path="/user/nobody", due=0.1)
    deadline = time.monotonic() + 5
    while "nobody" not in dead and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "nobody" in dead


def test_context_reminders_register_for_the_actor_itself(solo: ActorSystem) -> None:
    rec = solo.actor_of(Props(Recorder), "me")
    assert rec.ask(("self-register", "mine", 0.3, None), timeout=5) == ["mine"]
    assert Reminders(solo).names(path="/user/me") == ["mine"]
    got = wait_log(rec, 1, 5)
    assert [m for _, m in got] == [("ping", "mine")]
    rec.ask(("self-register", "mine", 60, None), timeout=5)
    assert rec.ask("self-unregister", timeout=5) is True
    assert Reminders(solo).names(path="/user/me") == []


@pytest.mark.parametrize(
    ("misfire", "fires"),
    [("once", 1), ("all", 10), ("skip", 0)],
)
def test_misfire_plan(misfire: str, fires: int) -> None:
    # Due at 0, every 100 ms, looked at 950 ms later: 10 due times passed (the
    # latest 50 ms ago, more than the 20 ms of grace: a recovery, not a tick).
    assert plan(0, 100, misfire, 950, 20) == (fires, 1000)
    # The latest within the grace: skip fires it (an ordinary, slightly late tick).
    assert plan(0, 100, misfire, 910, 20)[0] == {"once": 1, "all": 10, "skip": 1}[misfire]
    # One due time passed: an ordinary firing whatever the policy.
    assert plan(0, 100, misfire, 50, 200) == (1, 100)
    # A one-shot fires once.
    assert plan(0, None, misfire, 10_000, 200) == (1, None)


def test_misfire_all_is_capped() -> None:
    assert plan(0, 1, "all", 10_000_000, 2000)[0] == 1000


def test_prometheus_counts_registered_fired_and_lateness(solo: ActorSystem) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from gactors.contrib.prometheus import ActorSystemMetrics

    registry = prometheus_client.CollectorRegistry()
    metrics = ActorSystemMetrics(solo, registry=registry, interval=None)
    rec = solo.actor_of(Props(Recorder), "rec")
    r = Reminders(solo)
    r.register("soon", "x", path="/user/rec", due=0.2)
    r.register("later", "y", path="/user/rec", due=600)
    wait_log(rec, 1, 5)
    time.sleep(0.1)
    metrics.refresh()
    labels = {"system": solo.name}

    def value(name: str) -> float | None:
        return registry.get_sample_value(name, labels)  # type: ignore[no-any-return]

    assert value("gactors_reminders_registered_total") == 2
    assert value("gactors_reminders_fired_total") == 1
    assert value("gactors_reminders_lateness_seconds_count") == 1
    late = value("gactors_reminders_lateness_seconds_sum")
    assert late is not None and 0 <= late <= TICK + 0.3
    metrics.refresh()  # nothing new: the totals stay
    assert value("gactors_reminders_fired_total") == 1
    assert value("gactors_reminders_lateness_seconds_count") == 1


def test_an_undecodable_reminder_does_not_stop_the_others(solo: ActorSystem) -> None:
    rec = solo.actor_of(Props(Recorder), "rec")
    r = Reminders(solo)
    # A record this process cannot decode (0xc1 is never valid msgpack), due first.
    r._store.register("/user/rec", "broken", int(time.time() * 1000), b"\xc1")
    r.register("fine", "ok", path="/user/rec", due=0.3)
    got = wait_log(rec, 1, 5)
    assert [m for _, m in got] == ["ok"]
    assert r.names(path="/user/rec") == ["broken"]  # left for a process that can

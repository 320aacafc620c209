"""Store calls other than batched writes (recoveries, snapshots, deletions) are served
by a few greenlets, not one each; a slow call holds up none of the others."""

from __future__ import annotations

from typing import Any

import gevent

from gactors import ActorSystem
from gactors.persistence._extension import RUNNERS, persistence_of


def test_a_thousand_calls_use_at_most_runners_greenlets(psys: ActorSystem) -> None:
    pers = persistence_of(psys)
    answers: list[Any] = []
    most = [0]

    def call(i: int) -> Any:
        most[0] = max(most[0], pers._runners)
        gevent.sleep(0.001)
        return i

    for i in range(1000):
        pers.run(f"call {i}", lambda i=i: call(i), lambda r, e: answers.append((r, e)))
    with gevent.Timeout(10):
        while len(answers) < 1000:
            gevent.sleep(0.01)
    assert sorted(r for r, _ in answers) == list(range(1000))
    assert all(e is None for _, e in answers)
    assert 1 < most[0] <= RUNNERS
    gevent.sleep(0.05)
    assert pers._runners == 0 and pers._busy == 0


def test_a_slow_call_does_not_hold_up_the_next(psys: ActorSystem) -> None:
    pers = persistence_of(psys)
    order: list[str] = []
    pers.run("slow", lambda: gevent.sleep(0.5), lambda r, e: order.append("slow"))
    gevent.sleep(0.01)  # the slow call is running
    pers.run("fast", lambda: None, lambda r, e: order.append("fast"))
    with gevent.Timeout(5):
        while len(order) < 2:
            gevent.sleep(0.01)
    assert order == ["fast", "slow"]

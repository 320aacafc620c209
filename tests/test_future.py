"""gactors._future: waiting for a Future (its bad inputs and where it may not wait)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import gevent
import pytest
from _inputs import NAN, WAIT, short

from gactors import ActorRef, ActorSystem, IllegalStateError
from gactors._future import Future


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
@pytest.mark.parametrize("timeout", [-1, NAN, math.inf, 10**400], ids=short)
def test_bad_future_waits(echo: ActorRef, system: ActorSystem, timeout: Any) -> None:
    fut = echo.ask("x", timeout=WAIT, block=False)
    with pytest.raises(ValueError, match="timeout"):
        fut.get(timeout)
    with pytest.raises(ValueError, match="timeout"):
        system.await_termination(timeout)
    assert fut.get(WAIT) == "x"


@pytest.mark.parametrize("timeout", ["1", [1], True], ids=repr)
def test_future_waits_of_the_wrong_type(echo: ActorRef, system: ActorSystem, timeout: Any) -> None:
    fut = echo.ask("x", timeout=WAIT, block=False)
    with pytest.raises(TypeError, match="timeout"):
        fut.get(timeout)
    with pytest.raises(TypeError, match="timeout"):
        system.await_termination(timeout)
    assert fut.get(timedelta(seconds=WAIT)) == "x"


def test_waiting_for_a_future_inside_the_hub_is_refused(system: ActorSystem) -> None:
    fut: Future[int] = Future(system._hub, system._tid)
    errors: list[BaseException] = []

    def in_hub() -> None:
        try:
            fut.get(0.1)
        except BaseException as e:
            errors.append(e)

    system._hub.loop.run_callback(in_hub)
    gevent.sleep(0.05)
    assert len(errors) == 1 and isinstance(errors[0], IllegalStateError)

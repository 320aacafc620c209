"""gactors.pattern: graceful_stop, ask and pipe_to check their arguments."""

from __future__ import annotations

from typing import Any

import pytest
from _actors import Echo
from _inputs import BAD_TIMEOUTS, NOT_DURATIONS, WAIT, short

from gactors import ActorRef, ActorSystem, AskTimeoutError, PoisonPill, Props, pattern


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=short)
def test_bad_graceful_stop_timeouts(echo: ActorRef, timeout: Any) -> None:
    with pytest.raises(ValueError, match="graceful_stop timeout"):
        pattern.graceful_stop(echo, timeout)


@pytest.mark.parametrize("timeout", NOT_DURATIONS, ids=short)
def test_graceful_stop_timeouts_of_the_wrong_type(echo: ActorRef, timeout: Any) -> None:
    with pytest.raises(TypeError, match="graceful_stop timeout"):
        pattern.graceful_stop(echo, timeout)


def test_pattern_functions_check_their_arguments(echo: ActorRef) -> None:
    with pytest.raises(TypeError):
        pattern.ask("not a ref", "x", 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pattern.pipe_to("not a future", echo)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pattern.pipe_to(echo.ask("x", timeout=WAIT, block=False), "not a ref")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pattern.graceful_stop("not a ref", 1.0)  # type: ignore[arg-type]


def test_poison_pill_is_the_only_stop_message_graceful_stop_needs(
    system: ActorSystem,
) -> None:
    ref = system.actor_of(Props(Echo), "e")
    with pytest.raises(AskTimeoutError):
        # A stop message the actor does not stop on: a defined failure, not a hang.
        pattern.graceful_stop(ref, 0.1, stop_message="not a stop").get(WAIT)
    assert pattern.graceful_stop(ref, WAIT, PoisonPill).get(WAIT) is True

"""gactors._context: what an actor's context refuses (checked inside the actor)."""

from __future__ import annotations

from typing import Any

import pytest
from _actors import Echo
from _inputs import NAN, WAIT

from gactors import Actor, ActorSystem, Props


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
class Misuser(Actor):
    """Tries one misuse of its context per message; replies with the exception."""

    def receive(self, message: Any) -> None:
        ctx = self.context
        actions = {
            "watch non-ref": lambda: ctx.watch("x"),  # type: ignore[arg-type]
            "unwatch non-ref": lambda: ctx.unwatch(3),  # type: ignore[arg-type]
            "watch_with None": lambda: ctx.watch_with(self.ref, None),
            "rewatch": lambda: (
                ctx.watch_with(self.sender, "a"),
                ctx.watch_with(self.sender, "b"),
            ),
            "become non-callable": lambda: ctx.become("nope"),  # type: ignore[arg-type]
            "negative receive timeout": lambda: ctx.set_receive_timeout(-1),
            "nan receive timeout": lambda: ctx.set_receive_timeout(NAN),
            "str receive timeout": lambda: ctx.set_receive_timeout("1"),  # type: ignore[arg-type]
            "huge receive timeout": lambda: ctx.set_receive_timeout(10**400),
            "stop non-ref": lambda: ctx.stop("x"),  # type: ignore[arg-type]
            "bad child name": lambda: ctx.actor_of(Props(Echo), "a/b"),
            "child non-props": lambda: ctx.actor_of(Echo),  # type: ignore[arg-type]
            "timer None": lambda: self.timers.start_single_timer("k", None, 0.1),
            "timer unhashable key": lambda: self.timers.start_single_timer([], "m", 0.1),
            "timer nan": lambda: self.timers.start_single_timer("k", "m", NAN),
            "timer zero interval": lambda: self.timers.start_timer_at_fixed_rate("k", "m", 0),
        }
        try:
            actions[message]()
        except Exception as e:
            self.sender.tell(type(e).__name__)
        else:
            self.sender.tell("accepted")


@pytest.mark.parametrize(
    ("misuse", "error"),
    [
        ("watch non-ref", "TypeError"),
        ("unwatch non-ref", "TypeError"),
        ("watch_with None", "InvalidMessageException"),
        ("rewatch", "IllegalStateError"),
        ("become non-callable", "TypeError"),
        ("negative receive timeout", "ValueError"),
        ("nan receive timeout", "ValueError"),
        ("str receive timeout", "TypeError"),
        ("huge receive timeout", "ValueError"),
        ("stop non-ref", "TypeError"),
        ("bad child name", "InvalidActorNameException"),
        ("child non-props", "TypeError"),
        ("timer None", "InvalidMessageException"),
        ("timer unhashable key", "TypeError"),
        ("timer nan", "ValueError"),
        ("timer zero interval", "ValueError"),
    ],
)
def test_context_misuse_raises_inside_the_actor(
    system: ActorSystem, misuse: str, error: str
) -> None:
    ref = system.actor_of(Props(Misuser), "m")
    assert ref.ask(misuse, timeout=WAIT) == error

"""The receive timeout: ``ReceiveTimeout`` after a quiet period, repeated while idle."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from gactors._dungeon._state import CellState
from gactors._messages import ReceiveTimeout as _RECEIVE_TIMEOUT


class ReceiveTimeout(CellState):
    """Mixin of ActorCell. The timer is a hub timer; it is re-armed after a batch that
    processed at least one message that influences the timeout."""

    if not TYPE_CHECKING:  # mypy would check every attribute against the empty slots
        __slots__ = ()

    @property
    def receive_timeout(self) -> float | None:
        return self.rt_seconds

    def set_receive_timeout(self, timeout: float | timedelta | None) -> None:
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds()
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            raise ValueError(f"receive timeout must be a positive number or None, not {timeout!r}")
        self.rt_seconds = float(timeout) if timeout is not None else None
        self.check_receive_timeout()

    def cancel_receive_timeout(self) -> None:
        timer = self.rt_timer
        if timer is not None:
            self.rt_timer = None
            timer.close()

    def check_receive_timeout(self) -> None:
        """(Re)start the idle timer for the full period, or stop it when unset."""
        if self.rt_seconds is None and self.rt_timer is None:
            return  # the common case: no receive timeout at all
        self.cancel_receive_timeout()
        seconds = self.rt_seconds
        if seconds is not None and not self.dead:
            timer = self.rt_timer = self.system._hub.loop.timer(seconds)
            timer.start(self._fire_receive_timeout)

    def _fire_receive_timeout(self) -> None:
        timer = self.rt_timer
        self.rt_timer = None
        if timer is not None:
            timer.close()
        if not self.dead and self.rt_seconds is not None:
            self.ref.tell(_RECEIVE_TIMEOUT, None)

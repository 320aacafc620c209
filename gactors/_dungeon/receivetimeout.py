"""The receive timeout: ``ReceiveTimeout`` after a quiet period, repeated while idle."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from gactors._dungeon._state import CellState
from gactors._duration import seconds
from gactors._messages import ReceiveTimeout


class ReceiveTimeoutTimer(CellState):
    """Mixin of ActorCell. The timer is a hub timer; it is re-armed after a batch that
    processed at least one message that influences the timeout."""

    if not TYPE_CHECKING:  # mypy would check every attribute against the empty slots
        __slots__ = ()

    @property
    def receive_timeout(self) -> float | None:
        return self.rt_seconds

    def set_receive_timeout(self, timeout: float | timedelta | None) -> None:
        self.rt_seconds = None if timeout is None else seconds(timeout, "receive timeout")
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
        period = self.rt_seconds
        if period is not None and not self.dead:
            loop = self.system._hub.loop
            timer = self.rt_timer = loop.timer(period)
            # The idle period starts now, not at the loop's last clock update (which
            # lags behind after the hub was blocked: the timeout would come early).
            loop.update_now()
            timer.start(self._fire_receive_timeout)

    def _fire_receive_timeout(self) -> None:
        timer = self.rt_timer
        self.rt_timer = None
        if timer is not None:
            timer.close()
        if not self.dead and self.rt_seconds is not None:
            self.ref.tell(ReceiveTimeout, None)

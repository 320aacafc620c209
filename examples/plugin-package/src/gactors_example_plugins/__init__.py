"""Example gactors plugins (see this package's README).

* ``resume_value_errors`` (entry point ``example-resume-value-errors`` in
  ``gactors.strategies``): a one-for-one strategy that resumes a child failing with
  ``ValueError`` and otherwise decides like gactors' default decider.
* ``ResumingConfigurator`` (``example-resuming`` in ``gactors.configurators``): gives the
  ``/user`` guardian that strategy, for ``guardian_supervisor_strategy =
  "example-resuming"``.
* ``LinearBackoff`` (``example-linear`` in ``gactors.backoff_policies``): delays growing
  by ``min_backoff`` per restart, capped at ``max_backoff``, plus the usual random part.
"""

from __future__ import annotations

import random

from zope.interface import implementer

from gactors import Directive, OneForOneStrategy, default_decider
from gactors.interfaces import IBackoffPolicy, ISupervisorStrategyConfigurator

__all__ = ["LinearBackoff", "ResumingConfigurator", "ResumingStrategy", "resume_value_errors"]


def _resume_value_errors(exc: BaseException) -> Directive | None:
    if isinstance(exc, ValueError):
        return Directive.RESUME
    return default_decider(exc)


class ResumingStrategy(OneForOneStrategy):
    """One-for-one: resume on ``ValueError``, otherwise the default decider.

    Subclassing a built-in strategy is the easy way to provide ``ISupervisorStrategy``:
    the base class declares the interface and implements ``handle_failure`` and
    ``handle_child_terminated``.
    """

    def __init__(self) -> None:
        super().__init__(_resume_value_errors)


resume_value_errors = ResumingStrategy()
"""The instance named by the ``example-resume-value-errors`` entry point."""


@implementer(ISupervisorStrategyConfigurator)
class ResumingConfigurator:
    """Gives the ``/user`` guardian a :class:`ResumingStrategy`.

    gactors instantiates the class with no arguments and calls :meth:`create` once per
    actor system.
    """

    def create(self) -> ResumingStrategy:
        return ResumingStrategy()


@implementer(IBackoffPolicy)
class LinearBackoff:
    """``delay(n) = min(max_backoff, min_backoff * (n + 1)) * (1 + random() * random_factor)``.

    The class is the factory: gactors calls ``LinearBackoff(min_backoff, max_backoff,
    random_factor)`` once per backoff supervisor.
    """

    def __init__(
        self,
        min_backoff: float,
        max_backoff: float,
        random_factor: float,
        rng: random.Random | None = None,
    ) -> None:
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.random_factor = random_factor
        self.rng = rng if rng is not None else random.Random()

    def next_delay(self, restart_count: int) -> float:
        base = min(self.max_backoff, self.min_backoff * (restart_count + 1))
        return base * (1.0 + self.rng.random() * self.random_factor)

    def reset(self) -> None:
        """Stateless: nothing to forget."""

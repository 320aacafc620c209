"""Backoff supervision (docs/backoff.md): restart a child after growing delays.

A :class:`BackoffSupervisor` sits between a parent and one child. When the child stops
(:meth:`BackoffOpts.on_stop`) or fails (:meth:`BackoffOpts.on_failure`), a new child is
started only after a delay that grows with each restart, so that a child depending on
something that is down (a database, a remote service) does not hammer it::

    from gactors.backoff import BackoffOpts, BackoffSupervisor

    opts = BackoffOpts.on_failure(Props(Worker), "worker", 3.0, 30.0, 0.2).with_max_retries(10)
    supervisor = system.actor_of(BackoffSupervisor.props(opts), "worker-supervisor")
    supervisor.tell(job)  # forwarded to the current child

The delays come from a backoff policy (:class:`~gactors.interfaces.IBackoffPolicy`):
``"exponential"`` (the default, Akka's formula), ``"full-jitter"``,
``"decorrelated-jitter"``, ``"constant"``, or one registered by a plugin
(:mod:`gactors.plugins`).
"""

from __future__ import annotations

from gactors.backoff._options import BackoffOpts
from gactors.backoff._policies import (
    BackoffPolicy,
    ConstantBackoff,
    DecorrelatedJitterBackoff,
    ExponentialBackoff,
    FullJitterBackoff,
)
from gactors.backoff._supervisor import (
    BackoffSupervisor,
    CurrentChild,
    GetCurrentChild,
    GetRestartCount,
    Reset,
    RestartCount,
)

__all__ = [
    "BackoffOpts",
    "BackoffPolicy",
    "BackoffSupervisor",
    "ConstantBackoff",
    "CurrentChild",
    "DecorrelatedJitterBackoff",
    "ExponentialBackoff",
    "FullJitterBackoff",
    "GetCurrentChild",
    "GetRestartCount",
    "Reset",
    "RestartCount",
]

"""gunicorn hooks: one actor system per worker process.

In ``gunicorn.conf.py``::

    from gactors.contrib.gunicorn import GunicornHooks

    worker_class = "gevent"
    _gactors = GunicornHooks("myapp.actors:make_system")
    post_worker_init = _gactors.post_worker_init
    worker_exit = _gactors.worker_exit

``make_system()`` is your factory: it takes no arguments, builds the worker's
:class:`~gactors.ActorSystem` (and usually its top-level actors) and returns it.

Why these two hooks:

* ``post_worker_init`` runs in the worker process, after the fork, after the gevent
  worker monkey-patched the process and loaded the application, and just before the
  worker starts serving. The system then lives in the worker's hub, next to the request
  greenlets. A system created in the master (at import time with ``preload_app``, or in
  ``on_starting``) would be unusable in the workers: gactors refuses it there.
* ``worker_exit`` runs in the worker process once it stopped serving (SIGTERM, SIGINT,
  ``max_requests``, a timeout). The system is terminated there, and waited for, within a
  *shutdown budget* that stays below gunicorn's ``graceful_timeout``, after which the
  master kills the worker. What was still queued in mailboxes (and so goes to dead
  letters) is logged first.

Progress is logged on the worker's gunicorn logger (``gunicorn.error``), prefixed with
``gactors:``; unless ``route_logs=False`` or logging is configured already, gactors' own
loggers are sent to the same handlers. The module-level :func:`post_worker_init` and
:func:`worker_exit` do the same with the factory named by the ``GACTORS_SYSTEM_FACTORY``
environment variable.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any, cast

from gactors._system import ActorSystem
from gactors._threads import get_ident
from gactors.contrib import set_worker_system
from gactors.exceptions import IllegalStateError

if TYPE_CHECKING:
    from gactors._cell import ActorCell

__all__ = [
    "ENV_FACTORY",
    "GunicornHooks",
    "post_worker_init",
    "queued_messages",
    "resolve_factory",
    "worker_exit",
]

ENV_FACTORY = "GACTORS_SYSTEM_FACTORY"
"""Environment variable naming the factory used by the module-level hooks."""

BUDGET_SHARE = 0.9
"""The shutdown budget never exceeds this share of ``graceful_timeout``."""

SystemFactory = Callable[[], ActorSystem]

_log = logging.getLogger("gactors.contrib.gunicorn")


def resolve_factory(factory: str | SystemFactory) -> SystemFactory:
    """Turn ``"package.module:callable"`` (the attribute may be dotted) into the callable."""
    if callable(factory):
        return factory
    if not isinstance(factory, str):
        raise TypeError(
            f"the system factory must be a callable or a 'package.module:callable' string, "
            f"not {type(factory).__name__}"
        )
    module_name, sep, attr = factory.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"the system factory {factory!r} must look like 'package.module:callable'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(f"cannot import the system factory {factory!r}: {e}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(
                f"cannot load the system factory {factory!r}: {module_name} has no {attr!r}"
            ) from None
    if not callable(obj):
        raise TypeError(f"the system factory {factory!r} is not callable")
    return cast(SystemFactory, obj)  # a callable: what the docs ask the factory to be


def queued_messages(system: ActorSystem) -> list[tuple[str, int]]:
    """``(actor path, mailbox depth)`` of every live actor with queued ordinary messages.

    Must be called in the system's hub thread.
    """
    if get_ident() != system._tid:
        raise IllegalStateError("queued_messages() must be called in the system's hub thread")
    found: list[tuple[str, int]] = []
    cells: list[ActorCell] = [system.root_cell]
    while cells:
        cell = cells.pop()
        depth = len(cell.mailbox)
        if depth and not cell.dead:
            found.append((str(cell.path), depth))
        cells.extend(cell.child_cells.values())
    found.sort()
    return found


class GunicornHooks:
    """The ``post_worker_init``/``worker_exit`` pair for one system factory.

    :param factory: ``"package.module:callable"`` or the callable itself; called with
        no arguments in each worker, it returns that worker's :class:`ActorSystem`.
    :param shutdown_budget: seconds ``worker_exit`` waits for the system to terminate.
        Default: the system's ``shutdown_timeout`` setting. Either way it is capped at
        ``0.9 * graceful_timeout``, so the worker exits before the master kills it.
    :param route_logs: send the ``gactors`` loggers to gunicorn's error-log handlers
        when nothing else configured them.
    """

    def __init__(
        self,
        factory: str | SystemFactory,
        *,
        shutdown_budget: float | None = None,
        route_logs: bool = True,
    ) -> None:
        if isinstance(factory, str):
            module_name, sep, attr = factory.partition(":")
            if not sep or not module_name or not attr:
                raise ValueError(
                    f"the system factory {factory!r} must look like 'package.module:callable'"
                )
        elif not callable(factory):
            raise TypeError(
                "the system factory must be a callable or a 'package.module:callable' string, "
                f"not {type(factory).__name__}"
            )
        if shutdown_budget is not None and (
            isinstance(shutdown_budget, bool)
            or not isinstance(shutdown_budget, (int, float))
            or shutdown_budget <= 0
        ):
            raise ValueError(
                f"shutdown_budget must be a positive number of seconds, not {shutdown_budget!r}"
            )
        self.factory = factory
        self.shutdown_budget = shutdown_budget
        self.route_logs = route_logs
        self.system: ActorSystem | None = None
        """The worker's system, once ``post_worker_init`` ran in this process."""

    # -- the hooks --------------------------------------------------------------------------
    def post_worker_init(self, worker: Any) -> None:
        """gunicorn hook: build this worker's actor system with the factory."""
        log = _worker_log(worker)
        if self.route_logs:
            _route_gactors_logs(worker)
        _check_gevent(log)
        factory = resolve_factory(self.factory)
        system = factory()
        if not isinstance(system, ActorSystem):
            raise TypeError(
                f"the system factory {self.factory!r} returned {type(system).__name__}, "
                "not a gactors.ActorSystem"
            )
        self.system = system
        set_worker_system(system)
        budget, capped = self._budget(worker, system)
        if capped:
            log.warning(
                "gactors: shutdown budget capped at %.1f s (%d%% of graceful_timeout %s s)",
                budget,
                round(BUDGET_SHARE * 100),
                _graceful_timeout(worker),
            )
        log.info(
            "gactors: actor system %r started in worker %s (shutdown budget %.1f s)",
            system.name,
            os.getpid(),
            budget,
        )
        system.when_terminated.add_done_callback(
            lambda _: self._terminated_on_its_own(system, worker, log)
        )

    def _terminated_on_its_own(self, system: ActorSystem, worker: Any, log: Any) -> None:
        """The system terminated without ``worker_exit`` (e.g. its cluster node was
        downed): the worker stops, so gunicorn starts a fresh one (a new node)."""
        if self.system is not system:
            return  # worker_exit terminated it: the normal way out
        # A cluster node is the system's ref provider (one with a node id).
        node = system.provider if system.provider.node_id is not None else None
        reason = getattr(node, "termination_reason", None) or "it was terminated by the application"
        log.error(
            "gactors: actor system %r terminated on its own in worker %s (%s); the worker "
            "exits so that gunicorn starts a fresh one%s",
            system.name,
            os.getpid(),
            reason,
            " (a new cluster node)" if node is not None else "",
        )
        # gunicorn's workers loop while ``alive``; clearing it is their graceful exit.
        worker.alive = False

    def worker_exit(self, server: Any, worker: Any) -> None:
        """gunicorn hook: terminate this worker's system within the shutdown budget."""
        system = self.system
        if system is None:
            return  # the worker never got as far as post_worker_init
        log = _worker_log(worker)
        self.system = None
        set_worker_system(None)
        try:
            self._terminate(system, worker, log)
        except Exception:
            log.exception("gactors: terminating actor system %r failed", system.name)

    # -- internals ---------------------------------------------------------------------------
    def _budget(self, worker: Any, system: ActorSystem) -> tuple[float, bool]:
        wanted = (
            self.shutdown_budget
            if self.shutdown_budget is not None
            else system.settings.shutdown_timeout
        )
        graceful = _graceful_timeout(worker)
        if graceful is not None and wanted > BUDGET_SHARE * graceful:
            return BUDGET_SHARE * graceful, True
        return float(wanted), False

    def _terminate(self, system: ActorSystem, worker: Any, log: Any) -> None:
        budget, _ = self._budget(worker, system)
        pid = os.getpid()
        if system.is_terminated:
            log.info(
                "gactors: actor system %r was already terminated (worker %s)", system.name, pid
            )
            return
        if get_ident() == system._tid:
            queued = queued_messages(system)
            if queued:
                total = sum(depth for _, depth in queued)
                log.warning(
                    "gactors: %d message(s) still queued in worker %s at shutdown; they go to "
                    "dead letters: %s",
                    total,
                    pid,
                    ", ".join(f"{path} ({depth})" for path, depth in queued),
                )
            else:
                log.info("gactors: no messages queued in worker %s at shutdown", pid)
        start = perf_counter()
        system.terminate()
        if system.await_termination(budget):
            log.info(
                "gactors: actor system %r terminated cleanly in %.3f s (budget %.1f s, worker %s)",
                system.name,
                perf_counter() - start,
                budget,
                pid,
            )
        else:
            log.error(
                "gactors: actor system %r did not terminate within its budget of %.1f s "
                "(worker %s); still alive:\n%s",
                system.name,
                budget,
                pid,
                system.tree(),
            )


def _worker_log(worker: Any) -> Any:
    log = getattr(worker, "log", None)
    return log if log is not None else _log


def _graceful_timeout(worker: Any) -> float | None:
    value = getattr(getattr(worker, "cfg", None), "graceful_timeout", None)
    return float(value) if isinstance(value, (int, float)) else None


def _check_gevent(log: Any) -> None:
    from gevent import monkey

    if not monkey.is_module_patched("socket"):
        log.warning(
            "gactors: this gunicorn worker did not monkey-patch the process: actors only run "
            "while gevent's hub runs; use the gevent worker (worker_class = 'gevent')"
        )


def _route_gactors_logs(worker: Any) -> None:
    """Send the ``gactors`` loggers to gunicorn's error log unless logging is configured."""
    gactors_log = logging.getLogger("gactors")
    if gactors_log.handlers or logging.getLogger().handlers:
        return
    error_log = getattr(getattr(worker, "log", None), "error_log", None)
    if not isinstance(error_log, logging.Logger) or not error_log.handlers:
        return
    for handler in error_log.handlers:
        gactors_log.addHandler(handler)
    gactors_log.setLevel(error_log.level or logging.INFO)
    gactors_log.propagate = False


# -- hooks configured through the environment -------------------------------------------------

_env_hooks: GunicornHooks | None = None


def post_worker_init(worker: Any) -> None:
    """gunicorn hook using the factory named by ``GACTORS_SYSTEM_FACTORY``."""
    global _env_hooks
    spec = os.environ.get(ENV_FACTORY)
    if not spec:
        raise IllegalStateError(
            f"gactors.contrib.gunicorn.post_worker_init needs the {ENV_FACTORY} environment "
            "variable ('package.module:callable'), or use GunicornHooks(factory) in "
            "gunicorn.conf.py"
        )
    _env_hooks = GunicornHooks(spec)
    _env_hooks.post_worker_init(worker)


def worker_exit(server: Any, worker: Any) -> None:
    """gunicorn hook terminating the system started by :func:`post_worker_init`."""
    if _env_hooks is not None:
        _env_hooks.worker_exit(server, worker)

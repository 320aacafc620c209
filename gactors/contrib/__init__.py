"""Integrations of gactors with servers and frameworks.

* :mod:`gactors.contrib.gunicorn` — ``gunicorn.conf.py`` hooks that start one actor
  system per worker process (after the fork) and terminate it when the worker exits.
* :mod:`gactors.contrib.wsgi` — a WSGI middleware that puts the worker's actor system
  into ``environ["gactors.system"]``.

Both share the *worker system*: the one actor system of the current worker process,
set by the gunicorn hooks (or by your own post-fork code under uWSGI and friends, with
:func:`set_worker_system`) and read by the middleware with :func:`worker_system`.
Importing this package imports neither gunicorn nor any web framework.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gactors.exceptions import IllegalStateError

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = ["has_worker_system", "set_worker_system", "worker_system"]

_system: ActorSystem | None = None
_pid: int = 0


def set_worker_system(system: ActorSystem | None) -> None:
    """Make ``system`` the actor system of this worker process (``None`` forgets it).

    Call it after the fork, in the worker: a system set in a parent process is not
    handed to its children (see :func:`worker_system`).
    """
    global _system, _pid
    _system = system
    _pid = os.getpid()


def has_worker_system() -> bool:
    """True if this process has a worker system (set in this very process)."""
    return _system is not None and _pid == os.getpid()


def worker_system() -> ActorSystem:
    """The actor system of this worker process.

    Raises :class:`~gactors.IllegalStateError` when there is none: no hook started one
    in this process, or it was set in a parent process before a fork (such a system
    cannot be used in the child).
    """
    system = _system
    if system is None:
        raise IllegalStateError(
            "this process has no gactors worker system: start one after the fork, e.g. with "
            "the gactors.contrib.gunicorn hooks in gunicorn.conf.py, or call "
            "gactors.contrib.set_worker_system(...) from your server's post-fork hook"
        )
    if _pid != os.getpid():
        raise IllegalStateError(
            f"the gactors worker system {system.name!r} was set in process {_pid}, before a "
            f"fork: it cannot be used in process {os.getpid()}; start a new system after the "
            "fork"
        )
    return system

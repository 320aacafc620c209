"""gactors: Akka-style supervised actors on gevent greenlets.

Importing gactors never monkey-patches and never starts greenlets; call
``gevent.monkey.patch_all()`` first thing in your application, as with gevent.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from gactors import pattern as pattern  # the public submodule: gactors.pattern.ask works
from gactors._actor import Actor
from gactors._context import ActorContext
from gactors._eventstream import EventStream, LogEvent
from gactors._extension import ExtensionId
from gactors._future import Future
from gactors._messages import (
    ActorIdentity,
    DeadLetter,
    HubBlocked,
    Identify,
    Kill,
    NotInfluenceReceiveTimeout,
    PoisonPill,
    ReceiveTimeout,
    Status,
    Terminated,
    UnhandledMessage,
)
from gactors._path import ActorPath
from gactors._props import Props
from gactors._ref import ActorRef
from gactors._scheduler import Cancellable, Scheduler
from gactors._settings import Settings
from gactors._stash import Stash
from gactors._supervision import (
    AllForOneStrategy,
    ChildRestartStats,
    DefaultSupervisorStrategy,
    Directive,
    Escalate,
    OneForOneStrategy,
    Restart,
    Resume,
    Stop,
    StoppingSupervisorStrategy,
    SupervisorStrategy,
    SupervisorStrategyConfigurator,
    default_decider,
)
from gactors._system import ActorSystem
from gactors._timers import TimerScheduler
from gactors.exceptions import (
    ActorInitializationException,
    ActorKilledException,
    ActorNotFound,
    AskTimeoutError,
    ClusterError,
    ConfigError,
    DeathPactException,
    GactorsError,
    IllegalStateError,
    InvalidActorNameException,
    InvalidMessageException,
    PluginError,
    PostRestartException,
    PreRestartException,
    RemoteError,
    SerializationError,
    StashOverflowException,
)

if TYPE_CHECKING:
    # For type checkers only: at run time these are imported on first access (below).
    from gactors import backoff as backoff
    from gactors import cluster as cluster
    from gactors import contrib as contrib
    from gactors import interfaces as interfaces
    from gactors import plugins as plugins
    from gactors import routing as routing
    from gactors import testkit as testkit

__version__ = "0.1.0"

# The public submodules: after ``import gactors``, ``gactors.routing`` (and the others)
# work like ``gactors.pattern``. They are imported on first access, not here, so that
# ``import gactors`` stays light and a system without a cluster never imports
# gactors.cluster (nor redis and msgspec).
_SUBMODULES: frozenset[str] = frozenset(
    {
        "backoff",
        "cluster",
        "contrib",
        "exceptions",
        "interfaces",
        "pattern",
        "plugins",
        "routing",
        "testkit",
    }
)


def __getattr__(name: str) -> ModuleType:
    if name in _SUBMODULES:
        # import_module binds the attribute on this package: the next access is direct
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES)


__all__ = [
    "Actor",
    "ActorContext",
    "ActorIdentity",
    "ActorInitializationException",
    "ActorKilledException",
    "ActorNotFound",
    "ActorPath",
    "ActorRef",
    "ActorSystem",
    "AllForOneStrategy",
    "AskTimeoutError",
    "Cancellable",
    "ChildRestartStats",
    "ClusterError",
    "ConfigError",
    "DeadLetter",
    "DeathPactException",
    "DefaultSupervisorStrategy",
    "Directive",
    "Escalate",
    "EventStream",
    "ExtensionId",
    "Future",
    "GactorsError",
    "HubBlocked",
    "Identify",
    "IllegalStateError",
    "InvalidActorNameException",
    "InvalidMessageException",
    "Kill",
    "LogEvent",
    "NotInfluenceReceiveTimeout",
    "OneForOneStrategy",
    "PluginError",
    "PoisonPill",
    "PostRestartException",
    "PreRestartException",
    "Props",
    "ReceiveTimeout",
    "RemoteError",
    "Restart",
    "Resume",
    "Scheduler",
    "SerializationError",
    "Settings",
    "Stash",
    "StashOverflowException",
    "Status",
    "Stop",
    "StoppingSupervisorStrategy",
    "SupervisorStrategy",
    "SupervisorStrategyConfigurator",
    "Terminated",
    "TimerScheduler",
    "UnhandledMessage",
    "__version__",
    "default_decider",
]

"""gactors: Akka-style supervised actors on gevent greenlets.

Importing gactors never monkey-patches and never starts greenlets; call
``gevent.monkey.patch_all()`` first thing in your application, as with gevent.
"""

from __future__ import annotations

from gactors import pattern as pattern  # the public submodule: gactors.pattern.ask works
from gactors._actor import Actor
from gactors._context import ActorContext
from gactors._eventstream import EventStream, LogEvent
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

__version__ = "0.1.0"

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

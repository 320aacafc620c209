"""Every exception gactors raises.

All of them subclass :class:`GactorsError` (itself an :class:`Exception`), so
``except gactors.GactorsError`` catches anything the framework signals.
:class:`AskTimeoutError` is also a :class:`TimeoutError`, :class:`SerializationError`
also a :class:`TypeError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gactors._text import safe_repr, safe_str

if TYPE_CHECKING:
    from gactors._ref import ActorRef

__all__ = [
    "ActorInitializationException",
    "ActorKilledException",
    "ActorNotFound",
    "AskTimeoutError",
    "ClusterError",
    "ConfigError",
    "DeathPactException",
    "GactorsError",
    "IllegalStateError",
    "InvalidActorNameException",
    "InvalidMessageException",
    "PluginError",
    "PostRestartException",
    "PreRestartException",
    "RemoteError",
    "SerializationError",
    "StashOverflowException",
]


class GactorsError(Exception):
    """Base class of every gactors exception."""


class ActorInitializationException(GactorsError):
    """An actor failed in its constructor or ``pre_start``.

    The message is prefixed with the actor's path; the original exception is the
    ``__cause__``. The default decider stops such an actor.
    """

    def __init__(self, actor: ActorRef | None, message: str, cause: BaseException | None = None):
        prefix = f"{actor.path}: " if actor is not None else ""
        super().__init__(prefix + message)
        self.actor = actor
        if cause is not None:
            self.__cause__ = cause


class PreRestartException(ActorInitializationException):
    """``pre_restart`` raised; logged, and the restart goes on."""

    def __init__(
        self,
        actor: ActorRef | None,
        cause: BaseException,
        original_cause: BaseException,
        message_being_processed: Any = None,
    ):
        super().__init__(
            actor,
            f"exception in pre_restart({type(original_cause).__name__}, "
            f"{safe_repr(message_being_processed)}): {safe_str(cause)}",
            cause,
        )
        self.original_cause = original_cause
        self.message_being_processed = message_being_processed


class PostRestartException(ActorInitializationException):
    """The fresh instance failed in its constructor or ``post_restart``."""

    def __init__(self, actor: ActorRef | None, cause: BaseException, original_cause: BaseException):
        super().__init__(
            actor,
            f"exception post restart ({type(original_cause).__name__}): {safe_str(cause)}",
            cause,
        )
        self.original_cause = original_cause


class ActorKilledException(GactorsError):
    """Raised inside an actor that processes :data:`gactors.Kill`."""


class DeathPactException(GactorsError):
    """An actor did not handle the ``Terminated`` of an actor it watched."""

    def __init__(self, dead: ActorRef):
        super().__init__(f"monitored actor {dead} terminated")
        self.dead = dead


class InvalidActorNameException(GactorsError):
    """An actor name is malformed or already taken by a live sibling."""


class InvalidMessageException(GactorsError):
    """A message that cannot be sent, such as ``None``."""


class AskTimeoutError(GactorsError, TimeoutError):
    """No reply arrived within the ask's timeout."""


class IllegalStateError(GactorsError):
    """An operation that is not allowed in the current state."""


class StashOverflowException(GactorsError):
    """The stash is over its capacity."""


class ConfigError(GactorsError):
    """A setting is unknown or has a value of the wrong type."""


class PluginError(GactorsError):
    """A plugin is unknown, fails verification, or could not be loaded."""


# -- the cluster (docs/cluster/concepts.md); defined here so that they can be caught
# without importing gactors.cluster (and its dependencies).
class ClusterError(GactorsError):
    """A cluster operation failed: no cluster configured, Redis unreachable, ..."""


class SerializationError(ClusterError, TypeError):
    """A message cannot be sent to another node: its type cannot be serialized (an
    unregistered class, a lambda, ...) or it is larger than ``max_message_size``.

    Raised by ``tell``/``ask`` before anything is sent; the text names the type.
    """


class RemoteError(ClusterError):
    """An ask failed on another node with an exception that cannot travel as itself
    (its class is not registered with :func:`gactors.cluster.register_message`).

    ``type_name`` is the remote exception's ``module.qualname``, ``message`` its text.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(type_name, message)
        self.type_name = type_name
        self.message = message

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}" if self.message else self.type_name


class ActorNotFound(ClusterError):
    """``ActorSelection.resolve_one`` found no actor at the path."""

"""``ActorSystem``: the guardians, the dispatcher, dead letters and shutdown."""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

from gevent.hub import get_hub
from greenlet import getcurrent

from gactors import _gcpause
from gactors import _sysmsg as sm
from gactors._actor import Actor
from gactors._cell import AUTO_RECEIVED, ActorCell
from gactors._deadlines import AskDeadlines
from gactors._dispatch import Dispatcher, Worker
from gactors._eventstream import EventStream, LogEvent
from gactors._extension import ExtensionId, ExtensionRegistry, settings_owner, validate_table
from gactors._future import Future
from gactors._messages import _CARRIERS, ActorIdentity, DeadLetter, Identify, Terminated
from gactors._path import ActorPath, Address
from gactors._props import Props
from gactors._provider import LOCAL_PROVIDER, RefProvider
from gactors._ref import ActorRef, DeadLettersRef
from gactors._scheduler import Scheduler
from gactors._selection import ActorSelection
from gactors._settings import Settings, load_settings
from gactors._supervision import (
    Directive,
    OneForOneStrategy,
    SupervisorStrategy,
)
from gactors._text import safe_str
from gactors._threads import allocate_lock, get_ident, thread_token
from gactors._unpatched import warn_if_unpatched
from gactors.exceptions import (
    ActorInitializationException,
    ActorKilledException,
    ConfigError,
    IllegalStateError,
    PluginError,
)

if TYPE_CHECKING:
    from gactors.interfaces import ISupervisorStrategyConfigurator

__all__ = ["ActorSystem"]

_log = logging.getLogger("gactors")
_SYSTEM_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
R = TypeVar("R")
T = TypeVar("T")
E = TypeVar("E")
P = ParamSpec("P")


def resolve_configurator(value: Any) -> ISupervisorStrategyConfigurator:
    """Turn the ``guardian_supervisor_strategy`` setting into a configurator instance.

    A registered name (built in: ``"default"``, ``"stopping"``), a
    ``"package.module:Name"`` reference or the class/object itself, through
    :mod:`gactors.plugins`; an unknown name raises PluginError listing the known names.
    """
    from gactors import plugins

    try:
        return plugins.resolve_configurator(value)
    except PluginError as e:
        raise PluginError(f"setting 'guardian_supervisor_strategy': {e}") from e


def _guardian_strategy(configurator: ISupervisorStrategyConfigurator, value: Any) -> Any:
    """The /user guardian's strategy, verified before anything of the system exists."""
    from gactors import plugins

    try:
        strategy = configurator.create()
        return plugins.verify_strategy(strategy, f"the strategy created by {value!r}")
    except PluginError as e:
        raise PluginError(f"setting 'guardian_supervisor_strategy': {e}") from e


def _in_hub_thread(
    method: Callable[Concatenate[ActorSystem, P], R],
) -> Callable[Concatenate[ActorSystem, P], R]:
    """Carry a call made from a foreign OS thread over to the system's hub thread."""

    @functools.wraps(method)
    def wrapper(self: ActorSystem, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.forked:
            raise self.fork_error()
        # Before comparing thread ids: a new thread may reuse the id of the system's
        # thread once that has exited.
        self.check_thread_alive(f"call {method.__name__}()")
        if get_ident() == self._tid:
            return method(self, *args, **kwargs)
        return self.run_in_hub(method, self, *args, **kwargs)

    return wrapper


# -- fork detection ----------------------------------------------------------------------------

_live_systems: weakref.WeakSet[ActorSystem] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for system in list(_live_systems):
        system._mark_forked()  # noqa: SLF001  the fork hook of this module


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- the guardians ---------------------------------------------------------------------------


def _stop_anything(exc: BaseException) -> Directive:
    return Directive.STOP


class _StopWhenWatchedStops(Actor):
    """The root and system guardians: each watches one actor (``/``'s is ``/system``,
    ``/system``'s is ``/user``) and stops when it has stopped, which is how shutdown
    walks up the tree: /user, then /system, then the root."""

    def receive(self, message: Any) -> None:
        if type(message) is Terminated:
            self.context.stop(self.ref)
        else:
            self.unhandled(message)


class _RootGuardian(_StopWhenWatchedStops):
    supervisor_strategy = OneForOneStrategy(_stop_anything)


class _UserGuardian(Actor):
    def __init__(self, strategy: SupervisorStrategy) -> None:
        self._strategy = strategy

    @property
    def supervisor_strategy(self) -> SupervisorStrategy:  # type: ignore[override]
        return self._strategy

    def receive(self, message: Any) -> None:
        self.unhandled(message)


def _system_guardian_decider(exc: BaseException) -> Directive:
    if isinstance(exc, (ActorInitializationException, ActorKilledException)):
        return Directive.STOP
    if isinstance(exc, Exception):
        return Directive.RESTART
    return Directive.ESCALATE


class _SystemGuardian(_StopWhenWatchedStops):
    supervisor_strategy = OneForOneStrategy(_system_guardian_decider)


class _TheOneWhoWalksTheBubbles(ActorRef):
    """The synthetic parent of the root guardian, outside the tree."""

    __slots__ = ()
    _system: ActorSystem  # refs see a SystemSPI; this one is the system's own part

    def tell(self, message: Any, sender: Any = None) -> None:
        self._system.publish_dead_letter(message, None, self)

    def _send_system(self, message: sm.SystemMessage) -> None:
        system = self._system
        if type(message) is sm.Failed:
            system.publish_log(
                logging.ERROR,
                str(message.child.path),
                f"root guardian failed, shutting down: {type(message.cause).__name__}: "
                f"{safe_str(message.cause)}",
                message.cause,
            )
            message.child._send_system(sm.TERMINATE)
        elif type(message) is sm.DeathWatchNotification:
            system._root_terminated()  # noqa: SLF001  the root's parent is part of the system

    def __repr__(self) -> str:
        return "<bubble-walker>"


# -- the system ------------------------------------------------------------------------------


class ActorSystem:
    """A hierarchy of actors living in the calling thread's gevent hub.

    ``ActorSystem(name="default", config=None)`` starts at once. Use it as a context
    manager to terminate it (and wait) on leaving the block.
    """

    receive_hook: Callable[[Any, Any, Any], Any] | None = None
    """Internal: called by a cell with (cell, actor, None) when an actor is installed
    and with (cell, actor, behavior) on become (returning the behavior to use). None
    (this class attribute) unless actor classes are timed (:mod:`gactors._timing` sets
    it on the instance): actors pay nothing for it, and the instance's attributes stay
    as they were."""

    # -- internal API ----------------------------------------------------------------------
    # Besides the public API (docs/api/system.md), the system has an internal API for
    # gactors' own modules: the cells and refs, the dispatcher, the scheduler, the
    # cluster, the contrib integrations and the testkit. It is not for applications and
    # may change in any release; docs/internals.md maps who uses what. The attributes:
    #
    #   _hub, _tid      the gevent hub and the OS thread id the system runs in (kept
    #                   underscored: ruff's flake8-self ignore-names lists them)
    #   dispatcher      the Dispatcher that runs every cell's batches
    #   root_cell, user_cell, system_cell   the guardians' cells ("/", "/user", "/system")
    #   temp_path       "/temp": the parent path of asks' PromiseRefs
    #   ask_deadlines   the timeouts of pending asks (one hub timer for all of them)
    #   provider        the RefProvider: LOCAL_PROVIDER, or the extension that provides
    #                   refs to other nodes (the cluster node)
    #   forked          True in the child of os.fork(): every use raises fork_error()
    #   thread_alive    a token that is None once the system's thread has exited
    #   failure_tb      (cause, traceback) of the child failure being decided, for its log
    #   log_filters     callables that drop LogEvents before they are published
    #   termination_hooks   run in reverse order once the root has stopped
    #   _extensions     the ExtensionRegistry behind extension()/has_extension()
    #
    # and the methods publish_dead_letter, publish_log, run_in_hub, run_in_hub_async,
    # tell_from_thread, check_thread_alive, check_stoppable, fork_error and
    # resolve_local (most of them below the "internal API" line further down).

    def __init__(
        self,
        name: str = "default",
        config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(name, str) or not _SYSTEM_NAME_RE.fullmatch(name):
            raise ValueError(
                f"invalid actor system name {name!r}: use ASCII letters, digits, '-' and '_', "
                "starting with a letter or digit"
            )
        self.name = name
        self.settings: Settings = load_settings(config, validate_table)
        warn_if_unpatched()
        configurator = resolve_configurator(self.settings.guardian_supervisor_strategy)
        user_strategy = _guardian_strategy(configurator, self.settings.guardian_supervisor_strategy)
        self._hub = get_hub()
        self._tid = get_ident()
        self.thread_alive = thread_token()
        self._pid = os.getpid()
        self.forked = False
        self._calls: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._async = self._hub.loop.async_()
        self._async.start(self._on_async)
        self._terminating = False
        self._gc_held = False
        self.termination_hooks: list[Callable[[], Any]] = []
        self.scheduler = Scheduler(self)
        self.ask_deadlines = AskDeadlines(self._hub)
        # Registered first, so it runs last: hooks may still use the scheduler.
        self.termination_hooks.append(self.scheduler._close)  # noqa: SLF001  the system owns its scheduler
        self._dead_letter_count = 0
        self.log_filters: list[Callable[[LogEvent], bool]] = []
        # (cause, traceback) of the child failure a supervisor is deciding on, if any:
        # its log shows that traceback (see FaultHandling.handle_failure).
        self.failure_tb: tuple[BaseException, TracebackType | None] | None = None
        self.when_terminated: Future[None] = Future(self._hub, self._tid)
        self.event_stream = EventStream(self)
        self.log = logging.LoggerAdapter(logging.getLogger("gactors.system"), {"actor_path": name})
        self._extensions = ExtensionRegistry(self)

        # The ref provider (an extension that provides_refs: the cluster node) is made
        # before the root path: paths carry its node id. A system whose settings install
        # none has the local provider and imports no extension.
        self.provider: RefProvider = LOCAL_PROVIDER
        try:
            self._install_provider()
        except BaseException:
            self.provider.close()  # one made before another failed
            self._async.close()  # nothing of this system may keep the hub alive
            raise
        self.address = Address(name, self.provider.node_id)
        root_path = ActorPath(name, (), None, self.address.node)
        self.temp_path = root_path.child("temp")
        self.dead_letters: ActorRef = DeadLettersRef(self, root_path.child("deadLetters"), 0)
        self.dispatcher = Dispatcher(
            self._hub,
            self.settings.dispatcher_throughput,
            self._on_fatal,
            AUTO_RECEIVED,
            self.dead_letters,
        )
        bubble = _TheOneWhoWalksTheBubbles(self, root_path.child("bubble-walker"), 0)
        root = self.root_cell = ActorCell(self, Props(_RootGuardian), "", bubble, None, root_path)
        root.send_system(sm.CREATE)
        user = root.attach_child(Props(_UserGuardian, user_strategy), "user", system_name=True)
        sysg = root.attach_child(Props(_SystemGuardian), "system", system_name=True)
        self.user_cell: ActorCell = root.child_cells["user"]
        self.system_cell: ActorCell = root.child_cells["system"]
        # /system outlives /user; the root outlives /system.
        self.system_cell.watch(user, None)
        root.watch(sysg, None)
        _live_systems.add(self)
        if self.provider is not LOCAL_PROVIDER:
            try:
                self.provider.start()  # a cluster node returns once it joined
            except BaseException:
                self.provider.close()
                self._terminating = True
                self.root_cell.stop_ref(self.user_cell.ref)
                raise
        self._create_configured_extensions()
        if self.settings.blocking_threshold is not None:
            from gactors._monitor import start_monitoring

            start_monitoring(self)
        _log.debug("actor system %r started", name)

    def _install_provider(self) -> None:
        """Make the extension that provides_refs the provider, if the settings name one."""
        for key in self.settings.extension_tables:
            owner = settings_owner(key)
            if owner is not None and owner.provides_refs:
                if self.provider is not LOCAL_PROVIDER:
                    raise ConfigError(
                        f"setting {key!r}: the extension {owner.__qualname__} provides refs, "
                        "and another one of the settings does already"
                    )
                self.provider = self._extensions.get(owner)

    def _create_configured_extensions(self) -> None:
        """Create the extensions whose settings tables the config has, in its order."""
        tables = self.settings.extension_tables
        if not tables:
            return
        try:
            for key in tables:
                owner = settings_owner(key)
                if owner is not None:
                    self._extensions.get(owner)
        except BaseException:
            self._terminating = True
            self.provider.close()
            self.root_cell.stop_ref(self.user_cell.ref)
            raise

    # -- public API ----------------------------------------------------------------------------
    def extension(self, ext_id: type[ExtensionId[E]] | ExtensionId[E]) -> E:
        """The extension ``ext_id`` (an :class:`~gactors.ExtensionId` subclass or
        instance) of this system: made by ``ext_id.create(self)`` on the first call,
        the same object on every later one. Safe from any thread; concurrent first
        calls create it once."""
        # The registry keeps every system's extensions in one dict: the one made by
        # ext_id.create() is an E.
        return cast(E, self._extensions.get(ext_id))

    def has_extension(self, ext_id: type[ExtensionId[Any]] | ExtensionId[Any]) -> bool:
        """True once the extension ``ext_id`` of this system has been created."""
        return self._extensions.has(ext_id)

    @_in_hub_thread
    def actor_of(self, props: Props, name: str | None = None) -> ActorRef:
        """Create a top-level actor under ``/user``; returns its ref at once."""
        self._check_alive("actor_of")
        return self.user_cell.attach_child(props, name)

    @_in_hub_thread
    def stop(self, ref: ActorRef) -> None:
        """Stop ``ref`` (its current message finishes; the rest goes to dead letters).

        Raises :class:`ValueError` for a ref of another actor system and for the
        guardians (``/``, ``/user``, ``/system``): :meth:`terminate` ends a system.
        """
        self.check_stoppable(ref)
        cell = getattr(ref, "_cell", None)
        if cell is not None and cell.parent_cell is self.user_cell:
            self.user_cell.stop_ref(ref)
        else:
            ref._send_system(sm.TERMINATE)

    @_in_hub_thread
    def terminate(self) -> Future[None]:
        """Stop every actor, then the system. Idempotent; returns ``when_terminated``."""
        if not self._terminating:
            self._terminating = True
            _log.debug("actor system %r terminating", self.name)
            if not self.forked:
                # No full collection of the whole heap while the actors stop (released
                # when the system has terminated: _root_terminated).
                _gcpause.hold()
                self._gc_held = True
            # The extensions' shutdown steps run first, the one created last first (a
            # cluster node's, created first, leaves and hands its singletons and shards
            # over), then the user actors stop.
            self._extensions.shutdown(self._stop_user_guardian)
        return self.when_terminated

    def _stop_user_guardian(self) -> None:
        self.root_cell.stop_ref(self.user_cell.ref)

    def await_termination(self, timeout: float | timedelta | None = None) -> bool:
        """Wait until the system terminated; False if ``timeout`` (seconds or timedelta,
        counted from this call) passed first.

        Raises :class:`IllegalStateError` inside one of this system's actors: the
        system waits for that actor's current message, which would wait for the system;
        and from another thread once the system's own thread has exited.
        """
        if self.forked:
            raise self.fork_error()
        g = getcurrent()
        if type(g) is Worker and g.dispatcher is self.dispatcher and not self.is_terminated:
            raise IllegalStateError(
                f"an actor of {self.name!r} cannot wait for the termination of its own "
                "system: termination waits for the actor's current message to finish "
                "(use register_on_termination or when_terminated.add_done_callback)"
            )
        if not self.when_terminated.done():
            self.check_thread_alive("await termination")  # it would never come
        try:
            self.when_terminated.get(timeout)
        except TimeoutError:
            return False
        return True

    @property
    def is_terminated(self) -> bool:
        """True once every actor has stopped and the termination hooks ran."""
        if self.forked:
            raise self.fork_error()
        return self.when_terminated.done()

    @_in_hub_thread
    def register_on_termination(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` after every actor has stopped (in reverse order of registration)."""
        if not callable(fn):
            raise TypeError(f"register_on_termination needs a callable, not {type(fn).__name__}")
        if self.is_terminated:
            raise IllegalStateError(f"actor system {self.name!r} is already terminated")
        self.termination_hooks.append(fn)

    @_in_hub_thread
    def lookup(self, path: ActorPath | str) -> ActorRef | None:
        """The live actor at ``path`` (an ActorPath, ``gactors://<sys>/user/a`` or
        ``/user/a``), or None."""
        if isinstance(path, ActorPath):
            if path.system_name != self.name:
                return None
        else:
            path = ActorPath.parse(path, self.name)
        if path.node is not None and path.node != self.address.node:
            return None  # another node's actor: lookup stays local (actor_selection)
        elements = path.elements
        cell = self.root_cell
        for element in elements:
            child = cell.child_cells.get(element)
            if child is None:
                return None
            cell = child
        return None if cell.dead else cell.ref

    def actor_selection(self, path: ActorPath | str) -> ActorSelection:
        """An :class:`ActorSelection` of ``path``: a full path string (with another
        node's address in a cluster: ``gactors://shop@n1/user/a``), ``/user/a`` or an
        :class:`ActorPath`. Its ``tell``/``ask`` go to whatever lives at the path."""
        if not isinstance(path, ActorPath):
            path = ActorPath.parse(path, self.name)
        elif path.system_name != self.name:
            raise ValueError(
                f"path {path} belongs to system {path.system_name!r}, not {self.name!r}"
            )
        return ActorSelection(self, path)

    def resolve_local(self, elements: tuple[str, ...] | list[str], uid: int) -> ActorRef | None:
        """The live local actor at ``elements`` with incarnation ``uid`` (0: any), or None.
        Hub thread only (used by the cluster node to deliver inbound messages)."""
        cell = self.root_cell
        for element in elements:
            child = cell.child_cells.get(element)
            if child is None:
                return None
            cell = child
        if cell.dead or (uid and cell.uid != uid):
            return None
        return cell.ref

    @_in_hub_thread
    def tree(self) -> str:
        """The live hierarchy: path, state, mailbox depth and restart count per actor."""
        lines: list[str] = []
        # Depth first with an explicit stack (children pushed in reverse to keep their
        # order): a tree deeper than the recursion limit must still print.
        stack: list[tuple[ActorCell, int]] = [(self.root_cell, 0)]
        while stack:
            cell, depth = stack.pop()
            label = "/" if depth == 0 else cell.name
            lines.append(
                f"{'  ' * depth}{label}  [{cell.state_name}] mailbox={len(cell.mailbox)} "
                f"restarts={cell.restarts}"
            )
            stack.extend((child, depth + 1) for child in reversed(cell.child_cells.values()))
        return "\n".join(lines)

    def __enter__(self) -> ActorSystem:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.terminate()
        timeout = self.settings.shutdown_timeout
        exc_type = exc_info[0]
        if isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt):
            _log.warning(
                "interrupted: waiting up to %s s (setting shutdown_timeout) for the actors "
                "of %r to stop; interrupt again to stop waiting",
                timeout,
                self.name,
            )
        try:
            terminated = self.await_termination(timeout)
        except KeyboardInterrupt:
            # The way out of a shutdown stuck on a busy actor: say what is left behind.
            _log.warning(
                "interrupted: no longer waiting for actor system %r to terminate; still alive:\n%s",
                self.name,
                self.tree(),
            )
            raise
        if not terminated:
            _log.error(
                "actor system %r did not terminate within %s s; still alive:\n%s",
                self.name,
                timeout,
                self.tree(),
            )

    def __repr__(self) -> str:
        state = "terminated" if self.is_terminated else "running"
        return f"<ActorSystem {self.name!r} {state}>"

    # -- internal API (see the top of the class) -------------------------------------------------
    def _check_alive(self, what: str) -> None:
        if self._terminating or self.is_terminated or self.user_cell.dead:
            raise IllegalStateError(
                f"actor system {self.name!r} is terminated or terminating: cannot {what}"
            )

    def check_stoppable(self, ref: object) -> None:
        """Refuse what the public ``stop`` must not stop (guardians stop themselves
        through their cells during ``terminate``, not through this check)."""
        if not isinstance(ref, ActorRef):
            raise TypeError(f"stop() needs an ActorRef, not {type(ref).__name__}")
        if ref._system is not self:
            theirs, ours = repr(ref._system.name), repr(self.name)
            if theirs == ours:
                # Two systems of the same name: tell them apart by identity.
                theirs += f" (another system of that name, id {id(ref._system):#x})"
                ours += f" (id {id(self):#x})"
            raise ValueError(
                f"cannot stop {ref.path}: it belongs to actor system {theirs}, "
                f"not {ours} (stop it through its own system)"
            )
        cell = getattr(ref, "_cell", None)
        if cell is not None and cell in (self.root_cell, self.user_cell, self.system_cell):
            raise ValueError(
                f"cannot stop the guardian {ref.path}: use terminate() to end actor "
                f"system {self.name!r}"
            )

    def fork_error(self) -> IllegalStateError:
        """The error of any use of this system in the child of ``os.fork()``."""
        return IllegalStateError(
            f"actor system {self.name!r} was created before os.fork() (in process {self._pid}) "
            f"and cannot be used in the child process {os.getpid()}: create the actor system "
            "after the fork (with gunicorn, in post_worker_init: see gactors.contrib.gunicorn)"
        )

    def _mark_forked(self) -> None:
        """In the child of ``os.fork()``: make every use of this system raise."""
        self.forked = True
        # Nothing of the parent's runs in the child (docs/gunicorn.md): the workers copied
        # mid-message or parked are frozen, the timers and the parent's queued messages
        # are dropped, and closing every mailbox sends tell() to the slow path, which
        # raises. Without this the child's hub would wake the copied workers and
        # process the parent's messages a second time.
        self._calls.clear()
        self.dispatcher.after_fork()
        self.scheduler._after_fork()  # noqa: SLF001  the system owns its scheduler
        try:
            self.ask_deadlines.close()  # the parent's asks never time out here
        except Exception:  # pragma: no cover - depends on the loop's state after fork
            pass
        cells = [self.root_cell]
        while cells:
            cell = cells.pop()
            cell.after_fork()
            cells.extend(cell.child_cells.values())
        try:
            self._async.ref = False  # the parent's system must not keep the child's hub alive
        except Exception:  # pragma: no cover - depends on the loop's state after fork
            pass

    def _root_terminated(self) -> None:
        self._terminating = True
        for fn in reversed(self.termination_hooks):
            try:
                fn()
            except Exception:
                _log.exception("termination hook %r of %r failed", fn, self.name)
        self.termination_hooks.clear()
        if self._gc_held:
            self._gc_held = False
            _gcpause.release()
        self._async.ref = False  # the system no longer keeps the hub alive
        self.ask_deadlines.system_terminated()  # but an ask pending still does
        _log.debug("actor system %r terminated", self.name)
        self.when_terminated._set_result(None)

    def _on_fatal(self, cell: ActorCell, exc: BaseException) -> None:
        _log.critical(
            "%s in actor %s: terminating actor system %r", type(exc).__name__, cell.path, self.name
        )
        self.terminate()

    def publish_dead_letter(
        self, message: Any, sender: ActorRef | None, recipient: ActorRef
    ) -> None:
        """``message`` could not be delivered to ``recipient``: publish a DeadLetter (and
        log it, within the ``log_dead_letters`` budget). An ``Identify`` is answered
        with an empty ``ActorIdentity`` instead, as Akka does."""
        if type(message) is Identify:
            if sender is not None:
                sender.tell(ActorIdentity(message.message_id, None), None)
            return
        if type(message) is DeadLetter:
            return
        unpack = _CARRIERS.get(type(message))
        if unpack is not None:
            # An extension's wrapper: the dead letters are the messages it carries.
            for carried, carried_sender in unpack(message, sender):
                self.publish_dead_letter(carried, carried_sender, recipient)
            return
        self.event_stream.publish(DeadLetter(message, sender, recipient))
        limit = self.settings.log_dead_letters
        count = self._dead_letter_count
        if count >= limit:
            return
        if self._terminating and not self.settings.log_dead_letters_during_shutdown:
            return
        self._dead_letter_count = count = count + 1
        quiet = (
            ", no more dead letters will be logged (setting log_dead_letters)"
            if count == limit
            else ""
        )
        self.publish_log(
            logging.INFO,
            str(recipient.path),
            f"message [{type(message).__name__}] from {sender} to {recipient.path} was not "
            f"delivered. [{count}] dead letters encountered{quiet}.",
            category="deadletters",
        )

    def publish_log(
        self,
        level: int,
        source: str,
        message: str,
        cause: BaseException | None = None,
        logger_class: type | None = None,
        *,
        category: str = "supervision",
        directive: Directive | None = None,
    ) -> None:
        """Publish a :class:`LogEvent` (unless a log filter drops it) and log it to the
        ``gactors.<category>`` logger, with the failing child's traceback while a
        supervisor decides on it (``failure_tb``)."""
        event = LogEvent(level, source, message, cause, logger_class, directive)
        for f in self.log_filters:
            if f(event):
                return
        self.event_stream.publish(event)
        logger = logging.getLogger(f"gactors.{category}")
        if not logger.isEnabledFor(level):
            return
        tb = None
        if cause is not None:
            failure = self.failure_tb
            tb = failure[1] if failure is not None and failure[0] is cause else cause.__traceback__
        if type(getcurrent()) is Worker:
            # A LogRecord asks threading.current_thread(), which under gevent builds a
            # _DummyThread for every greenlet that logs: on short-lived worker
            # greenlets that costs more than a whole restart. The hub greenlet has
            # one for good, so the stdlib record is made there, a moment later; the
            # event stream above has already seen the event.
            self._hub.loop.run_callback(self._emit_log, logger, level, source, message, cause, tb)
        else:
            self._emit_log(logger, level, source, message, cause, tb)

    @staticmethod
    def _emit_log(
        logger: logging.Logger,
        level: int,
        source: str,
        message: str,
        cause: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        exc_info = (
            (type(cause), cause, tb) if cause is not None and level >= logging.ERROR else None
        )
        try:
            logger.log(
                level, "[%s] %s", source, message, exc_info=exc_info, extra={"actor_path": source}
            )
        except Exception:
            # A logging handler that raises must not break the caller (tell never
            # raises; supervision goes on): report it as logging reports its own errors.
            if logging.raiseExceptions:
                traceback.print_exc(file=sys.stderr)

    # -- threads --------------------------------------------------------------------------------
    def _on_async(self) -> None:
        # One FIFO for everything foreign threads hand over (tells, system messages,
        # calls): each thread's requests keep their order.
        calls = self._calls
        while calls:
            fn, args = calls.popleft()
            try:
                fn(*args)
            except Exception:
                _log.exception("call %r carried to the hub thread failed", fn)

    def tell_from_thread(self, ref: ActorRef, message: Any, sender: ActorRef | None) -> None:
        """tell() from a foreign OS thread: finished by the hub thread, in order."""
        self._calls.append((ref.tell, (message, sender)))
        self._async.send()

    def run_in_hub_async(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in the hub thread soon (safe from any thread)."""
        self._calls.append((fn, args))
        self._async.send()

    def check_thread_alive(self, what: str) -> None:
        """From a foreign thread: fail at once if the system's own thread has exited
        (nothing would ever run the hub again, so any wait for it would be in vain)."""
        if self.thread_alive() is None:
            raise IllegalStateError(
                f"cannot {what}: the thread of actor system {self.name!r} (which ran its "
                "gevent hub) has exited, so the system can no longer run"
            )

    def run_in_hub(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` in the hub thread and wait for its result (from a foreign thread)."""
        self.check_thread_alive(f"call {getattr(fn, '__name__', 'a function')}()")
        lock = allocate_lock()
        lock.acquire()
        results: list[T] = []
        errors: list[BaseException] = []

        def call() -> None:
            try:
                results.append(fn(*args, **kwargs))
            except BaseException as e:
                errors.append(e)
            finally:
                lock.release()

        self.run_in_hub_async(call)
        if not lock.acquire(True, 60.0):
            raise IllegalStateError(
                f"the hub thread of actor system {self.name!r} did not run the call within 60 s "
                "(is its thread blocked outside gevent?)"
            )
        if errors:
            raise errors[0]
        return results[0]

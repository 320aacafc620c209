"""OpenTelemetry tracing of messages (``gactors[otel]``; docs/observability.md).

Enabled by the setting ``tracing = true`` (or a ``tracing`` table, see
:class:`Tracing`): a ``tell`` or ``ask`` made while a span is current carries that
span's context to the receiver, on this node or another one, and the receiving actor's
``receive`` runs inside a span of kind CONSUMER whose parent is the sender's span (a
child, not a link: a web request, the ask it makes, the remote actor that answers and
whatever that actor tells on form one trace). A failure of ``receive`` is recorded on
its span (an exception event, status ERROR) before supervision handles it.

How it costs nothing while disabled: the core names no tracing at all. While at least
one actor system of the process has tracing enabled, this module replaces a few methods
(``LocalActorRef.tell``, ``ActorRef.ask``, the cluster's ``RemoteActorRef.tell``,
``ReliableSender.send``) by versions that wrap the message in a :class:`Traced` envelope,
then call the original; the last traced system to terminate puts the originals back.
The envelope is an auto-received message of the cell (like a timer's message): the cell
hands it to :func:`_on_traced`, which opens the span and runs the inner message as the
actor would have run it. A process without tracing never runs any of this.

Where the context travels:

* locally, in the envelope (the sender's whole OpenTelemetry context, baggage too);
* to another node, the envelope is a registered wire class: trace id, span id, flags
  and ``tracestate`` (W3C trace context; baggage does not cross nodes);
* through sharding, inside the :class:`~gactors.cluster.ShardingEnvelope` (the entity's
  message is wrapped, not the envelope), so it survives the region's batching and
  buffering;
* through reliable delivery, with the message from ``send`` on (resent with it), and
  unwrapped around the ``Delivery`` the entity gets; a durable producer stores no
  context (its journal must stay readable without tracing).

gactors' own actors (regions, shards, producers, singleton managers: classes defined in
``gactors.*``) get no span of their own unless ``system_actors = true``; they run with
the sender's context current, so what they tell on stays in the trace.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import (
        NonRecordingSpan,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        TraceFlags,
        TraceState,
    )
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "gactors tracing needs the OpenTelemetry API: pip install 'gactors[otel]'"
    ) from _e

from gactors._cell import AUTO_RECEIVED
from gactors._extension import ExtensionId
from gactors._messages import NotInfluenceReceiveTimeout, register_carrier
from gactors._ref import IMPLICIT as _IMPLICIT
from gactors._ref import ActorRef, LocalActorRef, PromiseRef
from gactors.exceptions import ConfigError

if TYPE_CHECKING:
    from gactors._cell import ActorCell
    from gactors._system import ActorSystem

__all__ = ["SCOPE", "TraceIdFilter", "Traced", "Tracing", "TracingExtension", "tracing_of"]

_log = logging.getLogger("gactors.otel")

SCOPE = "gactors"
"""The instrumentation scope name of the spans (``tracer_provider.get_tracer(SCOPE)``)."""

#: Attribute names of a receive span.
ATTR_PATH = "gactors.actor.path"
ATTR_TYPE = "gactors.message.type"
ATTR_NODE = "gactors.node"


# -- the envelope ---------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class Traced:
    """A message and the trace context it was sent in (internal: actors never see it).

    ``trace_id``/``span_id``/``flags``/``state`` are the sender's span context (W3C
    trace context; ``state`` is the ``tracestate`` header, usually empty); all zero: no
    trace (a message sent outside any span with ``new_traces = true``). ``context`` is
    the sender's whole OpenTelemetry context when the envelope never left the process
    (it does not travel: a node receiving it rebuilds the parent from the ids).
    """

    message: Any
    trace_id: int
    span_id: int
    flags: int
    state: str
    context: Any = field(default=None, init=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        # The pickle serializer: the local context (spans, baggage) stays here.
        return (Traced, (self.message, self.trace_id, self.span_id, self.flags, self.state))


def _unpack(env: Traced, sender: Any) -> list[tuple[Any, Any]]:
    return [(env.message, sender)]


# A dead letter of a traced message is the message itself.
register_carrier(Traced, _unpack)


# -- per-system state -----------------------------------------------------------------------------
class Tracing:
    """The tracing of one actor system (``system.extension(TracingExtension)``).

    Settings (``tracing = true``, or a table):

    ``enabled`` (bool, default true)
        ``tracing = false`` or ``enabled = false`` leaves everything as without the
        table (nothing is replaced, nothing costs).
    ``system_actors`` (bool, default false)
        Spans for gactors' own actors too (sharding regions and shards, delivery
        producers, singleton managers, routers, test probes); without it they only pass
        the context on.
    ``new_traces`` (bool, default false)
        A message sent outside any span starts a trace of its own at its receive
        (every message of every actor gets a span); without it such messages get no
        span.
    ``tracer_provider`` (object or None)
        The ``TracerProvider`` to get the tracer from (a mapping given to
        ``ActorSystem`` only); None: OpenTelemetry's global one.
    """

    def __init__(self, system: ActorSystem, settings: Mapping[str, Any]) -> None:
        self.system = system
        self.enabled: bool = settings["enabled"]
        self.system_actors: bool = settings["system_actors"]
        self.new_traces: bool = settings["new_traces"]
        provider = settings["tracer_provider"]
        self.tracer: trace.Tracer = (
            trace.get_tracer(SCOPE) if provider is None else provider.get_tracer(SCOPE)
        )
        self.node = str(system.address)

    def __repr__(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        return f"<Tracing of {self.system.name!r}: {state}>"


class TracingExtension(ExtensionId[Tracing]):
    """Owns the ``tracing`` setting (SPEC section 18, "Tracing"); see :class:`Tracing`."""

    settings_key = "tracing"
    settings_fields: ClassVar[Mapping[str, tuple[Any, Any]]] = {
        "enabled": (bool, True),
        "system_actors": (bool, False),
        "new_traces": (bool, False),
        "tracer_provider": ((object, None), None),
    }

    def validate_settings(self, table: Any) -> Any:
        # `tracing = true` is the short form of an empty table (SPEC section 18).
        if type(table) is bool:
            table = {"enabled": table}
        values = super().validate_settings(table)
        if values["enabled"] and "gactors.cluster" in sys.modules:
            # Known on the wire before the node starts reading its inbox (the extension
            # itself is created once the node joined).
            _register_wire()
        provider = values["tracer_provider"]
        if provider is not None and not callable(getattr(provider, "get_tracer", None)):
            raise ConfigError(
                "setting 'tracing.tracer_provider' must be an OpenTelemetry TracerProvider "
                f"(with get_tracer), not {type(provider).__name__}"
            )
        return values

    def create(self, system: ActorSystem) -> Tracing:
        settings = system.settings.extension_tables.get("tracing")
        if settings is None:
            settings = self.validate_settings(True)
        t = Tracing(system, settings)
        if t.enabled:
            _enable(system, t)
        return t

    def shutdown(self, extension: Tracing, proceed: Callable[[], None]) -> None:
        _disable(extension.system)
        proceed()


def tracing_of(system: ActorSystem) -> Tracing:
    """The :class:`Tracing` of ``system`` (created, disabled, if its settings have no
    ``tracing`` table)."""
    return system.extension(TracingExtension)


# -- the receiving side ---------------------------------------------------------------------------
_type_names: dict[type, str] = {}
_internal: dict[type, bool] = {}
_EMPTY = otel_context.Context()


def _type_name(cls: type) -> str:
    name = _type_names.get(cls)
    if name is None:
        mod = cls.__module__
        name = _type_names[cls] = (
            cls.__qualname__ if mod == "builtins" else f"{mod}.{cls.__qualname__}"
        )
    return name


def _is_internal(cls: type) -> bool:
    known = _internal.get(cls)
    if known is None:
        known = _internal[cls] = cls.__module__.startswith("gactors.")
    return known


def _parent_context(env: Traced) -> Any:
    ctx = env.context
    if ctx is not None:
        return ctx
    if not env.trace_id:
        return _EMPTY  # a new trace
    sc = SpanContext(
        env.trace_id,
        env.span_id,
        is_remote=True,
        trace_flags=TraceFlags(env.flags),
        trace_state=TraceState.from_header([env.state]) if env.state else None,
    )
    return trace.set_span_in_context(NonRecordingSpan(sc), _EMPTY)


def _deliver(cell: ActorCell, message: Any) -> None:
    handler = AUTO_RECEIVED.get(type(message))
    if handler is None:
        cell.receive_message(message)
    else:
        handler(cell, message)


def _on_traced(cell: ActorCell, env: Traced) -> None:
    """The cell's handler of a :class:`Traced` message (an auto-received type)."""
    inner = env.message
    t = _states.get(cell.system)
    actor = cell.actor
    if t is None or actor is None:
        _deliver(cell, inner)  # tracing is off in this system
        return
    parent = _parent_context(env)
    if not t.system_actors and _is_internal(type(actor)):
        # gactors' own actors pass the context on without a span of their own.
        token = otel_context.attach(parent)
        try:
            _deliver(cell, inner)
        finally:
            otel_context.detach(token)
        return
    mtype = type(inner)
    if mtype is _delivery:
        # Reliable delivery: the entity's handler gets the message the Delivery carries.
        mtype = type(inner.message)
    # Written out rather than start_as_current_span's context managers (a third of the
    # cost of a receive span with the API's no-op tracer).
    atype = type(actor)
    key = (atype, mtype)
    name = _span_names.get(key)
    if name is None:
        name = _span_names[key] = f"{atype.__name__} receive {mtype.__name__}"
    span = t.tracer.start_span(
        name,
        parent,
        _CONSUMER,
        {
            ATTR_PATH: str(cell.ref.path),
            ATTR_TYPE: _type_name(mtype),
            ATTR_NODE: t.node,
            "messaging.system": "gactors",
            "messaging.operation.type": "process",
        },
    )
    token = _attach(_set_span(span, parent))
    try:
        _deliver(cell, inner)
    except Exception as exc:
        # The failure supervision is about to handle (fatal BaseExceptions are not
        # the actor's failures: they stop the system).
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        _detach(token)
        span.end()


_span_names: dict[tuple[type, type], str] = {}
_CONSUMER = SpanKind.CONSUMER
_attach = otel_context.attach
_detach = otel_context.detach
_set_span = trace.set_span_in_context


AUTO_RECEIVED[Traced] = _on_traced


# -- the sending side -----------------------------------------------------------------------------
_states: dict[Any, Tracing] = {}
_lock = threading.Lock()
_originals: dict[tuple[type, str], Any] = {}
_get_span = trace.get_current_span
# The key under which a Context holds its span, found through the public API (a Context
# is a dict): `tell` reads it directly instead of through get_current_span.
_SPAN_KEY = next(iter(trace.set_span_in_context(trace.INVALID_SPAN, otel_context.Context())))
_get_context = otel_context.get_current
_sharding_envelope: Any = None
_delivery: Any = None


_wrappable: dict[type, bool] = {}


def _kind(cls: type) -> bool:
    # Not wrapped: what the cell handles itself (PoisonPill, Kill, Identify, timers, the
    # envelope itself: control, not work) and what must not reset a receive timeout
    # (the envelope would, being of another class).
    ok = _wrappable[cls] = not (cls in AUTO_RECEIVED or issubclass(cls, NotInfluenceReceiveTimeout))
    return ok


def _wrap(message: Any, t: Tracing) -> Any:
    """``message`` in an envelope with the current span's context (or as it is)."""
    cls = type(message)
    ok = _wrappable.get(cls)
    if ok is None:
        ok = _kind(cls)
    if not ok:
        return message
    ctx = _get_context()
    span: Any = ctx.get(_SPAN_KEY)  # get_current_span(ctx), two calls less
    if span is not None:
        sc = span.get_span_context()
        if sc.is_valid:
            ts = sc.trace_state
            env = Traced(
                message, sc.trace_id, sc.span_id, int(sc.trace_flags), ts.to_header() if ts else ""
            )
            env.context = ctx
            return env
    if t.new_traces:
        return Traced(message, 0, 0, 0, "")
    return message


def _wrap_entity_message(env: Any, t: Tracing) -> Any:
    """A ShardingEnvelope with its message wrapped (the region batches, buffers and
    forwards the entity's message: the context travels with it)."""
    inner = env.message
    ti = type(inner)
    if ti is Traced:
        return env
    if ti is _delivery and type(inner.message) is Traced:
        # Reliable delivery: the context was taken at send(); the entity's mixin must
        # get the Delivery itself, so the envelope goes around it.
        carried = inner.message
        out = Traced(
            dataclasses.replace(inner, message=carried.message),
            carried.trace_id,
            carried.span_id,
            carried.flags,
            carried.state,
        )
        out.context = carried.context
        return type(env)(env.entity_id, out)
    wrapped = _wrap(inner, t)
    return env if wrapped is inner else type(env)(env.entity_id, wrapped)


def _traced_tell(original: Callable[..., None]) -> Callable[..., None]:
    def tell(self: ActorRef, message: Any, sender: Any = _IMPLICIT) -> None:
        t = _states.get(self._system)
        if t is not None and message is not None:
            if type(message) is _sharding_envelope:
                message = _wrap_entity_message(message, t)
            else:
                message = _wrap(message, t)
        original(self, message, sender)

    functools.update_wrapper(tell, original)  # its name, its doc, and __wrapped__
    return tell


def _traced_remote_tell(original: Callable[..., None]) -> Callable[..., None]:
    def tell(self: Any, message: Any, sender: Any = _IMPLICIT) -> None:
        t = _states.get(self._system)
        # A reply to an ask of that node goes to its promise (/temp/...), which takes
        # the first message as the answer: never wrapped.
        if t is not None and message is not None and not self.rpath.startswith("/temp/"):
            if type(message) is _sharding_envelope:
                message = _wrap_entity_message(message, t)
            else:
                message = _wrap(message, t)
        original(self, message, sender)

    functools.update_wrapper(tell, original)  # its name, its doc, and __wrapped__
    return tell


def _traced_ask(original: Callable[..., Any]) -> Callable[..., Any]:
    # The ask wraps before the original runs: its fast path (a plain greenlet asking a
    # local actor) fills the mailbox without a tell, and from another OS thread the
    # tell runs in the hub, where the asker's context is not current.
    def ask(self: ActorRef, message: Any, **kwargs: Any) -> Any:
        t = _states.get(self._system)
        if t is not None and message is not None and type(self) is not PromiseRef:
            if type(message) is _sharding_envelope:
                message = _wrap_entity_message(message, t)
            else:
                message = _wrap(message, t)
        return original(self, message, **kwargs)

    functools.update_wrapper(ask, original)  # its name, its doc, and __wrapped__
    return ask


def _traced_timeout_error(original: Callable[..., Any]) -> Callable[..., Any]:
    # The timeout's text names the asked message's type, not the envelope's.
    def timeout_error(self: PromiseRef, timeout: float) -> Any:
        msg = self._message
        if type(msg) is Traced:
            self._message = msg.message
        return original(self, timeout)

    functools.update_wrapper(timeout_error, original)
    return timeout_error


def _traced_send(original: Callable[..., int]) -> Callable[..., int]:
    # ReliableSender.send: the context is taken here and resent with the message. Not
    # for a durable producer: its journal must stay readable by a node without tracing
    # (the envelope would be stored with the message).
    def send(self: Any, entity_id: str, message: Any, **kwargs: Any) -> int:
        t = _states.get(self.system)
        if t is not None and message is not None and not self.durable:
            message = _wrap(message, t)
        return original(self, entity_id, message, **kwargs)

    functools.update_wrapper(send, original)  # its name, its doc, and __wrapped__
    return send


_Patch = tuple[type, str, Callable[[Any], Any]]


def _core_patches() -> list[_Patch]:
    return [
        (LocalActorRef, "tell", _traced_tell),
        (ActorRef, "ask", _traced_ask),
        (PromiseRef, "timeout_error", _traced_timeout_error),
    ]


def _cluster_patches() -> list[_Patch]:
    """The cluster's part, installed once a traced system is a cluster node (a system
    without a cluster loads nothing of it, tracing or not)."""
    global _sharding_envelope, _delivery
    from gactors.cluster._remote import RemoteActorRef
    from gactors.cluster._sharding import ShardingEnvelope
    from gactors.delivery._messages import Delivery
    from gactors.delivery._producer import ReliableSender

    _register_wire()
    _sharding_envelope = ShardingEnvelope
    _delivery = Delivery
    return [
        (RemoteActorRef, "tell", _traced_remote_tell),
        (ReliableSender, "send", _traced_send),
    ]


def _register_wire() -> None:
    from gactors.cluster._registry import register_message

    register_message(Traced, tag="gactors.otel.Traced")  # again: harmless


_groups: set[str] = set()


def _install(group: str, patches: list[_Patch]) -> None:
    for cls, name, make in patches:
        original = cls.__dict__[name]
        _originals[(cls, name)] = original
        setattr(cls, name, make(original))
    _groups.add(group)
    _log.debug("tracing installed its %s methods", group)


def _enable(system: ActorSystem, t: Tracing) -> None:
    clustered = "cluster" in system.settings.extension_tables
    with _lock:
        if "core" not in _groups:
            _install("core", _core_patches())
        if clustered and "cluster" not in _groups:
            _install("cluster", _cluster_patches())
        _states[system] = t


def _disable(system: ActorSystem) -> None:
    with _lock:
        if _states.pop(system, None) is None or _states:
            return
        for (cls, name), original in _originals.items():
            setattr(cls, name, original)
        _originals.clear()
        _groups.clear()
        _log.debug("tracing removed: no traced actor system left")


class TraceIdFilter(logging.Filter):
    """A ``logging`` filter that puts the current trace and span ids on every record
    (``record.trace_id``, 32 hex digits, and ``record.span_id``, 16; ``"0"`` outside any
    span), so that log lines written inside ``receive`` can be found from the trace::

        handler.addFilter(TraceIdFilter())
        handler.setFormatter(logging.Formatter("%(asctime)s %(trace_id)s %(message)s"))
    """

    def filter(self, record: logging.LogRecord) -> bool:
        sc = _get_span().get_span_context()
        if sc.is_valid:
            record.trace_id = f"{sc.trace_id:032x}"
            record.span_id = f"{sc.span_id:016x}"
        else:
            record.trace_id = record.span_id = "0"
        return True


def installed() -> bool:
    """Whether the traced methods are in place (some system of the process traces)."""
    return bool(_originals)

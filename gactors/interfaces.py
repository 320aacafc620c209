"""The plugin interfaces (zope.interface).

A plugin provides one of these interfaces; :mod:`gactors.plugins` verifies it with
``zope.interface.verify`` when it is registered (and whenever a setting or an option
names an object directly). Verification is strict: the class must *declare* the
interface with ``@zope.interface.implementer(...)`` and provide every attribute and
method below with a compatible signature. Every built-in class declares its interface.

* :class:`ISupervisorStrategy` -- how a supervisor handles its children's failures.
  The built-ins are :class:`gactors.OneForOneStrategy` and
  :class:`gactors.AllForOneStrategy`; subclassing :class:`gactors.SupervisorStrategy`
  (or one of those) is the easiest way to write a new one.
* :class:`ISupervisorStrategyConfigurator` -- creates the ``/user`` guardian's
  strategy (the ``guardian_supervisor_strategy`` setting).
* :class:`IBackoffPolicy` -- computes the restart delays of a
  :class:`gactors.backoff.BackoffSupervisor`. A backoff policy is registered as a
  *factory* ``(min_backoff, max_backoff, random_factor) -> IBackoffPolicy``, called once
  per backoff supervisor, so a policy may keep state (such as the previous delay).
* :class:`ISerializer` -- turns the messages sent to other cluster nodes into bytes
  and back (docs/cluster/concepts.md, "Serialization"). The built-ins are
  ``"msgpack"`` (the default) and ``"pickle"`` (trusted networks only).
"""

from __future__ import annotations

from typing import Any

from zope.interface import Attribute, Interface

__all__ = [
    "IBackoffPolicy",
    "ISerializer",
    "ISupervisorStrategy",
    "ISupervisorStrategyConfigurator",
]


# zope.interface describes methods without ``self``; the signatures are checked by
# ``zope.interface.verify`` against the implementation (which has ``self``), and mypy
# reads them through the mypy-zope plugin (setup.cfg).
class ISupervisorStrategy(Interface):
    """How a supervisor handles the failures of its children.

    Both methods run inside the supervising actor, while it processes the child's
    failure report or termination; the supervising actor's ``self.sender`` is the
    failing child while the strategy decides.
    """

    decider = Attribute(
        "The decider: a callable (exception) -> Directive | None, where None means escalate."
    )

    def handle_failure(
        context: Any, child: Any, cause: BaseException, stats: Any, children: Any
    ) -> bool:
        """Decide what to do with a failed child and do it.

        ``context`` is the supervising actor's :class:`~gactors.ActorContext`,
        ``child`` the failed child's ref, ``cause`` the exception, ``stats`` the
        child's :class:`~gactors.ChildRestartStats` (restart bookkeeping) and
        ``children`` the stats of every live child. Return ``True`` when the failure
        was handled (resumed, restarted or stopped) and ``False`` to escalate it: the
        supervisor then fails with the same exception.
        """

    def handle_child_terminated(context: Any, child: Any, children: Any) -> None:
        """Called after ``child`` terminated; ``children`` are the remaining children."""


class ISupervisorStrategyConfigurator(Interface):
    """Creates the ``/user`` guardian's strategy.

    Named by the ``guardian_supervisor_strategy`` setting; the configurator class is
    instantiated with no arguments and :meth:`create` is called once per actor system.
    """

    def create() -> Any:
        """Return the :class:`ISupervisorStrategy` of the ``/user`` guardian."""


class IBackoffPolicy(Interface):
    """Computes the restart delays of one backoff supervisor.

    Made by a factory ``(min_backoff, max_backoff, random_factor) -> IBackoffPolicy``
    (all three in seconds, ``random_factor`` in [0, 1]), once per backoff supervisor.
    """

    def next_delay(restart_count: int) -> float:
        """Seconds (a float >= 0) to wait before restart number ``restart_count``.

        ``restart_count`` is 0 for the first restart after a (re)start or a reset, 1 for
        the next one, and so on.
        """

    def reset() -> None:
        """Forget any state: called when the supervisor's restart count is reset."""


class ISerializer(Interface):
    """Turns the messages a node sends to other nodes into bytes and back.

    A cluster node uses the serializer named by its ``cluster.serializer`` setting for
    every user message it sends; one ``encode`` call per message at ``tell`` time, one
    ``decode`` call per message on arrival, so both should be fast. ``encode`` raises
    :class:`~gactors.SerializationError` (naming the type) for what it cannot carry;
    ``decode`` may raise anything on bad input: the node turns that into a warning and
    a dead letter.

    **Refs inside messages.** Refs are bound to an actor system: a ref decoded on a
    node must resolve against *that* node's system. A serializer is registered once per
    process, so it cannot hold one system's resolver. The decision: a serializer that
    carries refs defines an optional method ``bind(ref_codec) -> ISerializer`` (not part
    of this interface, so serializers without refs need nothing). The node calls it
    once with its ``RefCodec`` (``ref_to_wire(ref) -> (address, path, uid)`` and
    ``ref_from_wire(address, path, uid) -> ActorRef``, see
    ``gactors.cluster._serialization``) and uses the serializer it returns, which must
    provide this interface too. A serializer without ``bind`` is used as registered.

    **Trust.** A serializer whose ``decode`` can run arbitrary code (pickle and the
    like) sets a class attribute ``unsafe = True``: a node then decodes its payloads
    only when it is the node's configured serializer. Other registered serializers
    decode what a node with a different configuration sends, so nodes may migrate from
    one serializer to another one node at a time.

    **Identity on the wire.** A payload is tagged with a small number derived from the
    serializer's ``name`` (which must be the name it is registered under), so every
    node must register it under the same name.
    """

    name = Attribute("The name the serializer is registered under (a str).")

    def encode(obj: Any) -> bytes:
        """Return ``obj`` as bytes; raise :class:`~gactors.SerializationError` if it
        cannot be serialized."""

    def decode(data: bytes) -> Any:
        """Return the object encoded in ``data`` (bytes)."""

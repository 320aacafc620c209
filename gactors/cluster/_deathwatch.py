"""Remote DeathWatch of a cluster node (:class:`_DeathWatch`, a part of
:class:`~gactors.cluster._node.ClusterNode`): which local actors watch which actor of
which node (``_watching``), and which remote nodes watch local actors
(``_watched_by``). A removed node yields ``Terminated(ref, True, True)`` for every
watched actor of it, and the watchers it had here are dropped
(:meth:`_DeathWatch._node_gone_watches`).
"""

from __future__ import annotations

import logging
from typing import cast

from gactors import _sysmsg as sm
from gactors._ref import ActorRef
from gactors._threads import get_ident
from gactors.cluster._node_base import _NodeBase
from gactors.cluster._remote import RemoteActorRef
from gactors.cluster._serialization import Record
from gactors.exceptions import SerializationError

_log = logging.getLogger("gactors.cluster")


class _DeathWatch(_NodeBase):
    """Watch, unwatch and death-watch notifications across nodes."""

    def send_system(self, ref: RemoteActorRef, message: sm.SystemMessage) -> None:
        """A system message for a remote actor (watch, unwatch, death-watch notification)."""
        if get_ident() != self._tid:
            self.system.run_in_hub_async(self.send_system, ref, message)
            return
        dest = ref.dest
        # type(message) each time, not a local: mypy narrows the message by it
        if type(message) is sm.Watch:
            watcher = message.watcher
            if dest in self._removed:
                # A node that is gone: its actors are terminated.
                watcher._send_system(sm.DeathWatchNotification(ref, False, True))
                return
            self._watching.setdefault(dest, {}).setdefault(ref, set()).add(watcher)
        elif type(message) is sm.Unwatch:
            watchers = self._watching.get(dest, {}).get(ref)
            if watchers is not None:
                watchers.discard(message.watcher)
                if not watchers:
                    del self._watching[dest][ref]
        elif type(message) is sm.DeathWatchNotification:
            # A local actor died; ``ref`` watched it from another node.
            s = self._watched_by.get(dest)
            if s is not None:
                s.discard((message.actor, ref))
        else:
            _log.debug("system message %r to remote %s not sent", message, ref)
            return
        try:
            rec = self.codec.system_record(ref.rpath, ref._uid, message)
        except SerializationError as e:
            _log.warning("cannot send %r to %s: %s", message, ref, e)
            return
        self._enqueue(dest, rec, message, None, ref)

    def _system_record(self, r: Record) -> None:
        message = self.codec.decode_system(r.payload)
        if type(message) is sm.Watch:
            watchee, watcher = message.watchee, message.watcher
            if type(watcher) is RemoteActorRef:
                self._watched_by.setdefault(watcher.dest, set()).add((watchee, watcher))
            watchee._send_system(message)
        elif type(message) is sm.Unwatch:
            watchee, watcher = message.watchee, message.watcher
            if type(watcher) is RemoteActorRef:
                s = self._watched_by.get(watcher.dest)
                if s is not None:
                    s.discard((watchee, watcher))
            watchee._send_system(message)
        else:  # DeathWatchNotification for a local watcher
            actor = cast(sm.DeathWatchNotification, message).actor
            watcher = self._resolve_local(*r.recipient)
            if type(actor) is RemoteActorRef:
                watchers = self._watching.get(actor.dest, {}).get(actor)
                if watchers is not None:
                    watchers.discard(watcher)
                    if not watchers:
                        del self._watching[actor.dest][actor]
            watcher._send_system(message)

    def _watch_undeliverable(self, message: sm.SystemMessage, ref: ActorRef) -> None:
        """``message`` for remote ``ref`` cannot be sent: a watch of it is answered
        at once as if the actor had died (its node is gone); the others are dropped."""
        if type(message) is sm.Watch:
            watcher = message.watcher
            remote = cast(RemoteActorRef, ref)  # (only a remote ref's message is undeliverable)
            watchers = self._watching.get(remote.dest, {}).get(remote)
            if watchers is not None:
                watchers.discard(watcher)
            watcher._send_system(sm.DeathWatchNotification(ref, False, True))

    def _node_gone_watches(self, node: str) -> None:
        """``node`` was removed: its watched actors are terminated for their local
        watchers, and its watchers of local actors are dropped."""
        for watchee, watchers in self._watching.pop(node, {}).items():
            for w in list(watchers):
                w._send_system(sm.DeathWatchNotification(watchee, True, True))
        for watchee, watcher in self._watched_by.pop(node, ()):
            watchee._send_system(sm.Unwatch(watchee, watcher))

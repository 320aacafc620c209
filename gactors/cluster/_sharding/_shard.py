"""The shard actor: runs a shard's entities while it holds the shard's lease, after
it took the shard's hand-over stream (what the previous owner's side handed over)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import Any
from urllib.parse import quote
from uuid import uuid4

import gevent
from greenlet import getcurrent

from gactors._actor import Actor
from gactors._messages import Terminated
from gactors._props import Props
from gactors._ref import ActorRef
from gactors.cluster._lease import LeasedProps, LeaseKeeper
from gactors.cluster._seam import BackendUnavailable, LeaseStore
from gactors.cluster._sharding._handover import BUFFER_LIMIT
from gactors.cluster._sharding._protocol import (
    _PASSIVATE_TICK,
    _Acquired,
    _Env,
    _Envs,
    _HandedOff,
    _HandOff,
    _Lost,
    _PassivateTick,
    _Released,
    _Taken,
)
from gactors.cluster._singleton import poll_interval

_log = logging.getLogger("gactors.cluster.sharding")


class _Shard(Actor):
    def __init__(
        self,
        shard: int,
        entity_props: Props | Callable[[str], Props],
        passivate: float | None,
        stop_message: Any,
        store: LeaseStore,
        lease: str,
        owner: str,
        lease_ttl: float,
        take: Callable[[], list[tuple[str, Any, Any]]],
    ) -> None:
        self._shard = shard
        self._entity_props = entity_props
        self._passivate = passivate
        self._stop_message = stop_message
        ref = self.ref
        # on_lost runs in the renewing greenlet: only a message.
        # One owner name per incarnation, not the node's id: the store's acquire is
        # re-entrant per owner, so a closed keeper of an earlier incarnation on this
        # node giving back its late grant would release this one's lease too.
        self._keeper = LeaseKeeper(
            store, lease, f"{owner}#{uuid4().hex[:12]}", lease_ttl, lambda: ref.tell(_Lost(), None)
        )
        self._poll = poll_interval(lease_ttl)
        self._token: int | None = None
        self._buffer: deque[tuple[Any, ActorRef | None]] = deque()  # until the lease
        self._entities: dict[str, ActorRef] = {}
        self._ids: dict[ActorRef, str] = {}
        self._last: dict[str, float] = {}
        # Messages for an entity that passivates, kept as _Env (their origin decides where
        # they go if the shard hands off meanwhile).
        self._passivating: dict[str, list[tuple[_Env, ActorRef | None]]] = {}
        self._handing_off = False
        self._done = False
        # The hand-over stream is taken once the lease is held, and delivered before
        # anything routed here (it holds what was sent before the shard moved here).
        self._take = take
        self._taking = True  # not taken yet: everything is buffered
        self._take_in_flight = False
        self._finish_pending = False  # finish once the take in flight came back

    def pre_start(self) -> None:
        ref = self.ref
        self._keeper.acquire_in_background(
            lambda token: ref.tell(_Acquired(token), None), self._poll
        )
        if self._passivate is not None:
            every = min(max(self._passivate / 4, 0.05), 5.0)
            self.timers.start_timer_with_fixed_delay("passivate", _PASSIVATE_TICK, every)

    def post_stop(self) -> None:
        # The entities (children) have terminated before post_stop.
        self._keeper.let_go(blocking=getcurrent() is not self.context.system._hub)
        system = self.context.system
        for env, snd in self._buffer:
            system.publish_dead_letter(env.message, snd, self.ref)
        self._buffer.clear()
        # Stopped while entities passivated: what waited for them goes nowhere else.
        for waiting in self._passivating.values():
            for env, snd in waiting:
                system.publish_dead_letter(env.message, snd, self.ref)
        self._passivating.clear()

    def receive(self, m: Any) -> None:
        t = type(m)
        if t is _Env:
            self._env(m, self.context.sender)
        elif t is _Envs:
            self._envs(m.items, m.origin)
        elif t is _Acquired:
            if self._handing_off:
                self._release()
                return
            self._token = m.token
            _log.debug("shard %s: lease token %d", self.context.self.path, m.token)
            self._start_take()
        elif t is _Taken:
            self._taken(m.items)
        elif t is Terminated:
            self._terminated(m.actor)
        elif t is _PassivateTick:
            self._passivate_idle()
        elif t is _HandOff:
            self._hand_off()
        elif t is _Released:
            self._finish()
        elif t is _Lost:
            _log.warning(
                "shard %s lost its lease: stopping its %d entities now",
                self.context.self.path,
                len(self._entities),
            )
            self._token = None
            for ref in list(self._entities.values()):
                self.context.stop(ref)
            self._handing_off = True
            if not self._entities:
                self._finish()
        else:
            self.unhandled(m)

    def _start_take(self) -> None:
        self._take_in_flight = True
        ref, take, path = self.ref, self._take, self.context.self.path

        def run() -> None:
            delay = 0.05
            while True:
                try:
                    items = take()
                except BackendUnavailable as e:
                    # The read failed: the stream stays on the server, whole (it is
                    # deleted only after a read succeeded), and is read again (the
                    # shard's messages wait, in order).
                    _log.warning("shard %s: cannot read its hand-over stream: %s", path, e)
                    gevent.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                except Exception:
                    # The region stopped meanwhile (its store closed): the stream stays
                    # on the server for the shard's next owner.
                    _log.debug("shard %s: hand-over stream not taken", path, exc_info=True)
                    return
                ref.tell(_Taken(items), None)
                return

        gevent.spawn(run)

    def _taken(self, items: list[tuple[str, Any, Any]]) -> None:
        self._take_in_flight = False
        self._taking = False
        # Handed over from other regions: they go first, and back to a stream if this
        # shard hands off before delivering them (origin "~": not from this node).
        envs = [(_Env(eid, msg, "~"), snd) for eid, msg, snd in items]
        buf = self._buffer
        buf.extendleft(reversed(envs))
        if self._finish_pending:
            self._finish()
            return
        if self._handing_off:
            if not self._entities:
                self._release()
            return
        keeper = self._keeper
        while buf and self._token is not None and keeper.held:
            env, snd = buf.popleft()
            self._deliver(env.entity_id, env.message, snd, env.origin)

    def _env(self, m: _Env, sender: ActorRef | None) -> None:
        # Past the lease's local deadline nothing is delivered, even before _Lost (a
        # message, queued behind what arrived while the process was paused) stops the
        # entities: kept here, it goes to the shard's next incarnation in order.
        if self._token is None or self._handing_off or self._taking or not self._keeper.held:
            if len(self._buffer) < BUFFER_LIMIT:
                self._buffer.append((m, sender))
            else:
                self.context.system.publish_dead_letter(m.message, sender, self.ref)
            return
        self._deliver(m.entity_id, m.message, sender, m.origin)

    def _envs(self, f: list[Any], origin: str) -> None:
        # A slice of a batch from another region (entity id, message, sender, ...):
        # the common case (lease held, the entity running) in one tight loop, the rest
        # exactly as one _Env each, in order.
        if self._token is None or self._handing_off or self._taking or not self._keeper.held:
            env = self._env
            for k in range(0, len(f), 3):
                env(_Env(f[k], f[k + 1], origin), f[k + 2])
            return
        get = self._entities.get
        last = self._last if self._passivate is not None else None
        passivating = self._passivating
        now = monotonic()
        for k in range(0, len(f), 3):
            eid = f[k]
            ref = get(eid)
            if ref is None or (passivating and eid in passivating):
                # Starts it, or waits for it to terminate.
                self._deliver(eid, f[k + 1], f[k + 2], origin)
                continue
            if last is not None:
                last[eid] = now
            ref.tell(f[k + 1], f[k + 2])

    def _deliver(self, eid: str, message: Any, sender: ActorRef | None, origin: str = "") -> None:
        if self._passivating:
            # Told its stop message, not terminated yet: the message waits and starts
            # it again (told to it now it would come after the stop message and be a
            # dead letter).
            waiting = self._passivating.get(eid)
            if waiting is not None:
                waiting.append((_Env(eid, message, origin), sender))
                return
        ref = self._entities.get(eid)
        if ref is None:
            ref = self._start_entity(eid)
        if self._passivate is not None:
            self._last[eid] = monotonic()
        ref.tell(message, sender)

    def _start_entity(self, eid: str) -> ActorRef:
        ep = self._entity_props
        props = ep if isinstance(ep, Props) else ep(eid)
        if not isinstance(props, Props):
            raise TypeError(f"entity_props({eid!r}) must return Props, not {type(props).__name__}")
        assert self._token is not None
        ref = self.context.actor_of(
            LeasedProps.of(props, eid, self._token), quote(eid, safe="-_.~:@&=+,!*'")
        )
        self.context.watch(ref)
        self._entities[eid] = ref
        self._ids[ref] = eid
        return ref

    def _terminated(self, ref: ActorRef) -> None:
        eid = self._ids.pop(ref, None)
        if eid is None:
            return
        self._entities.pop(eid, None)
        self._last.pop(eid, None)
        waiting = self._passivating.pop(eid, None)
        if self._handing_off:
            if waiting:
                # With their origin: another region's go to the hand-over stream.
                self._buffer.extend(waiting)
            if not self._entities:
                self._release()
            return
        if waiting:
            if self._token is not None and self._keeper.held:
                # Messages that came while it passivated: start it again, in order.
                for env, snd in waiting:
                    self._deliver(eid, env.message, snd, env.origin)
            else:
                self._buffer.extend(waiting)  # for the next incarnation, with _Lost's

    def _passivate_idle(self) -> None:
        if self._handing_off or self._passivate is None:
            return
        limit = monotonic() - self._passivate
        for eid, at in list(self._last.items()):
            if at <= limit and eid not in self._passivating:
                self._passivating[eid] = []
                del self._last[eid]
                self._entities[eid].tell(self._stop_message, self.ref)

    def _hand_off(self) -> None:
        if self._handing_off:
            return
        self._handing_off = True
        if self._take_in_flight:
            return  # _taken goes on with the hand-off once the stream is here
        if self._token is None:
            if self._keeper.token is not None:
                # Granted, its _Acquired not here yet: give it back first.
                self._release()
            else:
                # Still acquiring: stop, and a grant in flight is given back when it
                # arrives (killing the request instead would leave the lease held by
                # nobody for a whole ttl, and the next owner waiting for it).
                self._keeper.close()
                self._finish()
            return
        if not self._entities:
            self._release()
            return
        for eid, ref in self._entities.items():
            if eid not in self._passivating:
                ref.tell(self._stop_message, self.ref)

    def _release(self) -> None:
        ref = self.ref
        self._token = None
        self._keeper.release_in_background(lambda: ref.tell(_Released(), None))

    def _finish(self) -> None:
        if self._done:
            return
        if self._take_in_flight:
            # What the take brings must be in the leftover: finish once it is here.
            self._finish_pending = True
            return
        self._done = True
        leftover = list(self._buffer)
        self._buffer.clear()
        self.context.parent.tell(_HandedOff(self._shard, leftover), self.ref)
        self.context.stop(self.ref)

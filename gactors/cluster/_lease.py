"""Keeping one lease (a singleton's or a shard's) on the seam's ``LeaseStore``.

A :class:`LeaseKeeper` acquires a named lease for this node, renews it every
``ttl / 3`` from a greenlet, and calls ``on_lost`` when it cannot be sure it still holds
it. The local deadline of a grant or renewal is ``t0 + ttl - margin``, with ``t0`` read
from the monotonic clock *before* the request was sent: the server set the expiry at
the earliest when it received the request, so it cannot have expired on the server
before our deadline (clock-rate drift aside; no wall clocks are compared). A refused
renewal, or no successful renewal before the deadline (Redis errors count as failed
renewals), means the lease is lost: ``on_lost`` runs at once, before the lease can have
been granted to another node.

What a lease cannot promise: a process paused (SIGSTOP, a long GC, a blocked hub)
across its deadline runs ``on_lost`` only when it resumes, possibly after another node
started the same singleton/shard; a Redis failover with asynchronous replication can
forget a grant and hand the lease out twice. The fencing token, strictly increasing per
lease name, is what the singleton or entity passes to its database so stale writers are
refused there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import monotonic
from typing import Any

import gevent

from gactors._props import Props
from gactors.cluster._seam import BackendUnavailable, LeaseStore

__all__ = ["LeaseKeeper", "LeasedProps"]

_log = logging.getLogger("gactors.cluster.lease")


class LeaseKeeper:
    """One named lease held by this node (use it from the hub thread's greenlets).

    ``on_lost`` is called once, from the renewing greenlet, when the lease is lost;
    it must not block (it sends messages). :meth:`try_acquire` and :meth:`release`
    do blocking I/O: call them from a greenlet of their own, never the hub greenlet.
    """

    __slots__ = (
        "_closed",
        "_deadline",
        "_margin",
        "_on_lost",
        "_renewer",
        "_ttl",
        "name",
        "owner",
        "store",
        "token",
    )

    def __init__(
        self,
        store: LeaseStore,
        name: str,
        owner: str,
        ttl: float,
        on_lost: Callable[[], Any],
    ) -> None:
        if not ttl > 0:
            raise ValueError(f"a lease ttl must be > 0, not {ttl!r}")
        self.store = store
        self.name = name
        self.owner = owner
        self._ttl = ttl
        # Two renewals (at ttl/3 and 2*ttl/3) may fail before the deadline at 0.8 * ttl;
        # the remaining fifth leaves time to stop what the lease protects.
        self._margin = ttl / 5
        self._on_lost = on_lost
        #: The fencing token while the lease is held, else None.
        self.token: int | None = None
        self._deadline = 0.0
        self._renewer: Any = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<LeaseKeeper {self.name!r} owner={self.owner!r} token={self.token}>"

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: no acquisition will succeed any more."""
        return self._closed

    @property
    def held(self) -> bool:
        """True while the lease is held and its local deadline has not passed."""
        return self.token is not None and monotonic() < self._deadline

    def try_acquire(self) -> int | None:
        """Acquire the lease if it is free (blocking): the fencing token, or None if
        another node holds it or Redis cannot be reached."""
        if self._closed:
            return None
        if self.token is not None:
            return self.token
        ttl_ms = int(self._ttl * 1000)
        t0 = monotonic()
        try:
            token = self.store.acquire(self.name, self.owner, ttl_ms)
        except BackendUnavailable as e:
            _log.warning("lease %r: cannot acquire: %s", self.name, e)
            return None
        if token is None or self._closed:
            if token is not None:
                # Closed while the request was in flight: give it back at once.
                self._release_quietly(token)
            return None
        self.token = token
        self._deadline = t0 + self._ttl - self._margin
        self._renewer = gevent.spawn(self._renew_loop, token)
        _log.debug("lease %r acquired by %s with token %d", self.name, self.owner, token)
        return token

    def acquire_in_background(
        self, report: Callable[[int | None], Any], poll: float | None = None
    ) -> None:
        """Try to acquire from a greenlet of its own and ``report`` the outcome (it
        must not block: it sends a message).

        Without ``poll``: one attempt, reported as the token or None. With ``poll``:
        an attempt every ``poll`` seconds until one succeeds, and only the token is
        reported. Nothing is reported once the keeper is closed.

        To give up, call :meth:`close`, never kill the greenlet: a kill while the
        request is in flight would leave the lease granted on the server to nobody
        who knows it, blocking the next holder for a whole ttl. A closed keeper gives
        back a grant that arrives after the close at once.
        """

        def attempt() -> None:
            while not self._closed:
                token = self.try_acquire()
                if self._closed:
                    return
                if token is not None or poll is None:
                    report(token)
                    return
                gevent.sleep(poll)

        gevent.spawn(attempt)

    def release_in_background(self, then: Callable[[], Any] | None = None) -> None:
        """:meth:`release` from a greenlet of its own, then call ``then`` (which must
        not block). The release is never cut short once started."""

        def release() -> None:
            self.release()
            if then is not None:
                then()

        gevent.spawn(release)

    def let_go(self, *, blocking: bool) -> None:
        """Done with the lease (its holder stopped): release it if held (blocking, or
        from a greenlet of its own when ``blocking`` is False, e.g. in the hub
        greenlet), else stop acquiring (a grant in flight is given back when it
        arrives: never killed, or it would block the next holder for a whole ttl)."""
        if self.token is not None:
            if blocking:
                self.release()
            else:
                self.release_in_background()
        else:
            self.close()

    def _renew_loop(self, token: int) -> None:
        ttl_ms = int(self._ttl * 1000)
        every = self._ttl / 3
        next_at = monotonic() + every
        while self.token == token and not self._closed:
            now = monotonic()
            if now >= self._deadline:
                self._lost(token, "no successful renewal before the local deadline")
                return
            gevent.sleep(max(0.0, min(next_at, self._deadline) - now))
            if self.token != token or self._closed:
                return
            now = monotonic()
            if now >= self._deadline:
                self._lost(token, "no successful renewal before the local deadline")
                return
            if now < next_at:
                continue
            t0 = monotonic()
            ok: bool | None = None
            # The call itself may not outlast the deadline (a hung socket).
            with gevent.Timeout(max(0.001, self._deadline - t0), False):
                try:
                    ok = self.store.renew(self.name, self.owner, token, ttl_ms)
                except BackendUnavailable as e:
                    _log.warning("lease %r: renewal failed: %s", self.name, e)
            if self.token != token or self._closed:
                return
            if ok:
                self._deadline = t0 + self._ttl - self._margin
                next_at = t0 + every
            elif ok is False:
                self._lost(token, "the renewal was refused (expired or taken)")
                return
            else:
                # Failed or timed out: try again soon, until the deadline.
                next_at = monotonic() + min(every / 4, 0.5)

    def _lost(self, token: int, why: str) -> None:
        if self.token != token:
            return
        self.token = None
        _log.warning("lease %r (token %d) of %s lost: %s", self.name, token, self.owner, why)
        try:
            self._on_lost()
        except Exception:
            _log.exception("lease %r: the on_lost callback failed", self.name)

    def release(self) -> None:
        """Give the lease up (blocking); the renewals stop first."""
        token = self.token
        self.token = None
        self._stop_renewer()
        if token is not None:
            self._release_quietly(token)

    def _release_quietly(self, token: int) -> None:
        try:
            self.store.release(self.name, self.owner, token)
            _log.debug("lease %r (token %d) released by %s", self.name, token, self.owner)
        except BackendUnavailable as e:
            _log.warning("lease %r: cannot release (%s); it expires after its ttl", self.name, e)

    def _stop_renewer(self) -> None:
        g = self._renewer
        self._renewer = None
        if g is not None and g is not gevent.getcurrent() and not g.dead:
            g.kill(block=False)

    def close(self) -> None:
        """Stop renewing without releasing (no I/O); a lease held now expires by
        itself, a grant still in flight is given back as soon as it arrives."""
        self._closed = True
        self.token = None
        self._stop_renewer()


class LeasedProps(Props):
    """The props of an actor that runs under a lease: a sharded entity (``entity_id``
    set) or a singleton instance (``entity_id`` None). ``ActorContext.entity_id`` and
    ``ActorContext.fencing_token`` read these two attributes."""

    __slots__ = ("entity_id", "fencing_token")

    entity_id: str | None
    fencing_token: int

    @classmethod
    def of(cls, props: Props, entity_id: str | None, fencing_token: int) -> LeasedProps:
        """A copy of ``props`` carrying ``entity_id`` and ``fencing_token``."""
        p = cls.__new__(cls)
        p.factory, p.args, p.kwargs = props.factory, props.args, props.kwargs
        p.dispatcher, p.mailbox_capacity = props.dispatcher, props.mailbox_capacity
        p.entity_id = entity_id
        p.fencing_token = fencing_token
        return p

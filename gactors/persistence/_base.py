"""What persistent actors share: the internal stash, the persistence id, failure logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gactors._actor import Actor
from gactors._stash import StashStore, stash_of
from gactors.exceptions import IllegalStateError
from gactors.persistence._extension import Persistence, persistence_of
from gactors.persistence._model import check_persistence_id

if TYPE_CHECKING:
    from gactors._ref import ActorRef

__all__ = ["PersistentBase", "default_persistence_id"]


def _observed(pid: str, number: int, token: int | None, name: str) -> dict[str, Any]:
    """What the dashboard shows of a persistent actor (``persistence`` in its row)."""
    info: dict[str, Any] = {"id": pid or None, name: number}
    if token is not None:
        info["fencing_token"] = token
    return {"persistence": info}


def default_persistence_id(actor: Actor) -> str | None:
    """``"<type_name>|<entity_id>"`` for a sharded entity, ``"singleton|<name>"`` for a
    cluster singleton, None for any other actor."""
    context = actor.context
    entity_id = context.entity_id
    elements = actor.ref.path.elements
    if entity_id is not None:
        # An entity lives at /system/sharding-<type_name>/<shard>/<entity>.
        for e in elements:
            if e.startswith("sharding-"):
                return f"{e[len('sharding-') :]}|{entity_id}"
        return None
    if context.fencing_token is not None and len(elements) >= 2:
        # A singleton instance is /system/singletonManager-<name>/singleton.
        manager = elements[-2]
        if elements[-1] == "singleton" and manager.startswith("singletonManager-"):
            return f"singleton|{manager[len('singletonManager-') :]}"
    return None


class PersistentBase(Actor):
    """Common machinery of :class:`PersistentActor` and :class:`DurableStateActor`.

    Commands that arrive while the actor recovers or waits for a write are kept in an
    internal stash of its own (a user ``Stash`` is not touched); on restart or stop they
    go to the cell's stash, so the next incarnation gets them first (or dead letters
    get them) -- subclasses overriding ``pre_restart`` or ``post_stop`` call ``super()``.
    """

    _gactors_pstash: StashStore

    def _internal_stash(self) -> StashStore:
        s = self.__dict__.get("_gactors_pstash")
        if s is None:
            s = self._gactors_pstash = StashStore(self._gactors_cell)
        return s

    def _stash_command(self) -> None:
        self._internal_stash().stash()

    def _unstash_commands(self) -> None:
        s = self.__dict__.get("_gactors_pstash")
        if s is not None:
            s.unstash_all()

    def _hand_back_stash(self) -> None:
        # The cell's stash is what survives this instance: it is put back at the head of
        # the mailbox for the next incarnation, or sent to dead letters on stop.
        s = self.__dict__.get("_gactors_pstash")
        if s is not None and s.queue:
            cell_stash = stash_of(self._gactors_cell)
            cell_stash.queue.extendleft(reversed(s.queue))
            s.queue.clear()

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        """Hands the commands this instance held back to the cell, then the default."""
        self._hand_back_stash()
        super().pre_restart(reason, message)

    def post_stop(self) -> None:
        """Hands the commands this instance held to dead letters."""
        self._hand_back_stash()
        super().post_stop()

    # -- identity -----------------------------------------------------------------------
    def _resolve_persistence_id(self) -> str:
        pid = getattr(self, "persistence_id", None)
        if pid is None:
            pid = default_persistence_id(self)
            if pid is None:
                raise IllegalStateError(
                    f"{type(self).__qualname__} has no persistence_id: set "
                    "self.persistence_id (a non-empty str) in __init__ or define it as a "
                    "property (only sharded entities and singletons have a default)"
                )
            return pid
        return check_persistence_id(pid)

    @property
    def _persistence(self) -> Persistence:
        # Kept on the instance: looked up on every persist call otherwise.
        p: Persistence | None = self.__dict__.get("_gactors_pers")
        if p is None:
            p = self.__dict__["_gactors_pers"] = persistence_of(self.context.system)
        return p

    def _tell_self(self, message: Any) -> None:
        ref: ActorRef = self._gactors_cell.ref
        ref.tell(message, None)

"""Reading what persistent actors stored: for read models, reports and tests.

Both functions block the calling greenlet (or thread) while the store reads, never the
hub; call them from a greenlet or a thread, not from inside an actor's ``receive``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gactors.persistence._codec import codec
from gactors.persistence._extension import persistence_of
from gactors.persistence._model import EventEnvelope, PersistenceError, check_persistence_id

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = ["events_by_persistence_id", "persistence_ids"]

_PAGE = 1000


def events_by_persistence_id(
    system: ActorSystem,
    persistence_id: str,
    from_sequence_nr: int = 1,
    to_sequence_nr: int | None = None,
) -> Iterator[EventEnvelope]:
    """The stored events of ``persistence_id`` from ``from_sequence_nr`` to
    ``to_sequence_nr`` (None: the last), in order, read in pages of 1,000; an event that
    cannot be decoded raises :class:`PersistenceError` naming the id and its sequence
    number."""
    check_persistence_id(persistence_id)
    journal = persistence_of(system).journal
    dec = codec().decode
    nxt = max(1, from_sequence_nr)
    while True:
        page = journal.replay(persistence_id, nxt, to_sequence_nr, _PAGE)
        for e in page:
            try:
                event = dec(e.payload)
            except Exception as exc:
                raise PersistenceError(
                    f"cannot decode event {e.sequence_nr} of persistence id "
                    f"{persistence_id!r}: {exc}"
                ) from exc
            yield EventEnvelope(persistence_id, e.sequence_nr, event, e.timestamp)
        if len(page) < _PAGE:
            return
        nxt = page[-1].sequence_nr + 1


def persistence_ids(system: ActorSystem) -> Iterator[str]:
    """The persistence ids the system's journal holds events for."""
    yield from persistence_of(system).journal.persistence_ids()

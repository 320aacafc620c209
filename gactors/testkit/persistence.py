"""Testing persistent actors: the ``"memory"`` store, cleared and with fault injection.

Configure the system with ``config={"persistence": {"journal": "memory",
"snapshot_store": "memory", "state_store": "memory"}}`` (the ``memory_persistence``
pytest fixture returns a :class:`MemoryPersistence` and clears the store around the
test)::

    def test_failure(memory_persistence):
        memory_persistence.fail_next_write()     # -> on_persist_failure
        memory_persistence.reject_next_write()   # -> on_persist_rejected
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gactors.persistence._codec import codec
from gactors.persistence._memory import MemoryStore, memory_store

__all__ = ["MEMORY_CONFIG", "MemoryPersistence"]

MEMORY_CONFIG: Mapping[str, Any] = {
    "journal": "memory",
    "snapshot_store": "memory",
    "state_store": "memory",
}
"""The ``persistence`` settings table selecting the memory store for everything."""


class MemoryPersistence:
    """A handle on the process's memory store."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.store = store if store is not None else memory_store()

    @property
    def config(self) -> dict[str, Any]:
        """The ``persistence`` settings table that selects the memory store."""
        return dict(MEMORY_CONFIG)

    def fail_next_write(self, cause: BaseException | None = None) -> None:
        """The next event or state write fails (``on_persist_failure``), nothing stored."""
        self.store.fail_next(cause)

    def reject_next_write(self, cause: BaseException | None = None) -> None:
        """The store refuses the next event or state write (``on_persist_rejected``)."""
        self.store.reject_next(cause)

    def events(self, persistence_id: str) -> list[Any]:
        """The stored events of ``persistence_id``, decoded, in order."""
        dec = codec().decode
        return [dec(e.payload) for e in self.store.replay(persistence_id, 1, None, None)]

    def highest_sequence_nr(self, persistence_id: str) -> int:
        """The highest sequence number stored for ``persistence_id``."""
        return self.store.highest_sequence_nr(persistence_id)

    def clear(self) -> None:
        """Forget everything stored and every pending fault."""
        self.store.clear()

"""No full garbage collection of the whole heap while an actor system terminates.

Terminating a system of many actors allocates as it goes (system messages, death
notifications), and after the heap grew by the actors themselves the next full
collection of CPython's garbage collector is often due: it walks every object of the
process in one go, a pause no library can split (about 300 ms for 200,000 actors),
while the stop work itself runs in slices of about 20 ms so that the hub keeps
answering (a gunicorn worker's health checks during its shutdown).

While at least one system terminates, the objects that existed when termination
began are moved to the collector's permanent generation (``gc.freeze()``): a
collection during termination walks only what was allocated since. They are moved
back (``gc.unfreeze()``) once the last terminating system has terminated, and garbage
among them (the stopped actors' reference cycles) is collected by the next full
collection, after termination. Both calls only relink lists: they cost nothing for
any heap size.

A process that already froze objects itself (``gc.freeze()`` before forking workers,
to keep their pages shared) is left alone: unfreezing would undo its freeze.
"""

from __future__ import annotations

import gc

from gactors._threads import allocate_lock

__all__ = ["hold", "release"]

_lock = allocate_lock()
_holders = 0
_frozen_by_us = False


def hold() -> None:
    """A system begins to terminate."""
    global _holders, _frozen_by_us
    with _lock:
        if _holders == 0 and gc.get_freeze_count() == 0:
            gc.freeze()
            _frozen_by_us = True
        _holders += 1


def release() -> None:
    """A system that called :func:`hold` has terminated (call once per hold)."""
    global _holders, _frozen_by_us
    with _lock:
        if _holders == 0:  # pragma: no cover - a release without its hold
            return
        _holders -= 1
        if _holders == 0 and _frozen_by_us:
            _frozen_by_us = False
            gc.unfreeze()


def holders() -> int:
    """How many systems are terminating with the heap frozen (for tests)."""
    return _holders

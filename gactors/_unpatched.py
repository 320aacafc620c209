"""One warning for an actor system created in a process gevent has not monkey-patched.

Without ``monkey.patch_all()``, ``time.sleep``, socket I/O and ``select`` block the
whole OS thread, and with it the gevent hub that runs every actor of the system: four
actors each sleeping 0.5 s take 2 s one after the other, and nothing says why. The
first system created in such a process logs one warning saying what to do; a
patched process (or one patched with ``thread=False``, a common choice) gets none.

Only a system created in the main thread warns: a system in a thread of its own, in a
program that is not gevent-based (docs/howto/threads.md), is unpatched on purpose.
"""

from __future__ import annotations

import logging
import threading

from gevent import monkey

from gactors._threads import allocate_lock

__all__ = ["MODULES", "warn_if_unpatched"]

_log = logging.getLogger("gactors.gevent")

MODULES = ("time", "socket", "select")
"""The modules whose blocking calls an actor is most likely to make (``time.sleep``,
network clients, anything that waits on a file descriptor)."""

_lock = allocate_lock()
_warned = False


def warn_if_unpatched() -> bool:
    """Log the warning if one of :data:`MODULES` is not patched, once per process.

    Returns True when it logged (the first time only).
    """
    global _warned
    if _warned or threading.current_thread() is not threading.main_thread():
        return False
    missing = [name for name in MODULES if not monkey.is_module_patched(name)]
    if not missing:
        return False
    with _lock:
        if _warned:
            return False
        _warned = True
    _log.warning(
        "gevent has not monkey-patched this process (%s not patched): a blocking call in "
        "an actor (time.sleep, socket I/O, a database or HTTP client) holds the gevent "
        "hub, and every other actor of the system waits for it (four actors sleeping "
        "0.5 s each take 2 s, not 0.5 s). Put `from gevent import monkey; "
        "monkey.patch_all()` first in your program, before any other import. "
        "(Logged once per process, by logger 'gactors.gevent'.)",
        ", ".join(missing),
    )
    return True

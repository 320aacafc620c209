"""Thread identity that monkey-patching cannot fool.

After ``gevent.monkey.patch_all()`` the ``threading``/``_thread`` functions report
greenlets, not OS threads. gactors needs real OS thread identities to tell the hub
thread of a system from foreign threads, so it asks gevent for the originals.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from gevent import monkey

get_ident: Callable[[], int] = monkey.get_original("_thread", "get_ident")
allocate_lock: Callable[[], Any] = monkey.get_original("_thread", "allocate_lock")
start_new_thread: Callable[..., int] = monkey.get_original("_thread", "start_new_thread")


class _ThreadToken:
    """Lives exactly as long as the OS thread that made it (see :func:`thread_token`)."""

    __slots__ = ("__weakref__",)


# The original thread-local (patched, it would be per greenlet): its per-thread values
# are released when the thread exits, which is what makes the token die with it.
_tokens = monkey.get_original("_thread", "_local")()


def thread_token() -> Callable[[], object | None]:
    """A weak reference to the calling OS thread's token: it returns None once that
    thread has exited (checked in O(1) from any thread)."""
    token = getattr(_tokens, "token", None)
    if token is None:
        token = _tokens.token = _ThreadToken()
    return weakref.ref(token)

"""Thread identity that monkey-patching cannot fool.

After ``gevent.monkey.patch_all()`` the ``threading``/``_thread`` functions report
greenlets, not OS threads. gactors needs real OS thread identities to tell the hub
thread of a system from foreign threads, so it asks gevent for the originals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gevent import monkey

get_ident: Callable[[], int] = monkey.get_original("_thread", "get_ident")
allocate_lock: Callable[[], Any] = monkey.get_original("_thread", "allocate_lock")
start_new_thread: Callable[..., int] = monkey.get_original("_thread", "start_new_thread")

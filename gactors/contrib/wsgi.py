"""A WSGI middleware exposing the worker's actor system to request handlers.

::

    from gactors.contrib.wsgi import GactorsMiddleware, get_system

    app.wsgi_app = GactorsMiddleware(app.wsgi_app)      # Flask; any WSGI app works

    @app.get("/things/<key>")
    def thing(key):
        system = get_system(request.environ)             # environ["gactors.system"]
        return system.lookup("/user/things").ask(("get", key), timeout=2.0)

By default the middleware reads the worker system (:func:`gactors.contrib.worker_system`,
set by the gunicorn hooks) when a request comes in, not when the application is built:
the application is imported before the worker's system exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

from gactors._system import ActorSystem
from gactors.contrib import worker_system
from gactors.exceptions import IllegalStateError

__all__ = ["ENVIRON_KEY", "GactorsMiddleware", "get_system"]

ENVIRON_KEY = "gactors.system"
"""The WSGI environ key under which the middleware puts the system."""

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
SystemSource = Union[ActorSystem, Callable[[], ActorSystem], None]


class GactorsMiddleware:
    """WSGI middleware: ``environ["gactors.system"]`` is the actor system for each request.

    :param app: the WSGI application to wrap.
    :param system: an :class:`ActorSystem`, a callable returning one (called for every
        request), or ``None`` (default) for the worker system of this process.
    :param environ_key: where to put it (default ``"gactors.system"``).
    """

    def __init__(
        self, app: WSGIApp, system: SystemSource = None, *, environ_key: str = ENVIRON_KEY
    ) -> None:
        if not callable(app):
            raise TypeError(f"app must be a WSGI callable, not {type(app).__name__}")
        if system is not None and not isinstance(system, ActorSystem) and not callable(system):
            raise TypeError(
                "system must be an ActorSystem, a callable returning one, or None, "
                f"not {type(system).__name__}"
            )
        self.app = app
        self.system = system
        self.environ_key = environ_key

    def resolve(self) -> ActorSystem:
        """The system the next request will see."""
        source = self.system
        if source is None:
            return worker_system()
        if isinstance(source, ActorSystem):
            return source
        system = source()
        if not isinstance(system, ActorSystem):
            raise TypeError(
                f"the system callable {source!r} returned {type(system).__name__}, "
                "not a gactors.ActorSystem"
            )
        return system

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        environ[self.environ_key] = self.resolve()
        return self.app(environ, start_response)


def get_system(environ: Mapping[str, Any], key: str = ENVIRON_KEY) -> ActorSystem:
    """The actor system the middleware put into ``environ``.

    Raises :class:`~gactors.IllegalStateError` if the middleware did not run for this
    request.
    """
    system = environ.get(key)
    if not isinstance(system, ActorSystem):
        raise IllegalStateError(
            f"no actor system in environ[{key!r}]: wrap the WSGI application with "
            "gactors.contrib.wsgi.GactorsMiddleware"
        )
    return system

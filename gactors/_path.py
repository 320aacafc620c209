"""Actor paths and the rules for actor names."""

from __future__ import annotations

import re
from typing import Final

from gactors.exceptions import InvalidActorNameException

__all__ = ["ActorPath", "validate_name"]

# The characters of RFC 2396 that need no escaping in a URI path segment, plus %XX
# escapes: the same rule as Akka's ActorPath.ElementRegex. "$" may not come first
# because generated names start with it.
_NAME_RE: Final = re.compile(
    r"(?:[-\w:@&=+,.!~*'_;]|%[0-9A-Fa-f]{2})(?:[-\w:@&=+,.!~*'$_;]|%[0-9A-Fa-f]{2})*",
    re.ASCII,
)


def validate_name(name: object) -> str:
    """Return ``name`` if it is a valid user-given actor name, else raise."""
    if not isinstance(name, str):
        raise InvalidActorNameException(
            f"actor name must be a str, not {type(name).__name__}: {name!r}"
        )
    if not name:
        raise InvalidActorNameException("actor name must not be empty")
    if "/" in name:
        raise InvalidActorNameException(f"actor name {name!r} must not contain '/'")
    if name in (".", ".."):
        raise InvalidActorNameException(
            f"actor name {name!r} is not allowed: it would read as a relative path element"
        )
    if name.startswith("$"):
        raise InvalidActorNameException(
            f"actor name {name!r} must not start with '$' (reserved for generated names)"
        )
    if not _NAME_RE.fullmatch(name):
        raise InvalidActorNameException(
            f"actor name {name!r} contains characters that are not URL-safe; allowed are "
            "ASCII letters, digits, -_.:@&=+,!~*';$ (not first) and %XX escapes"
        )
    return name


class ActorPath:
    """The unique, hierarchical address of an actor, such as ``gactors://app/user/a/b``.

    Paths are immutable and compare by their text.
    """

    __slots__ = ("_elements", "_hash", "_parent", "_str", "_system")

    def __init__(
        self, system: str, elements: tuple[str, ...] = (), parent: ActorPath | None = None
    ):
        self._system = system
        self._elements = elements
        self._parent = parent
        self._str: str | None = None
        self._hash: int | None = None

    def child(self, name: str) -> ActorPath:
        """The path of a child called ``name``."""
        return ActorPath(self._system, (*self._elements, name), self)

    @property
    def name(self) -> str:
        """The last element, or ``""`` for the root."""
        return self._elements[-1] if self._elements else ""

    @property
    def parent(self) -> ActorPath:
        """The parent path (the root is its own parent)."""
        if self._parent is not None:
            return self._parent
        if not self._elements:
            return self
        self._parent = ActorPath(self._system, self._elements[:-1])
        return self._parent

    @property
    def elements(self) -> tuple[str, ...]:
        """The names from below the root down to this actor, e.g. ``("user", "a", "b")``."""
        return self._elements

    @property
    def root(self) -> ActorPath:
        """The root path ``gactors://<system>/``."""
        return ActorPath(self._system)

    @property
    def system_name(self) -> str:
        """The name of the actor system."""
        return self._system

    def __truediv__(self, name: str) -> ActorPath:
        return self.child(name)

    def __str__(self) -> str:
        s = self._str
        if s is None:
            s = self._str = f"gactors://{self._system}/" + "/".join(self._elements)
        return s

    def __repr__(self) -> str:
        return f"ActorPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, ActorPath):
            return NotImplemented
        return self._system == other._system and self._elements == other._elements

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((self._system, self._elements))
        return h

    def __lt__(self, other: ActorPath) -> bool:
        return str(self) < str(other)

    @classmethod
    def parse(cls, text: str, system: str) -> ActorPath:
        """Parse ``gactors://<system>/user/a`` or ``/user/a`` (relative to ``system``)."""
        if not isinstance(text, str):
            raise TypeError(f"an actor path must be a str or ActorPath, not {type(text).__name__}")
        if text.startswith("gactors://"):
            rest = text[len("gactors://") :]
            sysname, _, tail = rest.partition("/")
            if sysname != system:
                raise ValueError(f"path {text!r} belongs to system {sysname!r}, not {system!r}")
        elif text.startswith("/"):
            tail = text[1:]
        else:
            raise ValueError(f"an actor path must start with 'gactors://' or '/': {text!r}")
        # Empty elements ("/user//a", "/user/a/") are kept, not skipped: no actor is
        # called "", so such a path names no actor rather than quietly another one.
        elements = tuple(tail.split("/")) if tail else ()
        return cls(system, elements)

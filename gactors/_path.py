"""Actor paths and the rules for actor names."""

from __future__ import annotations

import re
from typing import Final

from gactors.exceptions import InvalidActorNameException

__all__ = ["ActorPath", "Address", "validate_name"]

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


class Address:
    """Where an actor system lives: ``Address("shop", "n1")`` is ``gactors://shop@n1``.

    ``node`` is None for a system without a cluster (``gactors://shop``); in a cluster
    it is the node id, unique per process incarnation. Equal and hashed by
    ``(system, node)``.
    """

    __slots__ = ("_str", "node", "system")

    system: str
    node: str | None
    _str: str

    def __init__(self, system: str, node: str | None = None) -> None:
        object.__setattr__(self, "system", system)
        object.__setattr__(self, "node", node)
        object.__setattr__(
            self, "_str", f"gactors://{system}" if node is None else f"gactors://{system}@{node}"
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Address is immutable (cannot set {name!r})")

    @property
    def has_node(self) -> bool:
        """True for a cluster node's address."""
        return self.node is not None

    def __str__(self) -> str:
        return self._str

    def __repr__(self) -> str:
        return f"Address({self.system!r}, {self.node!r})"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Address):
            return NotImplemented
        return self.system == other.system and self.node == other.node

    def __hash__(self) -> int:
        return hash((self.system, self.node))

    def __reduce__(self) -> tuple[type[Address], tuple[str, str | None]]:
        return (Address, (self.system, self.node))

    @classmethod
    def parse(cls, text: str) -> Address:
        """Parse ``gactors://shop`` or ``gactors://shop@n1`` (ValueError if malformed)."""
        if not isinstance(text, str) or not text.startswith("gactors://"):
            raise ValueError(f"an address must start with 'gactors://': {text!r}")
        rest = text[len("gactors://") :]
        system, at, node = rest.partition("@")
        if not system or "/" in rest or (at and not node):
            raise ValueError(f"malformed address {text!r}")
        return cls(system, node if at else None)


class ActorPath:
    """The unique, hierarchical address of an actor, such as ``gactors://app/user/a/b``.

    In a cluster the path carries the node's :class:`Address`
    (``gactors://app@node/user/a``). Paths are immutable and compare by their text.
    """

    __slots__ = ("_elements", "_hash", "_node", "_parent", "_str", "_system")

    def __init__(
        self,
        system: str,
        elements: tuple[str, ...] = (),
        parent: ActorPath | None = None,
        node: str | None = None,
    ):
        self._system = system
        self._elements = elements
        self._parent = parent
        self._node = node
        self._str: str | None = None
        self._hash: int | None = None

    def child(self, name: str) -> ActorPath:
        """The path of a child called ``name``."""
        return ActorPath(self._system, (*self._elements, name), self, self._node)

    @property
    def address(self) -> Address:
        """The :class:`Address` of the system this path belongs to."""
        return Address(self._system, self._node)

    @property
    def node(self) -> str | None:
        """The node id of the address (None without a cluster)."""
        return self._node

    @property
    def path_str(self) -> str:
        """The path without its address, e.g. ``"/user/a"``."""
        return "/" + "/".join(self._elements)

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
        self._parent = ActorPath(self._system, self._elements[:-1], None, self._node)
        return self._parent

    @property
    def elements(self) -> tuple[str, ...]:
        """The names from below the root down to this actor, e.g. ``("user", "a", "b")``."""
        return self._elements

    @property
    def root(self) -> ActorPath:
        """The root path ``gactors://<system>/``."""
        return ActorPath(self._system, (), None, self._node)

    @property
    def system_name(self) -> str:
        """The name of the actor system."""
        return self._system

    def __truediv__(self, name: str) -> ActorPath:
        return self.child(name)

    def __str__(self) -> str:
        s = self._str
        if s is None:
            node = self._node
            s = self._str = (
                f"gactors://{self._system}/"
                if node is None
                else f"gactors://{self._system}@{node}/"
            ) + "/".join(self._elements)
        return s

    def __repr__(self) -> str:
        return f"ActorPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, ActorPath):
            return NotImplemented
        return (
            self._elements == other._elements
            and self._system == other._system
            and self._node == other._node
        )

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((self._system, self._elements, self._node))
        return h

    def __lt__(self, other: ActorPath) -> bool:
        return str(self) < str(other)

    @classmethod
    def parse(cls, text: str, system: str, node: str | None = None) -> ActorPath:
        """Parse ``gactors://<system>/user/a``, ``gactors://<system>@<node>/user/a`` or
        ``/user/a`` (relative to ``system``, on ``node``)."""
        if not isinstance(text, str):
            raise TypeError(f"an actor path must be a str or ActorPath, not {type(text).__name__}")
        if text.startswith("gactors://"):
            rest = text[len("gactors://") :]
            authority, _, tail = rest.partition("/")
            sysname, at, node_part = authority.partition("@")
            if sysname != system:
                raise ValueError(f"path {text!r} belongs to system {sysname!r}, not {system!r}")
            if at:
                if not node_part:
                    raise ValueError(f"path {text!r} has an empty node after '@'")
                node = node_part
            else:
                node = None
        elif text.startswith("/"):
            tail = text[1:]
        else:
            raise ValueError(f"an actor path must start with 'gactors://' or '/': {text!r}")
        # Empty elements ("/user//a", "/user/a/") are kept, not skipped: no actor is
        # called "", so such a path names no actor rather than quietly another one.
        elements = tuple(tail.split("/")) if tail else ()
        for element in elements:
            if element in (".", ".."):
                # No actor is called so (names refuse them), and a path is absolute:
                # "/user/a/../b" must not quietly name /user/b, nor any actor at all.
                raise ValueError(
                    f"actor path {text!r} has the relative element {element!r}: paths are "
                    "absolute (an actor's context.parent / context.child(name) navigate)"
                )
        return cls(system, elements, None, node)

"""The plain-Python model of supervision that ``test_model.py`` checks gactors against.

It restates SPEC section 6 (and 3, 7) sequentially: a failure is decided by the
parent's strategy, a restart runs ``pre_restart`` / the factory / ``post_restart`` in
order, a stop stops the subtree bottom-up, every watcher of a stopped actor gets one
``Terminated``. Nothing here imports gactors' internals.

The real system is concurrent where the model is sequential. The outcomes agree as
long as at most one failure is being decided at any time. Two situations break that,
and the model refuses them by raising :class:`Ambiguous` (the test then skips the
step): a failure of an actor restarting in parallel with others (an all-for-one
group or the surviving children of a restart), and a failure anywhere while the
actor that received the step's messages has already been resumed and still has
messages to process (whether those are processed before or after that failure is a
matter of scheduling, not of the specification); likewise a ``PoisonPill`` processed
by that actor while other actors of the same failure are still restarting.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from gactors import Directive

DECIDER_KINDS = ("E1", "E2", "E3", "INIT", "KILL")
"""What a decider can see: three user errors, an initialization error (also
PostRestartException) and ActorKilledException."""

HOOKS = ("ctor", "pre_start", "pre_restart", "post_restart", "post_stop")

PROBE = "probe"
"""The watcher key of the test's own watcher actor (never stops)."""


class Ambiguous(Exception):
    """The step's outcome depends on scheduling: the model does not predict it."""


@dataclass(frozen=True)
class NodeCfg:
    """How one model actor supervises its children, and how it restarts."""

    all_for_one: bool
    table: tuple[tuple[str, Directive], ...]  # kind -> directive (the effective decision)
    form: str  # "mapping" | "callable" | "sequence": how the decider is written
    order: tuple[str, ...]  # order of the mapping/sequence entries
    omit: frozenset[str] = frozenset()  # mapping form: E kinds left to the ModelError entry
    none_for_escalate: bool = False  # callable form: return None instead of ESCALATE
    max_retries: int | None = None
    within: float | None = None
    keep_children: bool = False  # pre_restart only calls post_stop (children survive)
    logging_enabled: bool = True

    def directive(self, kind: str) -> Directive:
        return dict(self.table)[kind]

    @property
    def limit(self) -> int | None:
        return None if self.max_retries in (None, -1) else self.max_retries


USER_GUARDIAN = NodeCfg(
    all_for_one=False,
    table=(
        ("E1", Directive.RESTART),
        ("E2", Directive.RESTART),
        ("E3", Directive.RESTART),
        ("INIT", Directive.STOP),
        ("KILL", Directive.STOP),
    ),
    form="callable",
    order=DECIDER_KINDS,
)
"""``/user`` with the default strategy: one-for-one, the default decider, no limit."""


@dataclass
class MNode:
    nid: int
    parent: int | None
    cfg: NodeCfg
    depth: int
    faults: dict[str, int]
    children: list[int] = field(default_factory=list)  # alive children, creation order
    alive: bool = True
    has_instance: bool = False
    restarts: int = 0  # completed restarts (cell.restarts)
    stats_count: int = 0  # restart_count in the parent's ChildRestartStats
    failed_message: Any = None  # the message this actor failed on (pre_restart's argument)
    perp: int | None = None  # the child whose failure this actor escalated
    lifecycle: list[Any] = field(default_factory=list)
    processed: list[int] = field(default_factory=list)
    dead_letters: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"n{self.nid}"


@dataclass
class Msg:
    """One message of a ``send`` step: ``Work(seq, fail)``, ``Kill`` or ``PoisonPill``."""

    what: str  # "work" | "kill" | "poison"
    seq: int = 0
    fail: str | None = None


class Model:
    """The expected state of the actor tree and of everything the actors recorded."""

    def __init__(self) -> None:
        self.nodes: dict[int, MNode] = {}
        self.top: list[int] = []
        self.watches: set[tuple[Any, int]] = set()  # (watcher key, watchee nid)
        self.ever_watched: set[tuple[Any, int]] = set()
        self.terminated: defaultdict[Any, Counter[tuple[int, bool]]] = defaultdict(Counter)
        self.logs: Counter[tuple[str, int]] = Counter()
        self.failures = 0
        self.events: Counter[str] = Counter()  # what happened, for the run's statistics
        # The step being applied (see the module docstring on ambiguity).
        self._target: int | None = None
        self._pending: list[Msg] = []
        self._released = False
        self._others_restarted = False

    # -- queries ------------------------------------------------------------------------------
    def alive(self) -> list[MNode]:
        return [n for n in self.nodes.values() if n.alive]

    def siblings_of(self, node: MNode) -> list[int]:
        return self.top if node.parent is None else self.nodes[node.parent].children

    # -- steps --------------------------------------------------------------------------------
    def spawn(self, nid: int, parent: int | None, cfg: NodeCfg, faults: dict[str, int]) -> None:
        depth = 1 if parent is None else self.nodes[parent].depth + 1
        node = self.nodes[nid] = MNode(nid, parent, cfg, depth, dict(faults))
        self.siblings_of(node).append(nid)
        self.events[f"spawned at depth {depth}"] += 1
        self._create(node, parallel=False)

    def send(self, nid: int, messages: list[Msg]) -> None:
        target = self.nodes[nid]
        self._target, self._pending, self._released = nid, list(messages), False
        self._others_restarted = False
        try:
            while self._pending:
                m = self._pending.pop(0)
                if not target.alive:
                    if m.what == "work":
                        self.events["messages to dead letters"] += 1
                        target.dead_letters.append(m.seq)
                    continue
                self.events["messages delivered"] += 1
                if m.what == "poison":
                    if self._others_restarted:
                        # Children or siblings of the target may still be restarting:
                        # whether they stop before or after that completes is scheduling.
                        raise Ambiguous(f"n{nid} stops while others restart")
                    self.stop(target)
                    continue
                if m.what == "kill":
                    target.failed_message = "KILL"
                    kind = "KILL"
                else:
                    target.processed.append(m.seq)
                    if m.fail is None:
                        continue
                    target.failed_message = m.seq
                    kind = m.fail
                self._released = False
                self._others_restarted = False
                self._fail(target, kind, parallel=False)
                if target.alive and not self._released:
                    raise AssertionError(f"model bug: n{nid} neither resumed nor stopped")
        finally:
            self._target, self._pending = None, []

    def arm(self, nid: int, hook: str, count: int) -> None:
        faults = self.nodes[nid].faults
        faults[hook] = faults.get(hook, 0) + count

    def watch(self, watcher: Any, nid: int) -> None:
        key = (watcher, nid)
        self.ever_watched.add(key)
        if key in self.watches:
            return
        if not self.nodes[nid].alive:
            # Watching a dead actor: one Terminated at once, existence not confirmed.
            self.terminated[watcher][(nid, False)] += 1
            return
        self.watches.add(key)

    def unwatch(self, watcher: Any, nid: int) -> None:
        self.watches.discard((watcher, nid))

    # -- SPEC 6: failures -----------------------------------------------------------------------
    def _hook(self, node: MNode, name: str, *detail: Any) -> bool:
        """Record a lifecycle hook call; True if an armed fault makes it raise."""
        node.lifecycle.append((name, *detail) if detail else name)
        left = node.faults.get(name, 0)
        if left:
            node.faults[name] = left - 1
            return True
        return False

    def _fail(self, node: MNode, kind: str, parallel: bool) -> None:
        if parallel or (self._released and self._pending):
            raise Ambiguous(f"n{node.nid} fails while other work runs concurrently")
        self.failures += 1
        parent = self.nodes[node.parent] if node.parent is not None else None
        cfg = parent.cfg if parent is not None else USER_GUARDIAN
        directive = cfg.directive(kind)
        self.events[f"{directive.name.lower()} ({kind})"] += 1
        self.events[f"failure at depth {node.depth}"] += 1
        if parent is not None and cfg.all_for_one:
            size = len(parent.children)
            self.events[f"all-for-one {directive.name.lower()} with {size} children"] += 1
        if directive is not Directive.ESCALATE and cfg.logging_enabled:
            self.logs[("decision", node.nid)] += 1
        if directive is Directive.RESUME:
            self._resume(node, caused=True)
        elif directive is Directive.RESTART:
            if parent is None or not cfg.all_for_one:
                if self._permit(cfg, node):
                    self._restart(node, survivor=False, parallel=False)
                else:
                    self.events["restart limit reached"] += 1
                    self.stop(node)
            else:
                group = [self.nodes[c] for c in parent.children]
                # all() stops asking at the first refusal, exactly like the strategy.
                if all(self._permit(cfg, c) for c in group):
                    self.events["all-for-one restart of a group"] += len(group) > 1
                    for c in group:
                        self._restart(c, survivor=False, parallel=len(group) > 1)
                else:
                    self.events["restart limit reached"] += 1
                    for c in group:
                        self.stop(c)
        elif directive is Directive.STOP:
            if parent is not None and cfg.all_for_one:
                for c in list(parent.children):
                    self.stop(self.nodes[c])
            else:
                self.stop(node)
        else:
            assert parent is not None, "the /user guardian never escalates an Exception"
            parent.perp = node.nid
            self._fail(parent, kind, parallel=False)

    @staticmethod
    def _permit(cfg: NodeCfg, node: MNode) -> bool:
        limit = cfg.limit
        if limit is None:
            return True
        if limit < 1:
            return False
        node.stats_count += 1
        return node.stats_count <= limit

    def _released_if_target(self, node: MNode) -> None:
        if node.nid == self._target:
            self._released = True

    def _resume(self, node: MNode, caused: bool) -> None:
        if not node.has_instance:
            self._fresh_create(node, parallel=False)  # resuming a failed creation: retry it
            return
        perp = node.perp
        if caused:
            node.failed_message = None
            node.perp = None
        self._released_if_target(node)
        if caused and perp is not None:
            self._resume(self.nodes[perp], caused=True)

    def _restart(self, node: MNode, survivor: bool, parallel: bool) -> None:
        if not node.alive:
            return
        if node.nid != self._target:
            self._others_restarted = True
        if not node.has_instance:
            self._fresh_create(node, parallel)
            return
        message = None if survivor else node.failed_message
        if self._hook(node, "pre_restart", message):
            self.events["pre_restart raised"] += 1
            self.logs[("pre_restart", node.nid)] += 1
        else:
            if not node.cfg.keep_children:
                # Actor.pre_restart: unwatch and stop every child, then post_stop.
                for c in list(node.children):
                    self.watches.discard((node.nid, c))
                    self.stop(self.nodes[c])
            if self._hook(node, "post_stop"):
                self.logs[("pre_restart", node.nid)] += 1  # raised out of pre_restart
        node.failed_message = None
        node.perp = None
        survivors = list(node.children)
        if (
            self._hook(node, "ctor")
            or self._hook(node, "post_restart")
            or self._hook(node, "pre_start")  # Actor.post_restart calls pre_start
        ):
            node.has_instance = False  # PostRestartException; the survivors wait
            self.events["restart failed (PostRestartException)"] += 1
            self._fail(node, "INIT", parallel)
            return
        node.restarts += 1
        self.events["restart completed"] += 1
        self.events["children survived a restart"] += len(survivors)
        self._released_if_target(node)
        for c in survivors:
            self._restart(self.nodes[c], survivor=True, parallel=parallel or len(survivors) > 1)

    def _fresh_create(self, node: MNode, parallel: bool) -> None:
        if node.nid != self._target:
            self._others_restarted = True
        self.events["creation retried"] += 1
        for c in list(node.children):
            self.stop(self.nodes[c])
        node.failed_message = None
        node.perp = None
        self._create(node, parallel)

    def _create(self, node: MNode, parallel: bool) -> None:
        if self._hook(node, "ctor") or self._hook(node, "pre_start"):
            node.has_instance = False  # ActorInitializationException
            self._fail(node, "INIT", parallel)
            return
        node.has_instance = True
        self._released_if_target(node)

    # -- SPEC 6.5 and 7: stopping and DeathWatch ---------------------------------------------
    def stop(self, node: MNode) -> None:
        if not node.alive:
            return
        for c in list(node.children):
            self.stop(self.nodes[c])
        self.events["actor stopped"] += 1
        if node.has_instance and self._hook(node, "post_stop"):
            self.events["post_stop raised"] += 1
            self.logs[("post_stop", node.nid)] += 1
        node.alive = False
        node.has_instance = False
        self.siblings_of(node).remove(node.nid)
        for watcher, watchee in sorted(self.watches, key=repr):
            if watchee == node.nid:
                self.watches.discard((watcher, watchee))
                if watcher == PROBE or self.nodes[watcher].alive:
                    self.events["Terminated delivered"] += 1
                    self.terminated[watcher][(node.nid, True)] += 1
            elif watcher == node.nid:
                self.watches.discard((watcher, watchee))

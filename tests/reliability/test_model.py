"""Model-based test of supervision (issue 8): a hypothesis ``RuleBasedStateMachine``.

Each example starts an actor system and runs a random program of steps against it
and against the plain-Python model of ``_model.py``:

* ``spawn``   — a top-level actor or a child of a live actor, with a random strategy
  (one-for-one / all-for-one; a decider written as a mapping, a callable or a
  sequence; ``max_retries`` None/-1/0..3, sometimes with a ``within`` window; failure
  logging on or off; children kept or stopped on restart), possibly failing in its
  constructor or ``pre_start``;
* ``send``    — up to four ``Work`` messages, at most one of them failing (or a
  ``Kill``), possibly with a ``PoisonPill`` among them;
* ``arm``     — make the next call(s) of a lifecycle hook of an actor raise
  (constructor, ``pre_start``, ``pre_restart``, ``post_restart``, ``post_stop``);
* ``stop``    — by ``system.stop``, ``PoisonPill``, the parent's ``context.stop`` or
  the actor stopping itself;
* ``watch`` / ``unwatch`` — by the test's watcher actor or by a model actor, of a
  live or an already stopped actor.

After every step the system is brought to quiescence and compared with the model:

1. the set of live actors and each one's children (asked of the actor itself);
2. every live actor is responsive and not suspended, failed, waiting or terminating,
   with empty mailbox and system queues;
3. restart counts: completed restarts per actor, and the restart counter of its
   parent's ``ChildRestartStats``;
4. the exact sequence of lifecycle hook calls of every actor ever created,
   including ``pre_restart``'s ``message`` argument (what failed, or None);
5. every ``Work`` message was processed exactly once, in send order, or — after its
   actor stopped — published as a ``DeadLetter`` exactly once; nothing is lost;
6. every watcher that is alive got exactly one ``Terminated`` per stopped actor it
   watched, with ``existence_confirmed`` as expected; a stopped watcher at most one;
7. nothing ran on a suspended actor (checked inside ``receive`` from the cell);
8. every failure handled with resume/restart/stop was logged once (unless the
   strategy's logging is off), every ``pre_restart``/``post_stop`` failure once,
   and nothing else was logged at WARNING or above;
9. armed faults were consumed exactly as the model consumed them.

At the end of each example the system must terminate, leaving no worker greenlet;
after the whole run the number of live greenlets is back to what it was.

Quiescence: all actors live in this thread's hub and never block, so once the
dispatcher has no queued cell and no worker greenlet, nothing can happen until the
test acts again. ``settle()`` yields to the hub (``gevent.sleep(0)``, a cooperative
yield, not a timed wait) until that holds; the ``Report`` asks then double-check
every live actor with a real round trip.
"""

from __future__ import annotations

import copy
import gc
import itertools
import logging
import os
import sys
from collections import Counter, defaultdict
from time import monotonic
from typing import Any

import gevent
import greenlet
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from gactors import (
    Actor,
    ActorInitializationException,
    ActorKilledException,
    ActorRef,
    ActorSystem,
    AllForOneStrategy,
    DeadLetter,
    Directive,
    Kill,
    LogEvent,
    OneForOneStrategy,
    PoisonPill,
    Props,
    SupervisorStrategy,
    Terminated,
)
from gactors.testkit import await_condition

from ._model import DECIDER_KINDS, HOOKS, PROBE, Ambiguous, Model, Msg, NodeCfg
from .conftest import PROFILE_ENV, hypothesis_settings

MAX_ALIVE = 12
MAX_DEPTH = 4
ASK_TIMEOUT = 5.0
SETTLE_TIMEOUT = 10.0


# -- failures --------------------------------------------------------------------------------------
class ModelError(Exception):
    """Base of the user failures (a mapping decider may use it as a catch-all entry)."""


class E1(ModelError):
    pass


class E2(ModelError):
    pass


class E3(ModelError):
    pass


class HookFault(Exception):
    """Raised by an armed lifecycle hook; never reaches a decider unwrapped."""


KIND_CLASSES: dict[str, type[BaseException]] = {
    "E1": E1,
    "E2": E2,
    "E3": E3,
    "INIT": ActorInitializationException,
    "KILL": ActorKilledException,
}


def kind_of(exc: BaseException) -> str | None:
    if isinstance(exc, ActorInitializationException):  # also PostRestartException
        return "INIT"
    if isinstance(exc, ActorKilledException):
        return "KILL"
    for kind in ("E1", "E2", "E3"):
        if type(exc) is KIND_CLASSES[kind]:
            return kind
    return None


# -- messages --------------------------------------------------------------------------------------
class Work:
    __slots__ = ("fail", "seq")

    def __init__(self, seq: int, fail: str | None) -> None:
        self.seq = seq
        self.fail = fail

    def __repr__(self) -> str:
        return f"Work({self.seq}, {self.fail})"


class Spawn:
    __slots__ = ("name", "nid")

    def __init__(self, nid: int, name: str) -> None:
        self.nid = nid
        self.name = name


class StopChild:
    __slots__ = ("ref",)

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref


class WatchIt:
    __slots__ = ("ref",)

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref


class UnwatchIt:
    __slots__ = ("ref",)

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref


STOP_SELF = "stop-self"
REPORT = "report"


def nid_of(ref: ActorRef) -> int:
    return int(ref.path.name[1:])


def nid_of_source(source: str) -> int:
    last = source.rsplit("/", 1)[-1]
    return int(last[1:]) if last[:1] == "n" and last[1:].isdigit() else -1


def describe(message: Any) -> Any:
    """How pre_restart's ``message`` is journaled (the model uses the same values)."""
    if message is None:
        return None
    if type(message) is Work:
        return message.seq
    if message is Kill:
        return "KILL"
    return repr(message)


# -- what the actors record ----------------------------------------------------------------------
class Journal:
    """Written by the actors (hub thread), read by the test."""

    def __init__(self) -> None:
        self.cfgs: dict[int, NodeCfg] = {}
        self.faults: dict[int, dict[str, int]] = {}
        self.lifecycle: defaultdict[int, list[Any]] = defaultdict(list)
        self.processed: defaultdict[int, list[int]] = defaultdict(list)
        self.dead_letters: defaultdict[int, list[int]] = defaultdict(list)
        self.terminated: defaultdict[Any, Counter[tuple[int, bool]]] = defaultdict(Counter)
        self.logs: Counter[tuple[Any, ...]] = Counter()
        self.violations: list[str] = []

    def hook(self, nid: int, name: str, *detail: Any) -> None:
        self.lifecycle[nid].append((name, *detail) if detail else name)
        faults = self.faults[nid]
        left = faults.get(name, 0)
        if left:
            faults[name] = left - 1
            raise HookFault(f"{name} of n{nid}")

    def on_terminated(self, watcher: Any, t: Terminated) -> None:
        self.terminated[watcher][(nid_of(t.actor), t.existence_confirmed)] += 1


def build_strategy(cfg: NodeCfg, journal: Journal) -> SupervisorStrategy:
    table = dict(cfg.table)
    decider: Any
    if cfg.form == "mapping":
        decider = {}
        if cfg.omit:
            # The catch-all comes first: the most specific class must win anyway.
            decider[ModelError] = table[next(iter(sorted(cfg.omit)))]
        for kind in cfg.order:
            if kind not in cfg.omit:
                decider[KIND_CLASSES[kind]] = table[kind]
    elif cfg.form == "sequence":
        decider = [KIND_CLASSES[k] for k in cfg.order if table[k] is Directive.RESTART]
    else:

        def decider(exc: BaseException) -> Directive | None:
            kind = kind_of(exc)
            if kind is None:
                journal.violations.append(f"decider saw an unexpected {exc!r}")
                return Directive.ESCALATE
            d = table[kind]
            return None if d is Directive.ESCALATE and cfg.none_for_escalate else d

    cls = AllForOneStrategy if cfg.all_for_one else OneForOneStrategy
    return cls(
        decider,
        max_retries=cfg.max_retries,
        within=cfg.within,
        logging_enabled=cfg.logging_enabled,
    )


# -- the actors ------------------------------------------------------------------------------------
class Node(Actor):
    """A model actor: journals its hooks and messages; raises when told to."""

    def __init__(self, nid: int, journal: Journal) -> None:
        self.nid = nid
        self.journal = journal
        journal.hook(nid, "ctor")
        cfg = journal.cfgs[nid]
        self._strategy = build_strategy(cfg, journal)
        self._keep_children = cfg.keep_children

    @property  # type: ignore[override]
    def supervisor_strategy(self) -> SupervisorStrategy:
        return self._strategy

    def pre_start(self) -> None:
        self.journal.hook(self.nid, "pre_start")

    def post_stop(self) -> None:
        self.journal.hook(self.nid, "post_stop")

    def pre_restart(self, reason: BaseException, message: Any) -> None:
        self.journal.hook(self.nid, "pre_restart", describe(message))
        if self._keep_children:
            self.post_stop()
        else:
            super().pre_restart(reason, message)

    def post_restart(self, reason: BaseException) -> None:
        self.journal.hook(self.nid, "post_restart")
        super().post_restart(reason)

    def receive(self, message: Any) -> None:
        cell = self._gactors_cell
        parent = cell.parent_cell
        # A failing parent suspends its children synchronously (the Suspend is in the
        # child's system queue, which is drained before any message): so not only this
        # actor, its parent too must not be suspended while a message runs here.
        if (
            cell.suspend_count
            or cell.dead
            or cell.actor is not self
            or (parent is not None and parent.suspend_count)
        ):
            self.journal.violations.append(
                f"n{self.nid} ran {message!r} with suspend_count={cell.suspend_count}, "
                f"parent's={parent.suspend_count if parent else None}, dead={cell.dead}, "
                f"current instance={cell.actor is self}"
            )
        t = type(message)
        if t is Work:
            self.journal.processed[self.nid].append(message.seq)
            if message.fail is not None:
                raise KIND_CLASSES[message.fail](f"Work({message.seq}) of n{self.nid}")
        elif t is Terminated:
            self.journal.on_terminated(self.nid, message)
        elif t is Spawn:
            child = self.context.actor_of(Props(Node, message.nid, self.journal), message.name)
            self.sender.tell(child)
        elif t is StopChild:
            self.context.stop(message.ref)
        elif message == STOP_SELF:
            self.context.stop(self.ref)
        elif t is WatchIt:
            self.sender.tell(self.context.watch(message.ref))
        elif t is UnwatchIt:
            self.sender.tell(self.context.unwatch(message.ref))
        elif message == REPORT:
            self.sender.tell(tuple(c.name for c in self.context.children))
        else:
            self.journal.violations.append(f"n{self.nid} got unexpected {message!r}")


class WatchProbe(Actor):
    """The test's own watcher (under /system, outside the model tree)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def receive(self, message: Any) -> None:
        if type(message) is Terminated:
            self.journal.on_terminated(PROBE, message)
        elif type(message) is WatchIt:
            self.sender.tell(self.context.watch(message.ref))
        elif type(message) is UnwatchIt:
            self.sender.tell(self.context.unwatch(message.ref))
        else:
            self.unhandled(message)


# -- hypothesis strategies ------------------------------------------------------------------------
@st.composite
def node_cfgs(draw: Any) -> NodeCfg:
    form = draw(st.sampled_from(("mapping", "callable", "sequence")))
    choices = (Directive.RESTART, Directive.ESCALATE) if form == "sequence" else tuple(Directive)
    table = {k: draw(st.sampled_from(choices)) for k in DECIDER_KINDS}
    omit: frozenset[str] = frozenset()
    if form == "mapping":
        omit = frozenset(draw(st.sets(st.sampled_from(("E1", "E2", "E3")))))
        if omit:
            base = draw(st.sampled_from(choices))
            for k in omit:
                table[k] = base
    max_retries = draw(st.sampled_from((None, -1, 0, 1, 2, 3)))
    within = None
    if max_retries not in (None, -1) and draw(st.booleans()):
        within = 3600.0  # never runs out during an example: counts like no window
    return NodeCfg(
        all_for_one=draw(st.booleans()),
        table=tuple(table.items()),
        form=form,
        order=tuple(draw(st.permutations(DECIDER_KINDS))),
        omit=omit,
        none_for_escalate=draw(st.booleans()),
        max_retries=max_retries,
        within=within,
        keep_children=draw(st.booleans()),
        logging_enabled=draw(st.sampled_from((True, True, True, False))),
    )


STATS: Counter[str] = Counter()


def busy(system: ActorSystem) -> bool:
    """Whether any actor has work queued or running (a worker lingering for new work
    after running out of it does not count)."""
    d = system.dispatcher
    parked = getattr(d, "parked", None)
    return bool(d.queued or system._calls or any(w is not parked for w in d.workers))


def settle(system: ActorSystem) -> None:
    """Yield to the hub until no actor has work and no worker greenlet is running."""
    deadline = monotonic() + SETTLE_TIMEOUT
    idle = 0
    while idle < 2:
        gevent.sleep(0)
        idle = 0 if busy(system) else idle + 1
        if monotonic() > deadline:
            raise AssertionError(f"the system did not become quiescent:\n{system.tree()}")


def wait_for_no_workers(system: ActorSystem, timeout: float = SETTLE_TIMEOUT) -> None:
    """After termination: wait until every worker greenlet ended (a lingering worker
    retires after ``gactors._dispatch.LINGER`` seconds)."""
    await_condition(
        lambda: not system.dispatcher.workers,
        timeout=timeout,
        message="every worker greenlet to end after terminate()",
    )


# -- the state machine ---------------------------------------------------------------------------
class SupervisionModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        STATS["examples"] += 1
        self.system = ActorSystem("model")
        self.journal = Journal()
        self.model = Model()
        self.refs: dict[int, ActorRef] = {}
        self.ids = itertools.count(1)
        self.seqs = itertools.count(1)
        self.system.log_filters.append(self._on_log)
        self.system.event_stream.subscribe(self._on_dead_letter, DeadLetter)
        self.probe = self.system.system_cell.attach_child(
            Props(WatchProbe, self.journal), "watchprobe"
        )

    # -- recording ---------------------------------------------------------------------------------
    def _on_log(self, event: LogEvent) -> bool:
        if event.level >= logging.WARNING:
            nid = nid_of_source(event.source)
            if event.logger_class is not None:
                key: tuple[Any, ...] = ("decision", nid)
            elif event.message.startswith("pre_restart failed"):
                key = ("pre_restart", nid)
            elif event.message.startswith("post_stop failed"):
                key = ("post_stop", nid)
            else:
                key = ("other", event.source, event.message)
            self.journal.logs[key] += 1
        return True  # swallowed: the expected failures would flood the test log

    def _on_dead_letter(self, event: DeadLetter) -> None:
        if type(event.message) is Work:
            self.journal.dead_letters[nid_of(event.recipient)].append(event.message.seq)

    # -- helpers ---------------------------------------------------------------------------------
    def _alive(self) -> list[int]:
        return sorted(n.nid for n in self.model.alive())

    def _pick_alive(self, index: int) -> int:
        # Children first: their failures are decided by the random strategies, those
        # of top-level actors by /user.
        alive = sorted(self.model.alive(), key=lambda n: (n.parent is None, n.nid))
        return alive[index % len(alive)].nid

    def _apply(self, change_model: Any, act: Any) -> None:
        """Apply a step to a copy of the model; run it for real unless ambiguous."""
        trial = copy.deepcopy(self.model)
        try:
            change_model(trial)
        except Ambiguous:
            STATS["skipped steps"] += 1
            return
        STATS["steps"] += 1
        STATS[f"step {act.__qualname__.split('.')[1].lstrip('_')}"] += 1
        act()
        self.model = trial

    def _ask(self, ref: ActorRef, message: Any) -> Any:
        return ref.ask(message, timeout=ASK_TIMEOUT)

    # -- rules -------------------------------------------------------------------------------------
    @initialize(
        cfgs=st.lists(node_cfgs(), min_size=3, max_size=9),
        shape=st.lists(st.integers(0, 63), min_size=9, max_size=9),
    )
    def build_tree(self, cfgs: list[NodeCfg], shape: list[int]) -> None:
        """Start from a random tree (without faults), so that steps act on one."""
        created: list[int] = []
        for cfg, choice in zip(cfgs, shape, strict=False):
            nid = next(self.ids)
            index = choice % (len(created) + 1)
            pnid = created[index] if index < len(created) else None
            if pnid is not None and self.model.nodes[pnid].depth >= MAX_DEPTH:
                pnid = None
            self._spawn(nid, pnid, cfg, {h: 0 for h in HOOKS})
            created.append(nid)

    def _spawn(self, nid: int, pnid: int | None, cfg: NodeCfg, faults: dict[str, int]) -> None:
        def act() -> None:
            self.journal.cfgs[nid] = cfg
            self.journal.faults[nid] = dict(faults)
            props = Props(Node, nid, self.journal)
            if pnid is None:
                self.refs[nid] = self.system.actor_of(props, f"n{nid}")
            else:
                self.refs[nid] = self._ask(self.refs[pnid], Spawn(nid, f"n{nid}"))

        self._apply(lambda m: m.spawn(nid, pnid, cfg, faults), act)

    @precondition(lambda self: len(self.model.alive()) < MAX_ALIVE)
    @rule(
        top=st.sampled_from((False, False, False, True)),
        parent=st.integers(0, 63),
        cfg=node_cfgs(),
        ctor_faults=st.sampled_from((0, 0, 0, 0, 0, 0, 0, 0, 1, 2)),
        pre_start_faults=st.sampled_from((0, 0, 0, 0, 0, 0, 0, 0, 0, 1)),
    )
    def spawn(
        self, top: bool, parent: int, cfg: NodeCfg, ctor_faults: int, pre_start_faults: int
    ) -> None:
        candidates = [n.nid for n in self.model.alive() if n.depth < MAX_DEPTH]
        candidates.sort()
        top = top and len(self.model.top) < 3  # few top-level actors: /user decides there
        pnid = None if top or not candidates else candidates[parent % len(candidates)]
        nid = next(self.ids)
        faults = {h: 0 for h in HOOKS}
        faults["ctor"] = ctor_faults
        faults["pre_start"] = pre_start_faults
        self._spawn(nid, pnid, cfg, faults)

    @precondition(lambda self: bool(self.model.alive()))
    @rule(
        who=st.integers(0, 63),
        n=st.integers(1, 4),
        fail_at=st.one_of(st.none(), st.integers(0, 3)),
        fail=st.sampled_from(("E1", "E2", "E3", "E1", "E2", "E3", "KILL")),
        poison_at=st.one_of(st.none(), st.none(), st.none(), st.integers(0, 4)),
    )
    def send(self, who: int, n: int, fail_at: int | None, fail: str, poison_at: int | None) -> None:
        self._send(self._pick_alive(who), n, fail_at, fail, poison_at)

    def _send(
        self, nid: int, n: int, fail_at: int | None, fail: str, poison_at: int | None
    ) -> None:
        msgs = [Msg("work", next(self.seqs)) for _ in range(n)]
        if fail_at is not None and fail_at < n:
            if fail == "KILL":
                msgs.insert(fail_at, Msg("kill"))
            else:
                msgs[fail_at].fail = fail
        if poison_at is not None and poison_at <= len(msgs):
            msgs.insert(poison_at, Msg("poison"))

        def act() -> None:
            ref = self.refs[nid]
            for m in msgs:
                if m.what == "work":
                    ref.tell(Work(m.seq, m.fail), None)
                else:
                    ref.tell(Kill if m.what == "kill" else PoisonPill, None)

        self._apply(lambda m: m.send(nid, msgs), act)

    @precondition(lambda self: bool(self.model.alive()))
    @rule(
        who=st.integers(0, 63),
        n=st.integers(1, 4),
        fail_at=st.integers(0, 3),
        fail=st.sampled_from(("E1", "E2", "E3", "E1", "E2", "E3", "KILL")),
    )
    def send_failing(self, who: int, n: int, fail_at: int, fail: str) -> None:
        """Like ``send``, always with one failure, to an actor with siblings if there is
        one (so that all-for-one strategies have groups to act on)."""
        model = self.model
        crowded = sorted(
            n.nid
            for n in model.alive()
            if n.parent is not None and len(model.nodes[n.parent].children) > 1
        )
        nid = crowded[who % len(crowded)] if crowded else self._pick_alive(who)
        self._send(nid, n, min(fail_at, n - 1), fail, None)

    @precondition(lambda self: bool(self.model.alive()))
    @rule(who=st.integers(0, 63), hook=st.sampled_from(HOOKS), count=st.integers(1, 2))
    def arm(self, who: int, hook: str, count: int) -> None:
        nid = self._pick_alive(who)

        def act() -> None:
            faults = self.journal.faults[nid]
            faults[hook] = faults.get(hook, 0) + count

        self._apply(lambda m: m.arm(nid, hook, count), act)

    @precondition(lambda self: len(self.model.alive()) >= 3)
    @rule(who=st.integers(0, 63), how=st.sampled_from(("system", "poison", "parent", "self")))
    def stop(self, who: int, how: str) -> None:
        alive = self._alive()
        nid = alive[who % len(alive)]
        parent = self.model.nodes[nid].parent

        def act() -> None:
            ref = self.refs[nid]
            if how == "poison":
                ref.tell(PoisonPill, None)
            elif how == "parent" and parent is not None:
                self.refs[parent].tell(StopChild(ref), None)
            elif how == "self":
                ref.tell(STOP_SELF, None)
            else:
                self.system.stop(ref)

        self._apply(lambda m: m.stop(m.nodes[nid]), act)

    @precondition(lambda self: bool(self.model.alive()))
    @rule(watcher=st.integers(-8, 63), watchee=st.integers(0, 63))
    def watch(self, watcher: int, watchee: int) -> None:
        everyone = sorted(self.model.nodes)
        xnid = everyone[watchee % len(everyone)]
        alive = self._alive()
        wkey: Any = PROBE if watcher < 0 or not alive else alive[watcher % len(alive)]
        if wkey == xnid:
            return  # watching oneself means nothing (covered by the bad-input tests)

        def act() -> None:
            wref = self.probe if wkey == PROBE else self.refs[wkey]
            assert self._ask(wref, WatchIt(self.refs[xnid])) == self.refs[xnid]

        self._apply(lambda m: m.watch(wkey, xnid), act)

    @precondition(lambda self: bool(self.model.watches))
    @rule(index=st.integers(0, 63))
    def unwatch(self, index: int) -> None:
        watches = sorted(self.model.watches, key=repr)
        wkey, xnid = watches[index % len(watches)]

        def act() -> None:
            wref = self.probe if wkey == PROBE else self.refs[wkey]
            self._ask(wref, UnwatchIt(self.refs[xnid]))

        self._apply(lambda m: m.unwatch(wkey, xnid), act)

    # -- the comparison ----------------------------------------------------------------------------
    @invariant()
    def agrees_with_the_model(self) -> None:
        settle(self.system)
        model, journal, system = self.model, self.journal, self.system
        assert not journal.violations, journal.violations

        # 1. the live tree
        real: dict[int, Any] = {}
        stack = [system.user_cell]
        while stack:
            cell = stack.pop()
            for child in cell.child_cells.values():
                real[nid_of(child.ref)] = child
                stack.append(child)
        expected_alive = {n.nid for n in model.alive()}
        assert set(real) == expected_alive, (
            f"live actors differ: real {sorted(real)}, model {sorted(expected_alive)}\n"
            f"{system.tree()}"
        )
        for nid in sorted(real):
            node, cell = model.nodes[nid], real[nid]
            where = f"n{nid}"
            # 2. settled and responsive
            assert not cell.dead and cell.actor is not None, where
            assert cell.suspend_count == 0 and cell.failed is None, (
                f"{where} left suspended ({cell.suspend_count}) or failed ({cell.failed})"
            )
            assert cell.termination_reason is None and not cell.to_die, where
            assert not cell.sysq and not cell.sys_stash and not cell.mailbox, where
            children = self._ask(self.refs[nid], REPORT)
            assert list(children) == [f"n{c}" for c in node.children], (
                f"{where} children: real {children}, model {node.children}"
            )
            # 3. restart counts
            assert cell.restarts == node.restarts, (
                f"{where} restarts: real {cell.restarts}, model {node.restarts}"
            )
            parent_cell = cell.parent_cell
            stats = parent_cell.child_cells[node.name].restart_stats
            restart_count = 0 if stats is None else stats.restart_count  # made on first use
            assert restart_count == node.stats_count, (
                f"{where} restart_count: real {restart_count}, model {node.stats_count}"
            )
        assert not system.user_cell.suspend_count and system.user_cell.failed is None

        for nid, node in model.nodes.items():
            where = f"n{nid}"
            # 4. lifecycle
            assert journal.lifecycle[nid] == node.lifecycle, (
                f"{where} lifecycle:\n real  {journal.lifecycle[nid]}\n model {node.lifecycle}"
            )
            # 5. messages
            assert journal.processed[nid] == node.processed, (
                f"{where} processed: real {journal.processed[nid]}, model {node.processed}"
            )
            assert journal.dead_letters[nid] == node.dead_letters, (
                f"{where} dead letters: real {journal.dead_letters[nid]}, model {node.dead_letters}"
            )
            # 9. faults
            assert journal.faults[nid] == node.faults, (
                f"{where} faults left: real {journal.faults[nid]}, model {node.faults}"
            )

        # 6. Terminated
        watchers = set(journal.terminated) | set(model.terminated)
        for w in watchers:
            got, want = journal.terminated.get(w, Counter()), model.terminated.get(w, Counter())
            if w == PROBE or model.nodes[w].alive:
                assert got == want, f"Terminated at {w}: real {dict(got)}, model {dict(want)}"
            else:
                # A watcher that stopped may not have processed what was queued for it.
                for (x, confirmed), count in got.items():
                    allowed = 1 if confirmed else want[(x, confirmed)]
                    assert count <= allowed and (w, x) in model.ever_watched, (
                        f"stopped watcher n{w} got {count} Terminated(n{x}, {confirmed})"
                    )

        # 8. logging
        real_logs = {k: v for k, v in journal.logs.items() if v}
        want_logs = {k: v for k, v in model.logs.items() if v}
        assert real_logs == want_logs, f"log events: real {real_logs}, model {want_logs}"

    def teardown(self) -> None:
        system = self.system
        try:
            STATS["failures decided"] += self.model.failures
            STATS.update(self.model.events)
        finally:
            system.terminate()
            assert system.await_termination(10.0), f"did not terminate:\n{system.tree()}"
            assert system.root_cell.dead and system.user_cell.dead
            wait_for_no_workers(system)


def _live_greenlets() -> int:
    gevent.get_hub()  # the hub itself is not a leak: make sure it is counted both times
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, greenlet.greenlet) and not o.dead)


@pytest.mark.timeout(0 if os.environ.get(PROFILE_ENV, "").strip() == "long" else 60)
def test_supervision_agrees_with_the_model() -> None:
    STATS.clear()
    before = _live_greenlets()
    run_state_machine_as_test(SupervisionModel, settings=hypothesis_settings())
    after = _live_greenlets()
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(STATS.items()))
    sys.stdout.write(f"\nsupervision model: {summary}\n")
    assert after <= before, f"greenlets leaked: {before} before, {after} after"
    assert STATS["examples"] > 0 and STATS["steps"] > STATS["skipped steps"], summary

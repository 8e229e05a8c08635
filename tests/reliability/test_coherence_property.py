"""Working memory stays a coherent view of the store, whatever the interleaving.

A Hypothesis state machine drives three ``HTM`` objects on one store (two instances of robot
``a`` and one of robot ``b``; small budgets, so evictions are frequent) with random adds,
re-adds, recalls, retrievals, forgets, restores, purges, restarts (close and reopen) and clock
moves, on SQLite and on PostgreSQL. After every step, for every instance:

* no context and no recall holds a memory the store does not show (forgotten or purged);
* working memory is never over its budget;
* its in-process working memory is its robot's persisted membership.

The same invariants are then checked with the instances in separate OS processes, driven
through pipes by a seeded random script (a short run).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import traceback
import uuid
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from htm_core import HTM, FrozenClock, HashingEmbedder
from htm_core.errors import ConfirmationRequiredError, NotFoundError
from htm_core.store import open_store
from htm_core.testing import working_memories

WORDS = ["falcon", "harbour", "lantern", "meadow", "quartz", "signal", "timber", "violet"]
INSTANCES = {"a1": "a", "a2": "a", "b": "b"}
BUDGET = 60


def visible_keys(htm: HTM) -> set[str]:
    return {m.key for batch in htm.store.iter_memories(include_forgotten=False) for m in batch}


def check_instance(htm: HTM, visible: set[str]) -> None:
    """The three invariants for one instance (its create_context is its next call)."""
    ctx = htm.create_context(strategy="recent")
    assert {m.key for m in ctx.memories} <= visible, "context holds a hidden memory"
    wm = htm.working_memory
    assert wm.tokens <= wm.max_tokens, "working memory over budget"
    assert set(wm.keys()) <= visible
    persisted = {m.key for m in working_memories(htm.store, htm.robot)}
    assert set(wm.keys()) == persisted, "in-process working memory is not the persisted one"


class CoherenceMachine(RuleBasedStateMachine):
    """Three instances, two robots, one store (the class attribute ``url``)."""

    url = ""
    keys = Bundle("keys")

    def __init__(self) -> None:
        super().__init__()
        self.run = uuid.uuid4().hex[:8]  # examples share the store: own robots and keys
        self.clock = FrozenClock(datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc))
        self.htms = {name: self._open(name) for name in INSTANCES}
        self.n = 0

    def _open(self, name: str) -> HTM:
        return HTM(robot=f"{INSTANCES[name]}-{self.run}", database_url=self.url,
                   embedder=HashingEmbedder(), clock=self.clock, working_memory_tokens=BUDGET,
                   eviction="lru" if name == "b" else "hybrid")

    def teardown(self) -> None:
        for htm in self.htms.values():
            htm.close()

    @rule(target=keys, who=st.sampled_from(sorted(INSTANCES)),
          words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
          importance=st.sampled_from([0.5, 1.0, 5.0]), long=st.booleans())
    def add(self, who: str, words: list[str], importance: float, long: bool) -> str:
        self.n += 1
        key = f"{self.run}-{self.n}"
        text = " ".join(words * (8 if long else 1)) + f" note {self.n}"
        self.htms[who].add(text, key=key, importance=importance)
        return key

    @rule(who=st.sampled_from(sorted(INSTANCES)), key=keys)
    def readd(self, who: str, key: str) -> None:
        memory = self.htms[who].store.get(key, include_forgotten=True)
        if memory is not None:  # same key, same content: touches (and restores) it
            self.htms[who].add(memory.content, key=key, importance=5.0, tags=["again"])

    @rule(who=st.sampled_from(sorted(INSTANCES)), word=st.sampled_from(WORDS),
          strategy=st.sampled_from(["hybrid", "fulltext", "vector"]))
    def recall(self, who: str, word: str, strategy: str) -> None:
        htm = self.htms[who]
        hits = htm.recall(word, strategy=strategy, limit=5)
        assert {h.memory.key for h in hits} <= visible_keys(htm), "recall returned a hidden memory"

    @rule(who=st.sampled_from(sorted(INSTANCES)), key=keys)
    def retrieve(self, who: str, key: str) -> None:
        self.htms[who].retrieve(key)

    @rule(who=st.sampled_from(sorted(INSTANCES)), key=keys)
    def forget(self, who: str, key: str) -> None:
        with contextlib.suppress(NotFoundError):  # purged earlier
            self.htms[who].forget(key, confirm=True)

    @rule(who=st.sampled_from(sorted(INSTANCES)), key=keys)
    def restore(self, who: str, key: str) -> None:
        with contextlib.suppress(NotFoundError):
            self.htms[who].restore(key)

    @rule(who=st.sampled_from(sorted(INSTANCES)), key=st.one_of(st.none(), keys))
    def purge(self, who: str, key: str | None) -> None:
        with contextlib.suppress(NotFoundError, ConfirmationRequiredError):
            self.htms[who].purge(confirm=True, key=key)  # unknown, or not forgotten: no-op

    @rule(who=st.sampled_from(sorted(INSTANCES)))
    def restart(self, who: str) -> None:
        before = self.htms[who].working_memory.keys()
        self.htms[who].close()
        self.htms[who] = self._open(who)
        if who == "b":  # its own robot: nobody changed the set meanwhile
            assert self.htms[who].working_memory.keys() == before

    @rule(minutes=st.sampled_from([0, 0, 1, 90]))
    def tick(self, minutes: int) -> None:
        self.clock.advance(minutes=minutes)

    @invariant()
    def coherent(self) -> None:
        visible = visible_keys(self.htms["b"])
        for htm in self.htms.values():
            check_instance(htm, visible)


def _run_machine(url: str) -> None:
    machine = type("Machine", (CoherenceMachine,), {"url": url})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=8, stateful_step_count=25, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


@pytest.mark.postgres
def test_instances_on_one_store_stay_coherent(store_url: str) -> None:
    _run_machine(store_url)


# -- separate processes ---------------------------------------------------------------------

def _serve(name: str, url: str, conn: Any) -> None:
    """One instance in its own process: run the commands it is sent, report its view."""
    clock = FrozenClock(datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc))

    def open_one() -> HTM:
        return HTM(robot=INSTANCES[name], database_url=url, embedder=HashingEmbedder(),
                   clock=clock, working_memory_tokens=BUDGET)

    htm = open_one()
    try:
        while True:
            op, arg = conn.recv()
            reply: Any = None
            try:
                if op == "stop":
                    break
                if op == "add":
                    htm.add(arg[1], key=arg[0], importance=arg[2])
                elif op == "recall":
                    reply = [h.memory.key for h in htm.recall(arg, limit=5)]
                elif op == "forget":
                    htm.forget(arg, confirm=True)
                elif op == "restore":
                    htm.restore(arg)
                elif op == "purge":
                    htm.purge(confirm=True)
                elif op == "restart":
                    htm.close()
                    htm = open_one()
                elif op == "view":
                    ctx = htm.create_context(strategy="recent")
                    reply = ([m.key for m in ctx.memories], htm.working_memory.keys(),
                             htm.working_memory.tokens)
                clock.advance(seconds=1)
            except NotFoundError:
                reply = "not found"
            except Exception:
                reply = ("error", traceback.format_exc())
            conn.send(reply)
    finally:
        htm.close()


@pytest.mark.postgres
def test_instances_in_separate_processes_stay_coherent(store_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    pipes, procs = {}, []
    HTM(database_url=store_url, embedder=HashingEmbedder()).close()  # schema made once
    for name in INSTANCES:
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(name, store_url, there), daemon=True)
        proc.start()
        pipes[name], procs = here, [*procs, proc]
    store = open_store(store_url)
    rnd = random.Random(18)
    keys: list[str] = []

    def ask(name: str, op: str, arg: Any = None) -> Any:
        pipes[name].send((op, arg))
        if not pipes[name].poll(120):
            raise AssertionError(f"{name} did not answer {op}")
        reply = pipes[name].recv()
        assert not (isinstance(reply, tuple) and reply[0] == "error"), reply[1]
        return reply

    try:
        for step in range(45):
            name = rnd.choice(sorted(INSTANCES))
            op = rnd.choices(["add", "recall", "forget", "restore", "purge", "restart"],
                             weights=[5, 3, 3, 1, 1, 1])[0]
            if op == "add" or not keys:
                key = f"p{step}"
                words = " ".join(rnd.choices(WORDS, k=rnd.randint(1, 6)))
                ask(name, "add", (key, f"{words} note {step}", rnd.choice([0.5, 1.0, 5.0])))
                keys.append(key)
            elif op == "recall":
                visible = {m.key for b in store.iter_memories(include_forgotten=False) for m in b}
                assert set(ask(name, "recall", rnd.choice(WORDS))) <= visible
            elif op in ("forget", "restore"):
                ask(name, op, rnd.choice(keys))
            else:
                ask(name, op)
            visible = {m.key for b in store.iter_memories(include_forgotten=False) for m in b}
            for other, robot in INSTANCES.items():
                context, resident, tokens = ask(other, "view")
                assert set(context) <= visible, (step, other, "context holds a hidden memory")
                assert tokens <= BUDGET
                assert set(resident) == {m.key for m in working_memories(store, robot)}, (step, other)
    finally:
        _stop(pipes, procs)
        store.close()


@pytest.mark.postgres
def test_two_processes_of_one_robot_writing_at_once_settle_within_budget(store_url: str) -> None:
    """Two processes of robot ``a`` add and recall at the same time (each command is sent to
    both before either answers). Whatever the persisted set held meanwhile, each one's next
    call leaves it within budget, logged, and equal to the persisted membership."""
    ctx = multiprocessing.get_context("spawn")
    HTM(database_url=store_url, embedder=HashingEmbedder()).close()
    pipes, procs = {}, []
    for name in ("a1", "a2"):
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(name, store_url, there), daemon=True)
        proc.start()
        pipes[name], procs = here, [*procs, proc]
    store = open_store(store_url)

    def both(op: str, args: dict[str, Any]) -> list[Any]:
        for name, pipe in pipes.items():
            pipe.send((op, args[name]))
        replies = []
        for name, pipe in pipes.items():
            assert pipe.poll(120), f"{name} did not answer {op}"
            reply = pipe.recv()
            assert not (isinstance(reply, tuple) and reply[0] == "error"), reply[1]
            replies.append(reply)
        return replies

    try:
        for step in range(30):
            both("add", {n: (f"{n}-{step}", f"{WORDS[step % 8]} {n} note {step} of the run",
                             1.0) for n in pipes})
            if step % 5 == 4:
                both("recall", {n: WORDS[(step + 3) % 8] for n in pipes})
        for _round in range(2):  # the second round sees what the first one settled
            views = both("view", {n: None for n in pipes})
        persisted = working_memories(store, "a")
        assert sum(m.token_count for m in persisted) <= BUDGET
        for _context, resident, tokens in views:
            assert tokens <= BUDGET
            assert set(resident) == {m.key for m in persisted}
    finally:
        _stop(pipes, procs)
        store.close()


def _stop(pipes: dict[str, Any], procs: list[Any]) -> None:
    """Ask every served process to stop; kill those that do not within 30 s."""
    for pipe in pipes.values():
        with contextlib.suppress(OSError):
            pipe.send(("stop", None))
    for proc in procs:
        proc.join(30)
        if proc.is_alive():
            proc.kill()

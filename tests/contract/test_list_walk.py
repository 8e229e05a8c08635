"""A walk of ``HTM.list`` pages while another writer changes memories, on every backend.

For every order and direction, a walk of small pages runs while a second ``HTM`` on the
same store updates memories between pages (new importances, new texts), adds new ones and
forgets one. Keys are drawn to collide: case (``Ada``/``ada``), separators (``:`` ``/``
``-`` ``.`` space), a fullwidth lookalike, LIKE's wildcards. The walk never repeats a memory,
lists every memory that existed before it began and was not forgotten, and its order is
the order of the sort keys as they were when it began. Tampered cursors are a
``ValidationError``.
"""

from __future__ import annotations

import base64
import json
import random

import pytest

from htm_core.errors import ValidationError
from htm_core.store.base import LIST_ORDERS

KEYS = ["Ada", "ada", "ADA", "a:b", "a/b", "a-b", "A:b", "ab", "a.b", "a b", "b", "B",
        "a:b:c", "ａda", "a_b", "a%b", "Ada:notes", "ada/notes"]


def _fill(htm):
    for i, key in enumerate(KEYS):
        htm.add(f"note {i} about {key}", key=key, importance=float(i % 4))


def _meddle(other, rng, step, forgotten, seed):
    """Between two pages: change two memories, add one, now and then forget one."""
    for key in rng.sample(KEYS, 2):
        if key in forgotten:
            continue
        memory = other.get(key)
        if rng.random() < 0.5:
            other.update(key, memory.content, importance=float(rng.randint(0, 10)))
        else:
            other.update(key, f"{memory.content} (revised {step})",
                         importance=float(rng.randint(0, 10)))
    other.add(f"added during the walk {step}", key=f"new:{seed}:{step}",
              importance=float(rng.randint(0, 10)))
    if step == 2:
        victim = rng.choice([k for k in KEYS if k not in forgotten])
        other.forget(victim, confirm=True)
        forgotten.add(victim)


def _walk(htm, other, order, descending, seed):
    rng, forgotten = random.Random(seed), set()
    before = {m.key: getattr(m, order) for m in htm.list(order=order, limit=1000).memories}
    seen, cursor, step = [], None, 0
    while True:
        page = htm.list(order=order, descending=descending, limit=3, cursor=cursor)
        seen += [m.key for m in page.memories]
        if page.next_cursor is None:
            return seen, before, forgotten
        cursor, step = page.next_cursor, step + 1
        _meddle(other, rng, step, forgotten, seed)


@pytest.mark.parametrize("order", LIST_ORDERS)
@pytest.mark.parametrize("descending", [False, True])
def test_a_walk_lists_each_memory_once_while_others_change(htm_factory, order, descending):
    htm, other = htm_factory(robot="reader"), htm_factory(robot="writer")
    _fill(htm)
    for seed in range(3):
        seen, before, forgotten = _walk(htm, other, order, descending, seed)
        assert len(seen) == len(set(seen)), [k for k in seen if seen.count(k) > 1]
        old = [k for k in seen if k in before]
        assert set(old) >= set(before) - forgotten
        assert set(old) - (set(before) - forgotten) <= forgotten
        keys = [(before[k], htm.get(k, include_forgotten=True).id) for k in old]
        assert keys == sorted(keys, reverse=descending)
        for key in forgotten:
            other.restore(key)


def test_an_importance_walk_survives_a_purge_of_the_newest_history(htm_factory):
    """The history mark stays below every later update, also after the memory holding the
    newest superseded version is purged (SQLite would number the next one the same)."""
    htm, other = htm_factory(robot="reader"), htm_factory(robot="writer")
    for n, key in enumerate(["Ada", "ada", "a:b", "a/b", "A:B", "ab"]):
        htm.add(f"note about {key}", key=key, importance=float(n))
    htm.update("ab", "note about ab, revised")  # the newest history row
    page = htm.list(order="importance", limit=2)
    assert [m.key for m in page.memories] == ["Ada", "ada"]
    other.forget("ab", confirm=True)
    other.purge(confirm=True, key="ab")
    other.update("Ada", "note about Ada", importance=9.5)
    rest = htm.list(order="importance", limit=10, cursor=page.next_cursor)
    assert [m.key for m in rest.memories] == ["a:b", "a/b", "A:B"]


def _cursor(htm, **kwargs):
    for n in range(5):
        htm.add(f"memory {n}", key=f"m{n}", importance=float(n))
    return htm.list(limit=2, **kwargs).next_cursor


def _forge(cursor, change):
    raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    forged = json.dumps(change(raw)).encode()
    return base64.urlsafe_b64encode(forged).decode()


@pytest.mark.parametrize("change", [
    lambda c: [*c[:4], -1], lambda c: [*c[:4], True], lambda c: [*c[:4], "7"],
    lambda c: [*c[:4], 1.5], lambda c: [*c, 1, 2], lambda c: c[:3],
    lambda c: [c[0], c[1], None, c[3], c[4]], lambda c: [c[0], c[1], c[2], True, c[4]],
    lambda c: [c[0], "yes", *c[2:]], lambda c: [c[0], c[1], True, *c[3:]],
    lambda c: {"order": c[0]}])
def test_a_tampered_importance_cursor_is_a_validation_error(htm_factory, change):
    htm = htm_factory(robot="reader")
    cursor = _cursor(htm, order="importance")
    assert len(json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))) == 5
    with pytest.raises(ValidationError, match="next_cursor"):
        htm.list(order="importance", limit=2, cursor=_forge(cursor, change))


def test_a_cursor_of_another_order_is_refused(htm_factory):
    htm = htm_factory(robot="reader")
    cursor = _cursor(htm, order="importance")
    with pytest.raises(ValidationError, match="order='importance'"):
        htm.list(order="key", limit=2, cursor=cursor)
    with pytest.raises(ValidationError, match="next_cursor"):
        htm.list(order="importance", limit=2, cursor=cursor[:-3] + "!!!")

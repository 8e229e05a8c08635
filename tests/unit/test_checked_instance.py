"""``checked_instance`` and ``checked_from`` build the same frozen values as their dataclass
constructors (and ``replace``), defaults included: the add path uses them for every memory it
makes, the read path for every row it reads."""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import datetime, timezone

from htm_core.models import Memory
from htm_core.store.values import NewMemory, WorkingState, checked_from, checked_instance

WHEN = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)


def test_it_equals_the_constructor_with_every_default_in_place() -> None:
    given = {"key": "k1", "content": "hello", "robot": "r", "importance": 2.0,
             "token_count": 1, "created_at": WHEN, "metadata": {}}
    quick, slow = checked_instance(NewMemory, **given), NewMemory(**given)
    assert quick == slow and asdict(quick) == asdict(slow)
    assert quick.content_hash == slow.content_hash
    state = {"key": "k1", "last_accessed": WHEN, "access_count": 3, "seq": 4, "access_seq": 5}
    made = checked_instance(WorkingState, **state)
    assert asdict(made) == asdict(WorkingState(**state))


def test_like_copies_an_instance_as_replace_does() -> None:
    record = NewMemory(key="k1", content="hello", robot="r", importance=2.0, token_count=1,
                       created_at=WHEN, tags=("a",))
    quick = checked_instance(NewMemory, record, embedding=[1.0, 0.0], embedder="e")
    assert asdict(quick) == asdict(replace(record, embedding=[1.0, 0.0], embedder="e"))
    assert record.embedding is None  # the original is left as it was


def test_from_a_dict_equals_the_constructor_and_leaves_the_dict_alone() -> None:
    given = {"id": 7, "key": "k1", "content": "hello", "robot": "r", "created_at": WHEN,
             "last_accessed": WHEN, "metadata": {"a": 1}, "tags": ("t",), "version": 2}
    quick, slow = checked_from(Memory, given), Memory(**given)
    assert quick == slow and asdict(quick) == asdict(slow)
    assert list(vars(quick)) == list(vars(checked_instance(Memory, **given)))
    assert quick.in_working_memory is False and quick.kind == "episodic"
    assert "in_working_memory" not in given  # the defaults went to the instance only

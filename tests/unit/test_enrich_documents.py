"""Document chunk plans: stable keys, heading paths, round trips and re-add diffs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htm_core.enrich import diff_document, plan_document
from htm_core.errors import InvalidBudgetError, InvalidContentError, InvalidKeyError

DOC = """# Install

Run `pip install htm`. Python 3.10 or newer.

## From source

Clone the repository and run `pip install -e .`.

# Usage

Create an HTM and add memories.

```python
# not a heading inside a fence
htm.add("hello")
```

## Recall

Recall is hybrid: vectors and full text, fused.

---

---
"""


def test_chunks_round_trip_and_carry_heading_paths() -> None:
    plan = plan_document(DOC, source="docs/guide.md", chunk_tokens=12, overlap=3)
    assert plan.text() == DOC
    assert len(plan.chunks) >= 4
    by_heading = {chunk.metadata["heading"]: chunk for chunk in plan.chunks}
    assert "Install > From source" in by_heading
    source_chunk = by_heading["Install > From source"]
    assert source_chunk.embed_text.startswith("Install > From source\n\n## From source")
    assert source_chunk.metadata["heading_path"] == ["Install", "From source"]
    assert source_chunk.metadata["source"] == "docs/guide.md"
    assert [c.metadata["chunk_index"] for c in plan.chunks] == list(range(len(plan.chunks)))
    assert all(c.metadata["chunk_count"] == len(plan.chunks) for c in plan.chunks)
    assert all(DOC[c.metadata["start"]:].startswith(c.content) for c in plan.chunks)
    # the fenced "# not a heading" stays inside Usage
    assert not any("not a heading" in c.metadata["heading"] for c in plan.chunks)


def test_keys_are_stable_unique_and_scoped_to_the_source() -> None:
    a = plan_document(DOC, source="guide.md", chunk_tokens=12)
    b = plan_document(DOC, source="guide.md", chunk_tokens=12)
    other = plan_document(DOC, source="other.md", chunk_tokens=12)
    assert a.keys == b.keys
    assert len(set(a.keys)) == len(a.keys)  # the two identical "---" chunks get distinct keys
    assert all(key.startswith(a.prefix) and len(key) <= 255 for key in a.keys)
    assert not set(a.keys) & set(other.keys)


def test_re_adding_changed_document_touches_only_changed_chunks() -> None:
    old = plan_document(DOC, source="guide.md", chunk_tokens=12)
    changed = DOC.replace("text, fused.", "text, merged.")
    new = plan_document(changed, source="guide.md", chunk_tokens=12)
    diff = diff_document(new, old.keys)
    assert [c.metadata["heading"] for c in diff.add] == ["Usage > Recall"]
    assert len(diff.forget) == 1 and diff.forget[0] in old.keys and diff.forget[0] not in new.keys
    assert set(diff.keep) == set(old.keys) - set(diff.forget)
    assert diff.moved == [] and not diff.unchanged


def test_unchanged_document_is_a_no_op_and_foreign_keys_are_ignored() -> None:
    plan = plan_document(DOC, source="guide.md", chunk_tokens=12)
    stored = [*plan.keys, "doc:ffffffffffffffff:abc", "user-note-1"]
    diff = diff_document(plan, stored)
    assert diff.unchanged and diff.keep == plan.keys and diff.forget == []


def test_inserting_a_section_reports_moved_chunks() -> None:
    old = plan_document(DOC, source="g", chunk_tokens=12)
    new = plan_document("# Intro\n\nNew first section.\n\n" + DOC, source="g", chunk_tokens=12)
    diff = diff_document(new, {c.key: c.index for c in old.chunks})
    assert [c.metadata["heading"] for c in diff.add] == ["Intro"]
    assert diff.forget == []
    assert diff.moved and all(index == old.keys.index(key) + 1 for key, index in diff.moved)


def test_renamed_heading_changes_the_chunks_under_it() -> None:
    old = plan_document(DOC, source="g", chunk_tokens=12)
    new = plan_document(DOC.replace("## Recall", "## Searching"), source="g", chunk_tokens=12)
    diff = diff_document(new, old.keys)
    assert {c.metadata["heading"] for c in diff.add} == {"Usage > Searching"}
    assert all(c.embed_text.startswith("Usage > Searching") for c in diff.add)


def test_bad_input_rejected() -> None:
    with pytest.raises(InvalidContentError):
        plan_document("   ", source="x")
    with pytest.raises(InvalidKeyError):
        plan_document(DOC, source="")
    with pytest.raises(InvalidBudgetError):
        plan_document(DOC, source="x", chunk_tokens=0)


def test_oversized_blocks_are_cut_within_budget_and_round_trip() -> None:
    doc = ("# Big\n\n" + " ".join(f"word{i}" for i in range(1000)) + "\n\n```\n"
           + "\n".join(f"line {i} of code" for i in range(300)) + "\n```\n\n## Small\n\nshort\n")
    plan = plan_document(doc, source="big.md", chunk_tokens=100)
    assert plan.text() == doc
    assert max(len(c.content.split()) for c in plan.chunks) <= 100
    assert len(plan.chunks) >= 10 + 300 * 4 // 100
    assert plan.chunks[-1].metadata["heading"] == "Big > Small"
    assert all(c.metadata["heading"] == "Big" for c in plan.chunks[:-1])
    huge_word = "x" * 5000
    (only,) = plan_document(huge_word, source="w", chunk_tokens=1).chunks  # one word cannot be cut
    assert only.content == huge_word


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["# H1\n", "## H2\n", "\n", "text words here\n", "```\n", "- item\n",
                                 "long " * 30 + "\n", "  indented\n", "tail"]), min_size=1, max_size=40),
       st.integers(min_value=1, max_value=50))
def test_any_markdown_round_trips(parts: list[str], chunk_tokens: int) -> None:
    doc = "".join(parts)
    if not doc.strip():
        return
    plan = plan_document(doc, source="p", chunk_tokens=chunk_tokens, overlap=2)
    assert plan.text() == doc
    assert len(set(plan.keys)) == len(plan.keys)

"""Rule-based enrichment: importance rules, keyword tagging, Markdown chunking."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htm_core.enrich import RuleImportanceScorer, RuleTagger, chunk_markdown
from htm_core.errors import InvalidBudgetError, InvalidTagError


@pytest.mark.parametrize(
    ("text", "low", "high", "rules"),
    [
        ("Remember that the API key rotates monthly", 5.0, 10.0, {"explicit"}),
        ("I prefer tabs over spaces", 4.0, 4.0, {"preference"}),
        ("we decided to migrate next quarter", 3.5, 3.5, {"commitment"}),
        ("the invoice total was 4200 euros", 2.0, 2.0, {"fact"}),
        ("thanks!", 0.5, 0.5, {"small-talk"}),
        ("hi there, how are you", 0.5, 0.5, {"small-talk"}),
        ("what a lovely weather today", 0.5, 0.5, {"small-talk"}),
    ],
)
def test_importance_rules(text, low, high, rules):
    scorer = RuleImportanceScorer()
    assert set(scorer.explain(text)) == rules
    assert low <= scorer.score(text) <= high


def test_importance_is_clamped_and_ordered():
    scorer = RuleImportanceScorer(base=9.0)
    assert scorer.score("Remember that I prefer Vim, we decided, deadline 2024-05-01") == 10.0
    plain = RuleImportanceScorer()
    assert plain.score("Remember that I prefer Vim") > plain.score("I prefer Vim") > plain.score("ok")


def test_rule_tagger_uses_whole_words_and_validates_ontology():
    tagger = RuleTagger()
    assert tagger.tag("Deploy to staging failed; kubectl rollout undo") == [
        "devops:deploy", "devops:kubernetes"]
    assert tagger.tag("an unlikely indexation of reindexes") == []  # no partial words
    custom = RuleTagger({"project:apollo": ("apollo",)})
    assert custom.tag("Apollo launch review") == ["project:apollo"]
    with pytest.raises(InvalidTagError):
        RuleTagger({"bad tag!": ("x",)})


DOC = """# Guide

Intro paragraph with several words in it.

## Install

Run pip install htm.

```bash
# not a heading inside a fence
pip install "htm[local]"
```

## Usage

### Recall

Call recall with a query.

Another paragraph about recall options.
"""


def test_chunks_reassemble_and_carry_heading_paths():
    chunks = chunk_markdown(DOC, chunk_tokens=8, overlap=3)
    assert "".join(c.text for c in chunks) == DOC
    assert [c.start for c in chunks] == [DOC.index(c.text) for c in chunks]
    paths = [c.heading for c in chunks]
    assert "Guide > Install" in paths and "Guide > Usage > Recall" in paths
    fenced = next(c for c in chunks if "not a heading" in c.text)
    assert fenced.heading == "Guide > Install"
    assert chunks[1].context and chunks[1].context.split() == chunks[0].text.split()[-3:]
    with pytest.raises(InvalidBudgetError):
        chunk_markdown(DOC, chunk_tokens=0)


markdown_lines = st.lists(
    st.one_of(st.sampled_from(["", "# Title", "## Sub", "### Deep", "```", "text words here"]),
              st.text(alphabet="abc #\n`", max_size=30)),
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(lines=markdown_lines, size=st.integers(1, 50))
def test_property_chunks_always_reassemble(lines, size):
    doc = "\n".join(lines)
    chunks = chunk_markdown(doc, chunk_tokens=size)
    assert "".join(c.text for c in chunks) == doc
    assert [c.index for c in chunks] == list(range(len(chunks)))

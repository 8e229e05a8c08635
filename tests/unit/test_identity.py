"""The identity rule (htm_core/identity.py, htm_core/tags.py) without a database: ids,
keys and tags compare exactly, and a prefix range holds exactly the strings with the
prefix, including ids drawn to collide (case, lookalikes, separators, wildcards)."""

from __future__ import annotations

import unicodedata

import pytest

from htm_core.identity import has_prefix, prefix_range, same_id
from htm_core.tags import carries_tag, tag_filter, tag_matches

NFC_E = unicodedata.normalize("NFC", "é")
NFD_E = unicodedata.normalize("NFD", "é")
#: Ids that look alike and must stay apart.
COLLIDING = ["Ada", "ada", "ADA", "\u0430da", "Chat1", "chat1", "README.md", "readme.md",
             f"caf{NFC_E}", f"caf{NFD_E}", "a:b", "a/b", "a_b", "a-b", "a%b", "a:", "a",
             "a\U0010ffff", "a\U0010ffffb", "a\ud7ff", "a\ue000", "h-0", "_", "%"]


def test_ids_are_the_same_only_when_they_are_the_same_string() -> None:
    for a in COLLIDING:
        for b in COLLIDING:
            assert same_id(a, b) is (a == b)


def test_prefixes_are_exact() -> None:
    assert has_prefix("chat:Ada:1", "chat:Ada:")
    assert not has_prefix("chat:ada:1", "chat:Ada:")
    assert not has_prefix("a-b", "a_")  # no wildcard
    assert not has_prefix(f"caf{NFD_E}", f"caf{NFC_E}")
    assert has_prefix("x:y", ("q", "x:"))


@pytest.mark.parametrize("prefix", [*COLLIDING, "", "\U0010ffff", "a\ud7fe"])
def test_a_prefix_range_holds_exactly_the_strings_with_the_prefix(prefix: str) -> None:
    low, high = prefix_range(prefix)
    for s in [*COLLIDING, *(p + "x" for p in COLLIDING), prefix, prefix + "\U0010ffff"]:
        inside = low <= s and (high is None or s < high)
        assert inside is s.startswith(prefix), (prefix, s)


def test_a_range_bound_is_never_a_surrogate_and_the_last_code_point_has_no_successor() -> None:
    assert prefix_range("a\ud7ff") == ("a\ud7ff", "a\ue000")
    assert prefix_range("\U0010ffff\U0010ffff") == ("\U0010ffff\U0010ffff", None)
    assert prefix_range("ab\U0010ffff") == ("ab\U0010ffff", "ac")


def test_tags_compare_exactly_and_hierarchically() -> None:
    assert tag_matches("chat:user:Ada:session:s", "chat:user:Ada")
    assert not tag_matches("chat:user:Ada", "chat:user:ada")
    assert not tag_matches("chat:user:\u0430da", "chat:user:ada")
    assert not tag_matches("Project", "project")
    assert not tag_matches("chat:user:ada_x", "chat:user:ada")
    assert not carries_tag(["chat:user:Ada"], ["chat:user:ada", "chat:user:ADA"])
    keep = tag_filter(["chat:user:ada"])
    assert [keep([t]) for t in ("chat:user:ada", "chat:user:ada:s", "chat:user:Ada:s")] \
        == [True, True, False]


def test_an_id_spelling_another_ids_hashed_slug_gets_a_slug_of_its_own() -> None:
    from htm_integrations._scope import id_slug
    from htm_integrations.llama_index._filters import _segment

    ids = ["a:b", "Ada", "ada", "h-x", id_slug("a:b"), id_slug(id_slug("a:b")), "\u0430da"]
    assert len({id_slug(i) for i in ids}) == len(ids)
    assert id_slug("h-smith") == "h-smith"  # only the hashed form itself is hashed again
    values = ["README md", "README.md", "readme.md", _segment("README md"), "h-1"]
    assert len({_segment(v) for v in values}) == len(values)
    assert _segment("h-1") == "h-1"


def test_an_id_with_a_trailing_newline_is_another_id() -> None:
    from htm_integrations._scope import id_slug
    from htm_integrations.llama_index._filters import _segment

    assert id_slug("ada\n") != id_slug("ada")
    assert _segment("README.md\n") != _segment("README.md")

"""Hierarchical tags: a rule-based tagger that needs no model (the ``Tagger`` protocol is in
:mod:`htm_core.enrich.base`).

Tags are colon-separated paths (``database:postgresql:indexes``); recall filters by a tag
or anything below it. :class:`RuleTagger` maps keywords onto a small built-in ontology
that you can extend or replace.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..validation import check_tags
from .base import Tagger

__all__ = ["DEFAULT_ONTOLOGY", "RuleTagger", "Tagger"]


#: tag -> keywords (whole words, case-insensitive) that imply it.
DEFAULT_ONTOLOGY: dict[str, tuple[str, ...]] = {
    "database:postgresql": ("postgres", "postgresql", "pgvector", "psql"),
    "database:sqlite": ("sqlite", "fts5"),
    "database:indexes": ("index", "indexes", "hnsw", "btree", "gin"),
    "programming:python": ("python", "pip", "pytest", "django", "flask"),
    "programming:javascript": ("javascript", "typescript", "node", "npm", "react"),
    "devops:deploy": ("deploy", "deployment", "release", "rollback", "staging"),
    "devops:kubernetes": ("kubernetes", "k8s", "kubectl", "helm"),
    "user:preferences": ("prefer", "prefers", "favourite", "favorite", "like", "likes", "hate"),
    "schedule:deadline": ("deadline", "due", "tomorrow", "monday", "tuesday", "wednesday",
                          "thursday", "friday", "meeting"),
    "personal:food": ("lunch", "dinner", "breakfast", "cooked", "restaurant", "recipe"),
    "personal:travel": ("flight", "trip", "hotel", "airport", "travel", "vacation"),
    "personal:health": ("doctor", "gym", "run", "ran", "jogged", "sleep", "sick"),
}


class RuleTagger:
    """Tags by keyword against an ontology (default :data:`DEFAULT_ONTOLOGY`).

    >>> RuleTagger().tag("Our Postgres HNSW index is slow")
    ['database:indexes', 'database:postgresql']
    """

    name = "rules-v1"

    def __init__(self, ontology: Mapping[str, Sequence[str]] | None = None) -> None:
        ontology = DEFAULT_ONTOLOGY if ontology is None else ontology
        check_tags(list(ontology))
        self._patterns = {
            tag: re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)
            for tag, words in ontology.items() if words
        }

    def tag(self, content: str) -> list[str]:
        return sorted(tag for tag, pattern in self._patterns.items() if pattern.search(content))

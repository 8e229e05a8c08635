"""The memories' briefs (text, robot, time) one recall reads, read once for every step."""

from __future__ import annotations

from collections.abc import Collection

from ..store.base import Brief, Search, SearchFilters

__all__ = ["Briefs"]


class Briefs:
    """The briefs one recall reads, each id asked for at most once (the first ask batches
    what every step will need, so a recall usually reads them in one query)."""

    def __init__(self, store: Search, filters: SearchFilters) -> None:
        self._store, self._filters = store, filters
        self._asked: set[int] = set()
        self.found: dict[int, Brief] = {}

    def fetch(self, ids: Collection[int]) -> dict[int, Brief]:
        if self._asked.issuperset(ids):  # the usual case after the first ask
            return self.found
        todo = sorted({i for i in ids if i > 0} - self._asked)
        if todo:
            self._asked.update(todo)
            # Forgotten memories and those failing the recall's filters are not returned.
            self.found.update(self._store.briefs(todo, self._filters))
        return self.found

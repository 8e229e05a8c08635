"""How :class:`~htm_core.HTM` uses enrichers: rules inline, models in background jobs.

An enricher that calls a model (it has a ``usage`` counter, like
:class:`~htm_core.enrich.LLMTagger`: a :class:`~htm_core.enrich.base.ModelBacked`) never runs
inside ``add``: its work is queued in a
durable job queue (the ``htm_jobs`` table on the store's own database) and applied by a
worker thread. A rule-based enricher (:class:`~htm_core.enrich.RuleTagger`,
:class:`~htm_core.enrich.RuleImportanceScorer`) costs microseconds and runs inline, so its
result is part of the memory from the first write.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from ..errors import HTMError, ValidationError
from ..models import Memory
from ..store.base import EnrichmentStore, LongTermStore, capability
from ..validation import check_importance, check_tags
from .base import ImportanceScorer, SummaryWriter, Tagger, uses_model
from .pipeline import Enrichment

__all__ = ["SUMMARY_TAG", "FacadeEnrichment", "uses_model"]

logger = logging.getLogger(__name__)

#: The tag every summary memory carries.
SUMMARY_TAG = "htm:summary"


class FacadeEnrichment:
    """The enrichers of one ``HTM`` and the glue that writes their results to its store.

    Args:
        store: the long-term store results are written to.
        robot: the robot whose adds and evictions queue jobs; every job carries it, and a
            job's results are written as the robot it carries (on a shared store, this
            runner may do another robot's jobs: they stay that robot's).
        importance_scorer / tagger / summariser: the enrichers (any may be None).
        add_summary: ``add_summary(key, text, source_keys, robot)`` stores a summary memory
            as ``robot``'s.
        refresh_importance: ``refresh_importance(key, value)`` updates working memory.
        options: runner options for the background jobs (``requests_per_second``,
            ``workers``, ``batch_size``, ``max_attempts`` ...).
    """

    def __init__(self, *, store: LongTermStore, robot: str,
                 importance_scorer: ImportanceScorer | None = None, tagger: Tagger | None = None,
                 summariser: SummaryWriter | None = None,
                 add_summary: Callable[[str, str, list[str], str], None],
                 refresh_importance: Callable[[str, float], None],
                 options: Mapping[str, Any] | None = None) -> None:
        for name, enricher, method in (("importance_scorer", importance_scorer, "score"),
                                       ("tagger", tagger, "tag")):
            if enricher is not None and not callable(getattr(enricher, method, None)):
                raise ValidationError(f"{name} must have a {method}() method, got {enricher!r}")
        if summariser is not None and not uses_model(summariser):
            raise ValidationError("summariser must be a model-backed Summariser")
        self._robot = robot
        self._add_summary = add_summary
        self._refresh_importance = refresh_importance
        self.inline_scorer = None if uses_model(importance_scorer) else importance_scorer
        self.inline_tagger = None if uses_model(tagger) else tagger
        self.summaries: deque[str] = deque(maxlen=50)
        background_scorer = importance_scorer if uses_model(importance_scorer) else None
        background_tagger = tagger if uses_model(tagger) else None
        self.background: Enrichment | None = None
        if background_scorer or background_tagger or summariser:
            host = capability(store, EnrichmentStore, "enriching memories in the background")
            self.background = Enrichment(
                host.open_job_queue(),
                tagger=background_tagger,
                on_tags=partial(self._on_tags, host) if background_tagger else None,
                scorer=background_scorer,
                on_importance=partial(self._on_importance, host) if background_scorer else None,
                summariser=summariser, on_summary=self._on_summary if summariser else None,
                with_robot=True, **dict(options or {}))

    def start(self) -> None:
        """Start the background workers (jobs left from earlier runs resume)."""
        if self.background is not None:
            self.background.start()

    # -- at add time -----------------------------------------------------------------

    def importance_for(self, content: str) -> float:
        """Importance for a memory added without one: the inline scorer's, else 1.0."""
        if self.inline_scorer is None:
            return 1.0
        return check_importance(self.inline_scorer.score(content))

    def tags_for(self, content: str, given: Sequence[str]) -> tuple[str, ...]:
        """The caller's tags plus the inline tagger's."""
        if self.inline_tagger is None:
            return tuple(given)
        return check_tags([*given, *self.inline_tagger.tag(content)])

    def added(self, memories: Sequence[Memory], importance_given: Sequence[bool]) -> None:
        """Queue model enrichment for newly stored memories (never for summaries)."""
        if self.background is None:
            return
        fresh = [(m, given) for m, given in zip(memories, importance_given, strict=True)
                 if SUMMARY_TAG not in m.tags]
        for given in (True, False):
            batch = [(m.key, m.content) for m, g in fresh if g is given]
            if batch:
                self.background.memories_added(batch, importance=not given, robot=self._robot)

    def evicted(self, items: Sequence[tuple[str, str]]) -> None:
        """Queue a summary of what just left working memory."""
        if self.background is not None and items:
            self.background.memories_evicted(items, robot=self._robot)

    # -- callbacks from the worker ---------------------------------------------------

    def _on_tags(self, host: EnrichmentStore, key: str, tags: list[str],
                 robot: str | None = None) -> None:
        try:
            host.add_tags(key, check_tags(tags), robot=robot or self._robot)
        except HTMError as exc:  # purged meanwhile: nothing to tag
            logger.info("tags for %s not applied: %s", key, exc)

    def _on_importance(self, host: EnrichmentStore, key: str, value: float,
                       robot: str | None = None) -> None:
        try:
            host.set_importance(key, check_importance(value), robot=robot or self._robot)
        except HTMError as exc:
            logger.info("importance for %s not applied: %s", key, exc)
            return
        self._refresh_importance(key, value)

    def _on_summary(self, key: str, text: str, source_keys: list[str],
                    robot: str | None = None) -> None:
        owner = robot or self._robot
        self._add_summary(key, text, source_keys, owner)
        if owner == self._robot and key not in self.summaries:
            self.summaries.append(key)  # another robot's summary never reaches our context

    # -- lifecycle -------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for queued enrichment to finish; False on timeout."""
        return True if self.background is None else self.background.flush(timeout)

    def stats(self) -> dict[str, Any]:
        """Counters of the background jobs (empty when none run)."""
        return {} if self.background is None else self.background.stats()

    def stop(self) -> None:
        """Stop the workers; pending jobs stay queued for the next start."""
        if self.background is not None:
            self.background.stop(timeout=10)

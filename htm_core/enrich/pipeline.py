"""The seam between a memory facade and background enrichment.

:class:`Enrichment` bundles a queue, the enrichers, their callbacks and a runner, and offers
the two calls a facade makes: :meth:`Enrichment.memories_added` (queue tag / importance jobs,
in one transaction, returning at once) and :meth:`Enrichment.memories_evicted` (queue a
summary job). The facade supplies the callbacks that write results to its store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import ValidationError
from ..jobs import JobQueue, JobRunner
from .base import ImportanceScorer, ModelBacked, SummaryWriter, Tagger
from .kinds import IMPORTANCE, SUMMARY, TAGS, enrichment_handlers, importance_job, summary_job, tag_job
from .llm import LLMUsage

__all__ = ["Enrichment"]


def _model_backed(*enrichers: object) -> list[ModelBacked]:
    return [e for e in enrichers if isinstance(e, ModelBacked)]


class Enrichment:
    """Background enrichment for a memory store: queue on write, apply results by callback.

    Args:
        queue: the durable queue (:class:`~htm_core.enrich.SQLJobQueue`, for instance on the
            store's own engine).
        tagger / on_tags: a tagger and ``on_tags(memory_key, tags)``.
        scorer / on_importance: an importance scorer and ``on_importance(memory_key, value)``.
        summariser / on_summary: a summariser and ``on_summary(summary_key, text, source_keys)``.
        batch_tags: send a claimed batch of tag jobs to the model in one request.
        usage: the model counters :meth:`stats` reports (default: the first enricher's
            ``usage``; give all enrichers one shared ``LLMUsage`` to see every call).
        with_robot: call every callback with ``robot=``, the robot a job was queued for
            (``memories_added(..., robot=)``, ``memories_evicted(..., robot=)``).
        **runner: options for :class:`~htm_core.enrich.JobRunner` (``requests_per_second``,
            ``workers``, ``batch_size``, ``max_attempts``, ``lease`` ...).

    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> from htm_core.enrich import InMemoryJobQueue, LLMTagger
    >>> tags = {}
    >>> tagger = LLMTagger(FakeListChatModel(responses=['["a:b"]']))
    >>> enrichment = Enrichment(InMemoryJobQueue(), tagger=tagger, on_tags=tags.__setitem__)
    >>> enrichment.start()
    >>> _ = enrichment.memories_added([("m1", "some text")])
    >>> enrichment.stop(drain=True, timeout=5)
    True
    >>> tags
    {'m1': ['a:b']}
    """

    def __init__(self, queue: JobQueue, *, tagger: Tagger | None = None,
                 on_tags: Callable[[str, list[str]], None] | None = None,
                 scorer: ImportanceScorer | None = None,
                 on_importance: Callable[[str, float], None] | None = None,
                 summariser: SummaryWriter | None = None,
                 on_summary: Callable[[str, str, list[str]], None] | None = None,
                 batch_tags: bool = True, usage: LLMUsage | None = None,
                 with_robot: bool = False, **runner: Any) -> None:
        handlers = enrichment_handlers(tagger=tagger, on_tags=on_tags, scorer=scorer,
                                       on_importance=on_importance, summariser=summariser,
                                       on_summary=on_summary, batch_tags=batch_tags,
                                       with_robot=with_robot)
        if not handlers:
            raise ValidationError("give at least one enricher with its callback (e.g. tagger= and on_tags=)")
        if usage is None:
            usage = next((e.usage for e in _model_backed(tagger, scorer, summariser)
                          if isinstance(e.usage, LLMUsage)), None)
        self.queue = queue
        self.runner = JobRunner(queue, handlers, usage=usage, **runner)

    @property
    def kinds(self) -> list[str]:
        """The job kinds this pipeline runs (``tags``, ``importance``, ``summary``)."""
        return sorted(self.runner.handlers)

    def start(self) -> None:
        """Start the workers (pending jobs from earlier runs are picked up at once)."""
        self.runner.start()

    def stop(self, *, drain: bool = False, timeout: float | None = None) -> bool:
        """Stop the workers; see :meth:`JobRunner.stop`."""
        return self.runner.stop(drain=drain, timeout=timeout)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until no job is pending or running; ``False`` on timeout."""
        return self.runner.flush(timeout)

    def stats(self) -> dict[str, Any]:
        """The runner's counters; see :meth:`JobRunner.stats`."""
        return self.runner.stats()

    def memories_added(self, items: Iterable[tuple[str, str]], *, tags: bool = True,
                       importance: bool = True, robot: str | None = None) -> list[int]:
        """Queue enrichment for new memories ``(key, content)``, in one transaction.

        ``tags`` / ``importance``: whether to ask for them (a facade passes ``False`` when the
        caller gave them). Kinds without an enricher are skipped. ``robot``: the robot the
        jobs are for (carried by each job). Returns the job ids.
        """
        jobs = []
        for key, content in items:
            if tags and TAGS in self.runner.handlers:
                jobs.append(tag_job(key, content, robot=robot))
            if importance and IMPORTANCE in self.runner.handlers:
                jobs.append(importance_job(key, content, robot=robot))
        return self.runner.submit_many(jobs) if jobs else []

    def memories_evicted(self, items: Sequence[tuple[str, str]], *, robot: str | None = None
                         ) -> str | None:
        """Queue a summary of evicted memories ``(key, content)`` for ``robot`` (the one
        whose working memory evicted them); returns the summary's key (``None`` when there
        is nothing to summarise or no summariser)."""
        if not items or SUMMARY not in self.runner.handlers:
            return None
        kind, key, payload = summary_job([k for k, _ in items], [c for _, c in items],
                                         robot=robot)
        self.runner.submit(kind, key, payload)
        return key

"""The jobs of the built-in enrichers: tags, importance and summaries.

:func:`tag_job`, :func:`importance_job` and :func:`summary_job` build the
``(kind, memory_key, payload)`` triples a :class:`~htm_core.jobs.JobRunner` queues;
:func:`enrichment_handlers` runs the enrichers for those jobs and hands the results to
callbacks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ValidationError
from ..jobs import BatchHandler, Handler, Job
from ..validation import check_content, check_key
from .base import BatchTagger, ImportanceScorer, SummaryWriter, Tagger

__all__ = ["IMPORTANCE", "SUMMARY", "TAGS", "enrichment_handlers", "importance_job", "summary_job",
           "tag_job"]

#: Job kinds understood by :func:`enrichment_handlers`.
TAGS = "tags"
IMPORTANCE = "importance"
SUMMARY = "summary"

def _with_robot(payload: dict[str, Any], robot: str | None) -> dict[str, Any]:
    if robot is not None:
        payload["robot"] = check_key(robot)
    return payload


def tag_job(memory_key: str, content: str, *, robot: str | None = None
            ) -> tuple[str, str, dict[str, Any]]:
    """``(kind, memory_key, payload)`` asking for tags of ``content``; ``robot``: the robot
    the job is done for (its results are written as that robot's)."""
    return TAGS, check_key(memory_key), _with_robot({"content": check_content(content)}, robot)


def importance_job(memory_key: str, content: str, *, robot: str | None = None
                   ) -> tuple[str, str, dict[str, Any]]:
    """``(kind, memory_key, payload)`` asking for the importance of ``content`` (for ``robot``)."""
    return IMPORTANCE, check_key(memory_key), _with_robot({"content": check_content(content)},
                                                          robot)


def summary_job(source_keys: Sequence[str], texts: Sequence[str], *, robot: str | None = None
                ) -> tuple[str, str, dict[str, Any]]:
    """``(kind, summary_key, payload)`` asking for a summary of evicted memories.

    The summary's key is derived from its sources (``summary:<hash>``), so a job that runs
    twice writes the same memory. ``robot`` is the robot whose working memory evicted
    them: the summary becomes that robot's memory, whichever runner does the job.

    >>> summary_job(["m1", "m2"], ["a", "b"])[1]
    'summary:9a596d735a08fd02'
    """
    keys = [check_key(key) for key in source_keys]
    if not keys or len(keys) != len(texts):
        raise ValidationError("give one text per source key, and at least one")
    digest = hashlib.sha256("\x00".join(keys).encode()).hexdigest()[:16]
    return SUMMARY, f"summary:{digest}", _with_robot(
        {"source_keys": keys, "texts": [check_content(text) for text in texts]}, robot)


def enrichment_handlers(*, tagger: Tagger | None = None, scorer: ImportanceScorer | None = None,
                        summariser: SummaryWriter | None = None,
                        on_tags: Callable[[str, list[str]], None] | None = None,
                        on_importance: Callable[[str, float], None] | None = None,
                        on_summary: Callable[[str, str, list[str]], None] | None = None,
                        batch_tags: bool = False,
                        with_robot: bool = False) -> dict[str, Handler | BatchHandler]:
    """Handlers for :class:`JobRunner` that run the enrichers and hand results to callbacks.

    - ``tags`` jobs: ``on_tags(memory_key, tags)`` with ``tagger.tag(content)``;
    - ``importance`` jobs: ``on_importance(memory_key, value)`` with ``scorer.score(content)``;
    - ``summary`` jobs: ``on_summary(summary_key, summary, source_keys)`` with
      ``summariser.summarise(texts)``.

    With ``batch_tags`` (and a tagger that is also a :class:`~htm_core.enrich.base.BatchTagger`,
    as :class:`~htm_core.enrich.LLMTagger` is), the tag jobs of one claimed batch go to the
    model in a single request.

    With ``with_robot`` every callback also gets ``robot=``: the robot the job was queued
    for (``None`` for a job queued without one), so a runner shared by several robots
    writes each result as the robot that caused it.

    A kind is handled only when both its enricher and its callback are given. An enricher
    that raises (for instance ``InvalidModelOutputError``) calls no callback; the runner
    retries the job.
    """
    handlers: dict[str, Handler | BatchHandler] = {}
    if (tagger is None) != (on_tags is None) or (scorer is None) != (on_importance is None) \
            or (summariser is None) != (on_summary is None):
        raise ValidationError("give each enricher together with its callback (tagger with on_tags, "
                              "scorer with on_importance, summariser with on_summary)")
    def by(job: Job) -> dict[str, Any]:
        return {"robot": job.payload.get("robot")} if with_robot else {}

    if tagger is not None and on_tags is not None:
        handlers[TAGS] = _tag_handler(tagger, on_tags, batch=batch_tags, by=by)
    if scorer is not None and on_importance is not None:
        score, apply_importance = scorer.score, on_importance

        def run_importance(job: Job) -> None:
            apply_importance(job.memory_key, float(score(job.payload["content"])), **by(job))

        handlers[IMPORTANCE] = run_importance
    if summariser is not None and on_summary is not None:
        summarise, apply_summary = summariser.summarise, on_summary

        def run_summary(job: Job) -> None:
            apply_summary(job.memory_key, summarise(job.payload["texts"]),
                          list(job.payload["source_keys"]), **by(job))

        handlers[SUMMARY] = run_summary
    return handlers


def _tag_handler(tagger: Tagger, apply_tags: Callable[..., None], *, batch: bool,
                 by: Callable[[Job], dict[str, Any]]) -> Handler | BatchHandler:
    """The ``tags`` handler: one job at a time, or a claimed batch in one request when
    ``batch`` and the tagger is a :class:`~htm_core.enrich.base.BatchTagger`."""
    if batch and isinstance(tagger, BatchTagger):
        tag_many = tagger.tag_many

        def run_tag_batch(jobs: list[Job]) -> None:
            results = tag_many([job.payload["content"] for job in jobs])
            for job, tags in zip(jobs, results, strict=True):
                apply_tags(job.memory_key, list(tags), **by(job))

        return BatchHandler(run_tag_batch)
    tag = tagger.tag

    def run_tags(job: Job) -> None:
        apply_tags(job.memory_key, list(tag(job.payload["content"])), **by(job))

    return run_tags

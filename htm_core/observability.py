"""What the memory is doing: in-process metrics, optional OpenTelemetry metrics and spans.

Every :class:`~htm_core.HTM` carries a :class:`Metrics` (``htm.metrics``) that counts adds,
recalls, evictions, forgets and embedding calls and tokens, and keeps add and recall latencies
(percentiles over a reservoir sample); ``stats().extra["metrics"]`` reports them. With
``HTM(telemetry=True)`` or explicit providers the same figures are exported as
OpenTelemetry instruments (:data:`INSTRUMENTS`) and each add, recall, forget and restore is a
span (extra ``otel``). See docs/observability.md.
"""

from __future__ import annotations

import functools
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, ParamSpec, TypeVar

from .errors import missing_extra
from .validation import check_int

__all__ = [
    "COUNTERS",
    "INSTRUMENTS",
    "LatencyRecorder",
    "LatencySummary",
    "Metrics",
    "instrumented",
]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

#: The in-process counters, in the order :meth:`Metrics.snapshot` lists them.
COUNTERS: tuple[str, ...] = (
    "adds", "recalls", "evictions", "forgets", "restores", "embedding_calls",
    "embedding_tokens", "errors",
)

#: OpenTelemetry instrument name -> (kind, unit, description). Every data point carries the
#: attribute ``htm.robot``; ``htm.errors`` also carries ``htm.operation`` and ``error.type``.
INSTRUMENTS: dict[str, tuple[str, str, str]] = {
    "htm.adds": ("counter", "{memory}", "memories written by add/add_many"),
    "htm.recalls": ("counter", "{call}", "recall calls answered"),
    "htm.evictions": ("counter", "{memory}", "memories evicted from working memory"),
    "htm.forgets": ("counter", "{memory}", "memories forgotten"),
    "htm.restores": ("counter", "{memory}", "memories restored"),
    "htm.embedding.calls": ("counter", "{call}", "calls to the embedder"),
    "htm.embedding.tokens": ("counter", "{token}", "tokens sent to the embedder"),
    "htm.errors": ("counter", "{call}", "operations that raised"),
    "htm.add.duration": ("histogram", "s", "add/add_many latency"),
    "htm.recall.duration": ("histogram", "s", "recall latency"),
}

_COUNTER_INSTRUMENT = {
    "adds": "htm.adds", "recalls": "htm.recalls", "evictions": "htm.evictions",
    "forgets": "htm.forgets", "restores": "htm.restores",
    "embedding_calls": "htm.embedding.calls", "embedding_tokens": "htm.embedding.tokens",
    "errors": "htm.errors",
}
_TIMED = ("add", "recall")


@dataclass(frozen=True, kw_only=True)
class LatencySummary:
    """Latency of one operation since start, in milliseconds (zeros before the first call)."""

    count: int
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


class LatencyRecorder:
    """Latency observations: exact count/mean/max, percentiles over a bounded reservoir.

    >>> rec = LatencyRecorder()
    >>> for ms in range(1, 101):
    ...     rec.record(ms / 1000)
    >>> rec.summary().p95_ms
    95.0
    """

    def __init__(self, capacity: int = 10_000, *, seed: int = 0) -> None:
        self._capacity = check_int("latency_samples", capacity)
        self._random = random.Random(seed)
        self._samples: list[float] = []
        self._count = 0
        self._total = 0.0
        self._max = 0.0

    def record(self, seconds: float) -> None:
        """Add one observation (seconds); reservoir sampling keeps the sample uniform."""
        ms = seconds * 1000.0
        self._count += 1
        self._total += ms
        self._max = max(self._max, ms)
        if len(self._samples) < self._capacity:
            self._samples.append(ms)
        else:
            slot = self._random.randrange(self._count)
            if slot < self._capacity:
                self._samples[slot] = ms

    def summary(self) -> LatencySummary:
        """Count, mean, nearest-rank p50/p95/p99 and max, in milliseconds."""
        if not self._count:
            return LatencySummary(count=0, mean_ms=0.0, p50_ms=0.0, p95_ms=0.0, p99_ms=0.0,
                                  max_ms=0.0)
        ordered = sorted(self._samples)

        def rank(p: float) -> float:
            return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

        return LatencySummary(count=self._count, mean_ms=self._total / self._count,
                              p50_ms=rank(50), p95_ms=rank(95), p99_ms=rank(99),
                              max_ms=self._max)


class _Operation:
    """What an instrumented call reports back to its :meth:`Metrics.operation` scope."""

    def __init__(self, span: Any) -> None:
        self.span = span
        self.count = 1

    def set(self, name: str, value: Any) -> None:
        """Set a span attribute (ignored when tracing is off)."""
        if self.span is not None:
            self.span.set_attribute(name, value)


class Metrics:
    """Counters and latencies for one robot, optionally exported to OpenTelemetry.

    Args:
        robot: the robot name put on every OpenTelemetry data point (``htm.robot``).
        telemetry: export through the global OpenTelemetry meter and tracer providers.
        meter_provider: export metrics through this provider (implies ``telemetry``).
        tracer_provider: make spans with this provider (implies ``telemetry``).
        latency_samples: reservoir size for the latency percentiles.

    Thread-safe. Example::

        metrics = Metrics(robot="assistant")
        with metrics.operation("recall"):
            ...
        metrics.snapshot()["recalls"]   # 1
    """

    def __init__(self, *, robot: str = "default", telemetry: bool = False,
                 meter_provider: Any = None, tracer_provider: Any = None,
                 latency_samples: int = 10_000) -> None:
        self.robot = robot
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._latency = {op: LatencyRecorder(latency_samples) for op in _TIMED}
        self.started_at = datetime.now(timezone.utc)
        self._attributes = {"htm.robot": robot}
        self._instruments: dict[str, Any] = {}
        self._tracer: Any = None
        self._telemetry = bool(telemetry) or meter_provider is not None \
            or tracer_provider is not None
        if self._telemetry:
            self._start_telemetry(meter_provider, tracer_provider)

    def _start_telemetry(self, meter_provider: Any, tracer_provider: Any) -> None:
        try:
            from opentelemetry import metrics as otel_metrics
            from opentelemetry import trace as otel_trace
        except ImportError:
            raise missing_extra("opentelemetry-api", "otel") from None
        from . import __version__

        provider = meter_provider if meter_provider is not None \
            else otel_metrics.get_meter_provider()
        meter = provider.get_meter("htm_core", __version__)
        for name, (kind, unit, description) in INSTRUMENTS.items():
            make = meter.create_counter if kind == "counter" else meter.create_histogram
            self._instruments[name] = make(name, unit=unit, description=description)
        tracers = tracer_provider if tracer_provider is not None \
            else otel_trace.get_tracer_provider()
        self._tracer = tracers.get_tracer("htm_core", __version__)
        logger.info("telemetry on robot=%s meter_provider=%s tracer_provider=%s", self.robot,
                    type(provider).__name__, type(tracers).__name__)

    @property
    def telemetry(self) -> bool:
        """Whether figures are exported to OpenTelemetry."""
        return self._telemetry

    # -- recording -------------------------------------------------------------------

    def increment(self, counter: str, n: int = 1, attributes: Mapping[str, str] | None = None
                  ) -> None:
        """Add ``n`` to a counter (one of :data:`COUNTERS`); ``attributes`` go to OpenTelemetry."""
        if n <= 0:
            return
        with self._lock:
            self._counts[counter] += n
        instrument = self._instruments.get(_COUNTER_INSTRUMENT[counter])
        if instrument is not None:
            instrument.add(n, {**self._attributes, **(attributes or {})})

    def embedded(self, *, tokens: int, calls: int = 1) -> None:
        """Record calls to the embedder and the tokens sent to it."""
        self.increment("embedding_calls", calls)
        self.increment("embedding_tokens", tokens)

    def evicted(self, n: int) -> None:
        """Record ``n`` memories evicted from working memory."""
        if n > 0:
            logger.debug("evicted robot=%s n=%d", self.robot, n)
        self.increment("evictions", n)

    def observe(self, op: str, seconds: float) -> None:
        """Record one latency observation for ``add`` or ``recall``."""
        with self._lock:
            self._latency[op].record(seconds)
        instrument = self._instruments.get(f"htm.{op}.duration")
        if instrument is not None:
            instrument.record(seconds, self._attributes)

    @contextmanager
    def operation(self, op: str, counter: str | None = None) -> Iterator[_Operation]:
        """Time an operation, count it on success (``scope.count``), trace it if enabled.

        ``op`` is ``add``, ``recall``, ``forget``, ``restore`` (or any name: only ``add``
        and ``recall`` keep latencies). ``counter`` defaults to ``op + "s"``.
        """
        counter = counter or f"{op}s"
        span_cm: Any = None
        span: Any = None
        if self._tracer is not None:
            span_cm = self._tracer.start_as_current_span(f"htm.{op}",
                                                         attributes=self._attributes)
            span = span_cm.__enter__()
        scope = _Operation(span)
        start = time.perf_counter()
        try:
            yield scope
        except BaseException as exc:
            elapsed = time.perf_counter() - start
            self.increment("errors", attributes={"htm.operation": op,
                                                 "error.type": type(exc).__name__})
            logger.debug("%s failed robot=%s ms=%.2f error=%s: %s", op, self.robot,
                         elapsed * 1000, type(exc).__name__, exc)
            if span_cm is not None:
                span_cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        elapsed = time.perf_counter() - start
        if op in self._latency:
            self.observe(op, elapsed)
        self.increment(counter, scope.count)
        logger.debug("%s robot=%s n=%d ms=%.2f", op, self.robot, scope.count, elapsed * 1000)
        if span_cm is not None:
            scope.set("htm.count", scope.count)
            span_cm.__exit__(None, None, None)

    # -- reading ---------------------------------------------------------------------

    @property
    def counts(self) -> dict[str, int]:
        """A copy of the counters."""
        with self._lock:
            return dict(self._counts)

    def latency(self, op: str) -> LatencySummary:
        """Latency summary for ``add`` or ``recall`` since start."""
        with self._lock:
            return self._latency[op].summary()

    def snapshot(self) -> dict[str, Any]:
        """Counters, latency summaries and start time as a JSON-ready dict."""
        with self._lock:
            out: dict[str, Any] = dict(self._counts)
            out["latency_ms"] = {op: asdict(rec.summary()) for op, rec in self._latency.items()}
        out["since"] = self.started_at.isoformat()
        out["telemetry"] = self._telemetry
        return out


def instrumented(op: str, *, counter: str | None = None,
                 count: Callable[[Any], int] | None = None
                 ) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a method of an object with a ``metrics`` attribute: time, count, trace it.

    ``count(result)`` says how much to add to the counter (default 1); for example
    ``len`` for a method returning the list of memories it wrote.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            metrics: Metrics | None = getattr(args[0], "metrics", None) if args else None
            if metrics is None:
                return fn(*args, **kwargs)
            with metrics.operation(op, counter) as scope:
                result = fn(*args, **kwargs)
                scope.count = count(result) if count is not None else 1
            return result

        return wrapper

    return decorate

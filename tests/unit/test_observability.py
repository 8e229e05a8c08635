"""In-process metrics and the OpenTelemetry export (read back with the SDK's in-memory reader)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from htm_core import HTM
from htm_core.errors import (
    ConfirmationRequiredError,
    InvalidBudgetError,
    MissingDependencyError,
    UnknownStrategyError,
)
from htm_core.observability import (
    COUNTERS,
    INSTRUMENTS,
    LatencyRecorder,
    Metrics,
    instrumented,
)


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def meter_provider(reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[reader])
    yield provider
    provider.shutdown()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(spans: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return provider


def otel_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Instrument name -> its data points, from one collection of the in-memory reader."""
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    if data is None:
        return out
    for resource_metrics in data.resource_metrics:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def otel_sum(points: dict[str, list[Any]], name: str) -> int:
    return sum(p.value for p in points.get(name, []))


# -- latency ---------------------------------------------------------------------------


def test_latency_percentiles_are_nearest_rank() -> None:
    rec = LatencyRecorder()
    for ms in [5, 1, 4, 2, 3, 100, 7, 6, 9, 8]:
        rec.record(ms / 1000)
    s = rec.summary()
    assert s.count == 10
    assert s.p50_ms == pytest.approx(5.0)
    assert s.p95_ms == pytest.approx(100.0)
    assert s.max_ms == pytest.approx(100.0)
    assert s.mean_ms == pytest.approx(14.5)


def test_latency_reservoir_stays_bounded_and_counts_exactly() -> None:
    rec = LatencyRecorder(capacity=50)
    for i in range(1, 1001):
        rec.record(i / 1000)
    s = rec.summary()
    assert len(rec._samples) == 50
    assert s.count == 1000
    assert s.max_ms == pytest.approx(1000.0)
    assert s.mean_ms == pytest.approx(500.5)
    assert 100 < s.p50_ms < 900  # a uniform sample of 1..1000 ms


def test_empty_latency_is_zero() -> None:
    s = Metrics().latency("recall")
    assert (s.count, s.p50_ms, s.p99_ms, s.max_ms) == (0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_latency_capacity_is_checked(bad: Any) -> None:
    with pytest.raises(InvalidBudgetError, match="latency_samples must be a positive integer"):
        Metrics(latency_samples=bad)


# -- Metrics on its own ----------------------------------------------------------------


def test_operation_counts_success_and_errors_separately() -> None:
    metrics = Metrics(robot="r")
    with metrics.operation("add") as scope:
        scope.count = 3
    with metrics.operation("recall"):
        pass
    with pytest.raises(KeyError), metrics.operation("recall"):
        raise KeyError("boom")
    counts = metrics.counts
    assert counts["adds"] == 3
    assert counts["recalls"] == 1
    assert counts["errors"] == 1
    assert metrics.latency("recall").count == 1  # the failed call is not a latency sample
    snap = metrics.snapshot()
    assert list(snap)[: len(COUNTERS)] == list(COUNTERS)
    assert snap["latency_ms"]["add"]["count"] == 1
    assert snap["telemetry"] is False


def test_instrumented_uses_the_objects_metrics() -> None:
    class Thing:
        def __init__(self) -> None:
            self.metrics = Metrics()

        @instrumented("add", count=len)
        def write(self, items: list[str]) -> list[str]:
            return items

    thing = Thing()
    assert thing.write(["a", "b"]) == ["a", "b"]
    assert thing.metrics.counts["adds"] == 2


def test_otel_on_metrics_directly(reader: InMemoryMetricReader,
                                  meter_provider: MeterProvider) -> None:
    metrics = Metrics(robot="bot", meter_provider=meter_provider)
    assert metrics.telemetry
    metrics.embedded(tokens=12)
    metrics.embedded(tokens=3, calls=2)
    metrics.evicted(4)
    metrics.evicted(0)
    points = otel_points(reader)
    assert otel_sum(points, "htm.embedding.calls") == 3
    assert otel_sum(points, "htm.embedding.tokens") == 15
    assert otel_sum(points, "htm.evictions") == 4
    assert all(p.attributes["htm.robot"] == "bot" for p in points["htm.evictions"])
    assert set(points) <= set(INSTRUMENTS)


def test_asking_for_telemetry_without_opentelemetry_says_which_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """opentelemetry is installed here, so its absence is simulated by hiding the module."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "htm-memory\[otel\]"'):
        Metrics(telemetry=True)
    assert Metrics().snapshot()["adds"] == 0  # without telemetry nothing is imported


# -- through HTM -----------------------------------------------------------------------


def scripted(htm: HTM) -> None:
    """5 adds (one a batch of 2), 3 recalls (one refused), 1 forget (one refused)."""
    htm.add("User prefers Vim keybindings", importance=9.0, key="pref-vim")
    htm.add("We talked about the weather in Lisbon", key="weather")
    htm.add_many(["The deploy runs on Fridays", "Coffee is at ten"])
    htm.add("Alice owns the billing service", key="alice")
    htm.recall("editor keybindings", limit=3)
    htm.recall("Lisbon weather", strategy="fulltext", limit=2)
    with pytest.raises(UnknownStrategyError):
        htm.recall("anything", strategy="psychic")
    with pytest.raises(ConfirmationRequiredError):
        htm.forget("weather")
    htm.forget("weather", confirm=True)


def test_htm_counts_a_scripted_sequence_in_process(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="counter", working_memory_tokens=20)
    scripted(htm)
    counts = htm.metrics.counts
    assert counts["adds"] == 5
    assert counts["recalls"] == 2
    assert counts["forgets"] == 1
    assert counts["errors"] == 2
    assert counts["evictions"] == len(htm.operations(op="evict", limit=1000)) > 0
    # one batch per add call plus one query per recall that reached the vector arm
    assert counts["embedding_calls"] == htm.stats().embedding_calls
    stats = htm.stats()
    metrics = stats.extra["metrics"]
    assert metrics["adds"] == 5
    assert metrics["latency_ms"]["recall"]["count"] == 2
    assert metrics["latency_ms"]["add"]["count"] == 4
    assert metrics["latency_ms"]["recall"]["p95_ms"] >= metrics["latency_ms"]["recall"]["p50_ms"] > 0


def test_htm_exports_the_scripted_sequence_to_otel(
        htm_factory: Callable[..., HTM], reader: InMemoryMetricReader,
        meter_provider: MeterProvider, tracer_provider: TracerProvider,
        spans: InMemorySpanExporter) -> None:
    htm = htm_factory(robot="otel", working_memory_tokens=20, meter_provider=meter_provider,
                      tracer_provider=tracer_provider)
    scripted(htm)
    points = otel_points(reader)
    assert otel_sum(points, "htm.adds") == 5
    assert otel_sum(points, "htm.recalls") == 2
    assert otel_sum(points, "htm.forgets") == 1
    assert otel_sum(points, "htm.evictions") == len(htm.operations(op="evict", limit=1000)) > 0
    assert otel_sum(points, "htm.embedding.calls") == htm.stats().embedding_calls
    tokens = htm.token_counter.count
    assert otel_sum(points, "htm.embedding.tokens") >= sum(tokens(t) for t in [
        "User prefers Vim keybindings", "We talked about the weather in Lisbon",
        "The deploy runs on Fridays", "Coffee is at ten", "Alice owns the billing service"])
    errors = {(p.attributes["htm.operation"], p.attributes["error.type"]): p.value
              for p in points["htm.errors"]}
    assert errors == {("recall", "UnknownStrategyError"): 1,
                      ("forget", "ConfirmationRequiredError"): 1}
    (recall_hist,) = points["htm.recall.duration"]
    (add_hist,) = points["htm.add.duration"]
    assert (recall_hist.count, add_hist.count) == (2, 4)
    assert recall_hist.attributes == {"htm.robot": "otel"}

    names = [s.name for s in spans.get_finished_spans()]
    assert names.count("htm.add") == 4
    assert names.count("htm.recall") == 3
    assert names.count("htm.forget") == 2
    failed = [s for s in spans.get_finished_spans() if s.status.status_code is StatusCode.ERROR]
    assert sorted(s.name for s in failed) == ["htm.forget", "htm.recall"]


def test_htm_without_telemetry_exports_nothing(htm_factory: Callable[..., HTM],
                                                reader: InMemoryMetricReader,
                                                meter_provider: MeterProvider) -> None:
    htm = htm_factory()
    htm.add("quiet")
    assert not htm.metrics.telemetry
    assert otel_points(reader) == {}
    assert htm.metrics.counts["adds"] == 1


def test_operations_are_logged_at_debug(htm_factory: Callable[..., HTM],
                                        caplog: pytest.LogCaptureFixture) -> None:
    htm = htm_factory(robot="logger")
    with caplog.at_level(logging.DEBUG, logger="htm_core.observability"):
        htm.add("a line for the log")
        htm.recall("line")
    lines = [r.getMessage() for r in caplog.records if r.name == "htm_core.observability"]
    assert any(line.startswith("add robot=logger n=1 ms=") for line in lines)
    assert any(line.startswith("recall robot=logger n=1 ms=") for line in lines)


def test_docs_list_every_counter_and_instrument() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    assert {c for c in COUNTERS if f"| `{c}` |" not in doc} == set()
    assert {i for i in INSTRUMENTS if f"| `{i}` |" not in doc} == set()

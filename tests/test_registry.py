"""The span registry stays small: bounded per trace, forgetting ended runs, followed traces and
dropped causes without losing the trace."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.tracing import registry as registry_module
from otel_agents._internal.tracing.registry import ENDED_RUNS_KEPT, NODES_PER_TRAIL, REGISTRY
from tests.conftest import Capture
from tests.support.metrics import points
from tests.support.spans import one_trace
from tests.support.teams import writers_room
from tests.support.volleys import play


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def test_many_runs_leave_nothing_but_a_few_ended_runs_behind(capture: Capture) -> None:
    before = len(REGISTRY)
    for _ in range(ENDED_RUNS_KEPT * 3):
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
        assert len(REGISTRY) == before, "a run's entries are released when it ends"
    per_run = REGISTRY.remembered_ended_spans / ENDED_RUNS_KEPT
    assert 0 < per_run < 50, "only the last few runs' span ids are remembered"


async def test_ended_runs_are_forgotten_after_a_while(capture: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
    assert REGISTRY.remembered_ended_spans > 0
    monkeypatch.setattr(registry_module, "ENDED_KEPT_S", 0.0)
    await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="again")))
    assert REGISTRY.remembered_ended_spans <= 40, "older runs' ids forgotten once their time is up"


async def test_a_long_core_only_conversation_keeps_a_bounded_number_of_entries(nested_capture: Capture) -> None:
    volleys = NODES_PER_TRAIL * 2
    await play(volleys)

    spans = nested_capture.spans()
    tree = one_trace(spans)
    assert tree.root.name == "match"
    processed = [s for s in spans if s.name.startswith("autogen process ")]
    assert len(processed) >= volleys, "every message was traced"
    assert REGISTRY.entries(tree.root.context.trace_id) <= NODES_PER_TRAIL
    assert len(REGISTRY) <= NODES_PER_TRAIL + 10, "nothing else of the conversation is kept"


async def test_a_span_whose_cause_was_dropped_stays_in_the_trace_under_its_sender(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry_module, "NODES_PER_TRAIL", 0)  # every cause is dropped at once
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader], runtime_spans="nested") as telemetry:
        await drain(otel_agents.tap(writers_room(max_messages=6).run_stream(task="go")))
        telemetry.force_flush()
        counted = [point.value for point in points(reader.get_metrics_data(), "otel_agents.spans.unplaced")]

    spans = exporter.get_finished_spans()
    tree = one_trace(spans)
    assert tree.root.name == "invoke_workflow writers-room"
    under_sender = [s for s in spans if s.parent and s.links and s.parent.span_id == s.links[0].context.span_id]
    assert counted == [REGISTRY.unplaced] and counted[0] > 0, "counted in a metric"
    assert len(under_sender) >= counted[0], "each under the sender it is linked to"


def test_traces_followed_from_elsewhere_are_forgotten_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = trace.NoOpTracerProvider()
    first = REGISTRY.followed(0xA1, provider, "nested")
    assert REGISTRY.followed(0xA1, provider, "nested") is first, "followed while active"
    monkeypatch.setattr(registry_module, "FOLLOWED_IDLE_S", 0.0)
    REGISTRY.followed(0xA2, provider, "nested")
    assert REGISTRY.followed_traces == 1, "the idle trace was forgotten when a new one arrived"

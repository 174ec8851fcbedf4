"""Every span and metric otel-agents makes comes from one instrumentation scope, with a schema URL."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._version import SCHEMA_URL, __version__
from tests.support.teams import writers_room


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def test_our_spans_and_metrics_have_one_scope_with_the_schema_url_util_genai_records_under() -> None:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with otel_agents.configure(span_exporter=spans, metric_readers=[reader]) as telemetry:
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
        telemetry.force_flush()
        data = reader.get_metrics_data()
    ours = [s for s in spans.get_finished_spans() if s.instrumentation_scope.name == "otel_agents"]
    names = {s.name.split(" ")[0] for s in ours}
    assert {"invoke_workflow", "message", "chat"} <= names, "the run, its messages and util-genai's chat spans"
    assert {(s.instrumentation_scope.version, s.instrumentation_scope.schema_url) for s in ours} == {
        (__version__, SCHEMA_URL)
    }
    scopes = [m.scope for rm in data.resource_metrics for m in rm.scope_metrics if m.scope.name == "otel_agents"]
    assert [(scope.version, scope.schema_url) for scope in scopes] == [(__version__, SCHEMA_URL)], (
        "one meter: ours and util-genai's"
    )

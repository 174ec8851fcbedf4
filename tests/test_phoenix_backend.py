"""Through a real OTLP backend: Arize Phoenix on 127.0.0.1, over gRPC and HTTP/protobuf."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.export.store.reader import Store
from otel_agents.cli import main as cli
from tests.support.phoenix import Phoenix
from tests.support.spans import one_trace
from tests.support.teams import replay, text, writers_room

pytestmark = [pytest.mark.backend]


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def nested_team() -> RoundRobinGroupChat:
    inner = writers_room(max_messages=3, name="drafting")
    editor = AssistantAgent("editor", model_client=replay(text("edited", 40, 5), text("edited again", 45, 6)))
    return RoundRobinGroupChat([inner, editor], termination_condition=MaxMessageTermination(4), name="publishing")


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def assert_same_trace(captured: list[ReadableSpan], arrived: list[dict[str, Any]]) -> None:
    by_id = {span["context"]["span_id"]: span for span in arrived}
    assert len(by_id) == len(captured)
    for span in captured:
        stored = by_id[format(span.context.span_id, "016x")]
        assert stored["name"] == span.name
        assert stored["context"]["trace_id"] == format(span.context.trace_id, "032x")
        parent = format(span.parent.span_id, "016x") if span.parent is not None else None
        assert stored["parent_id"] == parent, span.name
        for key, value in (span.attributes or {}).items():
            if key == "openinference.span.kind":  # Phoenix keeps it as the span's kind, not an attribute
                assert str(stored["span_kind"]).upper() == value, span.name
                continue
            assert stored["attributes"].get(key) == _plain(value), (span.name, key)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
async def test_a_nested_team_run_arrives_as_one_trace(
    phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    project = "nested-" + protocol.replace("/", "-")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")  # Phoenix takes traces only
    endpoint = phoenix.grpc_endpoint if protocol == "grpc" else phoenix.http_endpoint
    telemetry = otel_agents.configure(endpoint=endpoint, protocol=protocol)
    assert telemetry.settings.traces_exporters == ("otlp",)
    memory = InMemorySpanExporter()
    telemetry.sdk_tracer_provider.add_span_processor(SimpleSpanProcessor(memory))  # type: ignore[attr-defined]
    try:
        await drain(otel_agents.tap(nested_team().run_stream(task="a story")))
        assert telemetry.force_flush()
    finally:
        telemetry.shutdown()

    captured = list(memory.get_finished_spans())
    tree = one_trace(captured)
    assert tree.named("invoke_workflow drafting") and tree.named("chat")
    trace_id = format(tree.root.context.trace_id, "032x")
    arrived = phoenix.wait_for_spans(project, trace_id, len(captured))
    assert_same_trace(captured, arrived)


async def test_a_stored_run_replayed_with_export_keeps_its_trace_id(
    phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    project = "replayed"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    with otel_agents.configure(store=tmp_path) as telemetry:
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
        telemetry.force_flush()
    run = Store(tmp_path).runs()[0]
    stored = Store(tmp_path).spans(run.trace_id)

    assert cli(["--store", str(tmp_path), "export", run.run_id[:10], "--endpoint", phoenix.http_endpoint]) == 0

    arrived = phoenix.wait_for_spans(project, run.trace_id, len(stored))
    assert {s["context"]["span_id"] for s in arrived} == {s.span_id for s in stored}
    assert {s["context"]["trace_id"] for s in arrived} == {run.trace_id}
    root = next(s for s in arrived if s["parent_id"] is None)
    assert root["attributes"]["otel_agents.run.id"] == run.run_id
    started = datetime.fromtimestamp(run.started_ns / 1e9, tz=UTC)
    assert root["start_time"].startswith(started.isoformat()[:23])  # to the millisecond

"""A kind on every span, for Phoenix and other OpenInference readers: runs and messages `CHAIN`
(a single agent's run `AGENT`), turns `AGENT`, model calls `LLM`, tools `TOOL`, runtime spans
`CHAIN`; a run's input and output only with content capture on the span."""

from __future__ import annotations

from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import CancellationToken
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from tests.support.phoenix import Phoenix
from tests.support.spans import one_trace
from tests.support.teams import replay, text, tool_call, writers_room

KIND = "openinference.span.kind"


def expected_kind(name: str) -> str:
    if name.startswith(("invoke_agent ", "create_agent ")):
        return "AGENT"
    if name.startswith("chat"):
        return "LLM"
    if name.startswith("execute_tool"):
        return "TOOL"
    return "CHAIN"  # invoke_workflow, message, autogen runtime spans


def tool_team() -> RoundRobinGroupChat:
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: 12 degrees"

    asks = tool_call("lookup", '{"city": "Oslo"}')
    agent = AssistantAgent("assistant", model_client=replay(asks, text("12 degrees")), tools=[lookup])
    return RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(3), name="weather")


@pytest.mark.parametrize("runtime_spans", ["auto", "nested"])
async def test_every_span_of_a_team_run_has_its_kind(runtime_spans: str) -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, runtime_spans=runtime_spans)
    try:
        await tool_team().run(task="weather in Oslo?")
        telemetry.force_flush()
        tree = one_trace(exporter.get_finished_spans())
    finally:
        telemetry.shutdown()
    kinds = {s.name: s.attributes.get(KIND) for s in tree.spans}
    assert {name: expected_kind(name) for name in kinds} == kinds
    assert {"CHAIN", "AGENT", "LLM", "TOOL"} <= set(kinds.values())
    if runtime_spans == "nested":
        assert any(name.startswith("autogen ") for name in kinds), "runtime spans kept, CHAIN"


async def test_a_single_agents_run_is_an_agent_span() -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    try:
        await AssistantAgent("solo", model_client=replay(text("hi"))).run(task="go")
        agent = AssistantAgent("support", model_client=replay(text("hi")))
        from autogen_agentchat.messages import TextMessage

        await agent.on_messages([TextMessage(content="hello", source="user")], CancellationToken())
        telemetry.force_flush()
        roots = [s for s in exporter.get_finished_spans() if s.parent is None]
    finally:
        telemetry.shutdown()
    assert {r.name: r.attributes[KIND] for r in roots} == {
        "invoke_workflow solo": "AGENT",
        "invoke_agent support": "AGENT",
    }


@pytest.mark.parametrize(("mode", "shown"), [("NO_CONTENT", False), ("EVENT_ONLY", False), ("SPAN_ONLY", True)])
async def test_a_runs_input_and_output_only_with_content_on_the_span(mode: str, shown: bool) -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, capture_content=mode)
    try:
        await writers_room(max_messages=3).run(task="Write about tracing.")
        telemetry.force_flush()
        root = one_trace(exporter.get_finished_spans()).root
    finally:
        telemetry.shutdown()
    attributes: dict[str, Any] = dict(root.attributes or {})
    if shown:
        assert attributes["input.value"] == "Write about tracing."
        assert attributes["output.value"] and attributes["output.value"] != attributes["input.value"]
    else:
        assert "input.value" not in attributes and "output.value" not in attributes


@pytest.mark.backend
async def test_phoenix_shows_a_kind_for_every_span(phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch) -> None:
    project = "span-kinds"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    telemetry = otel_agents.configure(endpoint=phoenix.http_endpoint, protocol="http/protobuf")
    try:
        await tool_team().run(task="weather in Oslo?")
        telemetry.force_flush()
    finally:
        telemetry.shutdown()
    spans = phoenix.project_spans(project, count=9)  # run, 3 messages, 2 turns, 2 calls, 1 tool call
    assert spans
    kinds = {s["name"]: s["span_kind"] for s in spans}
    assert "UNKNOWN" not in {str(k).upper() for k in kinds.values()}, kinds
    assert {name: expected_kind(name) for name in kinds} == {n: str(k).upper() for n, k in kinds.items()}

"""With OpenTelemetry's own OpenAI instrumentation also on, a model call is still one `chat` span and its
tokens are counted once: both go through util-genai, whose inner invocation stands down under ours."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from tests.support.metrics import points
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import one_trace
from tests.support.teams import openai_client


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


@contextmanager
def instrumented_twice(
    **configure: Any,
) -> Iterator[tuple[otel_agents.Telemetry, InMemorySpanExporter, InMemoryMetricReader]]:
    """otel-agents, and OpenTelemetry's OpenAI instrumentation on the same providers."""
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader], **configure) as telemetry:
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
        try:
            yield telemetry, exporter, reader
        finally:
            instrumentor.uninstrument()


@pytest.fixture
def both_instrumented() -> Iterator[tuple[otel_agents.Telemetry, InMemorySpanExporter, InMemoryMetricReader]]:
    with instrumented_twice() as instrumented:
        yield instrumented


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streaming"])
async def test_one_chat_span_per_call_and_tokens_counted_once(
    both_instrumented: tuple[otel_agents.Telemetry, InMemorySpanExporter, InMemoryMetricReader],
    openai_server: OpenAIServer,
    streaming: bool,
) -> None:
    telemetry, exporter, reader = both_instrumented
    openai_server.script = [Reply(text="a first draft"), Reply(text="needs work"), Reply(text="a second draft")]
    client_kwargs: dict[str, Any] = {"stream_options": {"include_usage": True}} if streaming else {}
    writer = AssistantAgent(
        "writer", model_client=openai_client(openai_server, **client_kwargs), model_client_stream=streaming
    )
    critic = AssistantAgent(
        "critic", model_client=openai_client(openai_server, **client_kwargs), model_client_stream=streaming
    )
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(4), name="pair")
    await drain(otel_agents.tap(team.run_stream(task="write")))
    assert telemetry.force_flush()

    assert openai_server.request_count == 3
    assert all(bool(r.get("stream")) is streaming for r in openai_server.requests)
    tree = one_trace(exporter.get_finished_spans())
    calls = [s for s in tree.spans if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
    assert [c.name for c in calls] == ["chat gpt-4o-mini"] * 3, "one chat span per call, not one per instrumentation"
    assert all((c.attributes or {}).get("server.address") == "127.0.0.1" for c in calls), (
        "the OpenAI instrumentation was on: what it knows joined our span"
    )
    assert [tree.parent(c).name for c in calls] == [  # type: ignore[union-attr]
        "invoke_agent writer",
        "invoke_agent critic",
        "invoke_agent writer",
    ]

    billed = {
        "input": sum(b.prompt_tokens for b in openai_server.billed),
        "output": sum(b.completion_tokens for b in openai_server.billed),
    }
    usage = points(reader.get_metrics_data(), "gen_ai.client.token.usage")
    counted = {kind: sum(p.sum for p in usage if p.attributes["gen_ai.token.type"] == kind) for kind in billed}
    assert counted == billed, "each billed token counted once"
    durations = points(reader.get_metrics_data(), "gen_ai.client.operation.duration")
    assert sum(p.count for p in durations) == 3, "one duration point per call"
    assert (
        tree.root.attributes["gen_ai.usage.input_tokens"],
        tree.root.attributes["gen_ai.usage.output_tokens"],
    ) == (billed["input"], billed["output"])


async def test_our_content_policy_wins_over_the_variable_for_both_instrumentations(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "CANARY-SUPPRESSED-3c9e"
    # read by util-genai's handlers, the OpenAI instrumentation's among them: alone, it would capture
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    openai_server.script = [Reply(text=f"an answer {canary}")]
    with instrumented_twice(capture_content=False) as (telemetry, exporter, _):
        agent = AssistantAgent("solo", model_client=openai_client(openai_server), system_message=f"Help. {canary}")
        await drain(otel_agents.tap(agent.run_stream(task=f"a question {canary}")))
        assert telemetry.force_flush()

    spans = exporter.get_finished_spans()
    (call,) = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
    assert "gen_ai.input.messages" not in (call.attributes or {}) and not call.events
    assert all(canary not in span.to_json() for span in spans)
    assert canary in json.dumps(openai_server.requests), "the canary was there to leak"

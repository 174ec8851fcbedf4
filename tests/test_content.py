"""Content stays home by default: canaries in task, system message, tool argument, tool result and an
exception message never leave the process; with capture on they do, redacted and bounded."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from tests.support.config import assert_configure_refuses
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.phoenix import Phoenix
from tests.support.spans import one_trace
from tests.support.teams import openai_client

TASK = "CANARY-TASK-7f3a"
SYSTEM = "CANARY-SYSTEM-51c2"
ARGUMENT = "CANARY-ARG-90de"
RESULT = "CANARY-RESULT-44b1"
FAILURE = "CANARY-EXCEPTION-e8a0"
CANARIES = (TASK, SYSTEM, ARGUMENT, RESULT, FAILURE)


async def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city} is sunny. {RESULT}"


async def explode(reason: str) -> str:
    """Fail, saying why."""
    raise ValueError(f"could not explode: {FAILURE}")


def canary_team(server: OpenAIServer) -> RoundRobinGroupChat:
    server.script = [
        Reply(tool_call=("lookup", {"city": ARGUMENT})),
        Reply(text="It is sunny."),
        Reply(tool_call=("explode", {"reason": "because"})),
        Reply(text="That failed."),
    ]
    agent = AssistantAgent(
        "assistant",
        model_client=openai_client(server),
        tools=[lookup, explode],
        system_message=f"You help. {SYSTEM}",
        reflect_on_tool_use=True,
    )
    return RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(7), name="canaries")


def every_byte(spans: list[ReadableSpan]) -> str:
    return "\n".join(span.to_json() for span in spans)


def metric_bytes(reader: InMemoryMetricReader) -> str:
    data = reader.get_metrics_data()
    return data.to_json() if data is not None else ""


async def run_canaries(
    server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, **configure: Any
) -> tuple[list[ReadableSpan], str]:
    caplog.set_level(logging.DEBUG, logger="otel_agents")
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with otel_agents.configure(
        span_exporter=exporter, store=tmp_path / "store", runtime_spans="nested", metric_readers=[reader], **configure
    ) as telemetry:
        items = [item async for item in otel_agents.tap(canary_team(server).run_stream(task=f"Weather? {TASK}"))]
        assert items[-1].stop_reason is not None
        telemetry.force_flush()
        metrics = metric_bytes(reader)
    store_bytes = b"".join(p.read_bytes() for p in (tmp_path / "store").iterdir()).decode("utf-8", "replace")
    logs = "\n".join(record.getMessage() for record in caplog.records if record.name.startswith("otel_agents"))
    return list(exporter.get_finished_spans()), "\n".join([metrics, store_bytes, logs])


async def test_by_default_no_content_leaves_the_process(
    openai_server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spans, elsewhere = await run_canaries(openai_server, tmp_path, caplog)

    exported = every_byte(spans)
    for canary in CANARIES:
        assert canary not in exported, canary
        assert canary not in elsewhere, canary
    tree = one_trace(spans)
    assert tree.named("autogen process"), "runtime spans were kept, and still carry no content"
    tool_error = tree.one("execute_tool explode")
    assert tool_error.status.description is None
    events = [e for e in tool_error.events if e.name == "exception"]
    assert events, "AutoGen recorded the exception; only its type is left"
    for event in events:
        assert event.attributes["exception.type"] == "ValueError"
        assert "exception.message" not in event.attributes and "exception.stacktrace" not in event.attributes
    # the canaries did reach the model server, so they were there to leak
    sent = json.dumps(openai_server.requests)
    assert TASK in sent and SYSTEM in sent and RESULT in sent


async def test_with_capture_on_content_is_recorded_and_bounded(
    openai_server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_AGENTS_CONTENT_MAX_CHARS", "400")
    spans, _ = await run_canaries(openai_server, tmp_path, caplog, capture_content="span_only")

    tree = one_trace(spans)
    first_call = tree.named("chat")[0]
    inputs = json.loads(first_call.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in inputs] == ["system", "user"]
    assert SYSTEM in inputs[0]["parts"][0]["content"] and TASK in inputs[1]["parts"][0]["content"]
    outputs = json.loads(first_call.attributes["gen_ai.output.messages"])
    assert outputs[0]["parts"][0]["type"] == "tool_call" and ARGUMENT in outputs[0]["parts"][0]["arguments"]
    assert outputs[0]["finish_reason"] == "function_calls"
    tool = tree.one("execute_tool lookup")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"city": ARGUMENT}
    assert RESULT in tool.attributes["gen_ai.tool.call.result"]
    task_message = tree.named("message user")[0]
    assert TASK in task_message.attributes["otel_agents.message.content"]
    for span in spans:
        for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"):
            if key in span.attributes:
                assert len(span.attributes[key]) <= 400
                json.loads(span.attributes[key])  # still valid JSON, however it was cut
    cut = [
        c.attributes["gen_ai.input.messages"]
        for c in tree.named("chat")
        if "…" in c.attributes["gen_ai.input.messages"]
    ]
    assert cut, "the later calls' inputs were longer than 400 characters, and were cut"
    tool_error = tree.one("execute_tool explode")
    texts = [
        str(value)
        for event in tool_error.events
        for key, value in (event.attributes or {}).items()
        if key in ("exception.message", "exception.stacktrace")
    ]
    assert all(len(text) <= 400 for text in [*texts, tool_error.status.description or ""]), "bounded too"
    traces = [str(e.attributes["exception.stacktrace"]) for e in tool_error.events if e.name == "exception"]
    assert traces and all(t.startswith("…") for t in traces), "every stack trace was longer than 400, and cut"
    assert all(t.rstrip().splitlines()[-1].startswith("ValueError") for t in traces), (
        "a stack trace cut keeps its end: the innermost frames and the exception"
    )


async def test_event_modes_put_content_in_events(
    openai_server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spans, _ = await run_canaries(openai_server, tmp_path, caplog, capture_content="EVENT_ONLY")

    call = one_trace(spans).named("chat")[0]
    assert "gen_ai.input.messages" not in call.attributes
    (event,) = [e for e in call.events if e.name == "gen_ai.client.inference.operation.details"]
    assert TASK in event.attributes["gen_ai.input.messages"]


async def test_redact_scrubs_every_text_before_it_is_recorded(
    openai_server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def redact(text: str) -> str:
        for canary in CANARIES:
            text = text.replace(canary, "[redacted]")
        return text

    spans, elsewhere = await run_canaries(openai_server, tmp_path, caplog, capture_content=True, redact=redact)

    exported = every_byte(spans)
    assert "[redacted]" in exported
    for canary in CANARIES:
        assert canary not in exported and canary not in elsewhere, canary


@pytest.mark.backend
async def test_nothing_reaches_phoenix_by_default(
    openai_server: OpenAIServer, phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=canaries")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    telemetry = otel_agents.configure(endpoint=phoenix.http_endpoint, runtime_spans="nested")
    made = InMemorySpanExporter()
    telemetry.sdk_tracer_provider.add_span_processor(SimpleSpanProcessor(made))  # type: ignore[attr-defined]
    try:
        [item async for item in otel_agents.tap(canary_team(openai_server).run_stream(task=f"Weather? {TASK}"))]
        assert telemetry.force_flush()
    finally:
        telemetry.shutdown()
    root = one_trace(list(made.get_finished_spans())).root
    trace_id = format(root.context.trace_id, "032x")
    arrived = phoenix.wait_for_spans("canaries", trace_id, len(made.get_finished_spans()))
    assert len(arrived) == len(made.get_finished_spans())
    text = json.dumps(arrived)
    for canary in CANARIES:
        assert canary not in text, canary


@pytest.mark.parametrize(
    ("env", "kwargs", "message"),
    [
        (
            {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "maybe"},
            {},
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT='maybe'",
        ),
        ({}, {"capture_content": "ALL"}, "capture_content='ALL'"),
        ({}, {"capture_content": 3}, "capture_content=3"),
        ({}, {"redact": "scrub"}, "redact='scrub'"),
        ({"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "short"}, {}, "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT='short'"),
        ({"OTEL_AGENTS_CONTENT_MAX_CHARS": "0"}, {}, "OTEL_AGENTS_CONTENT_MAX_CHARS='0'"),
    ],
)
def test_bad_content_settings_are_refused(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], kwargs: dict[str, Any], message: str
) -> None:
    assert_configure_refuses(monkeypatch, env, message, set_global=False, **kwargs)


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        ("true", "SPAN_ONLY"),
        ("False", "NO_CONTENT"),
        ("span_and_event", "SPAN_AND_EVENT"),
        ("EVENT_ONLY", "EVENT_ONLY"),
    ],
)
def test_capture_variable_values(monkeypatch: pytest.MonkeyPatch, value: str, mode: str) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
    with otel_agents.configure(set_global=False, store=False) as telemetry:
        assert telemetry.settings.content.mode == mode


def test_the_attribute_length_limit_wins_over_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "123")
    monkeypatch.setenv("OTEL_AGENTS_CONTENT_MAX_CHARS", "999")
    with otel_agents.configure(set_global=False, store=False) as telemetry:
        assert telemetry.settings.content.max_chars == 123

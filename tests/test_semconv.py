"""The `gen_ai.*` keys we write ourselves are literals in one module (`_internal/keys.py`); each is
checked here against what util-genai (the library OpenTelemetry's GenAI instrumentations share, and
that writes our `chat` spans and `gen_ai.client.*` metrics) writes itself. The `gen_ai` constants of
`opentelemetry-semantic-conventions` are deprecated there: nothing of ours imports them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_core._telemetry import _genai as autogen_genai
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart

from otel_agents._internal import keys as sc
from tests.support.metrics import points

ROOT = Path(__file__).resolve().parents[1]


class Written:
    """What util-genai writes, on in-memory providers, content capture on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
        self.exporter, self.reader = InMemorySpanExporter(), InMemoryMetricReader()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.handler = TelemetryHandler(
            tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[self.reader])
        )

    def span(self) -> ReadableSpan:
        (span,) = self.exporter.get_finished_spans()
        self.exporter.clear()
        return span

    def metric_keys(self, name: str) -> set[str]:
        return {key for point in points(self.reader.get_metrics_data(), name) for key in point.attributes}


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Iterator[Written]:
    yield Written(monkeypatch)


def test_chat_span_keys_are_util_genais(written: Written) -> None:
    call = written.handler.inference("openai", request_model="gpt-4o-mini")
    call.response_model_name = "gpt-4o-mini-2024-07-18"
    call.input_tokens, call.output_tokens, call.cache_read_input_tokens = 20, 3, 10
    call.finish_reasons = ["stop"]
    call.input_messages = [InputMessage(role="user", parts=[TextPart(content="hi")])]
    call.output_messages = [OutputMessage(role="assistant", parts=[TextPart(content="hello")])]
    call.stop()

    span = written.span()
    assert span.name == f"{sc.OPERATION_CHAT} gpt-4o-mini"
    attributes: dict[str, Any] = dict(span.attributes or {})
    assert attributes[sc.GEN_AI_OPERATION_NAME] == sc.OPERATION_CHAT
    assert attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert attributes[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini-2024-07-18"
    assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 20
    assert attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert attributes[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 10
    assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert sc.GEN_AI_INPUT_MESSAGES in attributes and sc.GEN_AI_OUTPUT_MESSAGES in attributes
    usage = points(written.reader.get_metrics_data(), "gen_ai.client.token.usage")
    assert {p.attributes[sc.GEN_AI_TOKEN_TYPE] for p in usage} == {"input", "output"}


def test_error_type_is_util_genais(written: Written) -> None:
    call = written.handler.inference("openai", request_model="gpt-4o-mini")
    call.fail(RuntimeError("down"))
    assert written.span().attributes[sc.ERROR_TYPE] == "RuntimeError"  # type: ignore[index]
    assert sc.ERROR_TYPE in written.metric_keys("gen_ai.client.operation.duration")


def test_workflow_agent_and_tool_keys_are_util_genais(written: Written) -> None:
    written.handler.workflow("pair").stop()
    workflow = written.span()
    assert workflow.name == f"{sc.OPERATION_INVOKE_WORKFLOW} pair"
    assert workflow.attributes == {
        sc.GEN_AI_OPERATION_NAME: sc.OPERATION_INVOKE_WORKFLOW,
        sc.GEN_AI_WORKFLOW_NAME: "pair",
    }

    written.handler.invoke_local_agent(agent_name="writer").stop()
    agent = written.span()
    assert agent.attributes is not None
    assert agent.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OPERATION_INVOKE_AGENT
    assert agent.attributes[sc.GEN_AI_AGENT_NAME] == "writer"

    tool = written.handler.tool("lookup")
    tool.arguments, tool.tool_result = {"city": "Oslo"}, "sunny"
    tool.stop()
    attributes = written.span().attributes or {}
    assert sc.GEN_AI_TOOL_CALL_ARGUMENTS in attributes and sc.GEN_AI_TOOL_CALL_RESULT in attributes


def test_the_content_event_name_is_util_genais(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    handler = TelemetryHandler(tracer_provider=TracerProvider(), logger_provider=logger_provider)
    call = handler.inference("openai", request_model="gpt-4o-mini")
    call.input_messages = [InputMessage(role="user", parts=[TextPart(content="hi")])]
    call.stop()
    (event,) = logs.get_finished_logs()
    assert event.log_record.event_name == sc.GEN_AI_INFERENCE_DETAILS_EVENT
    assert sc.GEN_AI_INPUT_MESSAGES in (event.log_record.attributes or {})


def test_the_conversation_id_key_is_util_genais(written: Written) -> None:
    call = written.handler.inference("openai", request_model="gpt-4o-mini", conversation_id="c-1")
    call.stop()
    assert (written.span().attributes or {})[sc.GEN_AI_CONVERSATION_ID] == "c-1"


def test_create_agent_is_autogens_own_operation_name() -> None:
    """util-genai has no `create_agent`; AgentChat writes those spans, under this name."""
    assert sc.OPERATION_CREATE_AGENT == autogen_genai.GenAiOperationNameValues.CREATE_AGENT.value


def test_the_evaluation_keys_are_the_semantic_conventions_own() -> None:
    """util-genai writes no evaluation (a run's outcome) yet: these are checked against the names of
    the semantic-conventions package, read as data (its gen_ai constants are deprecated for code,
    which is why nothing of ours imports them)."""
    import importlib

    names = importlib.import_module("opentelemetry.semconv._incubating.attributes.gen_ai_attributes")
    assert sc.GEN_AI_EVALUATION_NAME == names.GEN_AI_EVALUATION_NAME
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE == names.GEN_AI_EVALUATION_SCORE_VALUE
    assert sc.GEN_AI_EVALUATION_SCORE_LABEL == names.GEN_AI_EVALUATION_SCORE_LABEL
    assert sc.GEN_AI_EVALUATION_EXPLANATION == names.GEN_AI_EVALUATION_EXPLANATION
    # the event's name, which the package names in no constant: the conventions' event, as they spell it
    assert sc.GEN_AI_EVALUATION_RESULT_EVENT == "gen_ai.evaluation.result"


CHECKED_ABOVE = {
    sc.GEN_AI_OPERATION_NAME,
    sc.GEN_AI_WORKFLOW_NAME,
    sc.GEN_AI_AGENT_NAME,
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    sc.GEN_AI_PROVIDER_NAME,
    sc.GEN_AI_REQUEST_MODEL,
    sc.GEN_AI_RESPONSE_MODEL,
    sc.GEN_AI_RESPONSE_FINISH_REASONS,
    sc.GEN_AI_TOKEN_TYPE,
    sc.GEN_AI_INPUT_MESSAGES,
    sc.GEN_AI_OUTPUT_MESSAGES,
    sc.GEN_AI_TOOL_CALL_ARGUMENTS,
    sc.GEN_AI_TOOL_CALL_RESULT,
    sc.ERROR_TYPE,
    sc.GEN_AI_INFERENCE_DETAILS_EVENT,
    sc.GEN_AI_CONVERSATION_ID,
    sc.GEN_AI_EVALUATION_NAME,
    sc.GEN_AI_EVALUATION_SCORE_VALUE,
    sc.GEN_AI_EVALUATION_SCORE_LABEL,
    sc.GEN_AI_EVALUATION_EXPLANATION,
    sc.GEN_AI_EVALUATION_RESULT_EVENT,
}


def test_every_convention_key_of_ours_is_checked_against_util_genai() -> None:
    ours = {
        v for k, v in vars(sc).items() if k.isupper() and isinstance(v, str) and v.startswith(("gen_ai.", "error."))
    }
    assert ours == CHECKED_ABOVE, "a new gen_ai.* key: check it against util-genai's output above"


def test_our_own_keys_live_in_our_namespace() -> None:
    ours = [v for k, v in vars(sc).items() if k.isupper() and isinstance(v, str) and "." in v]
    assert ours
    general = {sc.USER_ID, sc.SESSION_ID}  # OpenTelemetry's general conventions for who a run is for
    openinference = {sc.OPENINFERENCE_SPAN_KIND, sc.INPUT_VALUE, sc.OUTPUT_VALUE}  # what Phoenix reads
    assert all(key.startswith(("gen_ai.", "otel_agents.", "error.")) or key in general | openinference for key in ours)
    assert general == {"user.id", "session.id"}
    assert openinference == {"openinference.span.kind", "input.value", "output.value"}


def test_nothing_imports_the_deprecated_semconv_gen_ai_constants() -> None:
    deprecated = "opentelemetry.semconv._incubating"
    found = []
    for path in [*(ROOT / "otel_agents").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.relative_to(ROOT)}: {name}" for name in names if name.startswith(deprecated)]
    assert not found

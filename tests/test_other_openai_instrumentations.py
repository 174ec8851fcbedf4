"""Beside the OpenAI instrumentations other projects bring in (Traceloop/OpenLLMetry's, OpenInference's),
a model call of AutoGen's OpenAI client is one `chat` span, its tokens are counted once, and no
prompt or reply leaves the process while content capture is off, where that instrumentation can be
told so narrowly; the HTTP client's span and `traceparent` stay. OpenLIT: tests/test_openlit.py."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

import otel_agents
from otel_agents._internal.genai import conventions as others
from tests.support.beside import Instrumentor, Seen, assert_one_chat_span_and_http_kept, one_call
from tests.support.openai_server import OpenAIServer

pytest.importorskip("opentelemetry.instrumentation.httpx")


def traceloop(telemetry: otel_agents.Telemetry) -> Instrumentor:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    return instrumentor


def openinference(telemetry: otel_agents.Telemetry) -> Instrumentor:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    return instrumentor


streaming = pytest.mark.parametrize("streaming", [False, True], ids=["create", "create_stream"])


# --- Traceloop / OpenLLMetry: opentelemetry-instrumentation-openai ---------------------------------


def test_traceloop_s_language_model_suppression_key_is_the_one_we_set() -> None:
    semconv_ai = pytest.importorskip("opentelemetry.semconv_ai")
    assert semconv_ai.SUPPRESS_LANGUAGE_MODEL_INSTRUMENTATION_KEY == others.TRACELOOP_SUPPRESS_LLM_KEY


@streaming
async def test_beside_traceloop_a_call_is_one_chat_span_counted_once_without_content(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, streaming: bool
) -> None:
    pytest.importorskip("opentelemetry.instrumentation.openai")
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true")  # its default, said out loud: alone, it captures
    seen = await one_call(openai_server, streaming=streaming, instrument=traceloop)

    assert_one_chat_span_and_http_kept(seen)
    assert "opentelemetry.instrumentation.openai.v1" not in seen.scopes, "Traceloop recorded no span"
    assert seen.counted_tokens() == seen.billed_tokens(), "each billed token counted once"
    assert seen.leaked() == []


# --- OpenInference: openinference-instrumentation-openai ------------------------------------------


@streaming
async def test_beside_openinference_its_own_span_stays_and_carries_the_content(
    openai_server: OpenAIServer, streaming: bool
) -> None:
    """OpenInference reads only OpenTelemetry's `_SUPPRESS_INSTRUMENTATION_KEY`, which would silence the
    HTTP client too: we leave it on, and the README says to disable it
    (`OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=openai`) or hide its content (`OPENINFERENCE_HIDE_*`)."""
    pytest.importorskip("openinference.instrumentation.openai")
    seen = await one_call(openai_server, streaming=streaming, instrument=openinference)

    (ours,) = seen.chats  # OpenInference's span has no gen_ai.operation.name: one `chat` span still
    (theirs,) = [s for s in seen.tree.spans if s.instrumentation_scope.name == "openinference.instrumentation.openai"]  # type: ignore[union-attr]
    assert theirs.name == "ChatCompletion" and seen.tree.parent(theirs) is ours
    assert theirs.attributes["openinference.span.kind"] == "LLM"  # type: ignore[index]
    assert theirs.attributes["llm.token_count.prompt"] == seen.billed_tokens()["input"], (  # type: ignore[index]
        "the call's tokens again, on its span (it records no metric)"
    )
    assert seen.counted_tokens() == seen.billed_tokens(), "the token metric still counts each token once"
    assert seen.leaked() == ["ChatCompletion"], "its span carries the prompt and the reply"


async def test_openinference_s_hide_variables_keep_the_content_off_its_span(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openinference.instrumentation.openai")
    monkeypatch.setenv("OPENINFERENCE_HIDE_INPUTS", "true")
    monkeypatch.setenv("OPENINFERENCE_HIDE_OUTPUTS", "true")
    seen = await one_call(openai_server, streaming=False, instrument=openinference)

    assert "ChatCompletion" in [s.name for s in seen.tree.spans]
    assert seen.leaked() == []


def test_every_openai_instrumentor_registers_the_entry_point_name_the_readme_names() -> None:
    """`OTEL_PYTHON_DISABLED_INSTRUMENTATIONS` matches entry point names: `openai` is OpenInference's,
    Traceloop's and OpenTelemetry's own, so it turns off whichever of them are installed."""
    registered = {ep.value: ep.name for ep in entry_points(group="opentelemetry_instrumentor")}
    found = {
        value: name
        for value, name in registered.items()
        if value
        in (
            "openinference.instrumentation.openai:OpenAIInstrumentor",
            "opentelemetry.instrumentation.openai:OpenAIInstrumentor",
            "opentelemetry.instrumentation.genai.openai:OpenAIInstrumentor",
        )
    }
    assert found, "none of them installed here"
    assert set(found.values()) == {others.OPENAI_INSTRUMENTOR_ENTRY_POINT}


# --- with no other instrumentation: what the tests above compare against ---------------------------


@streaming
async def test_alone_a_call_is_one_chat_span_with_the_http_span_under_it(
    openai_server: OpenAIServer, streaming: bool
) -> None:
    seen: Seen = await one_call(openai_server, streaming=streaming, instrument=None)
    assert_one_chat_span_and_http_kept(seen)
    assert seen.counted_tokens() == seen.billed_tokens()
    assert seen.leaked() == []

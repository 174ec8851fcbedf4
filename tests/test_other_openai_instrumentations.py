"""Beside the OpenAI instrumentations other projects bring in (Traceloop/OpenLLMetry's, OpenInference's),
a model call of AutoGen's OpenAI client is one `chat` span, its tokens are counted once, and no
prompt or reply leaves the process while content capture is off, where that instrumentation can be
told so narrowly; the HTTP client's span and `traceparent` stay. OpenLIT: tests/test_openlit.py."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

import otel_agents
from otel_agents._internal.genai import conventions as others
from tests.support.beside import Instrumentor, Seen, assert_one_chat_span_and_http_kept, one_call
from tests.support.openai_server import OpenAIServer
from tests.test_opentelemetry_instrument import APP, console_spans, run_instrumented

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
    HTTP client too: we leave it on, and docs/zero-code.md says to disable it
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


# --- under `opentelemetry-instrument`: the distro loads every installed `openai` entry point ----------

TASK = "Write a line about tracing."  # tests/support/zero_code_app.py's task: in every prompt


def zero_code_spans(server: OpenAIServer, tmp_path: Path, disabled: str) -> list[dict[str, Any]]:
    done = run_instrumented(
        APP, server, tmp_path, OTEL_TRACES_EXPORTER="console", OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=disabled
    )
    return console_spans(done.stdout)


def test_under_the_distro_traceloop_stands_down_and_openinference_stays_unless_disabled(tmp_path: Path) -> None:
    """The issue's stack: the distro loads Traceloop's, OpenInference's and OpenTelemetry's own OpenAI
    instrumentors (all installed here) beside otel-agents, and the HTTP client's."""
    pytest.importorskip("opentelemetry.instrumentation.openai")
    pytest.importorskip("openinference.instrumentation.openai")
    with OpenAIServer() as server:
        spans = zero_code_spans(server, tmp_path, disabled="autogen_agentchat")
    names = [s["name"] for s in spans]
    assert names.count("chat gpt-4o-mini") == server.request_count == 4, "one chat span per call"
    assert "openai.chat" not in names, "Traceloop recorded nothing"
    assert names.count("ChatCompletion") == 4, "OpenInference is not silenced"
    assert [s["name"] for s in spans if TASK in json.dumps(s)] == ["ChatCompletion"] * 4, "it alone exports prompts"
    assert names.count("POST") == 4 and all(h.get("traceparent") for h in server.headers)

    with OpenAIServer() as server:
        spans = zero_code_spans(
            server, tmp_path, disabled=f"autogen_agentchat,{others.OPENAI_INSTRUMENTOR_ENTRY_POINT}"
        )
    names = [s["name"] for s in spans]
    assert names.count("chat gpt-4o-mini") == server.request_count == 4
    assert "ChatCompletion" not in names and "openai.chat" not in names, "docs/zero-code.md's switch turns it off"
    assert not [s["name"] for s in spans if TASK in json.dumps(s)]
    assert names.count("POST") == 4 and all(h.get("traceparent") for h in server.headers), "the HTTP client's stay"

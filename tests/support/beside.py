"""One real OpenAI model call with another OpenAI instrumentation on: what the SDK recorded.

The call is AutoGen's `OpenAIChatCompletionClient` over HTTP to the tests' server, made under an
app span of a configured otel-agents with content capture off. The HTTP client is instrumented too
(OpenTelemetry's httpx instrumentation, as the distro loads it), so the HTTP span and the
`traceparent` it injects can be checked. Spans are read as the SDK ended them, before otel-agents'
exporter scrubs content from them: what a distro's own exporter beside ours would send.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import wrapt
from autogen_core.models import SystemMessage, UserMessage
from opentelemetry import context, trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.genai import conventions as others
from tests.support.metrics import points
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import Tree, one_trace
from tests.support.teams import openai_client

CANARY = "CANARY-BESIDE-5b2e"
APP_SPAN = "handle request"
HTTP_SCOPE = "opentelemetry.instrumentation.httpx"
_PROXY: Any = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)  # wrapt 2 (1: ObjectProxy)


class Instrumentor(Protocol):
    def uninstrument(self, **kwargs: Any) -> None: ...


@dataclass
class Seen:
    tree: Tree
    metrics: MetricsData | None
    server: OpenAIServer

    @property
    def chats(self) -> list[ReadableSpan]:
        return [s for s in self.tree.spans if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]

    @property
    def scopes(self) -> set[str]:
        return {s.instrumentation_scope.name for s in self.tree.spans if s.instrumentation_scope is not None}

    def counted_tokens(self) -> dict[str, int]:
        usage = points(self.metrics, "gen_ai.client.token.usage")
        return {
            kind: sum(p.sum for p in usage if p.attributes["gen_ai.token.type"] == kind) for kind in ("input", "output")
        }

    def billed_tokens(self) -> dict[str, int]:
        return {
            "input": sum(b.prompt_tokens for b in self.server.billed),
            "output": sum(b.completion_tokens for b in self.server.billed),
        }

    def leaked(self) -> list[str]:
        """The spans (and their events) that carry the canary the prompt and the reply held."""
        return [s.name for s in self.tree.spans if CANARY in s.to_json()]

    def traceparents(self) -> list[str | None]:
        return [headers.get("traceparent") for headers in self.server.headers]

    def http_span(self) -> ReadableSpan:
        (span,) = [s for s in self.tree.spans if s.instrumentation_scope and s.instrumentation_scope.name == HTTP_SCOPE]
        return span


def _openai_classes() -> Iterator[type]:
    for module_name, module in list(sys.modules.items()):
        if module_name == "openai" or module_name.startswith("openai."):
            yield from (cls for cls in vars(module).values() if inspect.isclass(cls) and cls.__module__ == module_name)


@contextlib.contextmanager
def openai_as_found() -> Iterator[None]:
    """The `openai` package's classes as they were before, whatever an instrumentor left behind:
    Traceloop's `uninstrument()` (0.62.4) leaves its wrappers of `chat.completions` in place, with a
    tracer of a provider that is shut down by then. A class first imported meanwhile (`openai`
    imports its resources lazily) loses every `wrapt` wrapper."""
    found = {(cls, name): value for cls in _openai_classes() for name, value in list(vars(cls).items())}
    try:
        yield
    finally:
        for cls in _openai_classes():
            for name, value in list(vars(cls).items()):
                if (cls, name) in found:
                    if value is not found[cls, name]:
                        setattr(cls, name, found[cls, name])
                    continue
                original = value
                while isinstance(original, _PROXY):
                    original = original.__wrapped__
                if original is not value:
                    setattr(cls, name, original)


def _http_instrumentor() -> Any:
    """OpenTelemetry's instrumentor of the HTTP library the installed `openai` uses (httpx2 from
    openai 3, httpx before)."""
    import openai._base_client as base
    from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor

    return HTTPX2ClientInstrumentor() if hasattr(base, "httpx2") else HTTPXClientInstrumentor()


async def one_call(
    server: OpenAIServer,
    *,
    streaming: bool,
    instrument: Callable[[otel_agents.Telemetry], Instrumentor] | None,
) -> Seen:
    """One `create` (or `create_stream`) with the instrumentation `instrument` turns on (given the
    configured telemetry's providers; None: no other instrumentation), and what came of it."""
    exporter, raw, reader = InMemorySpanExporter(), InMemorySpanExporter(), InMemoryMetricReader()
    server.script = [Reply(text=f"an answer {CANARY}")]
    client = openai_client(server, **({"stream_options": {"include_usage": True}} if streaming else {}))
    messages = [SystemMessage(content=f"Help. {CANARY}"), UserMessage(content=f"a question {CANARY}", source="user")]
    with otel_agents.configure(
        span_exporter=exporter, metric_readers=[reader], store=False, capture_content=False
    ) as telemetry:
        telemetry.sdk_tracer_provider.add_span_processor(SimpleSpanProcessor(raw))  # type: ignore[attr-defined]
        http = _http_instrumentor()
        with openai_as_found():
            http.instrument(tracer_provider=telemetry.tracer_provider)
            other = instrument(telemetry) if instrument is not None else None
            try:
                app = trace.get_tracer("app", tracer_provider=telemetry.tracer_provider)
                with app.start_as_current_span(APP_SPAN):
                    if streaming:
                        async for _ in client.create_stream(messages):
                            pass
                    else:
                        await client.create(messages)
                assert context.get_value(others.TRACELOOP_SUPPRESS_LLM_KEY) is None, "set for the call only"
            finally:
                if other is not None:
                    other.uninstrument()
                http.uninstrument()
        assert telemetry.force_flush()
        metrics = reader.get_metrics_data()
    assert server.request_count == 1 and bool(server.requests[0].get("stream")) is streaming
    assert CANARY in json.dumps(server.requests), "the canary was there to leak"
    return Seen(tree=one_trace(raw.get_finished_spans()), metrics=metrics, server=server)


def assert_one_chat_span_and_http_kept(seen: Seen) -> None:
    """One `chat` span (ours, under the app span), the HTTP span under it, and the request carrying
    the trace context that names the HTTP span."""
    (chat,) = seen.chats
    assert chat.name == "chat gpt-4o-mini" and chat.instrumentation_scope.name == "otel_agents"  # type: ignore[union-attr]
    assert seen.tree.parent(chat) is seen.tree.root and seen.tree.root.name == APP_SPAN
    http = seen.http_span()
    assert seen.tree.parent(http) is chat, "the HTTP client's span is still recorded, under the call"
    sent = http.get_span_context()
    assert sent is not None
    assert [tp.split("-")[1:3] if tp else None for tp in seen.traceparents()] == [
        [f"{sent.trace_id:032x}", f"{sent.span_id:016x}"]
    ], "the request still carries the trace context, injected by the HTTP client"

"""What each operation of otel-agents costs, timed on its own (microseconds)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def _time(operation: Callable[[], Any], repeat: int) -> float:
    """Microseconds per call: the median of 5 batches of `repeat` calls."""
    return _time_side_by_side({"operation": operation}, repeat)["operation"]


def _time_side_by_side(operations: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """`_time` for several operations at once, their batches alternated: comparable numbers."""
    batches: dict[str, list[float]] = {name: [] for name in operations}
    for _ in range(5):
        for name, operation in operations.items():
            started = time.perf_counter()
            for _ in range(repeat):
                operation()
            batches[name].append((time.perf_counter() - started) / repeat * 1e6)
    return {name: statistics.median(times) for name, times in batches.items()}


def measure_operations(repeat: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for runtime_spans in ("off", "nested"):
        results.update(_measure(runtime_spans, repeat))
    results.update(_measure_metrics(repeat))
    return results


def _measure_metrics(repeat: int) -> dict[str, dict[str, Any]]:
    """Measurements are made only when metrics go somewhere; what they cost when they do."""
    from autogen_core.models import CreateResult, RequestUsage
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from benchmarks.workloads import CountingExporter
    from otel_agents import configure
    from otel_agents._internal.autogen.model_clients import ModelCall

    telemetry = configure(span_exporter=CountingExporter(), metric_readers=[InMemoryMetricReader()])
    call = telemetry.sdk_tracer_provider.get_tracer("bench").start_span("invoke_agent writer")
    in_call = trace.set_span_in_context(call)  # a sampled span: exemplars are offered, as in a run
    answer = CreateResult(
        finish_reason="stop", content="a draft", usage=RequestUsage(prompt_tokens=20, completion_tokens=3), cached=False
    )

    class Client:
        model = "gpt-4o-mini"

    client = Client()

    def model_call() -> None:  # util-genai records the call's tokens and duration as the span ends
        token = otel_context.attach(in_call)
        try:
            made = ModelCall(telemetry, client, (), {})
            made.on_item(answer)
            made.end()
        finally:
            otel_context.detach(token)

    result = {
        "model-call span and metrics, per call, when metrics are exported": {
            "us": _time(model_call, repeat),
            "when": "each model call (none without a metrics destination)",
        }
    }
    call.end()
    telemetry.shutdown()
    return result


_RUNTIME_SPAN = "autogen process writer_1b6f.(1b6f)-A"
_RUNTIME_ATTRIBUTES = {  # what autogen-core 0.7.5 puts on a process span
    "messaging.operation": "process",
    "messaging.destination": "writer_1b6f.(1b6f)-A",
    "sender": "group_chat_manager_1b6f/1b6f",
    "recipient": "writer_1b6f/1b6f",
    "message": '{"message": {"source": "critic", "content": "' + "notes " * 40 + '"}}',
}


def _measure(runtime_spans: str, repeat: int) -> dict[str, dict[str, Any]]:
    from autogen_agentchat.messages import TextMessage
    from autogen_core.models import CreateResult, RequestUsage
    from opentelemetry import context as otel_context
    from opentelemetry.trace import Link

    from benchmarks.workloads import CountingExporter
    from otel_agents import configure
    from otel_agents._internal.autogen.model_clients import ModelCall
    from otel_agents._internal.run.start import start_run

    results: dict[str, dict[str, Any]] = {}
    telemetry = configure(span_exporter=CountingExporter(), runtime_spans=runtime_spans)
    workflow = start_run(telemetry, "bench")
    assert workflow is not None
    token = otel_context.attach(workflow.context)
    link = [Link(workflow.span.get_span_context())]
    runtime_tracer = telemetry.tracer_provider.get_tracer("autogen SingleThreadedAgentRuntime")

    def runtime_span(tracer: Any = runtime_tracer) -> None:
        with tracer.start_as_current_span(_RUNTIME_SPAN, attributes=_RUNTIME_ATTRIBUTES, links=link):
            pass

    if runtime_spans == "off":
        message = TextMessage(
            source="writer",
            content="a draft " * 20,
            models_usage=RequestUsage(prompt_tokens=20, completion_tokens=3),
        )
        result = CreateResult(
            finish_reason="stop",
            content="a draft",
            usage=RequestUsage(prompt_tokens=20, completion_tokens=3),
            cached=False,
        )

        class Client:
            model = "gpt-4o-mini"

        client = Client()

        def model_call() -> None:
            call = ModelCall(telemetry, client, (), {})
            call.on_item(result)
            call.end()

        sdk_tracer = telemetry.sdk_tracer_provider.get_tracer("bench")

        def sdk_span() -> None:
            sdk_tracer.start_span("plain span", attributes={"a": 1}).end()

        assert workflow.run.loops is not None
        loops = workflow.run.loops
        results["message span, per streamed item"] = {
            "us": _time(lambda: workflow.on_item(message), repeat),
            "when": "each message",
        }
        results["loop rules, per streamed item"] = {
            "us": _time(lambda: loops.observe(message), repeat),
            "when": "each message (inside the line above)",
        }
        results["model-call span, per call"] = {"us": _time(model_call, repeat), "when": "each model call"}
        results["AutoGen runtime span, dropped (off)"] = {
            "us": _time(runtime_span, repeat),
            "when": "about 10 a message",
        }
        results["plain SDK span, for scale"] = {"us": _time(sdk_span, repeat), "when": "-"}
    else:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        builtin = TracerProvider()  # as AutoGen's built-in tracing records it: a plain SDK pipeline
        builtin.add_span_processor(BatchSpanProcessor(CountingExporter()))
        builtin_tracer = builtin.get_tracer("autogen SingleThreadedAgentRuntime")
        paired = _time_side_by_side({"ours": runtime_span, "builtin": lambda: runtime_span(builtin_tracer)}, repeat)
        results["AutoGen runtime span, nested"] = {"us": paired["ours"], "when": "about 10 a message"}
        results["the same span as AutoGen's built-in tracing records it, for scale"] = {
            "us": paired["builtin"],
            "when": "- (timed alternately with the line above)",
        }
        builtin.shutdown()
    otel_context.detach(token)
    telemetry.shutdown()
    return results

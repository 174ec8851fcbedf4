"""What each operation of otel-agents costs, timed on its own (microseconds)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def _time(operation: Callable[[], Any], repeat: int) -> float:
    batches = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            operation()
        batches.append((time.perf_counter() - started) / repeat * 1e6)
    return statistics.median(batches)


def measure_operations(repeat: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for runtime_spans in ("off", "nested"):
        results.update(_measure(runtime_spans, repeat))
    results.update(_measure_metrics(repeat))
    return results


def _measure_metrics(repeat: int) -> dict[str, dict[str, Any]]:
    """Measurements are made only when metrics go somewhere; what they cost when they do."""
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from benchmarks.workloads import CountingExporter
    from otel_agents import configure

    telemetry = configure(span_exporter=CountingExporter(), metric_readers=[InMemoryMetricReader()])
    instruments = telemetry.instruments

    def model_call() -> None:
        instruments.model_call(
            provider="openai",
            model="gpt-4o-mini",
            agent="writer",
            workflow="bench",
            input_tokens=20,
            output_tokens=3,
            duration_s=0.5,
            cost_usd=0.00001,
            error_type=None,
        )

    result = {
        "model-call metrics, per call, when metrics are exported": {
            "us": _time(model_call, repeat),
            "when": "each model call (none without a metrics destination)",
        }
    }
    telemetry.shutdown()
    return result


def _measure(runtime_spans: str, repeat: int) -> dict[str, dict[str, Any]]:
    from autogen_agentchat.messages import TextMessage
    from autogen_core.models import CreateResult, RequestUsage
    from opentelemetry import context as otel_context
    from opentelemetry.trace import Link

    from benchmarks.workloads import CountingExporter
    from otel_agents import configure
    from otel_agents._model_calls import ModelCall
    from otel_agents._tap import start_run

    results: dict[str, dict[str, Any]] = {}
    telemetry = configure(span_exporter=CountingExporter(), runtime_spans=runtime_spans)
    workflow = start_run(telemetry, "bench")
    assert workflow is not None
    token = otel_context.attach(workflow.context)
    link = [Link(workflow.span.get_span_context())]
    runtime_tracer = telemetry.tracer_provider.get_tracer("autogen SingleThreadedAgentRuntime")

    def runtime_span() -> None:
        with runtime_tracer.start_as_current_span("autogen process writer_1b6f.(1b6f)-A", links=link):
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
        results["AutoGen runtime span, recorded (nested)"] = {
            "us": _time(runtime_span, repeat),
            "when": "about 10 a message",
        }
    otel_context.detach(token)
    telemetry.shutdown()
    return results

"""A failing backend never hurts the run: same result, nothing raised, bounded shutdown, drops counted."""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.model_context import BufferedChatCompletionContext
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.tracing.registry import REGISTRY
from tests.support.bad_backends import failing_endpoint, refusing_endpoint, silent_endpoint
from tests.support.metrics import points
from tests.support.teams import replay, text, writers_room

TIMEOUT_S = 1.0


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", str(TIMEOUT_S))
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    yield


BACKENDS: list[tuple[str, Callable[[], AbstractContextManager[str]], str]] = [
    ("refusing-http", refusing_endpoint, "http/protobuf"),
    ("refusing-grpc", refusing_endpoint, "grpc"),
    ("silent-http", silent_endpoint, "http/protobuf"),
    ("silent-grpc", silent_endpoint, "grpc"),
    ("http-500", lambda: failing_endpoint(500), "http/protobuf"),
    ("http-503", lambda: failing_endpoint(503), "http/protobuf"),
]


@pytest.mark.parametrize(("backend", "protocol"), [(b[1], b[2]) for b in BACKENDS], ids=[b[0] for b in BACKENDS])
async def test_a_failing_backend_never_hurts_the_run(
    backend: Callable[[], AbstractContextManager[str]], protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    untraced = [type(i).__name__ for i in await drain(writers_room(max_messages=4).run_stream(task="go"))]
    reader = InMemoryMetricReader()
    with backend() as endpoint:
        telemetry = otel_agents.configure(endpoint=endpoint, protocol=protocol, store=False, metric_readers=[reader])
        made = InMemorySpanExporter()
        telemetry.sdk_tracer_provider.add_span_processor(SimpleSpanProcessor(made))  # type: ignore[attr-defined]
        items = await drain(otel_agents.tap(writers_room(max_messages=4).run_stream(task="go")))
        started = time.monotonic()
        telemetry.shutdown()
        took = time.monotonic() - started

    assert [type(i).__name__ for i in items] == untraced
    assert took <= TIMEOUT_S + 5, f"shutdown took {took:.1f} s"
    created = len(made.get_finished_spans())
    assert created > 0 and telemetry.dropped_spans == created, "every span is counted, none silently lost"
    lines = [r for r in caplog.records if "could not export spans" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]


async def test_the_dropped_count_is_a_metric(caplog: pytest.LogCaptureFixture) -> None:
    reader = InMemoryMetricReader()
    with refusing_endpoint() as endpoint:
        telemetry = otel_agents.configure(endpoint=endpoint, store=False, metric_readers=[reader])
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
        telemetry.force_flush()
        data = reader.get_metrics_data()
        telemetry.shutdown()
    dropped = {p.attributes["otel_agents.drop.reason"]: p.value for p in points(data, "otel_agents.spans.dropped")}
    # by reason since 2026-12-04 (CHANGELOG): a backend that refuses every batch fails each export
    assert sum(dropped.values()) == telemetry.dropped_spans and dropped["export_failed"] > 0


class StalledExporter(SpanExporter):
    """Never finishes an export until released: a backend that stopped answering."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(timeout=120)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


class Ended(SpanProcessor):
    """Every sampled span the provider ended, counted; weakly kept, to see how many are still alive."""

    def __init__(self) -> None:
        self.count = 0
        self.alive: weakref.WeakSet[ReadableSpan] = weakref.WeakSet()
        self.trace_ids: set[int] = set()

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            self.count += 1
            self.alive.add(span)
            self.trace_ids.add(span.context.trace_id)

    def live(self) -> int:
        gc.collect()
        return len(self.alive)


@pytest.mark.slow
async def test_a_ten_thousand_message_run_with_a_stalled_exporter_stays_within_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2048")
    stalled = StalledExporter()
    telemetry = otel_agents.configure(span_exporter=stalled)
    ended = Ended()
    telemetry.sdk_tracer_provider.add_span_processor(ended)  # type: ignore[attr-defined]
    talker = AssistantAgent(
        "talker",
        model_client=replay(*(text(f"m{i}", 3, 1) for i in range(10_000))),
        model_context=BufferedChatCompletionContext(buffer_size=4),  # keeps AutoGen's own cost linear
    )
    team = RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(10_000), name="long")
    most_alive = 0
    count = 0
    async for _item in otel_agents.tap(team.run_stream(task="go")):
        count += 1
        if count % 2_000 == 0:
            most_alive = max(most_alive, ended.live())
    try:
        assert count == 10_001  # 10,000 messages and the result
        assert ended.count > 20_000
        # the queue (2048), the batch the stalled exporter holds (512 at most), a run's open spans
        assert max(most_alive, ended.live()) <= 2048 + 512 + 16, "memory stays bounded by the queue"
        while_stalled = telemetry.dropped_spans
    finally:
        stalled.release.set()
        telemetry.shutdown()
    lost = ended.count - stalled.exported
    assert lost > 15_000 and telemetry.dropped_spans == lost, "what the full queue dropped is counted"
    assert while_stalled == lost, "exact already while the full queue drops spans"
    # (by trace: the registry's size also changes as earlier tests' idle traces are forgotten)
    assert ended.trace_ids and not any(REGISTRY.entries(t) for t in ended.trace_ids), "nothing left behind"


SECRET = "sk-secret-0d1e"


async def test_otlp_headers_never_appear_in_logs_or_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with refusing_endpoint() as endpoint:
        telemetry = otel_agents.configure(endpoint=endpoint, store=False, headers={"authorization": f"Bearer {SECRET}"})
        await drain(otel_agents.tap(writers_room(max_messages=2).run_stream(task="go")))
        telemetry.shutdown()
    assert telemetry.dropped_spans > 0
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "could not export spans" in logged and SECRET not in logged


async def test_the_cli_never_prints_headers(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    with otel_agents.configure(store=tmp_path) as telemetry:
        await drain(otel_agents.tap(writers_room(max_messages=2).run_stream(task="go")))
        telemetry.force_flush()

    with refusing_endpoint() as endpoint:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "otel_agents.cli",
                "--store",
                str(tmp_path),
                "export",
                "--all",
                "--endpoint",
                endpoint,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{SECRET}"},
            check=False,
        )
        bad = subprocess.run(
            [sys.executable, "-m", "otel_agents.cli", "--store", str(tmp_path), "demo"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "OTEL_EXPORTER_OTLP_HEADERS": f"authorization {SECRET}"},
            check=False,
        )
    assert done.returncode == 1 and SECRET not in done.stdout + done.stderr
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and "OTEL_EXPORTER_OTLP_HEADERS" in bad.stderr
    assert SECRET not in bad.stdout + bad.stderr

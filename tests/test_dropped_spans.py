"""Spans the batch queue drops, or that are still queued when shutdown gives up, are counted: exactly
while the queue is full, after a flush and from shutdown on; never more than were lost; never less
than before."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import otel_agents
from otel_agents._internal.config.settings import Settings
from otel_agents._internal.export.health import Health
from otel_agents._internal.export.pipeline import (
    BoundedBatchSpanProcessor,
    GuardedExporter,
    make_processor,
)
from otel_agents._internal.genai.content import ContentPolicy
from tests.support.waits import wait_until

pytestmark = [pytest.mark.every_python]

QUEUE = 8
BATCH = 2


class Hanging(SpanExporter):
    """Its first export hangs until released; every export after that succeeds at once."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.shut_down = threading.Event()
        self.shutdowns = 0
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(timeout=30)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.shut_down.set()


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Batches of 2, exported as soon as 2 spans are queued (the schedule delay never passes)."""
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", str(BATCH))
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    yield


def end_spans(provider: TracerProvider, count: int) -> None:
    tracer = provider.get_tracer("test")
    for i in range(count):
        tracer.start_span(f"span {i}").end()


def stall_then_end(provider: TracerProvider, exporter: Hanging, total: int) -> None:
    """A first batch hangs in the exporter; the rest of `total` spans fill the queue, which drops."""
    end_spans(provider, BATCH)
    assert exporter.entered.wait(timeout=10)
    end_spans(provider, total - BATCH)


def pipeline(
    exporter: Hanging, processor: Callable[[GuardedExporter], BoundedBatchSpanProcessor] | None = None
) -> tuple[TracerProvider, BoundedBatchSpanProcessor, Health]:
    health = Health()
    if processor is None:
        settings = Settings(service_name="test", runtime_spans="off", span_queue_size=QUEUE)
        made = make_processor(exporter, settings, health)
    else:
        made = processor(GuardedExporter(exporter, ContentPolicy(), health))
        health.processors.append(made)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(made)
    return provider, made, health


def test_a_full_queue_is_counted_exactly_while_it_drops_and_the_count_never_falls() -> None:
    exporter = Hanging()
    provider, processor, health = pipeline(exporter)
    try:
        stall_then_end(provider, exporter, 30)
        lost = 30 - BATCH - QUEUE  # the hanging batch and a full queue are kept; the rest is dropped
        assert health.dropped_spans == lost

        exporter.release.set()
        assert wait_until(lambda: exporter.exported == BATCH + QUEUE)
        assert health.dropped_spans == lost, "the queue has room again; what it dropped stays counted"
        assert processor.force_flush()
        assert health.dropped_spans == lost == 30 - exporter.exported
    finally:
        exporter.release.set()
        provider.shutdown()
    assert health.dropped_spans == lost, "nothing lost at a shutdown that delivered the queue"


def test_a_queue_with_room_gives_a_lower_bound_that_a_flush_makes_exact() -> None:
    exporter = Hanging()
    provider, processor, health = pipeline(exporter)
    try:
        stall_then_end(provider, exporter, 30)
        exporter.release.set()
        assert wait_until(lambda: exporter.exported == BATCH + QUEUE)
        lost = 30 - exporter.exported
        assert 0 < health.dropped_spans <= lost, "while spans may still be queued, never more than were lost"
        assert processor.force_flush()
        assert health.dropped_spans == lost
    finally:
        exporter.release.set()
        provider.shutdown()


def test_shutdown_gives_up_in_time_and_counts_what_was_still_queued() -> None:
    threads_before = set(threading.enumerate())
    exporter = Hanging()
    provider, processor, health = pipeline(exporter, lambda guarded: BoundedBatchSpanProcessor(guarded, 0.3, QUEUE))
    try:
        stall_then_end(provider, exporter, 30)
        started = time.monotonic()
        processor.shutdown()
        took = time.monotonic() - started
        assert took < 0.3 + 0.5, f"shutdown took {took:.2f} s"
        assert exporter.shut_down.is_set(), "the exporter is shut down at the deadline, its export still hanging"
        assert health.dropped_spans == 30 - BATCH, "dropped by the full queue, and still queued"
        end_spans(provider, 1)
        assert health.dropped_spans == 30 - BATCH + 1, "a span ended after shutdown is not delivered"
    finally:
        exporter.release.set()
    assert wait_until(lambda: exporter.exported == BATCH)
    # the SDK's own shutdown goes on once the export returns; when its threads have ended, it has
    # shut nothing down twice
    assert wait_until(lambda: set(threading.enumerate()) <= threads_before)
    assert exporter.shutdowns == 1
    assert exporter.exported == BATCH, "no span counted as dropped is delivered later"
    assert health.dropped_spans == 30 - BATCH + 1


@pytest.fixture
def no_new_threads(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to make starting a thread fail as it does in exit handlers on Python 3.12 and later
    (threads started before then, such as the SDK's batch worker, go on running)."""

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    return lambda: monkeypatch.setattr(threading.Thread, "start", refuse)


def shut_down_released_after(
    processor: BoundedBatchSpanProcessor, exporter: Hanging, seconds: float, no_new_threads: Callable[[], None]
) -> None:
    """Shut `processor` down where no thread can start, its hanging export released after `seconds`."""
    release = threading.Timer(seconds, exporter.release.set)
    release.start()
    no_new_threads()
    try:
        processor.shutdown()
    finally:
        exporter.release.set()


def test_where_no_thread_can_start_shutdown_still_delivers_the_queue(no_new_threads: Callable[[], None]) -> None:
    exporter = Hanging()
    exporter.release.set()
    provider, processor, health = pipeline(exporter, lambda guarded: BoundedBatchSpanProcessor(guarded, 5.0, QUEUE))
    end_spans(provider, BATCH - 1)  # fewer than a batch: queued until shutdown
    no_new_threads()
    processor.shutdown()
    assert exporter.exported == BATCH - 1 and exporter.shutdowns == 1
    assert health.dropped_spans == 0


def test_where_no_thread_can_start_shutdown_hands_nothing_over_after_its_deadline(
    no_new_threads: Callable[[], None],
) -> None:
    """Shutdown runs in the exiting thread: the batch under way finishes (bounded by its exporter's
    own timeout), and nothing is handed over after the deadline; what was not is counted."""
    exporter = Hanging()
    provider, processor, health = pipeline(exporter, lambda guarded: BoundedBatchSpanProcessor(guarded, 0.2, QUEUE))
    stall_then_end(provider, exporter, 30)
    shut_down_released_after(processor, exporter, 1.0, no_new_threads)  # the export returns after the deadline
    assert exporter.exported == BATCH, "only the batch under way at the deadline"
    assert health.dropped_spans == 30 - BATCH
    assert exporter.shutdowns == 1


def test_where_no_thread_can_start_a_second_shutdown_waits_for_the_first(no_new_threads: Callable[[], None]) -> None:
    """A second shutdown, from another thread, while the first runs in its caller's thread: it
    waits for the first (within the deadline) rather than closing the exporter under it."""
    exporter = Hanging()
    provider, processor, health = pipeline(exporter, lambda guarded: BoundedBatchSpanProcessor(guarded, 10.0, QUEUE))
    stall_then_end(provider, exporter, 6)
    second = threading.Timer(0.2, processor.shutdown)  # while the first waits on the hanging export
    second.start()
    shut_down_released_after(processor, exporter, 0.6, no_new_threads)
    second.join(timeout=10)
    assert exporter.exported == 6 and health.dropped_spans == 0, "every span delivered"
    assert exporter.shutdowns == 1


def test_where_no_thread_can_start_the_pipelines_shutdown_still_delivers(
    no_new_threads: Callable[[], None],
) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, store=False, set_global=False)
    provider = telemetry.sdk_tracer_provider
    assert isinstance(provider, TracerProvider)
    end_spans(provider, 1)
    no_new_threads()
    telemetry.shutdown()
    assert [s.name for s in exporter.get_finished_spans()] == ["span 0"]
    assert telemetry.dropped_spans == 0


def test_the_shutdown_warning_names_exactly_the_spans_never_delivered(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", str(QUEUE))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.1")
    exporter = Hanging()
    telemetry = otel_agents.configure(span_exporter=exporter, store=False, set_global=False)
    provider = telemetry.sdk_tracer_provider
    assert isinstance(provider, TracerProvider)
    try:
        stall_then_end(provider, exporter, 30)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING):
            telemetry.shutdown()
        took = time.monotonic() - started
    finally:
        exporter.release.set()
    assert exporter.shut_down.wait(timeout=10)
    assert wait_until(lambda: exporter.exported == BATCH)  # the hanging export returns once released
    never_delivered = 30 - exporter.exported
    assert never_delivered == 30 - BATCH and took <= 0.1 + 5, f"shutdown took {took:.1f} s"
    warnings = [r.getMessage() for r in caplog.records if "could not be delivered" in r.getMessage()]
    assert warnings == [f"otel-agents: {never_delivered} spans could not be delivered and were dropped"]
    assert telemetry.dropped_spans == never_delivered


def test_the_warning_is_exact_when_the_pipelines_shutdown_gives_up_first(caplog: pytest.LogCaptureFixture) -> None:
    """A processor whose own bound outlasts the pipeline's (several processors shut down one after
    another): what it still holds when the pipeline gives up is counted in the warning."""
    from opentelemetry.sdk.metrics import MeterProvider

    from otel_agents._internal.telemetry import Telemetry

    exporter = Hanging()
    provider, _, health = pipeline(exporter, lambda guarded: BoundedBatchSpanProcessor(guarded, 60.0, QUEUE))
    settings = Settings(service_name="test", runtime_spans="off", exporter_timeout_s=0.1)
    telemetry = Telemetry(settings, provider, MeterProvider(), health=health)
    try:
        stall_then_end(provider, exporter, 30)
        with caplog.at_level(logging.WARNING):
            telemetry.shutdown()
    finally:
        exporter.release.set()
    assert exporter.shut_down.wait(timeout=10)
    assert wait_until(lambda: exporter.exported == BATCH)
    warnings = [r.getMessage() for r in caplog.records if "could not be delivered" in r.getMessage()]
    assert warnings == [f"otel-agents: {30 - BATCH} spans could not be delivered and were dropped"]


def test_a_forked_child_counts_only_what_it_loses() -> None:
    """A child forked while its parent's queue is full and an export hangs starts from nothing: the
    parent's losses are the parent's (the SDK starts the child with an empty queue)."""
    import os

    exporter = Hanging()
    provider, _, health = pipeline(exporter)
    try:
        stall_then_end(provider, exporter, 30)
        assert health.dropped_spans == 30 - BATCH - QUEUE
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            try:
                before = health.dropped_spans
                exporter.release.set()  # the child's exporter never hangs
                end_spans(provider, 3)
                os.write(write, f"{before} {health.dropped_spans}".encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            in_child = pipe.read()
        os.waitpid(child, 0)
        assert in_child == "0 0"
        assert health.dropped_spans == 30 - BATCH - QUEUE, "the parent's count is its own"
    finally:
        exporter.release.set()
        provider.shutdown()


def test_the_sdks_queue_full_lines_are_let_through_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK logs a line for every span a full queue drops, on the logger the pipeline filters."""
    from otel_agents._internal.export import pipeline as pipeline_module

    sdk_logger = logging.getLogger("opentelemetry.sdk._shared_internal")
    monkeypatch.setattr(sdk_logger, "filters", [])  # a fresh filter: not one an earlier test used
    pipeline_module.quiet_queue_full_logs()
    exporter = Hanging()
    provider, _, health = pipeline(exporter)
    try:
        with caplog.at_level(logging.WARNING, logger=sdk_logger.name):
            stall_then_end(provider, exporter, 30)
    finally:
        exporter.release.set()
        provider.shutdown()
    full = [r for r in caplog.records if r.name == sdk_logger.name and "Queue full" in r.getMessage()]
    assert health.dropped_spans == 30 - BATCH - QUEUE > 1 and len(full) == 1


def test_configuring_again_and_again_adds_no_fork_hook_and_keeps_no_old_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a forked child resets is found through one hook registered at import, holding the
    pipelines weakly: a process that calls `configure()` many times gathers neither hooks nor
    pipelines. (The SDK's own batch processor registers a hook of its own per instance.)"""
    import gc
    import os

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_agents._internal.export import fork as pipeline

    ours: list[object] = []
    register = os.register_at_fork

    def recording(**hooks: Callable[[], object]) -> None:
        ours.extend(h for h in hooks.values() if (getattr(h, "__module__", None) or "").startswith("otel_agents"))
        register(**hooks)

    monkeypatch.setattr(os, "register_at_fork", recording)
    gc.collect()
    alive = len(getattr(pipeline, "_reset_in_forked_child", ()))  # a global provider keeps its own
    for _ in range(5):
        otel_agents.configure(span_exporter=InMemorySpanExporter(), store=False).shutdown()
    gc.collect()
    assert ours == []
    assert len(pipeline._reset_in_forked_child) <= alive + 2  # and the current pipeline's health and processor

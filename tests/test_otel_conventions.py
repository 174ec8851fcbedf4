"""Every OpenTelemetry behaviour otel-agents relies on that is not public API
(`otel_agents/_internal/export/otel_conventions.py`), pinned against the installed SDK and
exporters, run on the lowest and the newest supported versions: if one fails, the conventions
module (and what reads it) must follow."""

from __future__ import annotations

import logging
import threading

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_agents._internal.export import otel_conventions as otel
from tests.test_metrics_refusal import traces_only_grpc, traces_only_http

pytestmark = pytest.mark.lowest_versions


class _Stuck(SpanExporter):
    """Holds the first batch until released: the batch processor's queue fills behind it."""

    def __init__(self) -> None:
        self.exporting = threading.Event()
        self.release = threading.Event()

    def export(self, spans: object) -> SpanExportResult:
        self.exporting.set()
        self.release.wait(10)
        return SpanExportResult.SUCCESS


def test_the_sdks_batch_processor_logs_each_span_a_full_queue_drops_on_its_logger(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the SDK's own record, not what a pipeline's filter (one line per outage) lets through
    monkeypatch.setattr(logging.getLogger(otel.SDK_BATCH_LOGGER), "filters", [])
    exporter = _Stuck()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=2, max_export_batch_size=1))
    tracer = provider.get_tracer("pin")
    try:
        with caplog.at_level(logging.WARNING, logger=otel.SDK_BATCH_LOGGER):
            tracer.start_span("first").end()
            assert exporter.exporting.wait(10), "the first batch is being exported"
            for n in range(5):
                tracer.start_span(f"span {n}").end()
    finally:
        exporter.release.set()
        provider.shutdown()
    full = [r for r in caplog.records if r.name == otel.SDK_BATCH_LOGGER]
    assert full and all(r.getMessage().startswith(otel.SDK_QUEUE_FULL_MESSAGE) for r in full), [
        (r.name, r.getMessage()) for r in caplog.records
    ]


def metrics_data() -> MetricsData:
    reader = InMemoryMetricReader()
    MeterProvider(metric_readers=[reader]).get_meter("pin").create_counter("pinned").add(1)
    data = reader.get_metrics_data()
    assert data is not None
    return data


def test_the_http_metric_exporter_logs_a_refused_export_with_its_status_on_its_loggers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with traces_only_http(405) as backend, caplog.at_level(logging.ERROR):
        exporter = HttpMetricExporter(endpoint=f"{backend.endpoint}/v1/metrics", timeout=2)
        assert exporter.export(metrics_data()) is MetricExportResult.FAILURE
        exporter.shutdown()
    refused = [r for r in caplog.records if r.levelno >= logging.ERROR and "405" in r.getMessage()]
    assert refused and {r.name for r in refused} <= set(otel.HTTP_METRIC_EXPORTER_LOGGERS), [
        (r.name, r.getMessage()) for r in caplog.records
    ]


def test_the_grpc_exporter_logs_a_refused_export_with_the_status_code_among_its_args(
    caplog: pytest.LogCaptureFixture,
) -> None:
    grpc_logger = logging.getLogger(otel.GRPC_EXPORTER_LOGGER)
    assert any(type(f).__name__ == "DuplicateFilter" for f in grpc_logger.filters), "ours goes in front of it"
    with traces_only_grpc() as backend, caplog.at_level(logging.ERROR, logger=otel.GRPC_EXPORTER_LOGGER):
        exporter = GrpcMetricExporter(endpoint=backend.endpoint.removeprefix("http://"), insecure=True, timeout=2)
        assert exporter.export(metrics_data()) is MetricExportResult.FAILURE
        exporter.shutdown()
    refused = [
        r
        for r in caplog.records
        if r.name == otel.GRPC_EXPORTER_LOGGER
        and r.levelno >= logging.ERROR
        and isinstance(r.args, tuple)
        and any(arg is grpc.StatusCode.UNIMPLEMENTED for arg in r.args)
    ]
    assert refused, [(r.name, r.getMessage(), r.args) for r in caplog.records]


def test_the_logs_api_and_sdk_are_where_an_outcome_log_event_looks_for_them() -> None:
    """An outcome recorded after its run ended is a log record in the run's trace context, emitted
    through the Logs API (still under `_logs`) to the SDK's global LoggerProvider, when there is one."""
    import importlib

    from opentelemetry import trace
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    logs = importlib.import_module(otel.LOGS_API_MODULE)
    sdk_logs = importlib.import_module(otel.SDK_LOGS_MODULE)
    provider = sdk_logs.LoggerProvider()
    exporter = InMemoryLogRecordExporter()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    span_context = trace.SpanContext(0xABC, 0xDEF, is_remote=False, trace_flags=trace.TraceFlags(1))
    context = trace.set_span_in_context(trace.NonRecordingSpan(span_context))
    provider.get_logger("otel_agents").emit(
        logs.LogRecord(
            timestamp=1,
            context=context,
            severity_number=logs.SeverityNumber.INFO,
            attributes={"gen_ai.evaluation.name": "outcome"},
            event_name="gen_ai.evaluation.result",
        )
    )
    (record,) = [r.log_record for r in exporter.get_finished_logs()]
    assert (record.trace_id, record.span_id, record.event_name) == (0xABC, 0xDEF, "gen_ai.evaluation.result")
    assert callable(logs.get_logger_provider)

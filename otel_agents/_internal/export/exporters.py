"""Exporters for the resolved settings: OTLP (gRPC or HTTP/protobuf), console, the embedded store.

Exporter packages are imported here, when `configure()` needs them, never at `import otel_agents`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from otel_agents._internal.config.settings import ConfigError, Settings, Signal

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader
    from opentelemetry.sdk.trace.export import SpanExporter

_GRPC_MISSING = (
    "OTLP over gRPC needs the grpc exporter: pip install 'otel-agents[grpc]' "
    "(or set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)"
)


def span_exporters(settings: Settings) -> list[SpanExporter]:
    exporters: list[SpanExporter] = []
    for name in settings.traces_exporters:
        if name == "otlp":
            exporters.append(otlp_span_exporter(settings.traces))
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter())
        elif name == "store":
            from otel_agents._internal.export.store.writer import StoreSpanExporter

            assert settings.store_dir is not None
            _check_store(settings)
            exporters.append(StoreSpanExporter(settings.store_dir, max_bytes=settings.store_max_bytes))
    return exporters


def _check_store(settings: Settings) -> None:
    """A store asked for by name that cannot be written is a bad setting; the default store's
    problem is told when a write fails (the app runs on, its spans dropped and counted)."""
    from otel_agents._internal.export.store_path import unwritable

    assert settings.store_dir is not None
    problem = unwritable(settings.store_dir)
    if problem is not None and settings.store_named_by is not None:
        raise ConfigError(f"{settings.store_named_by}={str(settings.store_dir)!r}: {problem}")


def otlp_span_exporter(signal: Signal) -> SpanExporter:
    """The OTLP span exporter for the signal's protocol."""
    headers = dict(signal.headers) if signal.headers is not None else None
    transport = "grpc" if signal.protocol == "grpc" else "http"
    try:
        module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{transport}.trace_exporter")
    except ImportError:
        if transport == "grpc":
            raise ConfigError(_GRPC_MISSING) from None
        raise
    exporter: SpanExporter = module.OTLPSpanExporter(endpoint=signal.endpoint, headers=headers)
    return exporter


def otlp_metric_exporter(signal: Signal) -> MetricExporter:
    """The OTLP metric exporter for the signal's protocol; it stops at the first refusal of metrics
    (HTTP 404 or 405, gRPC UNIMPLEMENTED: a traces-only backend) with one warning, see `refusal`."""
    from otel_agents._internal.export import refusal

    if signal.protocol == "grpc":
        try:
            return refusal.grpc_metric_exporter(signal.endpoint, signal.headers)
        except ImportError:
            raise ConfigError(_GRPC_MISSING) from None
    return refusal.http_metric_exporter(signal.endpoint, signal.headers)


def metric_readers(settings: Settings) -> list[MetricReader]:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

    readers: list[MetricReader] = []
    for name in settings.metrics_exporters:
        if name == "otlp":
            readers.append(PeriodicExportingMetricReader(otlp_metric_exporter(settings.metrics)))
        elif name == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    return readers

"""Exporters for the resolved settings: OTLP (gRPC or HTTP/protobuf), console, the embedded store.

Exporter packages are imported here, when `configure()` needs them, never at `import otel_agents`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._config import ConfigError, Settings, Signal

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
            from ._store import StoreSpanExporter

            assert settings.store_dir is not None
            exporters.append(StoreSpanExporter(settings.store_dir, max_bytes=settings.store_max_bytes))
    return exporters


def otlp_span_exporter(signal: Signal) -> SpanExporter:
    headers = dict(signal.headers) if signal.headers is not None else None
    if signal.protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcSpanExporter,
            )
        except ImportError:
            raise ConfigError(_GRPC_MISSING) from None
        return GrpcSpanExporter(endpoint=signal.endpoint, headers=headers)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    return HttpSpanExporter(endpoint=signal.endpoint, headers=headers)


def _otlp_metric_exporter(signal: Signal) -> MetricExporter:
    headers = dict(signal.headers) if signal.headers is not None else None
    if signal.protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter as GrpcExporter,
            )
        except ImportError:
            raise ConfigError(_GRPC_MISSING) from None
        return GrpcExporter(endpoint=signal.endpoint, headers=headers)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpExporter

    return HttpExporter(endpoint=signal.endpoint, headers=headers)


def metric_readers(settings: Settings) -> list[MetricReader]:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

    readers: list[MetricReader] = []
    for name in settings.metrics_exporters:
        if name == "otlp":
            readers.append(PeriodicExportingMetricReader(_otlp_metric_exporter(settings.metrics)))
        elif name == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    return readers

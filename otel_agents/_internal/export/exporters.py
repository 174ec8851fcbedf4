"""Exporters for the resolved settings: OTLP (gRPC or HTTP/protobuf), console, the embedded store.

Exporter packages are imported here, when `configure()` needs them, never at `import otel_agents`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otel_agents._internal.config.settings import ConfigError, Settings, Signal

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
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
            from otel_agents._internal.export.store import StoreSpanExporter

            assert settings.store_dir is not None
            exporters.append(StoreSpanExporter(settings.store_dir, max_bytes=settings.store_max_bytes))
    return exporters


def _otlp_exporter(signal: Signal, kind: str) -> Any:
    """The OTLP exporter class for `kind` ("trace" or "metric") and the signal's protocol."""
    headers = dict(signal.headers) if signal.headers is not None else None
    transport = "grpc" if signal.protocol == "grpc" else "http"
    module_name = f"opentelemetry.exporter.otlp.proto.{transport}.{kind}_exporter"
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        if transport == "grpc":
            raise ConfigError(_GRPC_MISSING) from None
        raise
    exporter_class = module.OTLPSpanExporter if kind == "trace" else module.OTLPMetricExporter
    return exporter_class(endpoint=signal.endpoint, headers=headers)


def otlp_span_exporter(signal: Signal) -> SpanExporter:
    exporter: SpanExporter = _otlp_exporter(signal, "trace")
    return exporter


def metric_readers(settings: Settings) -> list[MetricReader]:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

    readers: list[MetricReader] = []
    for name in settings.metrics_exporters:
        if name == "otlp":
            readers.append(PeriodicExportingMetricReader(_otlp_exporter(settings.metrics, "metric")))
        elif name == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    return readers

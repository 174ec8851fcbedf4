"""OTLP metric exporters that stop at a backend which does not take metrics.

A traces-only backend (a bare Jaeger, Phoenix) answers a metrics export with HTTP 404 or 405, or gRPC
UNIMPLEMENTED, and the OTLP exporter logs an error for every export, forever. The exporters here
notice the first refusal, say in one warning where metrics can go instead, and from then on send
nothing: an export returns success without a request, so nothing else is logged either. Any other
failure (5xx, a refused connection, a timeout) may be an outage that ends: the exporter handles it as
before. Traces are not touched.

Each exporter is the OTLP exporter itself, subclassed only to put `export` behind its `Refusal`; the
exporter packages are imported when one is built, never at `import otel_agents`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from otel_agents._internal.config import params
from otel_agents._internal.export import otel_conventions as otel

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData

logger = logging.getLogger(__name__)

REFUSING_HTTP_STATUSES: Final = frozenset({404, 405})
"""What a server that has no OTLP metrics route answers: not found, or method not allowed."""

ADVICE: Final = (
    "otel-agents: %s does not accept metrics (%s); metrics are no longer sent there. Send them elsewhere "
    "with OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, or switch them off with OTEL_METRICS_EXPORTER=none."
)

_HTTP_LOGGERS: Final = otel.HTTP_METRIC_EXPORTER_LOGGERS
_GRPC_LOGGERS: Final = (otel.GRPC_EXPORTER_LOGGER,)

# The exporter credential providers bring a `requests.Session` of their own: with one configured we
# pass no session (nor when the exporter takes none, or ignores it), so a refusal over HTTP goes
# unnoticed and the exporter logs every failed export as it does without otel-agents.
_HTTP_CREDENTIAL_PROVIDERS: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_METRICS_CREDENTIAL_PROVIDER",
)


class _Exporting(threading.local):
    refusal: Refusal | None = None


_exporting = _Exporting()
"""The refusal whose export is under way in this thread: records its exporter logs meanwhile are its."""


class Refusal:
    """One exporter's endpoint: whether it refused metrics, and the one warning that says so."""

    def __init__(self, endpoint: str | None) -> None:
        self.endpoint = endpoint or "the default OTLP endpoint"
        self.refused: str | None = None
        """How the endpoint refused ("HTTP 405", "gRPC UNIMPLEMENTED"); None while it has not."""
        self.seen: str | None = None
        """A refusal noticed during the export under way."""

    def export(self, send: Callable[[], MetricExportResult]) -> MetricExportResult:
        """`send()` the batch unless the endpoint refused metrics before; after the first refusal, warn once."""
        from opentelemetry.sdk.metrics.export import MetricExportResult

        if self.refused is not None:
            return MetricExportResult.SUCCESS
        self.seen = None
        _exporting.refusal = self
        try:
            result = send()
        finally:
            _exporting.refusal = None
        if self.seen is not None and result is not MetricExportResult.SUCCESS:
            self.refused = self.seen
            logger.warning(ADVICE, self.endpoint, self.refused)
        return result

    def keep(self, record: logging.LogRecord) -> bool:
        """Whether the exporter's `record`, logged during one of our exports, should be logged."""
        return True


class HttpRefusal(Refusal):
    """Noticed by a response hook on the exporter's `requests.Session` (requests' public hooks API)."""

    def on_response(self, response: Any, *args: object, **kwargs: object) -> None:
        status = getattr(response, "status_code", None)
        if status in REFUSING_HTTP_STATUSES:
            self.seen = f"HTTP {status}"

    def keep(self, record: logging.LogRecord) -> bool:
        # Only the exporter's error for the refused request ("Failed to export metrics batch code: 405,
        # ..."), which our warning replaces; if its wording changes, it is simply logged as before.
        if self.seen is None or record.levelno < logging.ERROR:
            return True
        return self.seen.removeprefix("HTTP ") not in record.getMessage()


class GrpcRefusal(Refusal):
    """Noticed by the gRPC exporter's error record.

    The gRPC exporter makes its own channel and returns only FAILURE: the status code of the call
    is nowhere in its public API. What it does expose is the error it logs, with the `grpc.StatusCode`
    among the record's arguments. So a filter on that logger recognises UNIMPLEMENTED, logged during
    one of our exports in this thread, and drops that one record. If the record changes shape, the
    refusal goes unnoticed and the exporter behaves as it does without otel-agents.
    """

    def __init__(self, endpoint: str | None, unimplemented: object) -> None:
        super().__init__(endpoint)
        self.unimplemented = unimplemented

    def keep(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not isinstance(record.args, tuple):
            return True
        if not any(arg is self.unimplemented for arg in record.args):
            return True
        self.seen = "gRPC UNIMPLEMENTED"
        return False


class _ExporterRecords(logging.Filter):
    """On an exporter's logger: a record logged during one of our exports is its refusal's to keep or drop."""

    def filter(self, record: logging.LogRecord) -> bool:
        refusal = _exporting.refusal
        return True if refusal is None else refusal.keep(record)


def _watch(logger_names: tuple[str, ...]) -> None:
    for name in logger_names:
        exporter_logger = logging.getLogger(name)
        if not any(isinstance(f, _ExporterRecords) for f in exporter_logger.filters):
            # First, before the gRPC module's DuplicateFilter, which would hide the record from us
            # when the same error (a trace export's, say) was logged just before.
            exporter_logger.filters.insert(0, _ExporterRecords())


def http_metric_exporter(endpoint: str | None, headers: Mapping[str, str] | None) -> MetricExporter:
    import requests
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    refusal = HttpRefusal(endpoint)

    class RefusalAwareMetricExporter(OTLPMetricExporter):
        def export(
            self, metrics_data: MetricsData, timeout_millis: float | None = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            return refusal.export(partial(super().export, metrics_data, timeout_millis, **kwargs))

    if any(params.environment(_HTTP_CREDENTIAL_PROVIDERS).values()):
        return RefusalAwareMetricExporter(endpoint=endpoint, headers=headers)
    session = requests.Session()
    session.hooks["response"].append(refusal.on_response)
    _watch(_HTTP_LOGGERS)
    try:
        return RefusalAwareMetricExporter(endpoint=endpoint, headers=headers, session=session)
    except TypeError:  # an exporter that takes no `session=` any more: it exports as it would without us
        session.close()
        return RefusalAwareMetricExporter(endpoint=endpoint, headers=headers)


def grpc_metric_exporter(endpoint: str | None, headers: Mapping[str, str] | None) -> MetricExporter:
    import grpc  # type: ignore[import-untyped]
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

    refusal = GrpcRefusal(endpoint, grpc.StatusCode.UNIMPLEMENTED)

    class RefusalAwareMetricExporter(OTLPMetricExporter):
        def export(
            self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            return refusal.export(partial(super().export, metrics_data, timeout_millis, **kwargs))

    _watch(_GRPC_LOGGERS)
    return RefusalAwareMetricExporter(endpoint=endpoint, headers=dict(headers) if headers is not None else None)

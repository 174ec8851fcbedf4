"""Every OpenTelemetry SDK and exporter behaviour otel-agents relies on that is not public API:
logger names and log records. Each is pinned by `tests/test_otel_conventions.py` on the lowest and
the newest supported versions; where one changes, otel-agents logs as the SDK does, and loses
nothing else (`autogen/conventions.py` holds AutoGen's)."""

from __future__ import annotations

from typing import Final

SDK_BATCH_LOGGER: Final = "opentelemetry.sdk._shared_internal"
"""Private module: the logger of the SDK's batch processor (`BatchProcessor`), which logs a line for
every span its full queue drops."""
SDK_QUEUE_FULL_MESSAGE: Final = "Queue full"
"""The start of that line ("Queue full, dropping ..."): we let its first one through (each dropped
span is counted in `otel_agents.spans.dropped`)."""

HTTP_METRIC_EXPORTER_LOGGERS: Final = (
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.common.http",
)
"""Where the OTLP/HTTP metric exporter logs a failed export ("Failed to export metrics batch code:
405, ..."): its own module's logger, and its HTTP client's."""
LOGS_API_MODULE: Final = "opentelemetry._logs"
"""The Logs API (its module name begins with an underscore while logs are in development):
`get_logger_provider()`, `LogRecord(..., context=, event_name=)`, `SeverityNumber`. An outcome
recorded after its run ended is a log event in the run's trace context."""
SDK_LOGS_MODULE: Final = "opentelemetry.sdk._logs"
"""The SDK's logs (`LoggerProvider`): a global one of these is the application's logs pipeline
(the distro's, with `OTEL_LOGS_EXPORTER`); otel-agents emits nothing where there is none."""
GRPC_EXPORTER_LOGGER: Final = "opentelemetry.exporter.otlp.proto.grpc.exporter"
"""The logger every OTLP/gRPC exporter shares. A failed export is logged at ERROR with the call's
`grpc.StatusCode` among the record's `args` (the status is in no public API of the exporter); a
`DuplicateFilter` on that logger hides a record equal to the one before, so our filter goes in
front of it (index 0 of `filters`)."""

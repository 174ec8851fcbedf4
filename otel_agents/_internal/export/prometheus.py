"""A Prometheus scrape endpoint for the metrics (127.0.0.1:9464 unless told otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otel_agents._internal.config.settings import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader

_MISSING = "the Prometheus endpoint needs: pip install 'otel-agents[prometheus]'"


class PrometheusEndpoint:
    """A metric reader with a registry of its own, served over HTTP until `close()`."""

    def __init__(self, host: str, port: int) -> None:
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError:
            raise ConfigError(_MISSING) from None
        self.host, self.port = host, port
        self.registry = CollectorRegistry(auto_describe=True)
        self.reader: MetricReader = PrometheusMetricReader(registry=self.registry)
        try:
            served = start_http_server(port, addr=host, registry=self.registry)
        except OSError as error:
            raise ConfigError(
                f"prometheus=({host!r}, {port}): cannot listen there: {error.strerror or error}"
            ) from None
        self._server: Any = served[0] if isinstance(served, tuple) else None
        if self._server is not None and port == 0:
            self.port = int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def is_scraped(reader: MetricReader) -> bool:
    """Whether `reader` is a Prometheus reader, read by scrapes: flushing it would only queue a stale
    copy of every series for the next scrape to show beside the current one."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
    except ImportError:
        return False
    return isinstance(reader, PrometheusMetricReader)

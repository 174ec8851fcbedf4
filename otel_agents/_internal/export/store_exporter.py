"""The embedded store as a traces exporter by name: `OTEL_TRACES_EXPORTER=otel_agents_store`
(the `opentelemetry_traces_exporter` entry point), so that an app run by `opentelemetry-instrument`
with no other change writes the store that `otel-agents runs` reads, quietly:

    OTEL_TRACES_EXPORTER=otel_agents_store OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none \\
        opentelemetry-instrument python app.py

The distro puts it behind its own batch processor; in it, the store sits behind the same content
guard as `configure()`'s (user content AutoGen's own spans carry is removed where capture is off),
and counts what it delivered and what failed (`span_accounts()`).
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_agents._internal.config.params import environment
from otel_agents._internal.config.settings import resolve_settings, store_dir
from otel_agents._internal.export.fork import reset_in_forked_child
from otel_agents._internal.export.health import Health, SpanAccount
from otel_agents._internal.export.pipeline import GuardedExporter


class StoreExporter(SpanExporter):
    """The embedded store (`OTEL_AGENTS_STORE`, else the default directory, bounded by
    `OTEL_AGENTS_STORE_MAX_MB`) behind otel-agents' content guard, for a pipeline that is not
    otel-agents' (the distro's). Made with no arguments, as the distro makes exporters."""

    def __init__(self) -> None:
        from otel_agents._internal.export.store.writer import StoreSpanExporter

        env = environment()
        settings = resolve_settings(environ=env)
        directory = store_dir(None, env)  # the one `otel-agents runs` reads
        self.health = Health()
        self._guarded = GuardedExporter(
            StoreSpanExporter(directory, max_bytes=settings.store_max_bytes), settings.content, self.health
        )
        self._exported = 0
        reset_in_forked_child(self)  # the distro's processor does not reset what is ours

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._exported += len(spans)
        return self._guarded.export(spans)

    def reset_after_fork(self) -> None:
        """In a forked child: its guard's locks and counts, and its own count, start afresh."""
        self._guarded.reset_after_fork()
        self._exported = 0

    def span_accounts(self) -> list[SpanAccount]:
        """The spans handed to this exporter: delivered, or failed (the distro's queue in front of
        it drops what it drops itself, and says so in its own log)."""
        guarded = self._guarded
        return [
            SpanAccount(
                destination=guarded.destination,
                ended=self._exported,
                delivered=guarded.delivered_spans,
                export_failed=guarded.failed_spans,
                not_exported=self._exported - guarded.handed_spans,
                sampled_out=0,
            )
        ]

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._guarded.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self._guarded.close()
        self._guarded.shutdown()

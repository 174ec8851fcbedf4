"""The span pipeline: what leaves the process, and that a failing backend never hurts the run.

Each exporter sits behind a `GuardedExporter` and a `BoundedBatchSpanProcessor`:

- the guard removes user content that AutoGen's own spans carry when capture is off (exception
  messages and stack traces in events, status descriptions, the runtime's `message` attribute);
- it counts the spans of every failed export and says so in one log line per outage;
- the processor counts the spans it was given, so that spans its bounded queue dropped, or that
  were still queued when shutdown gave up, are counted too;
- shutdown waits for the exporter's timeout plus a few seconds at most, never longer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from otel_agents._internal.config.settings import Settings
from otel_agents._internal.genai.content import ContentPolicy

logger = logging.getLogger(__name__)

_CONTENT_ATTRIBUTES: Final = frozenset(
    {
        "message",
        "otel_agents.message.content",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "exception.message",
        "exception.stacktrace",
    }
)
_EXCEPTION_TEXT: Final = ("exception.message", "exception.stacktrace")
SHUTDOWN_GRACE_S: Final = 3.0
"""Added to the exporter timeout: how long shutdown may take at most (the contract says + 5 s)."""


@dataclass
class Health:
    """What the pipeline lost: spans of failed exports, and spans its queues dropped."""

    failed_export_spans: int = 0
    processors: list[BoundedBatchSpanProcessor] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def dropped_spans(self) -> int:
        return self.failed_export_spans + sum(p.dropped_before_export for p in self.processors)

    def add_failed(self, count: int) -> None:
        with self._lock:
            self.failed_export_spans += count


def scrub(span: ReadableSpan, policy: ContentPolicy) -> ReadableSpan:
    """The span without user content the policy does not let out (the same object if it has none)."""
    attributes = span.attributes or {}
    if policy.enabled:
        if policy.redact is None:
            return span
        return _redacted(span, policy)
    has_content = not _CONTENT_ATTRIBUTES.isdisjoint(attributes)
    events = span.events
    has_exception_text = bool(events) and any(
        key in _EXCEPTION_TEXT for event in events for key in (event.attributes or {})
    )
    if not has_content and not has_exception_text and not span.status.description:
        return span
    return _copy(
        span,
        attributes={k: v for k, v in attributes.items() if k not in _CONTENT_ATTRIBUTES},
        events=[
            Event(e.name, {k: v for k, v in (e.attributes or {}).items() if k not in _CONTENT_ATTRIBUTES}, e.timestamp)
            for e in span.events
        ],
        status=Status(span.status.status_code, None),
    )


def _redacted(span: ReadableSpan, policy: ContentPolicy) -> ReadableSpan:
    """With capture on and a redact function: exception texts and status descriptions redacted too."""
    exception_texts = any(key in _EXCEPTION_TEXT for event in span.events for key in (event.attributes or {}))
    if not exception_texts and not span.status.description:
        return span
    events = [
        Event(
            e.name,
            {
                k: policy.text(v) if k in _EXCEPTION_TEXT and isinstance(v, str) else v
                for k, v in (e.attributes or {}).items()
            },
            e.timestamp,
        )
        for e in span.events
    ]
    description = span.status.description
    status = Status(span.status.status_code, policy.text(description) if description else None)
    return _copy(span, attributes=span.attributes, events=events, status=status)


def _copy(span: ReadableSpan, *, attributes: Any, events: Sequence[Event], status: Status) -> ReadableSpan:
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class GuardedExporter(SpanExporter):
    """Scrubs content, never raises, counts what it could not deliver, logs one line per outage."""

    def __init__(
        self, exporter: SpanExporter, policy: ContentPolicy, health: Health, endpoint: str | None = None
    ) -> None:
        self.exporter = exporter
        self._policy = policy
        self._health = health
        self._failing = False
        self.handed_spans = 0
        self.destination = f"{type(exporter).__name__} {endpoint}" if endpoint else type(exporter).__name__
        """What the outage warning names: the exporter, and the endpoint it was configured with."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.handed_spans += len(spans)
        try:
            result = self.exporter.export([scrub(span, self._policy) for span in spans])
            reason = "the export failed"
        except Exception as error:
            result, reason = SpanExportResult.FAILURE, type(error).__name__
        if result is SpanExportResult.SUCCESS:
            self._failing = False
            return result
        self._health.add_failed(len(spans))
        if not self._failing:
            self._failing = True
            logger.warning(
                "otel-agents: could not export spans to %s (%s); dropping them until it recovers "
                "(%d dropped so far, counted in otel_agents.spans.dropped)",
                self.destination,
                reason,
                self._health.dropped_spans,
            )
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        try:
            self.exporter.shutdown()
        except Exception:
            logger.debug("otel-agents: an exporter failed to shut down", exc_info=True)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        flush = getattr(self.exporter, "force_flush", None)
        try:
            return bool(flush(timeout_millis)) if flush is not None else True
        except Exception:
            return False


class BoundedBatchSpanProcessor(BatchSpanProcessor):
    """A batch processor that counts what it drops and whose shutdown is bounded in time."""

    def __init__(self, exporter: GuardedExporter, shutdown_within_s: float) -> None:
        super().__init__(exporter)
        self.guarded = exporter
        self._shutdown_within_s = shutdown_within_s
        self.ended_spans = 0
        self._shut_down = False

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            self.ended_spans += 1
        super().on_end(span)

    @property
    def queued_spans(self) -> int:
        queue = getattr(getattr(self, "_batch_processor", None), "_queue", None)
        return len(queue) if queue is not None else 0

    @property
    def dropped_before_export(self) -> int:
        """Spans ended but never handed to the exporter: dropped by a full queue or at shutdown."""
        queued = 0 if self._shut_down else self.queued_spans
        return max(0, self.ended_spans - self.guarded.handed_spans - queued)

    def shutdown(self) -> None:
        self._shut_down = True
        batch: Any = getattr(self, "_batch_processor", None)
        bound_ms = int(self._shutdown_within_s * 1000)
        if batch is not None:
            batch.shutdown(timeout_millis=bound_ms)
        else:  # pragma: no cover - an SDK without the shared batch processor
            super().shutdown()  # type: ignore[no-untyped-call]


class _QueueFullOnce(logging.Filter):
    """The SDK logs "Queue full" for every span it drops; one line per outage is enough."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if "Queue full" not in str(record.msg):
            return True
        if self.seen:
            return False
        self.seen = True
        return True


def quiet_queue_full_logs() -> None:
    sdk_logger = logging.getLogger("opentelemetry.sdk._shared_internal")
    if not any(isinstance(f, _QueueFullOnce) for f in sdk_logger.filters):
        sdk_logger.addFilter(_QueueFullOnce())


def shutdown_within(actions: Sequence[Any], seconds: float) -> None:
    """Run shutdown actions side by side; return after `seconds` at most, whatever they do."""
    threads = [threading.Thread(target=_quietly, args=(action,), daemon=True) for action in actions]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _quietly(action: Any) -> None:
    try:
        action()
    except Exception:
        logger.warning("otel-agents: shutting down part of the pipeline failed", exc_info=True)


def make_processor(
    exporter: SpanExporter, settings: Settings, health: Health, endpoint: str | None = None
) -> BoundedBatchSpanProcessor:
    """`exporter` behind the content guard and a batch processor whose shutdown takes at most the
    exporter timeout plus `SHUTDOWN_GRACE_S`."""
    guarded = GuardedExporter(exporter, settings.content, health, endpoint)
    processor = BoundedBatchSpanProcessor(guarded, settings.exporter_timeout_s + SHUTDOWN_GRACE_S)
    health.processors.append(processor)
    return processor

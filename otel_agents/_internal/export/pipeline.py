"""The span pipeline: what leaves the process, and that a failing backend never hurts the run.

Each exporter sits behind a `GuardedExporter` and a `BoundedBatchSpanProcessor`:

- the guard removes user content that AutoGen's own spans carry when capture is off (exception
  messages and stack traces in events, status descriptions, the runtime's `message` attribute:
  `export/scrub.py`);
- it counts the spans of every failed export (in the pipeline's `Health`, `export/health.py`) and
  says so in one log line per outage;
- the processor counts the spans it was given, so that spans its bounded queue dropped, or that
  were still queued when shutdown gave up, are counted too (from public API only: the SDK's queue
  is not public, so while running that count is a lower bound, exact once the queue is full);
- shutdown waits for the exporter's timeout plus a few seconds at most, never longer. At
  interpreter exit on Python 3.12 and later no thread can be started: shutdown then runs in the
  exiting thread, and batches not yet handed to the exporter by that time are refused (dropped and
  counted); a batch under way then still takes up to its exporter's own timeout.

A forked child starts its counts from zero (`export/fork.py`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_agents._internal import process_state
from otel_agents._internal.config.params import SDK_MAX_EXPORT_BATCH_SIZE, SPAN_QUEUE_SIZE
from otel_agents._internal.config.settings import Settings
from otel_agents._internal.export import otel_conventions as otel
from otel_agents._internal.export.fork import reset_in_forked_child
from otel_agents._internal.export.health import Health
from otel_agents._internal.export.scrub import scrub_span
from otel_agents._internal.genai.content import ContentPolicy

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S: Final = 3.0
"""Added to the exporter timeout: how long shutdown may take at most (the contract says + 5 s)."""


class GuardedExporter(SpanExporter):
    """Scrubs content, never raises, counts what it could not deliver, logs one line per outage."""

    def __init__(
        self, exporter: SpanExporter, policy: ContentPolicy, health: Health, endpoint: str | None = None
    ) -> None:
        self.exporter = exporter
        self._capturing = policy if policy.enabled else None
        """The policy when it lets content out, else None: asked once (a frozen policy), not a span."""
        self._health = health
        self._failing = False
        self._warned = False
        self._lock = threading.Lock()
        self._one_at_a_time = threading.Lock()
        """An exporter is given one batch at a time, as the SDK's batch processor gives them."""
        self._closed = False
        self._closes_at: float | None = None
        self._shut_down = False
        self._exporting = 0
        self.handed_spans = 0
        """Spans of every batch given to the exporter (none after `close()`)."""
        self.delivered_spans = 0
        """Spans of every batch the exporter delivered."""
        self.failed_spans = 0
        """Spans of every batch the exporter failed or refused."""
        self.on_export: Callable[[int], None] | None = None
        """Called with `handed_spans` as each batch is handed over, before it is exported."""
        self.destination = f"{type(exporter).__name__} {endpoint}" if endpoint else type(exporter).__name__
        """What the outage warning names: the exporter, and the endpoint it was configured with."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            if self._closes_at is not None and time.monotonic() >= self._closes_at:
                self._closed = True
            if self._closed:  # its processor counts these spans as dropped (not handed)
                return SpanExportResult.FAILURE
            self.handed_spans += len(spans)
            self._exporting += 1
            handed = self.handed_spans
        try:
            if self.on_export is not None:
                self.on_export(handed)
            return self._export(spans)
        finally:
            with self._lock:
                self._exporting -= 1

    @property
    def outage_warned(self) -> bool:
        """Whether the outage under way (the last export failed) has been warned about."""
        return self._warned

    def handed_while_exporting(self) -> int | None:
        """`handed_spans` while a batch is being exported, else None."""
        with self._lock:
            return self.handed_spans if self._exporting else None

    def _export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            with self._one_at_a_time:  # the batch processor's thread, or a kept run's whole batch
                capturing = self._capturing
                result = self.exporter.export([scrub_span(span, capturing) for span in spans])
            reason = _failure_of(self.exporter) or "the export failed"
        except Exception as error:
            result, reason = SpanExportResult.FAILURE, type(error).__name__
        if result is SpanExportResult.SUCCESS:
            self._failing = self._warned = False
            with self._lock:
                self.delivered_spans += len(spans)
            return result
        with self._lock:
            self.failed_spans += len(spans)
        self._health.add_failed(len(spans))
        if not self._failing:
            self._failing = True
            if self._health.quiet:  # the exit's shutdown cut it short: the exit's own line tells
                return SpanExportResult.FAILURE
            self._warned = True
            logger.warning(
                "otel-agents: could not export spans to %s (%s); dropping them until it recovers "
                "(%d dropped so far, counted in otel_agents.spans.dropped)",
                self.destination,
                reason,
                self._health.dropped_spans,
            )
        return SpanExportResult.FAILURE

    def close(self) -> None:
        """Refuse every later batch, leaving `handed_spans` as it is now."""
        with self._lock:
            self._closed = True

    def close_at(self, deadline: float) -> None:
        """Refuse every batch handed over from `deadline` (`time.monotonic()`) on."""
        with self._lock:
            self._closes_at = deadline

    def shutdown(self) -> None:
        """Shut the exporter down, once (the SDK's shutdown and ours may both ask; an OTLP exporter
        stops retrying an export that is still under way)."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        try:
            self.exporter.shutdown()
        except Exception:
            logger.debug("otel-agents: an exporter failed to shut down", exc_info=True)

    def reset_after_fork(self) -> None:
        """In a forked child: nothing handed or under way yet (the parent exports its own queue)."""
        self._lock = threading.Lock()
        self._one_at_a_time = threading.Lock()
        self._exporting = 0
        self.handed_spans = 0
        self.delivered_spans = 0
        self.failed_spans = 0

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        flush = getattr(self.exporter, "force_flush", None)
        try:
            return bool(flush(timeout_millis)) if flush is not None else True
        except Exception:
            return False


class BoundedBatchSpanProcessor(SpanProcessor):
    """The SDK's `BatchSpanProcessor`, counting the spans it drops, with a shutdown bounded in time.

    Its queue holds `max_queue_size` spans and, when full, drops the oldest. The queue itself is not
    public, so the spans dropped before export (`dropped_before_export`) are counted from what this
    processor sees: the spans ended here (`ended_spans`) and those the exporter was handed.

    - While running: `ended - handed - max_queue_size`, taken while the exporter holds a batch (the
      SDK then takes no span off its queue, so at most `max_queue_size` of the spans not handed are
      queued). Exact while the queue is full (a stalled backend); a lower bound otherwise.
    - After a successful `force_flush()`: every span ended before it and not handed, exact when no
      span ends during the flush.
    - From shutdown on: every span not handed, exactly: spans still queued when shutdown gave up, and
      spans ended after it. The exporter takes no batch after that, so none of them arrives later,
      and it is shut down at the deadline (an OTLP exporter stops retrying). A batch still being
      exported then counts as handed: if that export fails afterwards, its spans are counted as
      failed after the shutdown warning was written.

    The count never decreases (it feeds a counter). A forked child starts counting from zero, as
    the SDK's processor starts it with an empty queue.
    """

    def __init__(
        self,
        exporter: GuardedExporter,
        shutdown_within_s: float,
        max_queue_size: int = SPAN_QUEUE_SIZE,
        max_export_batch_size: int | None = None,
    ) -> None:
        self.guarded = exporter
        self.max_queue_size = max_queue_size
        self.max_export_batch_size = max_export_batch_size or SDK_MAX_EXPORT_BATCH_SIZE
        """The most spans the queue exports at once, and `export_whole` is given at once when kept
        traces are joined (None given: the SDK reads OTEL_BSP_MAX_EXPORT_BATCH_SIZE for the queue)."""
        self._batch = BatchSpanProcessor(
            exporter, max_queue_size=max_queue_size, max_export_batch_size=max_export_batch_size
        )
        self._shutdown_within_s = shutdown_within_s
        # re-entrant: a run the collector ends (a dropped stream) inside an allocation made under it
        # ends its spans here, in the same thread
        self._lock = threading.RLock()
        self._ended = 0
        self._awaiting_whole = 0
        """Spans of kept runs announced and not handed over yet (`awaiting_whole`)."""
        self._dropped = 0
        self._closed = False
        self._stopping: tuple[threading.Thread | None, float] | None = None
        self._stopped_here = threading.Event()
        """Set when a shutdown run in the calling thread (no thread could start) is over."""
        exporter.on_export = self._exporting
        reset_in_forked_child(self)

    def limit_shutdown(self, seconds: float) -> None:
        """Shut down within `seconds` at most, if that is sooner (at exit: the exit timeout)."""
        with self._lock:
            self._shutdown_within_s = min(self._shutdown_within_s, seconds)

    def reset_after_fork(self) -> None:
        self._lock = threading.RLock()
        self._ended = self._dropped = self._awaiting_whole = 0
        self._stopping = None
        self.guarded.reset_after_fork()

    @property
    def ended_spans(self) -> int:
        """Sampled spans ended through this processor (a kept run's announced batch included),
        shutdown or not."""
        return self._ended + self._awaiting_whole

    @property
    def shutdown_within_s(self) -> float:
        return self._shutdown_within_s

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._batch.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self._batch.on_end(span)
        context = span.context  # a property: read once, for every span ended
        if context is not None and context.trace_flags.sampled:
            with self._lock:  # counted once queued: the running count stays a lower bound
                self._ended += 1

    def awaiting_whole(self, count: int) -> None:
        """`count` spans of a kept run will come in one batch (`export_whole`): they count as ended
        here from now on, and as dropped if shutdown comes before they are handed over."""
        with self._lock:
            self._awaiting_whole += count

    def export_whole(self, spans: Sequence[ReadableSpan]) -> None:
        """Export `spans` (announced by `awaiting_whole`) as one batch, now, in the caller's thread:
        kept runs, whole, which the queue must not cut (handed, delivered or failed)."""
        if not spans:
            return
        try:
            self.guarded.export(spans)
        finally:  # counted as ended once handed (or refused): a flush's count of the dropped never overshoots
            with self._lock:
                self._awaiting_whole -= len(spans)
                self._ended += len(spans)

    @property
    def dropped_before_export(self) -> int:
        """Spans ended but never handed to the exporter: dropped by a full queue, or at shutdown."""
        ended = self._ended  # before `handed`: a span ended later could be one the queue had room for
        handed = self.guarded.handed_while_exporting()
        if handed is not None:
            self._at_least(ended - handed - self.max_queue_size)
        with self._lock:
            if self._closed:
                self._dropped = max(self._dropped, self._ended + self._awaiting_whole - self.guarded.handed_spans)
            return self._dropped

    def _exporting(self, handed: int) -> None:
        self._at_least(self._ended - handed - self.max_queue_size)

    def _at_least(self, dropped: int) -> None:
        with self._lock:
            self._dropped = max(self._dropped, dropped)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        ended = self._ended
        flushed = self._batch.force_flush(timeout_millis)
        if flushed:  # the queue held every span ended before the flush; now each was handed or dropped
            self._at_least(ended - self.guarded.handed_spans)
        return flushed

    def shutdown(self) -> None:
        """The SDK's shutdown (export what is queued, shut the exporter down), given
        `shutdown_within_s` at most; what was not handed to the exporter by then is dropped."""
        with self._lock:
            first = self._stopping is None
            if self._stopping is None:
                deadline = time.monotonic() + self._shutdown_within_s
                stopper = threading.Thread(target=_quietly, args=(self._batch.shutdown,), daemon=True)
                # at interpreter exit (Python 3.12+) no thread starts: shut down here, below
                self._stopping = (stopper if _started(stopper) else None, deadline)
            thread, deadline = self._stopping
        if thread is not None:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        elif first:
            # The SDK's shutdown in this thread: its worker (started with the processor) exports
            # what is queued; from the deadline on, the exporter is handed nothing more.
            self.guarded.close_at(deadline)
            _quietly(self._batch.shutdown)
            self._stopped_here.set()
        else:  # another caller is shutting down in its own thread: as long as it may take
            self._stopped_here.wait(timeout=max(0.0, deadline - time.monotonic()))
        self.close()

    def close(self) -> None:
        """Hand the exporter nothing more: every span not handed yet counts as dropped from now on;
        the exporter is shut down (if the SDK's shutdown has not done it yet)."""
        self.guarded.close()
        with self._lock:
            self._closed = True
        self.guarded.shutdown()


class _QueueFullOnce(logging.Filter):
    """The SDK logs "Queue full" for every span it drops; its first line is enough (each dropped
    span is counted in `otel_agents.spans.dropped`)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if otel.SDK_QUEUE_FULL_MESSAGE not in str(record.msg):
            return True
        if self.seen:
            return False
        self.seen = True
        return True


_queue_full_once = _QueueFullOnce()


def quiet_queue_full_logs() -> None:
    """Let the SDK's "Queue full" line through once a process (`configure()` calls this)."""
    logging.getLogger(otel.SDK_BATCH_LOGGER).addFilter(_queue_full_once)  # once: the logger keeps a filter once


def _loud_queue_full_logs() -> None:
    logging.getLogger(otel.SDK_BATCH_LOGGER).removeFilter(_queue_full_once)
    _queue_full_once.seen = False


process_state.hold(
    __name__,
    "_queue_full_once",
    bound="one filter on the SDK's batch logger, and whether it let its line through",
    size=lambda: (_queue_full_once in logging.getLogger(otel.SDK_BATCH_LOGGER).filters) + _queue_full_once.seen,
    forget=_loud_queue_full_logs,
)


def shutdown_within(actions: Sequence[Any], seconds: float) -> None:
    """Run shutdown actions side by side; return after `seconds` at most, whatever they do. Where
    no thread can be started (at interpreter exit, Python 3.12+), the actions run here, one after
    the other, and `seconds` no longer bounds them: each takes what its own bounds allow (a span
    processor of ours hands its exporter nothing after its deadline, but a batch under way then, or
    an exporter with no timeout of its own, takes what it takes)."""
    deadline = time.monotonic() + seconds
    threads = []
    for action in actions:
        thread = threading.Thread(target=_quietly, args=(action,), daemon=True)
        if _started(thread):
            threads.append(thread)
        else:
            _quietly(action)
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _started(thread: threading.Thread) -> bool:
    """Start `thread`; False where threads cannot be started any more: Python 3.12 and later
    refuse new threads once the interpreter has begun to exit (exit handlers run after that)."""
    try:
        thread.start()
    except RuntimeError:
        return False
    return True


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
    processor = BoundedBatchSpanProcessor(
        guarded,
        settings.exporter_timeout_s + SHUTDOWN_GRACE_S,
        settings.span_queue_size or SPAN_QUEUE_SIZE,
        settings.span_batch_size,
    )
    health.processors.append(processor)
    return processor


def _failure_of(exporter: SpanExporter) -> str | None:
    """Why an exporter of ours (the store's) failed, when it says."""
    failure = getattr(exporter, "failure", None)
    return failure if isinstance(failure, str) else None

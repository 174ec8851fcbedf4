"""Runs sampled whole in the process (`OTEL_AGENTS_SAMPLE_RUNS`): the processor in front of the
exporters that holds a run's spans until its decision (`run/keep.py` makes it, on the run's span).

A trace that holds a run is decided with its run. While the run is open its spans wait here; when
its span ends (its decision made before it ended), they go to the exporters whole, as one batch of
their own that the span queue cannot cut, or not at all. Spans of that trace ending later (a
request span around the run) follow the decision while it is remembered; traces without a run are
kept by trace id at the ratio, without waiting, as `TraceIdRatioBased` decides, so every process
decides one trace alike. Only the exporters sample: the embedded store's processor is not behind
this one, and the metrics count every run.

Bounded: a run whose waiting spans pass `max_spans_per_run` is kept from then on (`bound`); when all
waiting spans pass `max_waiting_spans`, the oldest waiting run is kept and sent (`bound`); at
shutdown every run still waiting is kept (`exit`). A kept run's batch waits for the next flush,
which a run's end asks for at once (`export/soon.py`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_agents._internal import keys as sc
from otel_agents._internal.config.settings import Sampling
from otel_agents._internal.export.fork import reset_in_forked_child
from otel_agents._internal.export.pipeline import BoundedBatchSpanProcessor
from otel_agents._internal.export.ratio import ratio_keeps

logger = logging.getLogger(__name__)

EXIT: Final = "exit"
BOUND: Final = "bound"
DECISIONS_KEPT: Final = 4096
"""Decided traces remembered for their late spans (the oldest forgotten first)."""
DECISIONS_KEPT_S: Final = 60.0
"""How long a decision is remembered."""


class _Waiting:
    """A trace holding an open run: the run's span (open), and the spans of the trace ended so far."""

    __slots__ = ("run_span", "run_span_id", "spans")

    def __init__(self, run_span: Span) -> None:
        self.run_span = run_span
        self.run_span_id = run_span.get_span_context().span_id
        self.spans: list[ReadableSpan] = []


class RunSamplingProcessor(SpanProcessor):
    """In front of the exporting processors (never the store's): the spans of a trace holding a run
    wait for its decision; a kept run goes to each of them as one batch (`export_whole`)."""

    def __init__(self, processors: Sequence[BoundedBatchSpanProcessor], sampling: Sampling) -> None:
        self.processors = tuple(processors)
        self.sampling = sampling
        self._lock = threading.Lock()
        self._waiting: OrderedDict[int, _Waiting] = OrderedDict()
        """By trace id, oldest first."""
        self._waiting_spans = 0
        self._decided: OrderedDict[int, tuple[bool, float]] = OrderedDict()
        """By trace id: kept or not, and when decided (monotonic), oldest first."""
        self._ready: list[list[ReadableSpan]] = []
        """Kept runs, each a batch, until the next flush sends them."""
        self._shut_down = False
        reset_in_forked_child(self)

    def reset_after_fork(self) -> None:
        """A forked child has none of its parent's runs (their spans are the parent's to send)."""
        self._lock = threading.Lock()
        self._waiting.clear()
        self._decided.clear()
        self._ready.clear()
        self._waiting_spans = 0

    # --- what waits ----------------------------------------------------------------------------

    @property
    def waiting_spans(self) -> int:
        return self._waiting_spans

    @property
    def waiting_runs(self) -> int:
        return len(self._waiting)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attributes = span.attributes or {}
        if sc.RUN_ID in attributes and not self._shut_down:
            trace_id = span.get_span_context().trace_id
            with self._lock:
                if trace_id not in self._waiting:
                    self._waiting[trace_id] = _Waiting(span)
                    self._decided.pop(trace_id, None)
        for processor in self.processors:
            processor.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        trace_id = context.trace_id
        send: list[ReadableSpan] | None = None
        with self._lock:
            waiting = self._waiting.get(trace_id)
            if waiting is not None:
                if context.span_id == waiting.run_span_id:  # the run ended: its decision is on it
                    del self._waiting[trace_id]
                    self._waiting_spans -= len(waiting.spans)
                    kept = bool((span.attributes or {}).get(sc.SAMPLE_KEPT_BECAUSE))
                    self._remember(trace_id, kept)
                    if kept:
                        self._ready.append([*waiting.spans, span])
                    return
                waiting.spans.append(span)
                self._waiting_spans += 1
                if len(waiting.spans) > self.sampling.max_spans_per_run:
                    self._keep_now(trace_id, waiting)
                while self._waiting_spans > self.sampling.max_waiting_spans and self._waiting:
                    oldest = next(iter(self._waiting))
                    self._keep_now(oldest, self._waiting[oldest])
                return
            decided = self._decided.get(trace_id)
            if decided is None:  # a trace without a run (or before its run): by trace id
                keep = ratio_keeps(self.sampling.ratio, trace_id)
            else:  # a late span of a decided run: as its run
                keep = decided[0]
            if keep:
                send = [span]
        if send is not None:
            for processor in self.processors:
                processor.on_end(span)

    def _keep_now(self, trace_id: int, waiting: _Waiting, because: str = BOUND) -> None:
        """(Under the lock.) Keep the run of `trace_id` from now on: its span says why, what waited
        is sent, and what comes later passes through."""
        del self._waiting[trace_id]
        self._waiting_spans -= len(waiting.spans)
        try:
            if waiting.run_span.is_recording():
                waiting.run_span.set_attributes({sc.SAMPLE_KEPT_BECAUSE: because, sc.SAMPLE_RATIO: self.sampling.ratio})
        except Exception:  # the run's span is another thread's: a decision without its reason
            logger.debug("otel-agents could not say why a run was kept", exc_info=True)
        self._remember(trace_id, True)
        if waiting.spans:
            self._ready.append(waiting.spans)

    def _remember(self, trace_id: int, kept: bool) -> None:
        decided = self._decided
        now = time.monotonic()
        decided[trace_id] = (kept, now)
        decided.move_to_end(trace_id)
        while decided and (len(decided) > DECISIONS_KEPT or next(iter(decided.values()))[1] < now - DECISIONS_KEPT_S):
            decided.popitem(last=False)

    # --- sending -------------------------------------------------------------------------------

    def _send_ready(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for batch in ready:
            for processor in self.processors:
                processor.export_whole(batch)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        self._send_ready()
        return all([processor.force_flush(timeout_millis) for processor in self.processors])

    def shutdown(self) -> None:
        """Every run still waiting is kept (`exit`) and sent, then the processors shut down."""
        with self._lock:
            self._shut_down = True
            for trace_id, waiting in list(self._waiting.items()):
                self._keep_now(trace_id, waiting, EXIT)
        self._send_ready()
        for processor in self.processors:
            processor.shutdown()

    def __repr__(self) -> str:
        return f"RunSamplingProcessor(ratio={self.sampling.ratio}, rules={self.sampling.rules})"

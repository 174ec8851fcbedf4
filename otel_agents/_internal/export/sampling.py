"""Runs sampled whole in the process (`OTEL_AGENTS_SAMPLE_RUNS`): the processor in front of the
exporters that holds a trace's spans until its runs are decided (`run/keep.py` decides each run, on
its span).

A trace that holds runs is decided as a trace. While a run of it is open in this process, the
trace's spans wait here (the spans of runs already ended included); when the last open run ends,
the trace goes to the exporters whole, in one batch that the span queue cannot cut, if any of its
runs is kept, or not at all. A run that starts in a trace already kept is kept with it
(its span says `trace`) and its spans pass at once; one that starts in a trace whose earlier runs
were left out is decided on its own. Spans of the trace ending later (a request span around the
runs) follow the decision while it is remembered; traces without a run are kept by trace id at the
ratio, without waiting, as `TraceIdRatioBased` decides, so every process decides one trace alike.
Only the exporters sample: the embedded store's processor is not behind this one, and the metrics
count every run.

Bounded: a trace whose waiting spans pass `max_spans_per_run` is kept from then on (`bound`); when
all waiting spans pass `max_waiting_spans`, the oldest waiting trace is kept and sent (`bound`); at
shutdown every trace still waiting is kept (`exit`).

Delivered: a kept trace's batch is sent by the next flush, which a run's end asks for at once
(`export/soon.py`). The batches ready at one flush are joined, in the order they were decided, into
exports of at most the export batch size (OTEL_BSP_MAX_EXPORT_BATCH_SIZE), none cut (one larger goes
alone): a busy service sends each exporter an export a flush, not one a kept trace. One thread
sends at a time: `force_flush()` returns once every batch decided before it was handed to the
exporters (a batch another thread took is waited for), then flushes them. Every span that ended
here is counted once: sent, left out (`sampled_out_spans`), waiting, or, from shutdown on, dropped
by the processors it was meant for.
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
TRACE: Final = "trace"
DECISIONS_KEPT: Final = 4096
"""Decided traces remembered for their late spans (the oldest forgotten first)."""
DECISIONS_KEPT_S: Final = 60.0
"""How long a decision is remembered."""


class _Waiting:
    """A trace holding runs open in this process: their spans (open), the spans of the trace ended
    so far, and whether one of its runs is kept already (`passing`: its spans go at once)."""

    __slots__ = ("kept", "open_runs", "passing", "spans")

    def __init__(self) -> None:
        self.open_runs: dict[int, Span] = {}
        """Run span id -> the run's span, for the runs of the trace not ended yet."""
        self.spans: list[ReadableSpan] = []
        self.kept = False
        """A run of the trace ended kept (or the trace passed a bound, or was kept before)."""
        self.passing = False
        """Kept already: the trace's spans go to the exporters as they end."""


def _sampled(span: ReadableSpan) -> bool:
    context = span.context
    return context is not None and context.trace_flags.sampled


class RunSamplingProcessor(SpanProcessor):
    """In front of the exporting processors (never the store's): the spans of a trace holding a run
    wait for its runs' decisions; a kept trace goes to each of them whole, in one batch
    (`export_whole`)."""

    def __init__(self, processors: Sequence[BoundedBatchSpanProcessor], sampling: Sampling) -> None:
        self.processors = tuple(processors)
        self.sampling = sampling
        self._init_state()
        reset_in_forked_child(self)

    def _init_state(self) -> None:
        # re-entrant: a stream dropped in a reference cycle ends its run (and so comes here) from the
        # garbage collector, which may run inside an allocation made under this very lock
        self._lock = threading.RLock()
        self._sending = threading.Lock()
        """Held by the one thread handing ready batches to the exporters."""
        self._waiting: OrderedDict[int, _Waiting] = OrderedDict()
        """By trace id, oldest first."""
        self._waiting_spans = 0
        self._decided: OrderedDict[int, tuple[bool, float]] = OrderedDict()
        """By trace id: kept or not, and when decided (monotonic), oldest first."""
        self._ready: list[list[ReadableSpan]] = []
        """Kept traces' spans, each a batch, until a flush sends them."""
        self._shut_down = False
        self.ended_spans = 0
        """Sampled spans ended through this processor."""
        self.sampled_out_spans = 0
        """Sampled spans of runs (and traces) not kept: never meant for the exporters."""

    def reset_after_fork(self) -> None:
        """A forked child has none of its parent's runs (their spans are the parent's to send)."""
        self._init_state()

    # --- what waits ----------------------------------------------------------------------------

    @property
    def waiting_spans(self) -> int:
        return self._waiting_spans

    @property
    def waiting_runs(self) -> int:
        return sum(len(waiting.open_runs) for waiting in list(self._waiting.values()))

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attributes = span.attributes or {}
        context = span.get_span_context()
        if sc.RUN_ID in attributes and context.trace_flags.sampled and not self._shut_down:
            # read before the lock (properties): under it, a collection that Python code can set off
            # may end another run of the trace (back here, under the re-entrant lock); see on_end
            trace_id, span_id = context.trace_id, context.span_id
            with self._lock:
                waiting = self._waiting.get(trace_id)
                if waiting is None:
                    waiting = self._waiting[trace_id] = _Waiting()
                    decided = self._decided.pop(trace_id, None)
                    if decided is not None and decided[0]:  # a trace kept already: so is this run
                        waiting.kept = waiting.passing = True
                    while len(self._waiting) > self.sampling.max_waiting_spans:  # runs never ended
                        self._let_go(next(iter(self._waiting)))
                waiting.open_runs[span_id] = span  # open before the span is told: never a trace decided without it
                if waiting.passing:
                    span.set_attribute(sc.SAMPLE_KEPT_BECAUSE, TRACE)
        for processor in self.processors:
            processor.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return  # never exported: the batch processors leave such spans out
        # read before the lock (properties): from `self._waiting.get` to the span's place in the
        # trace, nothing runs that could set off a collection, which may end the trace's last open
        # run (back here, under the re-entrant lock) and so decide the trace without this span
        trace_id, span_id = context.trace_id, context.span_id
        send = False
        with self._lock:
            self.ended_spans += 1
            waiting = self._waiting.get(trace_id)
            if waiting is not None:
                if span_id in waiting.open_runs:  # a run ended: decided on it
                    # read while the run is still open: a collection this read sets off may end
                    # another run of the trace (back here, under the re-entrant lock), never the last
                    kept = bool((span.attributes or {}).get(sc.SAMPLE_KEPT_BECAUSE))
                    del waiting.open_runs[span_id]
                    if not waiting.open_runs:  # the trace's last open run: the trace is decided
                        waiting.kept = waiting.kept or kept
                        self._decide(trace_id, waiting, span)
                        return
                    if kept and not waiting.passing:
                        self._keep_now(waiting, TRACE)  # kept: the runs still open go with it
                if waiting.passing:
                    send = True
                else:
                    waiting.spans.append(span)
                    self._waiting_spans += 1
                    if len(waiting.spans) > self.sampling.max_spans_per_run:
                        self._keep_now(waiting)
                    while self._waiting_spans > self.sampling.max_waiting_spans:
                        oldest = next((w for w in self._waiting.values() if w.spans), None)
                        if oldest is None:
                            break
                        self._keep_now(oldest)
            else:
                decided = self._decided.get(trace_id)
                if decided is None:  # a trace without a run (or before its run): by trace id
                    send = ratio_keeps(self.sampling.ratio, trace_id)
                else:  # a late span of a decided trace: as its runs
                    send = decided[0]
                if not send:
                    self.sampled_out_spans += 1
        if send:
            for processor in self.processors:
                processor.on_end(span)

    def _decide(self, trace_id: int, waiting: _Waiting, last: ReadableSpan) -> None:
        """(Under the lock.) The trace's last open run ended: send it whole if it is kept."""
        del self._waiting[trace_id]
        spans, waiting.spans = waiting.spans, []  # taken: a `_keep_now` this interrupted sends none again
        self._waiting_spans -= len(spans)
        self._remember(trace_id, waiting.kept)
        batch = [*spans, last]
        if waiting.kept:
            self._make_ready(batch)
        else:
            self.sampled_out_spans += len(batch)

    def _keep_now(self, waiting: _Waiting, because: str = BOUND) -> None:
        """(Under the lock.) Keep the trace from now on: each open run's span says why (unless it
        says already), what waited is sent, and what comes later passes at once."""
        waiting.kept = waiting.passing = True
        # a copy: a collection while a span is told may end another run of the trace, which comes
        # back here under the (re-entrant) lock and takes it out of `open_runs`
        for run_span in list(waiting.open_runs.values()):
            try:
                if run_span.is_recording() and not (run_span.attributes or {}).get(sc.SAMPLE_KEPT_BECAUSE):
                    run_span.set_attributes({sc.SAMPLE_KEPT_BECAUSE: because, sc.SAMPLE_RATIO: self.sampling.ratio})
            except Exception:  # the run's span is another thread's: a decision without its reason
                logger.debug("otel-agents could not say why a run was kept", exc_info=True)
        spans, waiting.spans = waiting.spans, []  # taken first: a `_decide` in a collection here finds none
        self._waiting_spans -= len(spans)
        if spans:
            self._make_ready(spans)

    def _let_go(self, trace_id: int) -> None:
        """(Under the lock.) Past `max_waiting_spans` traces waiting (runs whose spans never end: a
        stream collected unended), the oldest is kept from now on and forgotten here."""
        waiting = self._waiting[trace_id]
        self._keep_now(waiting)
        if self._waiting.get(trace_id) is waiting:  # else decided meanwhile (its last run ended in a collection)
            del self._waiting[trace_id]
            self._remember(trace_id, True)

    def _make_ready(self, batch: list[ReadableSpan]) -> None:
        """(Under the lock.) `batch` goes to the exporters at the next flush; until it is handed
        over, each processor counts it as ended and not handed yet."""
        self._ready.append(batch)
        for processor in self.processors:
            processor.awaiting_whole(len(batch))

    def _remember(self, trace_id: int, kept: bool) -> None:
        decided = self._decided
        now = time.monotonic()
        decided[trace_id] = (kept, now)
        decided.move_to_end(trace_id)
        while decided and (len(decided) > DECISIONS_KEPT or next(iter(decided.values()))[1] < now - DECISIONS_KEPT_S):
            decided.popitem(last=False)

    # --- sending -------------------------------------------------------------------------------

    def _send_ready(self, deadline: float) -> bool:
        """Hand the batches ready now to the exporters, one thread at a time (a batch another
        thread took is handed over by the time this takes its turn); False if `deadline`
        (`time.monotonic()`) passed first, the batches not handed left for the next send."""
        if not self._sending.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False
        try:
            with self._lock:
                ready, self._ready = self._ready, []
            ready = _joined(ready, min((p.max_export_batch_size for p in self.processors), default=1))
            for sent, batch in enumerate(ready):
                if time.monotonic() >= deadline:
                    with self._lock:
                        self._ready[:0] = ready[sent:]
                    return False
                for processor in self.processors:
                    processor.export_whole(batch)
            return True
        finally:
            self._sending.release()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Every trace decided before the call handed to the exporters, then their flush; False if
        that took longer than `timeout_millis`."""
        deadline = time.monotonic() + timeout_millis / 1000
        if not self._send_ready(deadline):
            return False
        return all([processor.force_flush(_millis_until(deadline)) for processor in self.processors])

    def shutdown(self) -> None:
        """Every trace still waiting is kept (`exit`) and sent, then the processors shut down, each
        within its bound."""
        with self._lock:
            self._shut_down = True
            for waiting in list(self._waiting.values()):
                self._keep_now(waiting, EXIT)
        within = max((processor.shutdown_within_s for processor in self.processors), default=0.0)
        self._send_ready(time.monotonic() + within)
        for processor in self.processors:
            processor.shutdown()

    def __repr__(self) -> str:
        return f"RunSamplingProcessor(ratio={self.sampling.ratio}, rules={self.sampling.rules})"


def _joined(batches: list[list[ReadableSpan]], most: int) -> list[list[ReadableSpan]]:
    """`batches` in order, each joined to the one before while the two hold at most `most` spans: a
    batch is never cut, and one larger than `most` goes alone."""
    out: list[list[ReadableSpan]] = []
    for batch in batches:
        if out and len(out[-1]) + len(batch) <= most:
            out[-1].extend(batch)
        else:
            out.append(list(batch))
    return out


def _millis_until(deadline: float) -> int:
    return max(0, int((deadline - time.monotonic()) * 1000))

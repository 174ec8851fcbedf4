"""`Recording`: what runs and model calls record with, one per pipeline.

Whoever sets telemetry up builds it (`Telemetry`, for `configure()` and for the instrumentor's
providers; `tracing.globals` for a view of the global providers) and hands it to the runs and model
calls that record through it; nothing below looks a pipeline up to find these.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace

from otel_agents._internal import process_state
from otel_agents._internal.genai.loops import ResolvedLimits
from otel_agents._internal.genai.metrics import Instruments, SpanLosses
from otel_agents._internal.genai.prices import PriceTable

if TYPE_CHECKING:
    from opentelemetry.util.genai.handler import TelemetryHandler

    from otel_agents._internal.config.settings import Settings
    from otel_agents._internal.genai.content import ContentPolicy


class Recording:
    """The content policy (in `settings`), prices, instruments, loop thresholds, util-genai's
    handler and the run-aware tracer provider of one pipeline."""

    def __init__(
        self,
        settings: Settings,
        sdk_tracer_provider: trace.TracerProvider,
        meter_provider: metrics.MeterProvider,
        tracer_provider: Callable[[Recording], trace.TracerProvider],
        loop_limits: ResolvedLimits,
        prices: PriceTable | None = None,
        *,
        metrics_exported: bool = True,
        span_losses: Callable[[], SpanLosses] = SpanLosses.none,
        unplaced_spans: Callable[[], int] = lambda: 0,
    ) -> None:
        """`tracer_provider(recording)`: the run-aware provider over this recording's SDK provider.
        `span_losses`, `unplaced_spans`: what the span counters read when metrics are collected."""
        self.settings = settings
        self.sdk_tracer_provider = sdk_tracer_provider
        """The provider that records and exports (no run-aware parenting)."""
        self.meter_provider = meter_provider
        self.prices = prices if prices is not None else PriceTable()
        self.instruments = Instruments(
            meter_provider,
            label_keys=settings.metric_attributes,
            exported=metrics_exported,
            span_losses=span_losses,
            unplaced_spans=unplaced_spans,
        )
        self.loop_limits = loop_limits
        """The thresholds of the loop detector the tap runs."""
        self.tracer_provider = tracer_provider(self)
        """A provider whose tracers place every span of a run inside that run's trace."""
        self._genai_handler: TelemetryHandler | None = None
        self._handler_lock = threading.Lock()
        process_state.new_locks_in_forked_child(self, "_handler_lock")
        self.samples_runs = False
        """Whether this pipeline's exporters sit behind the run sampler (`configure()` with
        `OTEL_AGENTS_SAMPLE_RUNS` below 1): else runs go whole to whoever exports them."""

    @property
    def disabled(self) -> bool:
        """True under `OTEL_SDK_DISABLED=true`: nothing is recorded and taps pass items through."""
        return self.settings.disabled

    @property
    def content(self) -> ContentPolicy:
        return self.settings.content

    @property
    def genai_handler(self) -> TelemetryHandler:
        """util-genai's handler for this pipeline's model calls, made at the first one."""
        handler = self._genai_handler
        if handler is None:
            with self._handler_lock:
                handler = self._genai_handler
                if handler is None:
                    from otel_agents._internal.genai.inference import make_handler

                    handler = self._genai_handler = make_handler(
                        self.tracer_provider, self.meter_provider, exported=self.instruments.exported
                    )
        return handler

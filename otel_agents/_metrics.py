"""The instruments otel-agents records (a contract: the README lists them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics

from ._version import __version__


class Instruments:
    def __init__(self, meter_provider: metrics.MeterProvider, telemetry: Any) -> None:
        meter = meter_provider.get_meter("otel_agents", __version__)

        def dropped(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            yield metrics.Observation(telemetry.dropped_spans)

        self.spans_dropped = meter.create_observable_counter(
            "otel_agents.spans.dropped",
            callbacks=[dropped],
            unit="{span}",
            description="Spans the pipeline could not deliver (failed exports, full queues, shutdown cut-offs)",
        )
        self.tokens_unpriced = meter.create_counter(
            "otel_agents.tokens.unpriced",
            unit="{token}",
            description="Tokens of model calls whose model has no price",
        )

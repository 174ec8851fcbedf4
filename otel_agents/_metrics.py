"""The instruments otel-agents records (a contract: the README lists them)."""

from __future__ import annotations

from opentelemetry import metrics

from ._version import __version__


class Instruments:
    def __init__(self, meter_provider: metrics.MeterProvider) -> None:
        meter = meter_provider.get_meter("otel_agents", __version__)
        self.tokens_unpriced = meter.create_counter(
            "otel_agents.tokens.unpriced",
            unit="{token}",
            description="Tokens of model calls whose model has no price",
        )

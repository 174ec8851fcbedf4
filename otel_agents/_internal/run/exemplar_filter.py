"""The exemplar filter of a pipeline whose exporters sample runs (`run/exemplars.py` says why)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.metrics import TraceBasedExemplarFilter
from opentelemetry.util.types import AnyValue

from otel_agents._internal.export.ratio import ratio_keeps
from otel_agents._internal.run.exemplars import is_kept

VARIABLE: Final = "OTEL_METRICS_EXEMPLAR_FILTER"
"""The SDK's choice of exemplar filter; ours stands in for its default, `trace_based`, only."""


class KeptRunsExemplarFilter(TraceBasedExemplarFilter):
    """The SDK's trace-based filter, narrowed to traces that are sent: a context `kept()` marked, or
    a trace id that `ratio` keeps."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def should_sample(
        self,
        value: float,
        time_unix_nano: int,
        attributes: Mapping[str, AnyValue] | None,
        context: otel_context.Context,
    ) -> bool:
        if not super().should_sample(value, time_unix_nano, attributes, context):
            return False
        if is_kept(context):
            return True
        return ratio_keeps(self.ratio, trace.get_current_span(context).get_span_context().trace_id)


def exemplar_filter(ratio: float, chosen: str | None) -> KeptRunsExemplarFilter | None:
    """Ours when runs are sampled for the exporters and the application chose no other filter
    (`chosen`: the variable's value), else None: the SDK's own choice stands (`always_on`,
    `always_off`)."""
    if chosen not in (None, "trace_based"):  # read as the SDK reads it
        return None
    return KeptRunsExemplarFilter(ratio)

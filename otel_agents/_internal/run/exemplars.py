"""Exemplars only where the trace reaches the exporters: with runs sampled
(`OTEL_AGENTS_SAMPLE_RUNS`), a metric point recorded in a left-out run must not name its trace, or
a dashboard's link from the point leads nowhere.

A run is decided at its end, after its model calls recorded their points. So a point gets its trace
as an exemplar when the trace is sure to be sent at the moment it is recorded: the run's own points,
recorded after its decision, in a context `kept()` marked; any other point (a model call, an
outcome) when its trace id is one the ratio keeps, as `TraceIdRatioBased` decides (a run the ratio
keeps is kept whatever the rules say). A call of a run that a rule keeps at its end has no exemplar;
the run's own points do. The filter that reads the mark is `run/exemplar_filter.py`, imported only
where a meter provider is built (it needs the SDK).
"""

from __future__ import annotations

from typing import Final

from opentelemetry import context as otel_context

_KEPT: Final = otel_context.create_key("otel_agents.run.kept")


def kept(context: otel_context.Context) -> otel_context.Context:
    """`context` marked as that of a run the exporters get: its points carry its trace."""
    return otel_context.set_value(_KEPT, True, context)


def is_kept(context: otel_context.Context) -> bool:
    """Whether `kept()` marked `context`."""
    return bool(otel_context.get_value(_KEPT, context))

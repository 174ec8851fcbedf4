"""`AUTOGEN_TRACERS`: the provider AutoGen's own tracers get when given none (`autogen.private`)."""

from __future__ import annotations

from opentelemetry import trace

from otel_agents._internal import process_state
from otel_agents._internal.autogen import wrapping
from otel_agents._internal.tracing.globals import current, global_recording_provider
from otel_agents._internal.tracing.placement import RunAwareTracerProvider

AUTOGEN_TRACERS = RunAwareTracerProvider(
    global_recording_provider,
    lambda: current(None).settings.runtime_spans,
    passed_to=lambda: None if wrapping.active() else trace.get_tracer_provider(),
)
"""What AutoGen's own tracers get when given no provider (the placement hook of `autogen.private`):
a span of a run goes to that run's pipeline, under the span that caused it; any other span goes to
the global provider, as it would without otel-agents. After `uninstrument()`, the tracers AutoGen
took from it before (a runtime built while instrumented keeps its tracer) start every span as the
global provider's own tracers would, as AutoGen's would had it never been instrumented."""
process_state.hold(
    __name__,
    "AUTOGEN_TRACERS",
    bound="its tracers, one per name AutoGen asks for, cleared beyond TRACERS_KEPT",
    size=AUTOGEN_TRACERS.tracers_kept,
    forget=AUTOGEN_TRACERS.forget_tracers,
)

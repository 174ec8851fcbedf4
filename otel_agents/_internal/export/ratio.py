"""Whether a trace's ordinary run is kept at a ratio: as OpenTelemetry's `TraceIdRatioBased` decides
by its trace id, so that every process decides one trace alike."""

from __future__ import annotations


def ratio_keeps(ratio: float, trace_id: int) -> bool:
    """Whether `TraceIdRatioBased(ratio)` samples `trace_id`."""
    if ratio >= 1:
        return True
    from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased  # the SDK, once sampling is on

    return TraceIdRatioBased(ratio).should_sample(None, trace_id, "").decision is Decision.RECORD_AND_SAMPLE

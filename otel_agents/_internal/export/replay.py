"""Replaying stored spans to an OTLP endpoint with their original ids and timestamps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_agents._internal.export.store.reader import StoredSpan


def _attributes(values: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def readable_span(stored: StoredSpan) -> ReadableSpan:
    """The stored span as the SDK's ReadableSpan, ready for any span exporter."""
    data = stored.data
    trace_id = int(stored.trace_id, 16)
    flags = TraceFlags(data.get("trace_flags", TraceFlags.SAMPLED))
    context = SpanContext(trace_id, int(stored.span_id, 16), is_remote=False, trace_flags=flags)
    parent = (
        SpanContext(
            trace_id,
            int(stored.parent_span_id, 16),
            is_remote=bool(data.get("parent_is_remote")),
            trace_flags=flags,
        )
        if stored.parent_span_id
        else None
    )
    status = data.get("status", {})
    scope = data.get("scope", {})
    return ReadableSpan(
        name=stored.name,
        context=context,
        parent=parent,
        resource=Resource(_attributes(data.get("resource", {}))),
        attributes=_attributes(data.get("attributes", {})),
        events=[
            Event(e["name"], _attributes(e.get("attributes", {})), timestamp=e.get("timestamp"))
            for e in data.get("events", [])
        ],
        links=[
            Link(
                SpanContext(int(link["trace_id"], 16), int(link["span_id"], 16), is_remote=True, trace_flags=flags),
                _attributes(link.get("attributes", {})),
            )
            for link in data.get("links", [])
        ],
        kind=SpanKind[data.get("kind", "INTERNAL")],
        status=Status(StatusCode[status.get("code", "UNSET")], status.get("description")),
        start_time=stored.start_ns,
        end_time=stored.end_ns,
        instrumentation_scope=InstrumentationScope(scope.get("name", ""), scope.get("version")),
    )


def readable_spans(stored: Sequence[StoredSpan]) -> list[ReadableSpan]:
    return [readable_span(span) for span in stored]

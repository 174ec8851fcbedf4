"""Marking a span failed without letting user content out."""

from __future__ import annotations

from opentelemetry.trace import Span, Status, StatusCode

from otel_agents._internal import keys as sc


def mark_error(span: Span, exc: BaseException) -> None:
    """`error.type`, status ERROR and an `exception` event: the type only, since an exception's
    message may carry user content."""
    error_type = type(exc).__name__
    span.set_attribute(sc.ERROR_TYPE, error_type)
    span.add_event("exception", {"exception.type": error_type})
    span.set_status(Status(StatusCode.ERROR, error_type))

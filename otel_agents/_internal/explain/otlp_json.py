"""OTLP JSON as `Span`s: an `ExportTraceServiceRequest` (or `TracesData`) as the OTLP/JSON encoding
writes it (a Collector's file exporter, protobuf's `json_format`), or Jaeger's `/api/v3/traces`
answer (the same under `result`).

What varies between writers is read either way: ids in hex (as the OTLP/JSON specification says) or
base64 (protobuf's `json_format` on the bytes fields), field names in lowerCamelCase or as in the
proto, 64-bit integers as strings or numbers, enums by name or number.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from otel_agents._internal.explain.errors import NotOtlpJson
from otel_agents._internal.explain.model import Span, SpanEvent

_STATUS: Final[Mapping[Any, str]] = MappingProxyType(
    {
        "STATUS_CODE_OK": "OK",
        "OK": "OK",
        1: "OK",
        "STATUS_CODE_ERROR": "ERROR",
        "ERROR": "ERROR",
        2: "ERROR",
    }
)


def field_of(item: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = item.get(camel)
    return item.get(snake) if value is None else value


def hex_id(value: Any, size: int, what: str) -> str | None:
    """An id of `size` bytes as lowercase hex: given in hex, or in base64; None when empty."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise NotOtlpJson(f"a {what} is not a string: {value!r}")
    if len(value) == size * 2 and all(c in "0123456789abcdefABCDEF" for c in value):
        return value.lower()
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) != size:
        raise NotOtlpJson(f"a {what} is neither {size * 2} hex digits nor {size} bytes in base64: {value!r}")
    return decoded.hex()


def nanos(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if value is None:
        return 0
    raise NotOtlpJson(f"a span's {what} is not a number of nanoseconds: {value!r}")


def _double(value: Any) -> float:
    if isinstance(value, str):  # JSON has no NaN or infinity: the encodings write them as strings
        return float(value)
    return float(value)


def _value(value: Any) -> Any:
    """An OTLP `AnyValue` as a plain value (arrays as tuples)."""
    if not isinstance(value, Mapping):
        return value
    if "stringValue" in value or "string_value" in value:
        return field_of(value, "stringValue", "string_value")
    if "intValue" in value or "int_value" in value:
        return int(field_of(value, "intValue", "int_value"))
    if "doubleValue" in value or "double_value" in value:
        return _double(field_of(value, "doubleValue", "double_value"))
    if "boolValue" in value or "bool_value" in value:
        return bool(field_of(value, "boolValue", "bool_value"))
    if "arrayValue" in value or "array_value" in value:
        array = field_of(value, "arrayValue", "array_value") or {}
        return tuple(_value(v) for v in array.get("values") or ())
    if "kvlistValue" in value or "kvlist_value" in value:
        return attributes_of((field_of(value, "kvlistValue", "kvlist_value") or {}).get("values"))
    if "bytesValue" in value or "bytes_value" in value:
        return field_of(value, "bytesValue", "bytes_value")
    return None


def attributes_of(items: Any) -> dict[str, Any]:
    if not items:
        return {}
    if not isinstance(items, list):
        raise NotOtlpJson(f"attributes are not a list: {items!r:.80}")
    out: dict[str, Any] = {}
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get("key"), str):
            out[item["key"]] = _value(item.get("value"))
    return out


def _status(status: Any) -> str:
    if not isinstance(status, Mapping):
        return "UNSET"
    return _STATUS.get(status.get("code"), "UNSET")


def _span(span: Mapping[str, Any]) -> Span:
    trace_id = hex_id(field_of(span, "traceId", "trace_id"), 16, "trace id")
    span_id = hex_id(field_of(span, "spanId", "span_id"), 8, "span id")
    if trace_id is None or span_id is None:
        raise NotOtlpJson("a span without a trace id or a span id")
    start = nanos(field_of(span, "startTimeUnixNano", "start_time_unix_nano"), "start")
    end = nanos(field_of(span, "endTimeUnixNano", "end_time_unix_nano"), "end")
    events = tuple(
        SpanEvent(
            str(event.get("name", "")),
            nanos(field_of(event, "timeUnixNano", "time_unix_nano"), "event time"),
            attributes_of(event.get("attributes")),
        )
        for event in span.get("events") or ()
        if isinstance(event, Mapping)
    )
    return Span(
        name=str(span.get("name", "")),
        trace_id=trace_id,
        span_id=span_id,
        parent_id=hex_id(field_of(span, "parentSpanId", "parent_span_id"), 8, "parent span id"),
        start_ns=start,
        end_ns=max(end, start),
        attributes=attributes_of(span.get("attributes")),
        events=events,
        status=_status(span.get("status")),
    )


def resource_spans_of(document: Any) -> list[Any]:
    if isinstance(document, Mapping) and isinstance(document.get("result"), Mapping):
        document = document["result"]  # Jaeger's /api/v3 answer
    if not isinstance(document, Mapping):
        raise NotOtlpJson("not a JSON object with resourceSpans")
    found = field_of(document, "resourceSpans", "resource_spans")
    if found is None:
        if "resourceSpans" in document or "resource_spans" in document or "result" in document:
            return []  # an empty export
        raise NotOtlpJson("a JSON object without resourceSpans")
    if not isinstance(found, list):
        raise NotOtlpJson("resourceSpans is not a list")
    return found


@dataclass(frozen=True, slots=True)
class ScopedSpan:
    """One span object of an OTLP JSON document, with the resource and scope objects it is under."""

    resource: Mapping[str, Any]
    """The resource (its `attributes`); empty when the document gives none."""
    scope: Mapping[str, Any]
    """The instrumentation scope (`name`, `version`); empty when the document gives none."""
    span: Mapping[str, Any]


def scoped_spans(document: Any) -> Iterator[ScopedSpan]:
    """The span objects of one OTLP JSON document (an export request, or Jaeger's answer), each with
    its resource and scope, as written: under `scopeSpans`, or before OTLP 0.15 under its older name
    `instrumentationLibrarySpans` (the scope then `instrumentationLibrary`). NotOtlpJson for an entry
    that is not an object."""
    for resource_spans in resource_spans_of(document):
        if not isinstance(resource_spans, Mapping):
            raise NotOtlpJson("a resourceSpans entry is not an object")
        resource = resource_spans.get("resource") or {}
        if not isinstance(resource, Mapping):
            raise NotOtlpJson("a resource is not an object")
        scopes = field_of(resource_spans, "scopeSpans", "scope_spans")
        if scopes is None:
            scopes = field_of(resource_spans, "instrumentationLibrarySpans", "instrumentation_library_spans")
        for scope_spans in scopes or ():
            if not isinstance(scope_spans, Mapping):
                raise NotOtlpJson("a scopeSpans entry is not an object")
            scope = scope_spans.get("scope")
            if scope is None:
                scope = field_of(scope_spans, "instrumentationLibrary", "instrumentation_library")
            for span in scope_spans.get("spans") or ():
                if not isinstance(span, Mapping):
                    raise NotOtlpJson("a span is not an object")
                yield ScopedSpan(resource, scope if isinstance(scope, Mapping) else {}, span)


def spans_of(document: Any) -> Iterator[Span]:
    """The spans of one OTLP JSON document (an export request, or Jaeger's answer)."""
    for scoped in scoped_spans(document):
        yield _span(scoped.span)


@contextmanager
def read_as_otlp_json() -> Iterator[None]:
    """Within it, a value of the wrong type or form (a `TypeError`, `ValueError` or `AttributeError`
    of reading a document) is a NotOtlpJson saying so."""
    try:
        yield
    except (TypeError, ValueError, AttributeError) as error:
        if isinstance(error, NotOtlpJson):
            raise
        raise NotOtlpJson(f"a value is not as OTLP JSON writes it ({error})") from None


def documents(text: str) -> list[Any]:
    """The JSON documents of `text`: one (a whole file, Jaeger's answer), or one a line (OTLP/JSON
    lines, as a Collector's file exporter writes them)."""
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            found.append(json.loads(line))
        except ValueError:
            raise NotOtlpJson(f"line {number} is not JSON") from None
    return found


def spans_of_text(text: str) -> list[Span]:
    """Every span of OTLP JSON `text` (NotOtlpJson when it is not OTLP JSON)."""
    found = documents(text)
    if not found:
        raise NotOtlpJson("it is empty")
    with read_as_otlp_json():
        return [span for document in found for span in spans_of(document)]

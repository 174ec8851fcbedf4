"""explain's reader of OTLP JSON (otel_agents/_internal/explain/otlp_json.py) finds a document's spans
under either name a scope's spans have had: `scopeSpans`, or before OTLP 0.15 `instrumentationLibrarySpans`
(the scope then `instrumentationLibrary`), each with the resource and scope it is under. The Jaeger
source of the web page reads through the same walker (tests/test_ui_jaeger_rows.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_agents._internal.explain.errors import NotOtlpJson
from otel_agents._internal.explain.otlp_json import scoped_spans, spans_of, spans_of_text

TRACE = "6ca6613412e15fb948a5b2b38229596d"
SPAN = "f242112ce53216af"


def document(spans_key: str, scope_key: str) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                spans_key: [
                    {
                        scope_key: {"name": "otel_agents", "version": "0.1.0"},
                        "spans": [
                            {
                                "traceId": TRACE,
                                "spanId": SPAN,
                                "name": "invoke_workflow review",
                                "startTimeUnixNano": "1796444403750000000",
                                "endTimeUnixNano": "1796444403859349000",
                            }
                        ],
                    }
                ],
            }
        ]
    }


@pytest.mark.parametrize(
    ("spans_key", "scope_key"),
    [
        ("scopeSpans", "scope"),
        ("instrumentationLibrarySpans", "instrumentationLibrary"),
        ("instrumentation_library_spans", "instrumentation_library"),
    ],
)
def test_a_span_is_found_with_its_resource_and_scope_under_either_name(spans_key: str, scope_key: str) -> None:
    given = document(spans_key, scope_key)
    (scoped,) = scoped_spans(given)
    assert scoped.span["spanId"] == SPAN
    assert scoped.resource["attributes"] == [{"key": "service.name", "value": {"stringValue": "svc"}}]
    assert scoped.scope == {"name": "otel_agents", "version": "0.1.0"}
    (span,) = spans_of(given)
    assert (span.trace_id, span.span_id, span.name) == (TRACE, SPAN, "invoke_workflow review")


def test_a_resource_that_is_not_an_object_is_not_otlp_json() -> None:
    given = document("scopeSpans", "scope")
    given["resourceSpans"][0]["resource"] = ["service.name"]
    with pytest.raises(NotOtlpJson, match="a resource is not an object"):
        spans_of_text(json.dumps(given))

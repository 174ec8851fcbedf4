"""The shape of Jaeger's answers as the store's rows (otel_agents/ui/jaeger.py), on small documents
written here: what varies between writers of OTLP JSON is read either way (ids in hex or base64,
kinds and status codes by number or name), Jaeger's own annotations are not the app's attributes,
events keep the order they happened in, and a run span is the run row the store's writer makes.
(Against the built Jaeger: tests/test_ui_jaeger.py.)"""

from __future__ import annotations

import base64
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from otel_agents._internal.explain.errors import NotOtlpJson
from otel_agents.ui.jaeger import checked_url, run_of, stored_spans

TRACE = "6ca6613412e15fb948a5b2b38229596d"
RUN_SPAN = "f242112ce53216af"
CHILD = "367022264a4c9b93"


def b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def answer(trace: str, run_span: str, child: str, *, kind: Any, code: Any) -> dict[str, Any]:
    return {
        "result": {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                    "scopeSpans": [
                        {
                            "scope": {"name": "otel_agents", "version": "0.1.0"},
                            "spans": [
                                {
                                    "traceId": trace,
                                    "spanId": child,
                                    "parentSpanId": run_span,
                                    "name": "chat gpt-4o-mini",
                                    "kind": kind,
                                    "startTimeUnixNano": "1796444403753693479",
                                    "endTimeUnixNano": "1796444403847163367",
                                    "attributes": [
                                        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "40"}},
                                        {"key": "otel_agents.cost.usd", "value": {"doubleValue": 0.0000066}},
                                        {
                                            "key": "gen_ai.response.finish_reasons",
                                            "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}},
                                        },
                                        {
                                            "key": "@jaeger@warnings",
                                            "value": {"arrayValue": {"values": [{"stringValue": "clock skew"}]}},
                                        },
                                    ],
                                    "events": [
                                        {"name": "second", "timeUnixNano": "1796444403800000000"},
                                        {"name": "first", "timeUnixNano": "1796444403760000000"},
                                    ],
                                    "status": {"code": code, "message": "boom"},
                                },
                                {
                                    "traceId": trace,
                                    "spanId": run_span,
                                    "name": "invoke_workflow review",
                                    "startTimeUnixNano": "1796444403750000000",
                                    "endTimeUnixNano": "1796444403859349000",
                                    "attributes": [
                                        {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
                                        {"key": "gen_ai.workflow.name", "value": {"stringValue": "review"}},
                                        {"key": "otel_agents.run.id", "value": {"stringValue": "ab" * 16}},
                                        {"key": "otel_agents.message_count", "value": {"intValue": "3"}},
                                        {"key": "user.id", "value": {"stringValue": "ana"}},
                                        {"key": "otel_agents.stop_kind", "value": {"stringValue": "max_messages"}},
                                    ],
                                    "status": {},
                                },
                            ],
                        }
                    ],
                }
            ]
        }
    }


@pytest.mark.parametrize(
    ("ids", "kind", "code"),
    [
        ((TRACE, RUN_SPAN, CHILD), 3, 2),
        ((b64(TRACE), b64(RUN_SPAN), b64(CHILD)), "SPAN_KIND_CLIENT", "STATUS_CODE_ERROR"),
    ],
    ids=["hex-numbers", "base64-names"],
)
def test_a_span_is_the_row_the_store_would_hold(ids: tuple[str, str, str], kind: Any, code: Any) -> None:
    run_span, chat = stored_spans(answer(*ids, kind=kind, code=code))  # by start, as the store reads them
    assert (chat.trace_id, chat.span_id, chat.parent_span_id) == (TRACE, CHILD, RUN_SPAN)
    assert chat.data["kind"] == "CLIENT"
    assert chat.data["status"] == {"code": "ERROR", "description": "boom"}
    assert chat.attributes == {
        "gen_ai.usage.input_tokens": 40,
        "otel_agents.cost.usd": 0.0000066,
        "gen_ai.response.finish_reasons": ["stop"],
    }, "Jaeger's own @jaeger@ annotations are not the app's; arrays as the store keeps them"
    assert [event["name"] for event in chat.data["events"]] == ["first", "second"], "in the order they happened"
    assert chat.data["resource"] == {"service.name": "svc"}
    assert chat.data["scope"] == {"name": "otel_agents", "version": "0.1.0"}
    assert run_span.data["status"]["code"] == "UNSET" and run_span.data["kind"] == "INTERNAL"
    assert run_of(chat) is None
    run = run_of(run_span)
    assert run is not None
    assert (run.run_id, run.trace_id, run.team, run.user_id, run.messages, run.stop_kind) == (
        "ab" * 16,
        TRACE,
        "review",
        "ana",
        3,
        "max_messages",
    )
    assert (run.started_ns, run.ended_ns) == (1796444403750000000, 1796444403859349000)
    assert run.cost_usd is None and run.input_tokens is None, "absent on the span: absent in the row"


def test_spans_under_the_older_instrumentation_library_key_are_read_with_their_scope() -> None:
    """Before OTLP 0.15 a scope's spans were `instrumentationLibrarySpans`, the scope `instrumentationLibrary`."""
    document = answer(TRACE, RUN_SPAN, CHILD, kind=3, code=2)
    (resource_spans,) = document["result"]["resourceSpans"]
    (scope_spans,) = resource_spans.pop("scopeSpans")
    scope_spans["instrumentationLibrary"] = scope_spans.pop("scope")
    resource_spans["instrumentationLibrarySpans"] = [scope_spans]
    spans = stored_spans(document)
    assert [(s.span_id, s.parent_span_id) for s in spans] == [(RUN_SPAN, None), (CHILD, RUN_SPAN)]
    run_span, chat = spans
    assert chat.data["resource"] == {"service.name": "svc"}
    assert chat.data["scope"] == {"name": "otel_agents", "version": "0.1.0"}
    run = run_of(run_span)
    assert run is not None and (run.run_id, run.team) == ("ab" * 16, "review")


@pytest.mark.parametrize(
    "document",
    [{"result": {"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": CHILD}]}]}]}}, ["not", "an", "object"], {}],
    ids=["no-trace-id", "a-list", "no-resource-spans"],
)
def test_what_is_not_otlp_json_is_said_so(document: Any) -> None:
    with pytest.raises(NotOtlpJson):
        stored_spans(document)


@pytest.mark.parametrize("url", ["localhost:16686", "ftp://127.0.0.1", "http://", "http://127.0.0.1:16686/?x=1"])
def test_a_url_that_is_not_jaegers_base_is_refused_naming_the_option(url: str) -> None:
    with pytest.raises(ValueError, match=r"^--jaeger .*expected the base URL of Jaeger's UI or query API"):
        checked_url(url)
    assert checked_url("http://127.0.0.1:16686/") == "http://127.0.0.1:16686"

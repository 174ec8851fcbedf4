"""Local HTTP servers on 127.0.0.1 that answer as Jaeger's query API does (or badly: holding or
dribbling a body after its headers), for the bad-input tests of the page's Jaeger source
(otel_agents/ui/jaeger.py); and small OTLP JSON documents of a run as Jaeger's `/api/v3` gives them."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.local_http import serving

NO_TRACES: Any = {"error": {"httpCode": 404, "message": "No traces found"}}
"""Jaeger v2's answer to a search or a trace id it holds nothing for (a 404)."""


class Asked:
    """What the server was asked: each request's path and query, in order (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.paths: list[str] = []

    def add(self, target: str) -> None:
        with self.lock:
            self.paths.append(target)

    def count(self, path: str) -> int:
        with self.lock:
            return sum(1 for p in self.paths if urlsplit(p).path == path)


Handle = Callable[[BaseHTTPRequestHandler, str, dict[str, list[str]]], None]
"""Answers one GET: the request, its path and its query."""


@contextmanager
def jaeger_like(handle: Handle) -> Iterator[tuple[str, Asked]]:
    """A server answering each GET with `handle`; its base URL and what it was asked."""
    asked = Asked()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.add(self.path)
            parts = urlsplit(self.path)
            try:
                handle(self, parts.path, parse_qs(parts.query))
            except ConnectionError:  # the page gave up on this answer (and said so)
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked


def send_json(request: BaseHTTPRequestHandler, status: int, answer: Any) -> None:
    body = json.dumps(answer).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    request.wfile.write(body)


def _text(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def run_trace(trace_id: str, run_id: str, *, conversation: str | None = None, start_ns: int) -> dict[str, Any]:
    """Jaeger's `/api/v3` answer for a trace holding one finished run (a workflow span)."""
    attributes = [
        _text("gen_ai.operation.name", "invoke_workflow"),
        _text("gen_ai.workflow.name", "review"),
        _text("otel_agents.run.id", run_id),
    ]
    if conversation is not None:
        attributes.append(_text("gen_ai.conversation.id", conversation))
    span = {
        "traceId": trace_id,
        "spanId": "f242112ce53216af",
        "name": "invoke_workflow review",
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 100_000_000),
        "attributes": attributes,
        "status": {},
    }
    return {
        "result": {
            "resourceSpans": [
                {
                    "resource": {"attributes": [_text("service.name", "svc")]},
                    "scopeSpans": [{"scope": {"name": "otel_agents"}, "spans": [span]}],
                }
            ]
        }
    }

"""Local HTTP servers on 127.0.0.1 that answer as Prometheus's HTTP API does, or badly, for the
tests of the cost page's Prometheus source (otel_agents/ui/prometheus.py): each answer made by the
test, by the request's path (and query)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.support.local_http import serving

EMPTY = {
    "/api/v1/query": {"status": "success", "data": {"resultType": "vector", "result": []}},
    "/api/v1/query_range": {"status": "success", "data": {"resultType": "matrix", "result": []}},
    "/api/v1/query_exemplars": {"status": "success", "data": []},
    "/api/v1/status/flags": {"status": "success", "data": {"enable-feature": "exemplar-storage"}},
}
"""What a Prometheus with no series answers each path the page asks."""

Reply = tuple[int, str, bytes]
"""An answer: its status, content type and body."""


@contextmanager
def serving_requests(reply: Callable[[str], Reply]) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 answering each GET with `reply(target)` (the request's path and
    query): (status, content type, body). Its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, kind, body = reply(self.path)
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except ConnectionError:  # the page gave up on this answer (and said so)
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


@contextmanager
def answering(reply: Callable[[str], Reply]) -> Iterator[str]:
    """The same, answering by the request's path alone."""
    with serving_requests(lambda target: reply(urlsplit(target).path)) as url:
        yield url


def as_json(status: int, answer: Any) -> Reply:
    return status, "application/json", json.dumps(answer).encode()

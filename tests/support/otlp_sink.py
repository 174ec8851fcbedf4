"""An OTLP trace receiver of ours on 127.0.0.1, over HTTP/protobuf or gRPC: keeps every span it is
sent (trace id, span id, name, the run attributes), optionally slow to answer, so that a test can
compare what arrived with what the app ended."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tests.support.local_http import serving


@dataclass(frozen=True)
class Received:
    trace_id: str
    span_id: str
    name: str
    attributes: dict[str, Any]


@dataclass
class OtlpSink:
    delay_s: float = 0.0
    """How long each export waits before it is answered (a slow backend)."""
    spans: list[Received] = field(default_factory=list)
    endpoint: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def take(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        received = [
            Received(
                span.trace_id.hex(),
                span.span_id.hex(),
                span.name,
                {kv.key: _value(kv.value) for kv in span.attributes},
            )
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        if self.delay_s:
            time.sleep(self.delay_s)  # the backend's own slowness, not a wait of the test's
        with self._lock:
            self.spans.extend(received)

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.spans)

    def twice(self) -> list[str]:
        """Span ids that arrived more than once."""
        return [span_id for span_id, n in Counter(s.span_id for s in self.received()).items() if n > 1]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


@contextmanager
def otlp_sink(protocol: str, delay_s: float = 0.0) -> Iterator[OtlpSink]:
    """A running sink: `protocol` `http/protobuf` (its endpoint a base URL) or `grpc`."""
    sink = OtlpSink(delay_s=delay_s)
    if protocol == "grpc":
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                sink.take(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        sink.endpoint = f"http://127.0.0.1:{port}"
        try:
            yield sink
        finally:
            server.stop(grace=None)
        return

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.rstrip("/").endswith("/v1/traces"):
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                sink.take(request)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as server:
        host, port = server.server_address[:2]
        sink.endpoint = f"http://{host}:{port}"
        yield sink

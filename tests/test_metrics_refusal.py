"""A traces-only backend (a bare Jaeger, Phoenix) refuses metrics: told once, then not sent there, traces unaffected.

Real servers on 127.0.0.1: an HTTP one that takes /v1/traces and answers /v1/metrics with a status,
and a gRPC one that serves the trace service only (so the metrics service is UNIMPLEMENTED).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

import otel_agents
from tests.support.bad_backends import answering
from tests.support.teams import writers_room

FLUSHES = 3
METRICS_RPC = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
TRACES_RPC = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@dataclass
class Backend:
    endpoint: str
    received: Counter[str] = field(default_factory=Counter)
    """Requests by path (HTTP) or method (gRPC)."""


@contextmanager
def traces_only_http(metrics_status: int) -> Iterator[Backend]:
    """Takes POST /v1/traces (200); answers POST /v1/metrics with `metrics_status`."""
    received: Counter[str] = Counter()
    lock = threading.Lock()

    def status_for(path: str) -> int:
        with lock:
            received[path] += 1
        return 200 if path == "/v1/traces" else metrics_status

    with answering(status_for) as url:
        yield Backend(url, received)


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request: Any, context: Any) -> Any:
        return trace_service_pb2.ExportTraceServiceResponse()


class _Count(grpc.GenericRpcHandler):
    """Counts every call, then leaves it to the registered services (none for metrics: UNIMPLEMENTED)."""

    def __init__(self, received: Counter[str], lock: threading.Lock) -> None:
        self.received = received
        self.lock = lock

    def service(self, handler_call_details: Any) -> None:
        with self.lock:
            self.received[handler_call_details.method] += 1
        return None


@contextmanager
def traces_only_grpc() -> Iterator[Backend]:
    """Serves the OTLP trace service only: a metrics export is answered UNIMPLEMENTED by gRPC itself."""
    received: Counter[str] = Counter()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[_Count(received, threading.Lock())])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield Backend(f"http://127.0.0.1:{port}", received)
    finally:
        server.stop(grace=None).wait(timeout=5)


@pytest.fixture(autouse=True)
def bounded_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")  # only our flushes export metrics


async def run_and_flush(backend: Backend, protocol: str) -> None:
    """A tapped team run (spans and metrics), `FLUSHES` flushes, then shutdown (one more export)."""
    telemetry = otel_agents.configure(endpoint=backend.endpoint, protocol=protocol, store=False)
    async for _ in otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")):
        pass
    for _ in range(FLUSHES):
        telemetry.force_flush()
    telemetry.shutdown()


def refusal_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "does not accept metrics" in r.getMessage()]


def metrics_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Failed to export metrics" in r.getMessage()]


@pytest.mark.parametrize("status", [405, 404])
async def test_an_http_backend_refusing_metrics_is_told_once_and_sent_no_more(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with traces_only_http(status) as backend:
        await run_and_flush(backend, "http/protobuf")

    (warning,) = refusal_warnings(caplog)
    assert warning.name.startswith("otel_agents.") and warning.levelno == logging.WARNING
    assert warning.getMessage() == (
        f"otel-agents: {backend.endpoint}/v1/metrics does not accept metrics (HTTP {status}); metrics are no "
        "longer sent there. Send them elsewhere with OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, or switch them off "
        "with OTEL_METRICS_EXPORTER=none."
    )
    assert backend.received["/v1/metrics"] == 1, "after the refusal nothing more is sent there"
    assert metrics_errors(caplog) == [], "the exporter's own error is not logged on top of the warning"
    assert backend.received["/v1/traces"] >= 1, "traces still go"
    assert not [r for r in caplog.records if "could not export spans" in r.getMessage()]


async def test_a_grpc_backend_without_the_metrics_service_is_told_once_and_sent_no_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with traces_only_grpc() as backend:
        await run_and_flush(backend, "grpc")

    (warning,) = refusal_warnings(caplog)
    assert warning.name.startswith("otel_agents.") and warning.levelno == logging.WARNING
    assert f"{backend.endpoint} does not accept metrics (gRPC UNIMPLEMENTED)" in warning.getMessage()
    assert "OTEL_METRICS_EXPORTER=none" in warning.getMessage()
    assert backend.received[METRICS_RPC] == 1, "after the refusal nothing more is sent there"
    assert metrics_errors(caplog) == [], "the exporter's own error is not logged on top of the warning"
    assert backend.received[TRACES_RPC] >= 1, "traces still go"
    assert not [r for r in caplog.records if "could not export spans" in r.getMessage()]


async def test_a_failing_metrics_endpoint_is_not_a_refusal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with traces_only_http(500) as backend:
        await run_and_flush(backend, "http/protobuf")

    assert refusal_warnings(caplog) == []
    assert backend.received["/v1/metrics"] == FLUSHES + 1, "every export still tries: a 500 may be an outage"
    assert len(metrics_errors(caplog)) == FLUSHES + 1, "and fails as loudly as without otel-agents"
    assert backend.received["/v1/traces"] >= 1

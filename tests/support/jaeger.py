"""Jaeger v2, built from its Go module, run on 127.0.0.1 with deploy/jaeger/config.yaml.

The config is deploy/'s own with only its addresses changed: every listener on a free 127.0.0.1
port (OTLP gRPC and HTTP, the query API's HTTP and gRPC, the health check, Jaeger's own metrics),
its metrics backend at the Prometheus the test gives it. Read back through the query API:
`/api/...` (Jaeger's JSON), `/api/v3/...` (OTLP JSON) and `/api/metrics/...` (the Monitor tab's).
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.support.collector import internal_metrics_on, readdress
from tests.support.deploy import DEPLOY
from tests.support.processes import launch, on_free_ports, stop_process

T = TypeVar("T")


@dataclass(frozen=True)
class JaegerPorts:
    otlp_grpc: int
    otlp_http: int
    query_http: int
    query_grpc: int
    health: int
    metrics: int


def render_config(source: Path, ports: JaegerPorts, prometheus_url: str) -> dict[str, Any]:
    """deploy/'s Jaeger config with every listener moved to 127.0.0.1 and its metrics backend at
    `prometheus_url` (nothing else changed): the query API's two listeners, which it leaves at their
    defaults on every interface, are named."""
    config: dict[str, Any] = readdress(
        yaml.safe_load(source.read_text()),
        {
            "0.0.0.0:4317": f"127.0.0.1:{ports.otlp_grpc}",
            "0.0.0.0:4318": f"127.0.0.1:{ports.otlp_http}",
            "0.0.0.0:13133": f"127.0.0.1:{ports.health}",
            "http://prometheus:9090": prometheus_url,
        },
    )
    query = config["extensions"]["jaeger_query"]
    query["http"] = {**(query.get("http") or {}), "endpoint": f"127.0.0.1:{ports.query_http}"}
    query["grpc"] = {**(query.get("grpc") or {}), "endpoint": f"127.0.0.1:{ports.query_grpc}"}
    internal_metrics_on(config, ports.metrics)
    return config


def poll(read: Callable[[], T], done: Callable[[T], bool], within_s: float = 30) -> T:
    """`read()` until `done(value)` (or the deadline passed): the last value read."""
    deadline = time.monotonic() + within_s
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.2)
        value = read()
    return value


@dataclass
class Jaeger:
    ports: JaegerPorts
    pid: int

    @property
    def otlp_http(self) -> str:
        return f"http://127.0.0.1:{self.ports.otlp_http}"

    @property
    def otlp_grpc(self) -> str:
        return f"http://127.0.0.1:{self.ports.otlp_grpc}"

    def endpoint(self, protocol: str) -> str:
        return self.otlp_grpc if protocol == "grpc" else self.otlp_http

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"http://127.0.0.1:{self.ports.query_http}{urllib.parse.quote(path)}{query}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise AssertionError(f"GET {url}: {error.code} {error.read().decode(errors='replace')[:2000]}") from None

    def services(self) -> list[str]:
        return list(self.get("/api/services")["data"] or [])

    def operations(self, service: str) -> list[str]:
        return list(self.get(f"/api/services/{service}/operations")["data"] or [])

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """The trace as Jaeger's JSON (spans, their references, tags and logs), or None."""
        found = self.get(f"/api/traces/{trace_id}")
        return found["data"][0] if found and found.get("data") else None

    def wait_for_trace(self, trace_id: str, span_count: int, within_s: float = 30) -> dict[str, Any]:
        trace = poll(lambda: self.trace(trace_id), lambda t: t is not None and len(t["spans"]) >= span_count, within_s)
        assert trace is not None, f"trace {trace_id} never arrived"
        return trace

    def search(self, service: str, *, operation: str | None = None, tags: Mapping[str, str] | None = None) -> set[str]:
        """Trace ids `/api/traces` finds for the service, operation and tags (all must match)."""
        params = {"service": service, "limit": "100", "lookback": "1h"}
        if operation is not None:
            params["operation"] = operation
        if tags:
            params["tags"] = json.dumps(dict(tags))
        return {trace["traceID"] for trace in self.get("/api/traces", params)["data"] or []}

    def v3_trace(self, trace_id: str) -> list[dict[str, Any]]:
        """The trace's spans as `/api/v3/traces/{id}` gives them (OTLP JSON)."""
        found = self.get(f"/api/v3/traces/{trace_id}")
        if not found:
            return []
        return [
            span
            for resource in found["result"]["resourceSpans"]
            for scope in resource["scopeSpans"]
            for span in scope["spans"]
        ]

    def rates(self, kind: str, service: str, span_kinds: Sequence[str], **params: str) -> dict[str, list[float]]:
        """`/api/metrics/{kind}` (latencies, calls or errors) grouped by operation, as the Monitor tab
        asks for them: each operation's points, oldest first (NaN where Prometheus had no value)."""
        query = urllib.parse.urlencode(
            [
                ("service", service),
                ("groupByOperation", "true"),
                *(("spanKind", k) for k in span_kinds),
                *params.items(),
            ]
        )
        url = f"http://127.0.0.1:{self.ports.query_http}/api/metrics/{kind}?{query}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                family = json.load(response)
        except urllib.error.HTTPError as error:
            raise AssertionError(f"GET {url}: {error.code} {error.read().decode(errors='replace')[:2000]}") from None
        found: dict[str, list[float]] = {}
        for metric in family.get("metrics") or []:
            labels = {label["name"]: label["value"] for label in metric.get("labels") or []}
            points = [float(p["gaugeValue"]["doubleValue"]) for p in metric.get("metricPoints") or []]
            found[labels.get("operation", "")] = points
        return found

    def v3_search(self, service: str, operation: str) -> set[str]:
        now = time.time()
        params = {
            "query.service_name": service,
            "query.operation_name": operation,
            "query.start_time_min": _rfc3339(now - 3600),
            "query.start_time_max": _rfc3339(now + 60),
            "query.num_traces": "100",
        }
        found = self.get("/api/v3/traces", params)
        if not found:
            return set()
        return {
            _hex_id(span["traceId"])
            for resource in found["result"]["resourceSpans"]
            for scope in resource["scopeSpans"]
            for span in scope["spans"]
        }


def _rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _hex_id(value: str) -> str:
    """A trace or span id of the v3 API's OTLP JSON: hex (as the OTLP/JSON spec says), or base64."""
    if all(c in "0123456789abcdefABCDEF" for c in value) and len(value) in (16, 32):
        return value.lower()
    return base64.b64decode(value).hex()


@contextmanager
def running_jaeger(
    binary: str,
    workdir: Path,
    *,
    prometheus_url: str | None = None,
    render: Callable[[JaegerPorts, str], dict[str, Any]] | None = None,
) -> Iterator[Jaeger]:
    """deploy's Jaeger (or the config `render(ports, metrics backend)` makes); its metrics backend at
    `prometheus_url` (unset: a free 127.0.0.1 port with nothing on it, for tests that read no
    metrics; Jaeger asks it only when asked for metrics)."""

    def start(found: list[int]) -> tuple[JaegerPorts, subprocess.Popen[bytes]]:
        *given, unused = found
        ports = JaegerPorts(*given)
        config = workdir / "jaeger.yaml"
        metrics_backend = prometheus_url or f"http://127.0.0.1:{unused}"
        rendered = (
            render(ports, metrics_backend)
            if render is not None
            else render_config(DEPLOY / "jaeger" / "config.yaml", ports, metrics_backend)
        )
        config.write_text(yaml.safe_dump(rendered))
        # Jaeger traces its own queries to the OTLP endpoint of its environment (by default
        # 127.0.0.1:4317, its own receiver in the compose stack): here too, its own receiver. Its last
        # spans find that receiver stopped when it shuts down: a 1 s export timeout, not 10 s, then.
        own_receiver = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{ports.otlp_grpc}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "1000",
        }
        health = f"http://127.0.0.1:{ports.health}/status"
        return ports, launch(binary, [f"--config={config}"], workdir / "jaeger.log", health, env=own_receiver)

    ports, process = on_free_ports(7, start)
    try:
        yield Jaeger(ports, process.pid)
    finally:
        stop_process(process)

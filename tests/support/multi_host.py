"""deploy/multi-host's gateway tier and Jaeger, run on 127.0.0.1 by the Jaeger binary built from
deploy/jaeger/go.mod (an OpenTelemetry Collector distribution with tail sampling, spanmetrics and
the Prometheus exporter). The Collector built from deploy/collector/manifest.yaml cannot run the
gateway: the tail-sampling processor is not served to these machines at its release.

Each config is deploy/'s own, rendered with other addresses, storage and names only: every
listener on a free 127.0.0.1 port; Jaeger on memory storage in place of Elasticsearch; component
types in the spelling of the Collector libraries Jaeger pins (v0.139, before `otlp` became
`otlp_grpc` and `spanmetrics` became `span_metrics`); the gateway's `decision_wait`, a timing
parameter, as the test asks. Pipelines, processors and policies stay as they are written.
"""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.collector import internal_metrics_on, readdress
from tests.support.deploy import DEPLOY
from tests.support.jaeger import Jaeger, JaegerPorts, running_jaeger
from tests.support.processes import free_port, launch, stop_process

LAYOUT = DEPLOY / "multi-host"
COMPONENT_KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")
# Collector v0.165's component types under the names Jaeger v1.75.0's pinned v0.139 libraries give them.
JAEGER_SPELLING = {"otlp_grpc": "otlp", "span_metrics": "spanmetrics"}


def in_jaegers_spelling(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with each component id's type renamed as JAEGER_SPELLING says, where it is defined
    and where the pipelines name it (pipeline ids, such as `traces/span_metrics`, are not components)."""

    def renamed(component_id: str) -> str:
        kind, _, name = component_id.partition("/")
        kind = JAEGER_SPELLING.get(kind, kind)
        return f"{kind}/{name}" if name else kind

    rendered = dict(config)
    for kind in COMPONENT_KINDS:
        if kind in rendered:
            rendered[kind] = {renamed(k): v for k, v in (rendered[kind] or {}).items()}
    service = dict(rendered.get("service") or {})
    service["pipelines"] = {
        pipeline: {kind: [renamed(c) for c in parts] for kind, parts in stages.items()}
        for pipeline, stages in (service.get("pipelines") or {}).items()
    }
    rendered["service"] = service
    return rendered


@dataclass(frozen=True)
class Gateway:
    otlp_grpc: int
    prometheus: int
    telemetry: int

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.otlp_grpc}"

    def own_metrics(self) -> OwnMetrics:
        """The gateway's own metrics, read from its Prometheus text."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.telemetry}/metrics", timeout=10) as response:
            text = response.read().decode()
        series: list[tuple[str, dict[str, str], float]] = []
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name_and_labels, _, value = line.rpartition(" ")
                name, _, labels = name_and_labels.partition("{")
                series.append((name, dict(LABEL.findall(labels)), float(value)))
        return OwnMetrics(series)


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class OwnMetrics:
    series: list[tuple[str, dict[str, str], float]]

    def total(self, name: str, **labels: str) -> float | None:
        """The sum of `name`'s series with those labels; None when there is no such series."""
        values = [v for n, found, v in self.series if n == name and labels.items() <= found.items()]
        return sum(values) if values else None


def render_gateway(gateway: Gateway, jaeger_otlp_grpc: str, decision_wait: str) -> dict[str, Any]:
    config = readdress(
        yaml.safe_load((LAYOUT / "otel-collector-gateway.yaml").read_text()),
        {
            "0.0.0.0:4317": f"127.0.0.1:{gateway.otlp_grpc}",
            "0.0.0.0:8889": f"127.0.0.1:{gateway.prometheus}",
            "jaeger:4317": jaeger_otlp_grpc,
        },
    )
    config["processors"]["tail_sampling"]["decision_wait"] = decision_wait
    internal_metrics_on(config, gateway.telemetry)
    return in_jaegers_spelling(config)


def accepting(port: int, within_s: float = 30) -> None:
    deadline = time.monotonic() + within_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextmanager
def running_gateway(
    binary: str,
    workdir: Path,
    *,
    jaeger_otlp_grpc: str,
    decision_wait: str,
) -> Iterator[Gateway]:
    """A gateway of deploy/multi-host exporting to `jaeger_otlp_grpc` (host:port)."""
    gateway = Gateway(free_port(), free_port(), free_port())
    config = render_gateway(gateway, jaeger_otlp_grpc, decision_wait)
    path = workdir / "otel-collector-gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    ready = f"http://127.0.0.1:{gateway.telemetry}/metrics"  # the config has no health check extension
    process = launch(binary, [f"--config={path}"], workdir / "otel-collector-gateway.log", ready)
    try:
        accepting(gateway.otlp_grpc)  # telemetry starts before the pipelines
        yield gateway
    finally:
        stop_process(process)


def render_jaeger(ports: JaegerPorts, prometheus_url: str) -> dict[str, Any]:
    """deploy/multi-host/jaeger.yaml with its listeners on 127.0.0.1 and memory storage in place
    of Elasticsearch (the same name everywhere the config names the store)."""
    config: dict[str, Any] = readdress(
        yaml.safe_load((LAYOUT / "jaeger.yaml").read_text()),
        {
            "0.0.0.0:4317": f"127.0.0.1:{ports.otlp_grpc}",
            "0.0.0.0:13133": f"127.0.0.1:{ports.health}",
            "http://prometheus:9090": prometheus_url,
        },
    )
    storage = config["extensions"]["jaeger_storage"]
    (store,) = storage["backends"]
    storage["backends"] = {store: {"memory": {"max_traces": 100_000}}}
    query = config["extensions"]["jaeger_query"]
    query["http"] = {**(query.get("http") or {}), "endpoint": f"127.0.0.1:{ports.query_http}"}
    query["grpc"] = {**(query.get("grpc") or {}), "endpoint": f"127.0.0.1:{ports.query_grpc}"}
    internal_metrics_on(config, ports.metrics)
    return config


@contextmanager
def running_multi_host_jaeger(binary: str, workdir: Path) -> Iterator[Jaeger]:
    with running_jaeger(binary, workdir, render=render_jaeger) as jaeger:
        yield jaeger


def app_environment(gateway: Gateway, service: str, store: Path) -> Mapping[str, str]:
    """An app's OTEL_* variables: OTLP over gRPC to the gateway (its only receiver), and the local
    store beside it (what the app recorded, for the test to compare)."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": gateway.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_SERVICE_NAME": service,
        "OTEL_AGENTS_STORE": str(store),
        # a queue no burst of runs overflows: a span the app drops is the app's loss, not the gateway's
        "OTEL_BSP_MAX_QUEUE_SIZE": "100000",
    }

"""The OpenTelemetry Collector built from deploy/collector/manifest.yaml, run on 127.0.0.1 with
deploy/otel-collector/config.yaml rendered with other addresses only (its pipelines, processors and
exporter settings as they are)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.deploy import DEPLOY
from tests.support.processes import launch, on_free_ports, stop_process


def readdress(config: Any, addresses: Mapping[str, str]) -> Any:
    """`config` with every string value found in `addresses` replaced by its new address; each
    address must be found, and none left listening on all interfaces."""
    used: set[str] = set()

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str) and value in addresses:
            used.add(value)
            return addresses[value]
        return value

    rendered = walk(config)
    assert used == set(addresses), f"not in the config: {set(addresses) - used}"
    assert "0.0.0.0" not in yaml.safe_dump(rendered), "every listener on 127.0.0.1"
    return rendered


def internal_metrics_on(config: dict[str, Any], port: int) -> None:
    """The binary's own metrics (by default on port 8888 of every interface) on 127.0.0.1:`port`."""
    telemetry = config.setdefault("service", {}).setdefault("telemetry", {})
    telemetry["metrics"] = {"readers": [{"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": port}}}}]}


@dataclass(frozen=True)
class Collector:
    otlp_grpc: int
    otlp_http: int
    prometheus: int

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.otlp_http}"

    @property
    def scrape_target(self) -> str:
        return f"127.0.0.1:{self.prometheus}"


@contextmanager
def running_collector(binary: str, workdir: Path, *, jaeger_otlp_grpc: str) -> Iterator[Collector]:
    """deploy's single-host Collector, exporting traces to `jaeger_otlp_grpc` (host:port)."""

    def start(ports: list[int]) -> tuple[Collector, subprocess.Popen[bytes]]:
        otlp_grpc, otlp_http, prometheus, health, internal = ports
        collector = Collector(otlp_grpc, otlp_http, prometheus)
        config = readdress(
            yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text()),
            {
                "0.0.0.0:4317": f"127.0.0.1:{collector.otlp_grpc}",
                "0.0.0.0:4318": f"127.0.0.1:{collector.otlp_http}",
                "0.0.0.0:8889": collector.scrape_target,
                "0.0.0.0:13133": f"127.0.0.1:{health}",
                "jaeger:4317": jaeger_otlp_grpc,
            },
        )
        internal_metrics_on(config, internal)
        path = workdir / "otel-collector.yaml"
        path.write_text(yaml.safe_dump(config))
        return collector, launch(
            binary, [f"--config={path}"], workdir / "otel-collector.log", f"http://127.0.0.1:{health}/"
        )

    collector, process = on_free_ports(5, start)
    try:
        yield collector
    finally:
        stop_process(process)

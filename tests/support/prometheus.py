"""Prometheus (and Alertmanager) from Debian, started on 127.0.0.1 by the tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.processes import launch, on_free_ports, stop_process


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        stop_process(self.process)


@dataclass
class Prometheus(Server):
    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def scraped_since(self, when: float) -> bool:
        """Every target has been scraped since `when` (a `time.time()`): what was measured before
        then is in the series (`up` is written with the scrape's other samples, stamped with its
        start)."""
        ups = self.query("timestamp(up)")
        return bool(ups) and all(float(r["value"][1]) > when for r in ups)

    def exemplars(self, promql: str, since: float) -> list[dict[str, Any]]:
        """`/api/v1/query_exemplars` for `promql` from `since` (a `time.time()`) to now: each series'
        labels and its exemplars (labels, value, timestamp)."""
        params = {"query": promql, "start": f"{since:.3f}", "end": f"{time.time() + 60:.3f}"}
        url = f"{self.url}/api/v1/query_exemplars?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return list(body["data"] or [])

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/alerts", timeout=10) as response:
            return list(json.load(response)["data"]["alerts"])


def start_prometheus(
    workdir: Path,
    targets: list[str],
    *,
    rules: Path | None = None,
    alertmanager: str | None = None,
    interval: str = "1s",
    flags: Sequence[str] = (),
) -> Prometheus:
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [{"job_name": "otel-agents", "static_configs": [{"targets": targets}]}],
    }
    if rules is not None:
        config["rule_files"] = [str(rules)]
    if alertmanager is not None:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return launch_prometheus(workdir, config, flags=flags)


def launch_prometheus(
    workdir: Path, config: Mapping[str, Any], port: int | None = None, flags: Sequence[str] = ()
) -> Prometheus:
    """Debian's Prometheus on 127.0.0.1:`port` (unset: a free one) with `config` (prometheus.yml as
    a mapping) and the command line `flags` besides (`--enable-feature=...`), ready."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus (Debian's package) is not installed"
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(dict(config)))

    def start(ports: list[int]) -> Prometheus:
        (listen,) = ports
        args = [
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{listen}",
            *flags,
        ]
        process = launch(binary, args, workdir / "prometheus.log", f"http://127.0.0.1:{listen}/-/ready")
        return Prometheus(f"http://127.0.0.1:{listen}", process)

    return start([port]) if port else on_free_ports(1, start)


def start_alertmanager(workdir: Path, config: dict[str, Any]) -> Server:
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    assert binary, "prometheus-alertmanager (Debian's package) is not installed"
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))

    def start(ports: list[int]) -> Server:
        port, cluster = ports
        args = [
            f"--config.file={workdir / 'alertmanager.yml'}",
            f"--storage.path={workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--cluster.listen-address=127.0.0.1:{cluster}",
        ]
        process = launch(binary, args, workdir / "alertmanager.log", f"http://127.0.0.1:{port}/-/ready")
        return Server(f"http://127.0.0.1:{port}", process)

    return on_free_ports(2, start)


@contextmanager
def scraped_pipeline(workdir: Path, **configure: Any) -> Iterator[tuple[Prometheus, Any, Any]]:
    """`otel_agents.configure()` with an in-memory span exporter and its Prometheus endpoint on a free
    port, scraped by a real Prometheus: (server, telemetry, exporter); both stopped at the end."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_agents

    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, prometheus=("127.0.0.1", 0), **configure)
    assert telemetry.prometheus is not None
    server = start_prometheus(workdir, [f"127.0.0.1:{telemetry.prometheus.port}"])
    try:
        yield server, telemetry, exporter
    finally:
        server.stop()
        telemetry.shutdown()

"""Prometheus (and Alertmanager) from Debian, started on 127.0.0.1 by the tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.processes import free_port, launch, stop_process


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
) -> Prometheus:
    binary = shutil.which("prometheus")
    assert binary, "prometheus (Debian's package) is not installed"
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [{"job_name": "otel-agents", "static_configs": [{"targets": targets}]}],
    }
    if rules is not None:
        config["rule_files"] = [str(rules)]
    if alertmanager is not None:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    args = [
        f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    process = launch(binary, args, workdir / "prometheus.log", f"http://127.0.0.1:{port}/-/ready")
    return Prometheus(f"http://127.0.0.1:{port}", process)


def start_alertmanager(workdir: Path, config: dict[str, Any]) -> Server:
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    assert binary, "prometheus-alertmanager (Debian's package) is not installed"
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
    port, cluster = free_port(), free_port()
    args = [
        f"--config.file={workdir / 'alertmanager.yml'}",
        f"--storage.path={workdir / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--cluster.listen-address=127.0.0.1:{cluster}",
    ]
    process = launch(binary, args, workdir / "alertmanager.log", f"http://127.0.0.1:{port}/-/ready")
    return Server(f"http://127.0.0.1:{port}", process)

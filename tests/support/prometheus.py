"""Prometheus (and Alertmanager) from Debian, started on 127.0.0.1 by the tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.phoenix import free_port


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready within {within_s} s")


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


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
    log = workdir / "prometheus.log"
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    server = Prometheus(f"http://127.0.0.1:{port}", process)
    try:
        wait_ready(f"{server.url}/-/ready", process, log)
    except Exception:
        server.stop()
        raise
    return server


def start_alertmanager(workdir: Path, config: dict[str, Any]) -> Server:
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    assert binary, "prometheus-alertmanager (Debian's package) is not installed"
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
    port, cluster = free_port(), free_port()
    log = workdir / "alertmanager.log"
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={workdir / 'alertmanager.yml'}",
            f"--storage.path={workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--cluster.listen-address=127.0.0.1:{cluster}",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    server = Server(f"http://127.0.0.1:{port}", process)
    try:
        wait_ready(f"{server.url}/-/ready", process, log)
    except Exception:
        server.stop()
        raise
    return server

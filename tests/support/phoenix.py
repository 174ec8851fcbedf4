"""Arize Phoenix, a real OTLP backend, started on 127.0.0.1 for the session's tests.

The test command installs Phoenix into its own environment and names its `phoenix` executable in
OTEL_AGENTS_TEST_PHOENIX. Phoenix's gRPC port listens on all interfaces (its one exception to
binding 127.0.0.1), so it gets an unusual port.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import on_free_ports, stop_process


@dataclass
class Phoenix:
    http_port: int
    grpc_port: int
    process: subprocess.Popen[bytes]

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    def spans(self, project: str, trace_id: str) -> list[dict[str, Any]]:
        url = f"{self.http_endpoint}/v1/projects/{project}/spans?trace_id={trace_id}&limit=1000"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return list(json.load(response)["data"])
        except urllib.error.HTTPError as error:
            if error.code == 404:  # the project does not exist yet
                return []
            raise

    def project_spans(self, project: str, count: int, deadline_s: float = 30) -> list[dict[str, Any]]:
        """Every span of the project, polled until `count` arrived (or the deadline passed)."""
        url = f"{self.http_endpoint}/v1/projects/{project}/spans?limit=1000"
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    spans = list(json.load(response)["data"])
            except urllib.error.HTTPError as error:
                if error.code != 404:  # 404: the project does not exist yet
                    raise
                spans = []
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.25)

    def wait_for_spans(self, project: str, trace_id: str, count: int, deadline_s: float = 30) -> list[dict[str, Any]]:
        """Poll until `count` spans of the trace arrived (or the deadline passed)."""
        deadline = time.monotonic() + deadline_s
        spans = self.spans(project, trace_id)
        while len(spans) < count and time.monotonic() < deadline:
            time.sleep(0.25)
            spans = self.spans(project, trace_id)
        return spans


def start_phoenix(executable: str, working_dir: Path, *, ready_within_s: float = 120) -> Phoenix:
    return on_free_ports(2, lambda ports: _start_phoenix(executable, working_dir, ports, ready_within_s))


def _start_phoenix(executable: str, working_dir: Path, ports: list[int], ready_within_s: float) -> Phoenix:
    http_port, grpc_port = ports
    env = dict(
        os.environ,
        PHOENIX_WORKING_DIR=str(working_dir),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(http_port),
        PHOENIX_GRPC_PORT=str(grpc_port),
        PHOENIX_TELEMETRY_ENABLED="false",
    )
    log_path = working_dir / "phoenix.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    phoenix = Phoenix(http_port, grpc_port, process)
    deadline = time.monotonic() + ready_within_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"phoenix exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{phoenix.http_endpoint}/healthz", timeout=2) as response:
                if response.status == 200:
                    return phoenix
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    stop_phoenix(phoenix)
    raise RuntimeError(f"phoenix was not ready within {ready_within_s} s")


def stop_phoenix(phoenix: Phoenix) -> None:
    stop_process(phoenix.process)

"""The embedded store as a traces exporter by name (DESIGN section 3, "Settings"): an app of ours
run unchanged by `opentelemetry-instrument` with the documented recipe,

    OTEL_TRACES_EXPORTER=otel_agents_store OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none

writes its runs to the store the CLI reads, behind the content guard, quietly: nothing connects
to the distro's default OTLP endpoint (localhost:4317), and stderr is empty."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from otel_agents._internal.export.store.reader import Store
from tests.support.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "support" / "zero_code_app.py"
BIN = Path(sys.executable).parent
RECIPE = {"OTEL_TRACES_EXPORTER": "otel_agents_store", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}


class Listener:
    """Listens on 127.0.0.1:4317, the distro's default OTLP/gRPC endpoint, counting connections."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind(("127.0.0.1", 4317))
        except OSError as error:
            pytest.fail(f"127.0.0.1:4317 is taken ({error}): this test watches it")
        self.socket.listen(8)
        self.socket.settimeout(0.2)
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.socket.accept()
            except OSError:
                continue
            self.connections += 1
            client.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close()


def test_the_recipe_writes_the_store_quietly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    listener = Listener()
    try:
        with OpenAIServer() as server:
            done = subprocess.run(
                [str(BIN / "opentelemetry-instrument"), sys.executable, str(APP)],
                env={
                    "PATH": os.environ["PATH"],
                    "PYTHONPATH": str(ROOT),
                    "HOME": str(tmp_path),
                    "XDG_DATA_HOME": str(tmp_path / "data"),
                    "OPENAI_BASE_URL": server.base_url,
                    "OPENAI_API_KEY": "test-key",
                    "OTEL_AGENTS_STORE": str(store),
                    # the other instrumentations installed here capture content of their own
                    "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "autogen_agentchat,openai,httpx,httpx2",
                    **RECIPE,
                },
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", done.stderr[-3000:]
    assert listener.connections == 0, "nothing connects to localhost:4317"
    runs = Store(store).runs(limit=None)
    assert [run.team for run in runs] == ["writers-room"] * 2 and {run.stop_kind for run in runs} == {"max_messages"}
    for run in runs:
        spans = Store(store).spans(run.trace_id)
        assert len([s for s in spans if s.parent_span_id is None]) == 1, "each run one trace"
        assert "Write a line about tracing." not in json.dumps([s.attributes for s in spans]), "no content"
    listed = subprocess.run(
        [str(BIN / "otel-agents"), "--store", str(store), "runs", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert len(json.loads(listed.stdout)) == 2

"""The README's quick start, as a newcomer runs it: examples/quickstart.py against a local
OpenAI-compatible server, its run in the store (and the CLI), and in Phoenix over OTLP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.openai_server import OpenAIServer
from tests.support.phoenix import Phoenix

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.py"
BIN = Path(sys.executable).parent


def run(args: list[str], tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"), **variables}
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_quickstart_puts_one_run_in_the_default_store(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        done = run([sys.executable, str(QUICKSTART)], tmp_path, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k")
    assert "stopped: Maximum number of messages 3 reached" in done.stdout
    assert done.stderr == "", "a first run says nothing on stderr"
    assert list((tmp_path / "data").rglob("*.sqlite3")), "in the user data directory, where the CLI looks"
    runs = run([str(BIN / "otel-agents"), "runs"], tmp_path).stdout.splitlines()  # as the README says: no --store
    assert len(runs) == 2 and "writers-room" in runs[1] and "max_messages" in runs[1], runs
    shown = run([str(BIN / "otel-agents"), "show", runs[1].split()[0]], tmp_path).stdout
    for name in ("invoke_workflow writers-room", "invoke_agent writer", "invoke_agent critic", "chat gpt-4o-mini"):
        assert name in shown, shown


def test_the_quickstart_sends_one_trace_to_an_otlp_backend(phoenix: Phoenix, tmp_path: Path) -> None:
    project = "quickstart"
    with OpenAIServer() as server:
        done = run(
            [sys.executable, str(QUICKSTART)],
            tmp_path,
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test-key",
            OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.http_endpoint,
            OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}",
        )
    spans = phoenix.project_spans(project, count=10)
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["name"] == "invoke_workflow writers-room"
    assert len([s for s in spans if s["name"].startswith("chat")]) == server.request_count == 2
    metric_lines = [line for line in done.stderr.splitlines() if "metrics" in line]
    assert len(metric_lines) == 1 and "OTEL_METRICS_EXPORTER=none" in metric_lines[0], done.stderr

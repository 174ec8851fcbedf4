"""The `otel-agents` command, run as a user runs it: a separate process, exit codes, one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "otel_agents.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=False,
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("otel-agents: error: ") and text in lines[0]
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    store = tmp_path_factory.mktemp("demo-store")
    return store, cli("--store", str(store), "demo")


def test_demo_runs_offline_and_shows_its_trace(demo_store: tuple[Path, Any]) -> None:
    _, done = demo_store
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "---------- TextMessage (writer) ----------" in out
    assert "---------- ToolCallRequestEvent (writer) ----------" in out
    status_lines = re.findall(r"\[(\d+) messages · ([\d,]+) in / ([\d,]+) out tokens · \$([\d.]+)\]", out)
    assert [int(s[0]) for s in status_lines] == list(range(1, len(status_lines) + 1))
    assert float(status_lines[-1][3]) > 0, "the demo's model is priced"
    assert "invoke_workflow writers-room" in out and "execute_tool web_search" in out
    assert re.search(r"chat gpt-4o-mini-2024-07-18 .* \$0\.0", out)


def test_runs_json(demo_store: tuple[Path, Any]) -> None:
    store, _ = demo_store
    done = cli("--store", str(store), "runs", "--json")
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)
    assert set(run) == {
        "run_id", "trace_id", "team", "started_at", "duration_s", "messages",
        "input_tokens", "output_tokens", "cost_usd", "stop_reason", "stop_kind",
    }  # fmt: skip
    assert re.fullmatch(r"[0-9a-f]{32}", run["trace_id"]) and re.fullmatch(r"[0-9a-f]{32}", run["run_id"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", run["started_at"])
    assert run["team"] == "writers-room"
    assert run["stop_kind"] == "text_mention" and run["stop_reason"] == "Text 'APPROVE' mentioned"
    assert run["messages"] == 7 and run["input_tokens"] == 412 + 702 + 655 + 980 and run["output_tokens"] == 81
    assert run["cost_usd"] == pytest.approx((2749 * 0.15 + 81 * 0.60) / 1e6)
    assert run["duration_s"] > 0


def test_runs_table_and_limit(demo_store: tuple[Path, Any]) -> None:
    store, _ = demo_store
    done = cli("--store", str(store), "runs", "--limit", "1")
    assert done.returncode == 0
    header, row = done.stdout.strip().splitlines()
    assert header.split()[:3] == ["RUN", "STARTED", "(UTC)"]
    assert "writers-room" in row and "text_mention" in row


def test_show_by_prefix(demo_store: tuple[Path, Any]) -> None:
    store, _ = demo_store
    run = json.loads(cli("--store", str(store), "runs", "--json").stdout)[0]
    done = cli("--store", str(store), "show", run["run_id"][:6])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"run {run['run_id']}  trace {run['trace_id']}"
    tree = [line for line in lines if "█" in line]
    assert tree[0].startswith("invoke_workflow writers-room")
    assert any(line.startswith("├─ invoke_agent writer") for line in tree)
    assert any(line.startswith("│  ├─ chat gpt-4o-mini") or line.startswith("│  └─ chat gpt-4o-mini") for line in tree)
    shown = json.loads(cli("--store", str(store), "show", run["run_id"], "--json").stdout)
    assert shown["run"] == run
    names = [s["name"] for s in shown["spans"]]
    assert names[0] == "invoke_workflow writers-room" and "execute_tool web_search" in names


def test_an_empty_store(tmp_path: Path) -> None:
    assert cli("--store", str(tmp_path / "none"), "runs", "--json").stdout.strip() == "[]"
    done = cli("--store", str(tmp_path / "none"), "runs")
    assert (done.returncode, done.stdout.strip()) == (0, "no runs yet")


def test_unknown_and_ambiguous_runs_exit_2(demo_store: tuple[Path, Any], tmp_path: Path) -> None:
    store, _ = demo_store
    assert_one_line_error(cli("--store", str(store), "show", "ffffffff0000"), 2, "no run 'ffffffff0000'")
    assert_one_line_error(cli("--store", str(store), "show", "not-hex"), 2, "not a run id")
    assert_one_line_error(cli("--store", str(store), "export", "abc", "--endpoint", "http://127.0.0.1:9"), 2, "no run")


def test_bad_usage_exits_2_in_one_line(tmp_path: Path) -> None:
    assert_one_line_error(cli("frobnicate"), 2, "invalid choice")
    assert_one_line_error(cli("runs", "--limit", "0"), 2, "--limit 0")
    assert_one_line_error(cli("runs", "--limit", "many"), 2, "invalid int value")
    assert_one_line_error(cli("export"), 2, "one of the arguments")
    done = cli("--store", str(tmp_path), "export", "--all", env={"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"})
    assert_one_line_error(done, 2, "OTEL_EXPORTER_OTLP_PROTOCOL='carrier-pigeon'")


def test_export_to_an_unreachable_endpoint_exits_1(demo_store: tuple[Path, Any]) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store, _ = demo_store
    done = cli(
        "--store", str(store), "export", "--all", "--endpoint", f"http://127.0.0.1:{port}",
        env={"OTEL_EXPORTER_OTLP_TIMEOUT": "2"},
    )  # fmt: skip
    assert_one_line_error(done, 1, f"could not export to http://127.0.0.1:{port}/v1/traces")

"""The benchmark runs (quick mode): it measures every mode and workload and writes its tables.
Timing is never asserted here; BENCHMARKS.md holds the numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_the_benchmark_runs_in_quick_mode(tmp_path: Path) -> None:
    out, numbers = tmp_path / "BENCHMARKS.md", tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--rounds", "2", "--out", str(out), "--json", str(numbers)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OTEL_AGENTS_TEST_PHOENIX": ""},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(numbers.read_text())
    for workload in ("replay-5", "replay-100", "openai-tool"):
        modes = results[workload]
        traced = {"autogen", "openinference", "otel-agents", "otel-agents-metrics", "otel-agents-nested"}
        assert set(modes) == {"untraced", *traced}
        assert modes["untraced"]["ratio"] == 1.0 and modes["untraced"]["spans"] == 0
        for mode in traced:
            assert modes[mode]["spans"] > 0 and modes[mode]["median_ms"] > 0, (workload, mode)
    assert results["memory"]["traced"] > 0 and results["memory"]["untraced"] > 0
    assert all(op["us"] > 0 for op in results["operations"].values())
    assert "model-call span, per call" in results["operations"]
    text = out.read_text()
    assert "Command: `python -m benchmarks --quick --rounds 2`" in text
    assert "## replay-5" in text and "ratio to untraced" in text and "## What costs what" in text


def test_the_service_benchmark_runs_every_mode_side_by_side(tmp_path: Path) -> None:
    numbers = tmp_path / "service.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.service", "--rounds", "1", "--concurrency", "2", "--json", str(numbers)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(numbers.read_text())
    assert set(results) == {"untraced", "autogen", "otel-agents"}
    assert results["untraced"]["throughput_ratio"] == 1.0 and results["untraced"]["spans_per_run"] == 0
    for mode in ("autogen", "otel-agents"):
        assert results[mode]["spans_per_run"] > 0 and results[mode]["p99_ms"] >= results[mode]["p50_ms"] > 0

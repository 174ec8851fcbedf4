"""The sampling benchmark runs (one round, two runs at once): every mode in a worker of its own, the
OTLP modes exporting to a sink in a process of its own, which counts what each mode sent. Timing is
never asserted here; BENCHMARKS.md holds the numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.reference_tree import reference_tree

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_the_sampling_benchmark_exports_each_otlp_mode_to_its_own_sink_process(tmp_path: Path) -> None:
    numbers = tmp_path / "sampling.json"
    command = [sys.executable, "-m", "benchmarks.sampling", "--rounds", "1", "--concurrency", "2", "--no-memory"]
    command += ["--traces-only", "--in-process", "--json", str(numbers)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)

    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(numbers.read_text())
    modes, received = results["modes"], results["received"]
    assert set(modes) == {
        "untraced",
        "autogen-otlp",
        "otel-agents-otlp",
        "otel-agents-otlp-sampled",
        "otel-agents-otlp-traces",
        "otel-agents-otlp-sampled-traces",
        "autogen",
        "otel-agents",
    }
    for mode in ("autogen-otlp", "otel-agents-otlp", "otel-agents-otlp-traces"):  # every run exported
        assert received[mode]["spans"] > 0 and received[mode]["trace requests"] > 0, mode
    assert received["otel-agents-otlp"]["metric points"] > 0  # the endpoint turns metrics on
    assert "metric points" not in received.get("otel-agents-otlp-traces", {})  # OTEL_METRICS_EXPORTER=none
    assert "metric points" not in received["autogen-otlp"]
    for mode in ("untraced", "autogen", "otel-agents"):  # nothing of theirs reaches the sink
        assert mode not in received


def test_the_sampling_benchmark_adds_each_otlp_mode_of_the_reference_tree(tmp_path: Path) -> None:
    numbers, tree = tmp_path / "sampling.json", reference_tree(tmp_path)
    command = [sys.executable, "-m", "benchmarks.sampling", "--rounds", "1", "--concurrency", "1", "--no-memory"]
    command += ["--reference", str(tree), "--json", str(numbers)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)

    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(numbers.read_text())
    references = {f"otel-agents-otlp@{tree}", f"otel-agents-otlp-sampled@{tree}"}
    assert (
        set(results["modes"])
        == {"untraced", "autogen-otlp", "otel-agents-otlp", "otel-agents-otlp-sampled"} | references
    )
    assert results["received"][f"otel-agents-otlp@{tree}"]["spans"] > 0, "the reference tree's runs were exported"

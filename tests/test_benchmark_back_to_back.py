"""The back-to-back benchmark runs (one round of a few runs a mode), otel-agents also from another
tree. Timing is never asserted here; BENCHMARKS.md holds the numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.reference_tree import reference_tree

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_the_back_to_back_benchmark_measures_each_mode_and_the_reference_tree(tmp_path: Path) -> None:
    numbers, tree = tmp_path / "back_to_back.json", reference_tree(tmp_path)
    command = [sys.executable, "-m", "benchmarks.back_to_back", "--rounds", "1", "--runs", "3"]
    command += ["--reference", str(tree), "--json", str(numbers)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)

    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(numbers.read_text())
    assert set(results) == {"untraced", "otel-agents", f"otel-agents@{tree}"}
    assert results["untraced"]["cpu_ratio"] == 1.0
    for mode in results.values():
        assert mode["cpu_ms"] > 0 and mode["wall_ms"] > 0 and mode["switches_per_run"] >= 0
    assert f"| otel-agents@{tree} |" in done.stdout

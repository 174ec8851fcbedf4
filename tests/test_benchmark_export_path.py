"""The export-path benchmark runs (a few spans, no valgrind): it sets two trees up in processes of
their own and prints each part's time a span side by side. Timing is never asserted here;
BENCHMARKS.md holds the numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_the_export_path_benchmark_times_each_part_of_both_trees() -> None:
    command = [sys.executable, "-m", "benchmarks.export_path", "--against", str(ROOT), "--no-instructions"]
    command += ["--copies", "2", "--batches", "1", "--rounds", "2"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)

    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert sum(f"otel_agents imported from {ROOT / 'otel_agents'}" in line for line in lines) == 2
    rows = [line for line in lines if line.startswith("| ") and line.endswith("x |")]
    assert [row.split(" |")[0] for row in rows] == [
        "| the whole path: on_end of each span, then the flush that exports them",
        "| on_end alone (the span processors, into the batch queue)",
        "| the flush alone (the batch handed to the guard: scrub, sink)",
        "| the scrub alone (`scrub(span, policy)` of each span)",
        "| the guard alone (`GuardedExporter.export`: scrub and sink)",
    ]

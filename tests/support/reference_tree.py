"""A tree of otel_agents of its own, for the benchmarks' `--reference TREE` (a worktree of another
commit, in real use)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def reference_tree(tmp_path: Path) -> Path:
    """A copy of this otel_agents in a tree of its own (resolved): a mode said to come from it must
    import it from there, not from the project (the benchmark's worker checks)."""
    tree = tmp_path / "reference"
    shutil.copytree(ROOT / "otel_agents", tree / "otel_agents", ignore=shutil.ignore_patterns("__pycache__"))
    return tree.resolve()

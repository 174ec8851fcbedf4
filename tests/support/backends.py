"""Jaeger v2 and the OpenTelemetry Collector built from their Go modules (scripts/build_backends.sh).

The build script keeps each binary in a cache outside the clone, named by version; asked again it
builds nothing and names them. A machine without Go skips the tests that need them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "build_backends.sh"
NO_GO = 3  # the build script's exit status when Go is not installed


@dataclass(frozen=True)
class Backends:
    jaeger: str
    collector: str


def go_found() -> str | None:
    return shutil.which("go") or next((p for p in ("/usr/local/go/bin/go",) if os.access(p, os.X_OK)), None)


def built_backends(build_within_s: float = 3600) -> Backends:
    """The built binaries; skip (one line saying why) without Go. A build that fails is an error."""
    if go_found() is None:
        pytest.skip("Go is not installed: Jaeger and the Collector cannot be built from their modules")
    done = subprocess.run(
        ["bash", str(BUILD)], capture_output=True, text=True, timeout=build_within_s, cwd=ROOT, check=False
    )
    if done.returncode == NO_GO:
        pytest.skip(done.stderr.strip())
    if done.returncode != 0:
        raise RuntimeError(f"scripts/build_backends.sh failed ({done.returncode}):\n{done.stderr[-4000:]}")
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return Backends(jaeger=paths["OTEL_AGENTS_TEST_JAEGER"], collector=paths["OTEL_AGENTS_TEST_COLLECTOR"])

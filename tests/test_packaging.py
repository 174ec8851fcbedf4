"""The package as a user installs it: `python -m build` makes an sdist and a wheel that `twine
check` passes; the wheel carries `py.typed`, the console script and the instrumentor's entry
point; installed into a project that already holds AutoGen 0.7.1 and OpenTelemetry SDK 1.43.0 (with
the project's versions as constraints, as the README says), it leaves both where they are, and the
demo runs from it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXISTING_PROJECT = {
    "autogen-core": "0.7.1",
    "autogen-agentchat": "0.7.1",
    "autogen-ext": "0.7.1",
    "opentelemetry-api": "1.43.0",
    "opentelemetry-sdk": "1.43.0",
}


def sh(*args: str | Path, timeout: float = 300) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def installed(python: Path) -> dict[str, str]:
    lines = sh(python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check").splitlines()
    return dict(line.lower().split("==", 1) for line in lines if "==" in line)


def test_the_wheel_fits_a_project_on_older_versions_and_runs_the_demo(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    sh(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", dist, ROOT, timeout=600)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    sh(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        declared = archive.read(entry_points).decode()
    assert "otel_agents/py.typed" in names
    assert "[console_scripts]\notel-agents = otel_agents.cli:main" in declared
    assert "[opentelemetry_instrumentor]\notel_agents = otel_agents:AutoGenInstrumentor" in declared
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/"))], "the wheel carries the package only"

    venv = tmp_path / "project"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    sh(python, "-m", "pip", "install", "-q", *(f"{name}=={v}" for name, v in EXISTING_PROJECT.items()), timeout=600)
    # as the README says: keep what the project has pinned (pip takes the newest release of each
    # package it adds, and OpenTelemetry's packages pin one another's versions)
    keep = tmp_path / "keep.txt"
    keep.write_text(sh(python, "-m", "pip", "freeze"))
    sh(python, "-m", "pip", "install", "-q", wheel, "-c", keep, timeout=600)
    after = installed(python)
    assert {name: after[name] for name in EXISTING_PROJECT} == EXISTING_PROJECT, "the project's versions stay"

    shown = sh(venv / "bin" / "otel-agents", "--store", tmp_path / "store", "demo", timeout=120)
    assert "invoke_workflow writers-room" in shown and "chat gpt-4o-mini" in shown

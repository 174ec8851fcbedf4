"""The package as a user installs it: `python -m build` makes an sdist and a wheel that `twine
check` passes; the wheel carries `py.typed`, the console script and the instrumentor's entry
point; installed with a plain `pip install` into a project that already holds AutoGen 0.7.1 and
OpenTelemetry SDK 1.43.0, it leaves both where they are (with the pip Python 3.11 brings and with the
newest pip, extras too), the demo runs from it, and with the web extra its page serves the
demo's run. And the test command covers every AutoGen
release in the supported range."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.support.ui_server import ui_server

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


def would_install(python: Path, requirement: str, report: Path) -> dict[str, str]:
    """What a plain `pip install requirement` would install or change (name: version), not done."""
    sh(python, "-m", "pip", "install", "-q", "--dry-run", "--report", report, requirement, timeout=600)
    chosen = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in chosen}


@pytest.mark.slow
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
    every_extra = f"otel-agents[openai,grpc,prometheus,instrument,ui] @ {wheel.as_uri()}"
    for pip in ("bundled", "newest"):
        if pip == "newest":
            sh(python, "-m", "pip", "install", "-q", "--upgrade", "pip", timeout=300)
        for requirement in (str(wheel), every_extra):
            moved = {
                name: version
                for name, version in would_install(python, requirement, tmp_path / "report.json").items()
                if name in EXISTING_PROJECT
            }
            assert not moved, f"pip ({pip}) would move the project's {moved} installing {requirement}"
    sh(python, "-m", "pip", "install", "-q", wheel, timeout=600)  # plain, as a user does
    after = installed(python)
    assert {name: after[name] for name in EXISTING_PROJECT} == EXISTING_PROJECT, "the project's versions stay"

    shown = sh(venv / "bin" / "otel-agents", "--store", tmp_path / "store", "demo", timeout=120)
    assert "invoke_workflow writers-room" in shown and "chat gpt-4o-mini" in shown

    # the web page from the wheel: its templates and static files are in it, and serve the demo's run
    assert {"otel_agents/ui/templates/run.html", "otel_agents/ui/static/app.js"} <= names
    sh(python, "-m", "pip", "install", "-q", f"otel-agents[ui] @ {wheel.as_uri()}", timeout=600)
    with ui_server(tmp_path / "store", python=python) as ui:
        with urllib.request.urlopen(ui.url, timeout=30) as answer:
            page = answer.read().decode()
        with urllib.request.urlopen(f"{ui.url}static/app.js", timeout=30) as answer:
            script = answer.status
    assert "writers-room" in page and script == 200


def test_every_supported_autogen_release_up_to_the_installed_one_is_tested() -> None:
    """The AutoGen of ci/lowest.txt, the releases of ci/autogen-releases.txt and the AutoGen this
    suite runs on (the newest) are every 0.7 release from the lowest to it, each in the supported
    range: a new AutoGen release that is installed here but not added to the list fails this test."""
    from importlib.metadata import version

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from otel_agents._internal.autogen import conventions as ag

    (lowest,) = [
        Version(line.split("==")[1])
        for line in (ROOT / "ci" / "lowest.txt").read_text().splitlines()
        if line.startswith("autogen-agentchat==")
    ]
    between = [
        Version(line.strip())
        for line in (ROOT / "ci" / "autogen-releases.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    newest = Version(version("autogen-agentchat"))
    supported = SpecifierSet(ag.INSTRUMENTED_PACKAGES[0].removeprefix("autogen-agentchat"))
    tested = sorted({lowest, *between, newest})
    assert all(release in supported for release in tested), tested
    assert {(r.major, r.minor) for r in tested} == {(lowest.major, lowest.minor)}, tested
    assert [r.micro for r in tested] == list(range(lowest.micro, newest.micro + 1)), (
        f"tested {[str(r) for r in tested]}: add the missing releases to ci/autogen-releases.txt"
    )

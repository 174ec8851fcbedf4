"""The quick start (the README's, and docs/getting-started.md's), as a newcomer runs it: its code
block pasted into a script, and examples/quickstart.py (the same code), against a local
OpenAI-compatible server; the run in the store (and the CLI), and in Phoenix over OTLP."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.phoenix import Phoenix

pytestmark = [pytest.mark.lowest_versions]

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.py"
BIN = Path(sys.executable).parent
PAGES = [ROOT / "README.md", ROOT / "docs" / "getting-started.md"]


def readme_quick_start(page: Path = PAGES[0]) -> str:
    """The first Python block of a page's "Quick start", as a person copies it."""
    section = page.read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"\n```python\n(.*?)\n```\n", section, re.DOTALL)
    assert found, "the quick start has a Python block"
    return found.group(1) + "\n"


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


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_readme_quick_start_runs_as_pasted_into_a_script(tmp_path: Path, page: Path) -> None:
    pasted = tmp_path / "app.py"
    pasted.write_text(readme_quick_start(page))
    with OpenAIServer() as server:
        done = run([sys.executable, str(pasted)], tmp_path, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k")
    assert "stopped: Maximum number of messages 3 reached" in done.stdout
    assert server.request_count == 2, "the team's two model calls, made by the block as it is"
    runs = run([str(BIN / "otel-agents"), "runs"], tmp_path).stdout.splitlines()
    assert len(runs) == 2 and "writers-room" in runs[1], runs


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_quickstart_is_the_readme_quick_start(page: Path) -> None:
    example = QUICKSTART.read_text()
    docstring = ast.get_docstring(ast.parse(example), clean=False)
    assert docstring is not None
    code = example.split(f'"""{docstring}"""', 1)[1].lstrip("\n")
    assert code == readme_quick_start(page), f"{page.name}'s block and examples/quickstart.py are the same code"


@pytest.mark.backend
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

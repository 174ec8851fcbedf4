"""`otel-agents ui` in a real browser, the smoke test: a store filled by the real OpenAI client (every
kind of run the page shows), the command started as a user starts it, its runs page opened in
Debian's headless chromium; and the docs' screenshots made the same way."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.support.browser import chromium
from tests.support.cli import ROOT
from tests.support.processes import listening
from tests.support.ui_server import ui_server
from tests.support.ui_store import MARKUP, UiRuns

PNG = b"\x89PNG\r\n\x1a\n"


def test_the_runs_page_lists_every_run_newest_first_with_no_error(ui_runs: UiRuns) -> None:
    with ui_server(ui_runs.store) as ui, chromium() as browser:
        assert ui.url == f"http://127.0.0.1:{ui.port}/"
        assert listening(ui.process.pid) == {("127.0.0.1", ui.port)}, "loopback only, the port it named"
        browser.open(ui.url)
        marked = browser.page.locator("[data-run-id]")
        shown = marked.evaluate_all("nodes => nodes.map(n => [n.getAttribute('data-run-id'), n.innerText])")
        order = list(dict.fromkeys(run_id for run_id, _ in shown))
        assert order == ui_runs.run_ids, "every run, newest first, as `runs --json` lists them"
        for run_id, text in shown:
            assert run_id[:8] in text, f"{run_id}'s element shows no prefix of it: {text!r}"
        assert browser.page.evaluate("window.__xss") is None, "no stored text ran as markup"
        browser.assert_no_errors()
        # the fixture's markup run holds its texts (content was captured), for the pages that show them
        with urllib.request.urlopen(f"{ui.url}api/runs/{ui_runs.id('markup')}", timeout=10) as response:
            body = json.dumps(json.load(response), ensure_ascii=False)  # however the server escaped it
        assert all(json.dumps(text, ensure_ascii=False)[1:-1] in body for text in MARKUP), body[:2000]


def test_the_docs_screenshots_are_made_from_the_same_fixture_and_browser(tmp_path: Path) -> None:
    out = tmp_path / "images"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ui_screenshots.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    made = sorted(p.name for p in out.iterdir())
    assert made == ["compare.png", "cost.png", "run.png", "runs.png"], made
    for name in made:
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 1000, f"{name}: {len(data)} bytes"

"""The docs' screenshots of `otel-agents ui`, made from the tests' store and browser: fills a store
with the runs the web page's tests use (tests/support/ui_store.py: the real OpenAI client against
the tests' local OpenAI-compatible server), starts `otel-agents ui` over it as a user does, and
screenshots each page in Debian's headless chromium (1280x800 viewport, the full page):

    runs.png     /
    run.png      /runs/RUN          the run stopped by the loop guard
    cost.png     /cost
    compare.png  /compare?a=RUN&b=RUN   the two runs of the resumed conversation

Usage: .venv/bin/python scripts/ui_screenshots.py [--out DIR]   (default docs/images/ui)
It fails (exit 1) when a page answers other than 200 or logs an error, a CSP violation included.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.browser import chromium  # noqa: E402
from tests.support.ui_server import ui_server  # noqa: E402
from tests.support.ui_store import UiRuns, fill_ui_store  # noqa: E402


def pages(runs: UiRuns) -> list[tuple[str, str]]:
    """(file name, path under the server's URL) of each screenshot."""
    first, second = runs.resumed
    compare = urllib.parse.urlencode({"a": first["run_id"], "b": second["run_id"]})
    return [
        ("runs.png", ""),
        ("run.png", f"runs/{runs.id('loop_guard')}"),
        ("cost.png", "cost"),
        ("compare.png", f"compare?{compare}"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "ui", help="where the PNGs go")
    options = parser.parse_args(argv)
    out: Path = options.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="otel-agents-ui-store-") as store:
        runs = fill_ui_store(Path(store))
        with ui_server(runs.store) as ui, chromium(viewport={"width": 1280, "height": 800}) as browser:
            for name, path in pages(runs):
                browser.open(ui.url + path)
                browser.page.screenshot(path=str(out / name), full_page=True)
                print(out / name)
            if browser.errors:
                print("the pages logged errors:\n" + "\n".join(browser.errors), file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The outputs the docs show, made again: each `<!-- output: NAME -->` block of README.md and
docs/*.md is what `OUTPUTS[NAME]` prints, compared with durations, bars, ids and dates normalised.

    python -m tests.support.docs_outputs --write     # rewrite every block with fresh output

A block whose last line is `...` shows only the first lines of its output.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.support.cli import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKED = re.compile(r"^<!-- output: (?P<name>[a-z0-9-]+) -->\n(?P<fence>```[a-z]*)\n(?P<body>.*?\n?)```$", re.M | re.S)
BARS = "█▏▎▍▌▋▊▉▐▕"
ELIDED = "..."


@dataclass(frozen=True)
class Block:
    page: Path
    name: str
    body: str
    """The block's text, without its fences."""


def blocks(pages: tuple[Path, ...] = PAGES) -> Iterator[Block]:
    for page in pages:
        for found in MARKED.finditer(page.read_text(encoding="utf-8")):
            yield Block(page, found.group("name"), found.group("body").rstrip("\n"))


def normalised(text: str) -> list[str]:
    """The lines of `text` with what differs from run to run replaced, and spacing collapsed."""
    lines = []
    for line in text.strip("\n").splitlines():
        line = re.sub(r"(?<![\w.$])\d+\.\d+s\b", "<seconds>", line)
        line = re.sub(f"[{BARS}]+", "<bar>", line)
        line = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?Z?", "<time>", line)
        line = re.sub(r"\b[0-9a-f]{8,32}\b", "<id>", line)
        lines.append(" ".join(line.split()))
    return lines


def differences(shown: str, produced: str) -> list[str]:
    """Where a block's text and the output disagree, normalised (empty: they agree)."""
    want, got = normalised(shown), normalised(produced)
    if want and want[-1] == ELIDED:
        want, got = want[:-1], got[: len(want) - 1]
    if want == got:
        return []
    found = [f"{len(want)} lines shown, {len(got)} produced"] if len(want) != len(got) else []
    for number, (a, b) in enumerate(zip(want, got, strict=False), 1):
        if a != b:
            found.append(f"line {number}: shown {a!r}, produced {b!r}")
    return found


def _run(*args: str) -> str:
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _command(store: Path, *args: str) -> str:
    """`$ otel-agents ARGS` and what it prints, as a user on the default store types it."""
    return f"$ otel-agents {' '.join(args)}\n" + _run("--store", str(store), *args)


def _compact_json(text: str) -> str:
    """A JSON list printed one row a line (the CLI prints one key a line)."""
    rows = json.loads(text)
    return "[\n" + ",\n".join(f"  {json.dumps(row)}" for row in rows) + "\n]\n"


@cache
def demo_store() -> Path:
    """A store holding the offline demo's two runs (ana's, then ben's)."""
    store = Path(tempfile.mkdtemp(prefix="docs-demo-"))
    _run("--store", str(store), "demo")
    return store


@cache
def report_store() -> Path:
    """The six runs of tests/test_cost_report.py."""
    from tests.test_cost_report import record

    store = Path(tempfile.mkdtemp(prefix="docs-report-"))
    asyncio.run(record(store))
    return store


@cache
def unknown_usage_store() -> Path:
    """The runs of dana, eve and fay in tests/test_cost_report.py, with calls that reported no usage."""
    from tests.test_cost_report import record_unknown_usage

    store = Path(tempfile.mkdtemp(prefix="docs-unknown-"))
    asyncio.run(record_unknown_usage(store))
    return store


@cache
def review_store() -> tuple[Path, str]:
    """The README's costly run (tests/support/explain_apps.py), recorded through the real OpenAI
    client against the tests' server: its store and its run id."""
    from tests.support.explain_apps import record, review_that_never_ends
    from tests.support.openai_server import OpenAIServer

    store = Path(tempfile.mkdtemp(prefix="docs-review-"))
    with OpenAIServer() as server:
        recorded = asyncio.run(record(review_that_never_ends(server), server, store))
    return store, recorded.run_id


def explain_review() -> str:
    store, run_id = review_store()
    return _command(store, "explain", run_id[:8])


def _ana() -> str:
    (run,) = json.loads(_run("--store", str(demo_store()), "runs", "--json", "--user", "ana"))
    return str(run["run_id"])


def demo_tree() -> str:
    """The trace tree of ana's demo run, as `show` draws it."""
    shown = _run("--store", str(demo_store()), "show", _ana()).splitlines()
    start = next(i for i, line in enumerate(shown) if line.startswith("invoke_workflow "))
    end = shown.index("", start)
    return "\n".join(shown[start:end]) + "\n"


def demo_show() -> str:
    return _command(demo_store(), "show", _ana()[:8])


def demo_runs() -> str:
    return _command(demo_store(), "runs")


def demo_cost_user() -> str:
    store = demo_store()
    as_json = _run("--store", str(store), "cost", "--by", "user", "--json")
    return _command(store, "cost", "--by", "user") + "$ otel-agents cost --by user --json\n" + _compact_json(as_json)


def report_six_runs() -> str:
    store = report_store()
    as_json = _run("--store", str(store), "cost", "--by", "team", "--json")
    return (
        _command(store, "cost", "--by", "team")
        + _command(store, "cost", "--by", "model")
        + "$ otel-agents cost --by team --json\n"
        + _compact_json(as_json)
    )


def report_unknown_usage() -> str:
    return _command(unknown_usage_store(), "cost", "--by", "user")


OUTPUTS: dict[str, Callable[[], str]] = {
    "demo-tree": demo_tree,
    "demo-show": demo_show,
    "demo-runs": demo_runs,
    "demo-cost-user": demo_cost_user,
    "report-six-runs": report_six_runs,
    "report-unknown-usage": report_unknown_usage,
    "explain-review": explain_review,
}


def rewritten(text: str) -> str:
    """`text` with every marked block holding fresh output (as many lines as it shows, if elided)."""

    def fresh(found: re.Match[str]) -> str:
        body = found.group("body").rstrip("\n")
        produced = OUTPUTS[found.group("name")]().rstrip("\n")
        lines = [line.rstrip() for line in produced.splitlines()]
        shown = body.splitlines()
        if shown and shown[-1].strip() == ELIDED:
            lines = [*lines[: len(shown) - 1], ELIDED]
        return f"<!-- output: {found.group('name')} -->\n{found.group('fence')}\n" + "\n".join(lines) + "\n```"

    return MARKED.sub(fresh, text)


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(__doc__, file=sys.stderr)
        return 2
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        if (new := rewritten(text)) != text:
            page.write_text(new, encoding="utf-8")
            print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

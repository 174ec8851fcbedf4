"""The docs a user reads: README.md, CONTRIBUTING.md, CHANGELOG.md and the pages under docs/.
Every relative link goes to a file that exists (and a heading of it, when it names one); every
output shown is what the command prints today; every command shown is run by a test or says why
not; the README leads to install, the quick start, Jaeger and the settings in one click."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

from tests.support import docs_outputs
from tests.support.docs_outputs import OUTPUTS, Block, blocks, differences

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
MARKDOWN = (ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *PAGES)
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^```[^\n]*\n.*?^```$", re.M | re.S)
CHECKED_LANGUAGES = ("sh", "console", "python")
MARKER = re.compile(r"<!-- (?P<kind>output|run by|not run here): (?P<what>.+?) -->")


def prose(text: str) -> str:
    """`text` without its code blocks and inline code (links there are not links)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def mkdocs_slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> tuple[set[str], set[str]]:
    """The anchors of a page's headings, as GitHub and as MkDocs make them."""
    headings = re.findall(r"^#{1,6} (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M)
    return {github_slug(h) for h in headings}, {mkdocs_slug(h) for h in headings}


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """The relative links of a Markdown file that lead nowhere (empty: none)."""
    found = []
    for link in LINK.finditer(prose(text if text is not None else page.read_text(encoding="utf-8"))):
        target = link.group("target")
        if re.match(r"[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            found.append(f"{page.name}: {target}: no such file")
            continue
        if anchor and path.suffix == ".md":
            on_github, on_the_site = anchors(path)
            if anchor not in on_github:
                found.append(f"{page.name}: {target}: no such heading on GitHub")
            elif path.is_relative_to(DOCS) and anchor not in on_the_site:
                found.append(f"{page.name}: {target}: no such heading on the site")
    return found


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_found() -> None:
    page = DOCS / "getting-started.md"
    text = page.read_text(encoding="utf-8")
    assert broken_links(page, text + "\n[gone](configuration.md#no-such-heading)\n") == [
        "getting-started.md: configuration.md#no-such-heading: no such heading on GitHub"
    ]
    assert broken_links(page, text + "\n[gone](../deploy/nowhere.yml)\n") == [
        "getting-started.md: ../deploy/nowhere.yml: no such file"
    ]
    assert broken_links(page, text + "\n`[code](nowhere.md)` is not a link\n") == []


def test_every_page_is_in_the_site_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = {next(iter(entry.values())) for entry in config["nav"]}
    assert listed == {p.name for p in PAGES}


def site_copy(into: Path) -> Path:
    """The repository as the docs build sees it, with a copy of docs/ that a test may change."""
    into.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("docs", ".git", "site") and not entry.name.startswith(".venv"):
            (into / entry.name).symlink_to(entry)
    shutil.copytree(DOCS, into / "docs")
    return into


def strict_build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_strict_docs_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    root = site_copy(tmp_path / "repo")
    done = strict_build(root, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8").count("run_attributes") > 1
    page = root / "docs" / "loops.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](../deploy/nowhere.yml), [gone](traces.md#nowhere)\n")
    done = strict_build(root, tmp_path / "broken")
    assert done.returncode != 0
    assert "'../deploy/nowhere.yml'" in done.stderr and "'#nowhere'" in done.stderr, done.stderr[-3000:]


def test_the_readme_leads_to_install_quick_start_jaeger_and_the_settings_in_one_click() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 170, "a README of a screen or two"
    assert "\n## Install\n" in readme and "\n## Quick start\n" in readme
    targets = {link.group("target") for link in LINK.finditer(prose(readme))}
    for target in ("docs/backends.md#jaeger", "docs/configuration.md#settings", "CONTRIBUTING.md"):
        assert target in targets, target
    assert {f"docs/{p.name}" for p in PAGES if p.name != "index.md"} <= targets, "every page, one click away"
    assert "```sh\nbash scripts/demo.sh\n```" in readme and "```sh\nbash scripts/test.sh\n```" in readme


def test_ci_runs_the_readmes_test_command() -> None:
    assert "exec bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# --- outputs: every one shown is what the command prints ------------------------------------------


@pytest.mark.parametrize("block", list(blocks()), ids=lambda b: f"{b.page.name}:{b.name}")
def test_each_output_shown_is_what_the_command_prints(block: Block) -> None:
    assert differences(block.body, OUTPUTS[block.name]()) == []


def test_every_output_is_shown_somewhere() -> None:
    assert {b.name for b in blocks()} == set(OUTPUTS)
    assert {b.name for b in blocks((ROOT / "README.md",))} == {"demo-tree", "explain-review"}


def test_a_changed_output_is_found() -> None:
    (tree,) = [b for b in blocks((ROOT / "README.md",)) if b.name == "demo-tree"]
    produced = OUTPUTS["demo-tree"]()
    assert differences(tree.body, produced) == []
    assert differences(tree.body.replace("412 in / 18 out", "412 in / 19 out"), produced) != []
    assert differences(tree.body.replace("invoke_agent critic", "invoke_agent editor", 1), produced) != []
    dropped = "\n".join(line for line in tree.body.splitlines() if "execute_tool" not in line)
    assert differences(dropped, produced) != [], "a span left out of the tree"
    assert differences(tree.body.replace("0.257s", "9.999s").replace("0.251s", "1.000s"), produced) == [], (
        "durations differ from run to run"
    )


# --- commands: each shown is run by a test, or says why not ---------------------------------------


def fenced(text: str) -> list[tuple[str, str]]:
    """(the line before it, its language) for every fenced block."""
    found = []
    lines = text.splitlines()
    inside = False
    for number, line in enumerate(lines):
        if line.startswith("```"):
            if not inside:
                found.append((lines[number - 1] if number else "", line[3:].strip()))
            inside = not inside
    return found


def unmarked(page: Path, text: str | None = None) -> list[str]:
    """The command and code blocks of a page that say neither who runs them nor why nobody does."""
    found = []
    for before, language in fenced(text if text is not None else page.read_text(encoding="utf-8")):
        marker = MARKER.fullmatch(before.strip())
        if marker is None:
            if language in CHECKED_LANGUAGES:
                found.append(f"{page.name}: a {language} block after {before!r} has no marker")
            continue
        if marker["kind"] == "output" and marker["what"] not in OUTPUTS:
            found.append(f"{page.name}: no output named {marker['what']!r}")
        if marker["kind"] == "run by":
            for runner in marker["what"].split(", "):
                file, _, test = runner.partition("::")
                if not (ROOT / file).is_file():
                    found.append(f"{page.name}: {file} does not exist")
                elif test and not re.search(rf"^(async )?def {test}\(", (ROOT / file).read_text(), re.M):
                    found.append(f"{page.name}: {file} has no test {test}")
    return found


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_shown_is_run_by_a_test_or_says_why_not(page: Path) -> None:
    assert unmarked(page) == []


def test_an_unmarked_command_or_a_runner_that_is_gone_is_found() -> None:
    page = DOCS / "getting-started.md"
    assert unmarked(page, "text\n\n```sh\nrm -rf /\n```\n") == ["getting-started.md: a sh block after '' has no marker"]
    assert unmarked(page, "<!-- run by: tests/test_cli.py::test_nothing -->\n```sh\nls\n```\n") == [
        "getting-started.md: tests/test_cli.py has no test test_nothing"
    ]
    assert unmarked(page, "<!-- output: nothing -->\n```\nx\n```\n") == [
        "getting-started.md: no output named 'nothing'"
    ]


def test_the_demo_script_runs_as_the_readme_shows_it(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh"), "--store", str(tmp_path / "store")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    normalised = docs_outputs.normalised(done.stdout)
    assert any(line.startswith("invoke_workflow writers-room") for line in normalised), done.stdout[-2000:]


@pytest.mark.slow
def test_the_demo_scripts_environment_runs_the_quick_start_in_a_fresh_clone(tmp_path: Path) -> None:
    """A newcomer runs the README's demo, then the quick start in the `.venv` the demo made (Getting
    started: `.venv/bin/python examples/quickstart.py`): AutoGen's OpenAI client is there, so it runs."""
    from tests.support.openai_server import OpenAIServer

    clone = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, tracked.stdout.split("\0")):  # what a fresh clone has: no .venv
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    home = {  # pip's settings and cache kept (its index, CA bundle, wheels); a store of its own
        **{name: value for name, value in os.environ.items() if not name.startswith("OTEL_")},
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    demo = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=clone, env=home, capture_output=True, text=True, timeout=900, check=False
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    with OpenAIServer() as server:
        quick_start = subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "examples/quickstart.py"],
            cwd=clone,
            env={**home, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "unused"},
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert "stopped: Maximum number of messages 3 reached" in quick_start.stdout, quick_start.stderr[-2000:]


# --- the runbook: every alert has its section ------------------------------------------------------


def test_every_alert_has_a_runbook_section_its_annotation_points_to() -> None:
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules.yml").read_text(encoding="utf-8"))
    alerts = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    runbook = DOCS / "loops.md"
    sections = re.findall(r"^### (\w+)$", runbook.read_text(encoding="utf-8"), re.M)
    assert [a["alert"] for a in alerts] == sections, "one section per alert, in the rules' order"
    for alert in alerts:
        target = alert["annotations"]["runbook"]
        assert target == f"docs/loops.md#{alert['alert'].lower()}"
        assert broken_links(ROOT / "README.md", f"[runbook]({target})") == []

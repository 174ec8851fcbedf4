"""`otel-agents ui` in a real browser (Debian's headless chromium through Playwright), over a store
the real OpenAI client filled: each page's figures are the CLI's JSON; a run that ends while the
runs page is open appears on it; the compare page's differences; stored markup shown as text and
never run; the trace folds and a span's attributes open on click; the page reads without
JavaScript. (Over HTTP alone: tests/test_ui.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Browser, chromium
from tests.support.cli import cli
from tests.support.ui_server import UiServer, ui_server
from tests.support.ui_store import MARKUP, UiRuns, fill_ui_store, run_store_app
from tests.support.ui_store_app import SESSION_PREFIX

pytestmark = pytest.mark.slow


@pytest.fixture
def browser() -> Iterator[Browser]:
    with chromium() as opened:
        yield opened
        opened.assert_no_errors()  # no console error, uncaught exception or CSP violation on any page


def cli_json(ui_runs: UiRuns, *args: str) -> Any:
    done = cli("--store", str(ui_runs.store), *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def money(value: float | None) -> str:
    if value is None:
        return "-"
    micro = round(value * 1_000_000)
    return f"${micro // 1_000_000}.{micro % 1_000_000:06d}"


def cells(browser: Browser, selector: str) -> list[list[str]]:
    rows: list[list[str]] = browser.page.locator(selector).evaluate_all(
        "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))"
    )
    return rows


def test_the_runs_page_shows_each_runs_figures_as_runs_json_gives_them(
    ui: UiServer, ui_runs: UiRuns, browser: Browser
) -> None:
    browser.open(ui.url)
    listed = cli_json(ui_runs, "runs", "--limit", "100")
    shown = cells(browser, "table#runs tbody tr")
    assert len(shown) == len(listed) == 7
    for row, run in zip(shown, listed, strict=True):
        _, run_cell, team, user, turns, messages, tokens, cost, _, stop, outcomes, findings = row
        assert run["run_id"].startswith(run_cell)
        assert (team, user) == (run["team"], run["user_id"])
        assert turns == str(run["turns"]) and messages == str(run["messages"])
        assert tokens == f"{run['input_tokens'] + run['output_tokens']:,}"
        assert cost == money(run["cost_usd"])
        assert stop == run["stop_kind"]
        assert outcomes.split() == [o["label"] for o in run["outcomes"]]
        assert findings.split() == run["findings"]


def test_the_filters_list_what_runs_lists(ui: UiServer, ui_runs: UiRuns, browser: Browser) -> None:
    browser.open(ui.url)
    page = browser.page
    page.select_option("select[name=stop_kind]", "loop_guard")
    with page.expect_navigation():
        page.click("button[type=submit]")
    shown = page.locator("table#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
    assert shown == [r["run_id"] for r in cli_json(ui_runs, "runs", "--stop-kind", "loop_guard")]
    assert shown == [ui_runs.id("loop_guard")]
    page.fill("input[name=team]", "research")
    page.select_option("select[name=stop_kind]", "")
    page.select_option("select[name=sort]", "tokens")
    with page.expect_navigation():
        page.click("button[type=submit]")
    shown = page.locator("table#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
    assert shown == [r["run_id"] for r in cli_json(ui_runs, "runs", "--team", "research", "--sort", "tokens")]
    assert len(shown) == 3


def test_a_run_that_ends_while_the_page_is_open_appears_without_a_reload(tmp_path: Path, browser: Browser) -> None:
    ui_runs = fill_ui_store(tmp_path / "store")  # a store of its own: this test adds a run
    with ui_server(ui_runs.store) as ui:
        browser.open(ui.url)
        browser.page.evaluate("window.__notReloaded = true")
        done = run_store_app(ui_runs.store, "--late", "late")
        assert done.returncode == 0, done.stderr[-3000:]
        listed = cli_json(ui_runs, "runs", "--team", "late")
        late = next(r for r in listed if r["session_id"] == SESSION_PREFIX + "late")
        row = browser.page.locator(f'table#runs tbody tr[data-run-id="{late["run_id"]}"]')
        row.wait_for(timeout=30_000)  # the page polls every second: a generous deadline
        assert browser.page.evaluate("window.__notReloaded") is True, "it appeared without a reload"
        assert browser.page.locator("table#runs tbody tr").first.get_attribute("data-run-id") == late["run_id"]
        assert browser.page.inner_text("#total") == str(len(ui_runs.rows) + 1)


def test_a_run_page_shows_explains_figures_and_the_trace(ui: UiServer, ui_runs: UiRuns, browser: Browser) -> None:
    run_id = ui_runs.id("loop_guard")
    explained = cli_json(ui_runs, "explain", run_id)
    shown_spans = cli_json(ui_runs, "show", run_id)["spans"]
    browser.open(f"{ui.url}runs/{run_id[:8]}")
    page = browser.page
    run = explained["run"]
    summary = page.inner_text("#summary")
    assert f"{run['turns']} turns" in summary and money(run["cost_usd"]) in summary and "loop_guard" in summary
    said = cli("--store", str(ui_runs.store), "explain", run_id)
    assert said.returncode == 0, said.stderr
    assert summary == said.stdout.splitlines()[0], "the summary is the first line `explain` prints"
    kinds = page.locator("#findings div.finding").evaluate_all("nodes => nodes.map(n => n.dataset.kind)")
    assert kinds == [f["kind"] for f in explained["findings"]] and "repeated_messages" in kinds
    for finding in explained["findings"]:
        assert finding["suggestion"] in page.inner_text("#findings")
    agents = cells(browser, "#agents table tbody tr")
    assert [(a[0], a[3], a[4], a[5]) for a in agents] == [
        (a["agent"], f"{a['input_tokens']:,}", f"{a['output_tokens']:,}", money(a["cost_usd"]))
        for a in explained["agents"]
    ]
    turns = cells(browser, "#turns table tbody tr")
    assert [(t[0], t[1], t[5], t[6]) for t in turns] == [
        (str(t["index"]), t["agent"], f"{t['input_tokens']:,}", f"{t['output_tokens']:,}") for t in explained["turns"]
    ]
    assert page.locator("#turns svg.chart").count() == 2, "the per-turn bars and the context line"
    drawn = page.locator("#waterfall tbody tr").evaluate_all("rows => rows.map(r => r.dataset.spanId)")
    assert drawn == [s["span_id"] for s in shown_spans], "the tree `show` draws, in its order"
    repeats = cells(browser, "#repeats table tbody tr")
    assert [r[2] for r in repeats] == [str(r["count"]) for r in explained["repeats"]]

    # a click on a column's head sorts by its figure (not its text: "850 ms" is less than "1.2 s"),
    # greatest first, then least first
    page.click("#turns table thead th:has-text('duration')")
    by_duration = sorted(explained["turns"], key=lambda t: -t["duration_s"])
    assert [t[0] for t in cells(browser, "#turns table tbody tr")] == [str(t["index"]) for t in by_duration]
    page.click("#turns table thead th:has-text('start')")
    page.click("#turns table thead th:has-text('start')")
    assert [t[0] for t in cells(browser, "#turns table tbody tr")] == [str(t["index"]) for t in explained["turns"]]


def test_the_trace_folds_and_a_span_opens_its_attributes(ui: UiServer, ui_runs: UiRuns, browser: Browser) -> None:
    run_id = ui_runs.id("failing_tool")
    browser.open(f"{ui.url}runs/{run_id}")
    page = browser.page
    rows = page.locator("#waterfall tbody tr")
    total = rows.count()
    agent = page.locator("#waterfall tbody tr[data-depth='1']:has(button.fold)").first
    agent.locator("button.fold").click()
    hidden = page.locator("#waterfall tbody tr[hidden]").count()
    assert hidden > 0
    assert page.locator("#waterfall tbody tr:visible").count() == total - hidden
    agent.locator("button.fold").click()
    assert page.locator("#waterfall tbody tr[hidden]").count() == 0
    tool = page.locator("#waterfall tbody tr.failed a.span-link", has_text="execute_tool").first
    tool.click()
    detail = page.locator("section#span-detail")
    detail.wait_for()
    text = detail.inner_text()
    assert "execute_tool" in text and "error.type" in text and "ConnectionError" in text
    assert page.url.endswith(f"/runs/{run_id}"), "opened in place, by script"


def test_stored_markup_is_shown_as_text_and_never_run(ui: UiServer, ui_runs: UiRuns, browser: Browser) -> None:
    run_id = ui_runs.id("markup")
    spans = cli_json(ui_runs, "show", run_id)["spans"]
    chat = next(s for s in spans if s["name"].startswith("chat"))
    browser.open(f"{ui.url}runs/{run_id}")
    browser.page.locator(f"#waterfall tr[data-span-id='{chat['span_id']}'] a.span-link").click()
    detail = browser.page.locator("section#span-detail")
    detail.wait_for()
    for text in MARKUP:  # in the JSON of the messages attribute, its quotes escaped
        assert json.dumps(text)[1:-1] in detail.inner_text(), f"{text} shown as text"
    assert browser.page.locator("section#span-detail script, section#span-detail img").count() == 0
    browser.open(f"{ui.url}runs/{run_id}?span={chat['span_id']}")  # drawn by the server, without script
    for text in MARKUP:
        assert json.dumps(text)[1:-1] in browser.page.inner_text("section#span-detail")
    assert browser.page.evaluate("window.__xss") is None, "no stored text ran"


def test_the_cost_page_shows_cost_json_and_the_costliest_runs(ui: UiServer, ui_runs: UiRuns, browser: Browser) -> None:
    browser.open(f"{ui.url}cost?by=team")
    rows = cells(browser, "#cost-rows tbody tr")
    expected = cli_json(ui_runs, "cost", "--by", "team")
    assert [(r[0], r[1], r[4]) for r in rows] == [(e["key"], str(e["runs"]), money(e["cost_usd"])) for e in expected]
    assert [(r[5], r[6], r[7]) for r in rows] == [
        (money(e["run_cost_usd"]["median"]), money(e["run_cost_usd"]["p95"]), money(e["run_cost_usd"]["max"]))
        for e in expected
    ]
    costliest = browser.page.locator("#costliest a[data-run-id]").evaluate_all("a => a.map(n => n.dataset.runId)")
    by_cost = cli_json(ui_runs, "runs", "--sort", "cost", "--limit", "10")
    assert costliest == [r["run_id"] for r in by_cost]
    assert browser.page.locator("#spend svg.chart rect").count() > 0
    stops = cells(browser, "#loops table tbody tr")
    assert sum(int(r[1]) for r in stops) == len(cli_json(ui_runs, "runs", "--stop-kind", "loop_guard"))
    assert sum(int(r[2]) for r in stops) == len(cli_json(ui_runs, "runs", "--stop-kind", "max_messages"))
    browser.page.select_option("select[name=by]", "model")
    with browser.page.expect_navigation():
        browser.page.click("button[type=submit]")
    rows = cells(browser, "#cost-rows tbody tr")
    assert [r[0] for r in rows] == [e["key"] for e in cli_json(ui_runs, "cost", "--by", "model")]


def test_the_compare_page_shows_each_difference(ui: UiServer, ui_runs: UiRuns, browser: Browser) -> None:
    first, second = (r["run_id"] for r in ui_runs.resumed)
    a, b = cli_json(ui_runs, "explain", first), cli_json(ui_runs, "explain", second)
    browser.open(f"{ui.url}compare?a={first}&b={second}")
    figures = {row[0]: row[1:] for row in cells(browser, "#compare-totals tbody tr")}
    assert figures["turns"] == [
        str(a["run"]["turns"]),
        str(b["run"]["turns"]),
        f"{b['run']['turns'] - a['run']['turns']:+,}",
    ]
    tokens_diff = b["run"]["input_tokens"] - a["run"]["input_tokens"]
    assert figures["input tokens"][2] == (f"{tokens_diff:+,}" if tokens_diff else "±0")
    cost_diff = b["run"]["cost_usd"] - a["run"]["cost_usd"]
    assert figures["cost"][2] == ("+" if cost_diff > 0 else "-") + money(abs(cost_diff))
    per_agent = {row[0]: row for row in cells(browser, "#compare-agents tbody tr")}
    for agent in a["agents"]:
        other = next(x for x in b["agents"] if x["agent"] == agent["agent"])
        diff = other["input_tokens"] + other["output_tokens"] - agent["input_tokens"] - agent["output_tokens"]
        assert per_agent[agent["agent"]][3] == (f"{diff:+,}" if diff else "±0")
    assert browser.page.locator("#context svg.chart polyline").count() == 2


def test_the_pages_read_without_javascript(ui: UiServer, ui_runs: UiRuns) -> None:
    with chromium(java_script=False) as browser:
        browser.open(ui.url)
        assert browser.page.locator("table#runs tbody tr").count() == len(ui_runs.rows)
        run_id = ui_runs.id("failing_tool")
        browser.open(f"{ui.url}runs/{run_id}")
        link = browser.page.locator("#waterfall tr.failed a.span-link").first
        with browser.page.expect_navigation():
            link.click()
        assert "error.type" in browser.page.inner_text("section#span-detail")
        browser.open(f"{ui.url}cost")
        assert browser.page.locator("#cost-rows tbody tr").count() > 0
        browser.assert_no_errors()

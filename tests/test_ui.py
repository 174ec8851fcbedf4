"""`otel-agents ui` over HTTP, started as a user starts it: every page's JSON is the CLI's JSON for
the same store; safe by default (the Host check, GET only, the Content-Security-Policy); bad input
answered with a page that says what is wrong; readers never change the store's main file.

(The pages in a real browser: tests/test_ui_browser.py.)"""

from __future__ import annotations

import hashlib
import json
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.support.cli import ROOT, cli
from tests.support.ui_server import get, get_json, request, ui_server
from tests.support.ui_store import UiRuns, add_copies

pytestmark = pytest.mark.slow


def cli_json(store: Path, *args: str) -> Any:
    done = cli("--store", str(store), *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the same figures as the CLI ------------------------------------------------------------------


def test_the_runs_json_is_the_rows_of_runs_json(ui: Any, ui_runs: UiRuns) -> None:
    page = get_json(ui, "/api/runs")
    assert page["total"] == len(ui_runs.rows) == 7
    assert page["runs"] == cli_json(ui_runs.store, "runs", "--limit", "100")
    for row in page["runs"]:
        assert isinstance(row["turns"], int) and isinstance(row["findings"], list), row
    assert "repeated_messages" in ui_runs.loop_guard["findings"] or "repeated_messages" in next(
        r["findings"] for r in page["runs"] if r["run_id"] == ui_runs.id("loop_guard")
    )


@pytest.mark.parametrize(
    ("query", "options"),
    [
        ({"team": "research"}, ["--team", "research"]),
        ({"user_id": "ben"}, ["--user", "ben"]),
        ({"stop_kind": "loop_guard"}, ["--stop-kind", "loop_guard"]),
        ({"outcome": "failure"}, ["--outcome", "failure"]),
        ({"finding": "tool_errors"}, ["--finding", "tool_errors"]),
        ({"since": "1d", "sort": "cost"}, ["--since", "1d", "--sort", "cost"]),
        ({"until": "1d"}, ["--until", "1d"]),
        ({"sort": "tokens"}, ["--sort", "tokens"]),
        ({"sort": "duration", "team": "review"}, ["--sort", "duration", "--team", "review"]),
    ],
)
def test_each_filter_lists_the_runs_the_cli_lists(
    ui: Any, ui_runs: UiRuns, query: Mapping[str, str], options: list[str]
) -> None:
    page = get_json(ui, "/api/runs?" + urlencode(query))
    listed = cli_json(ui_runs.store, "runs", "--limit", "100", *options)
    assert page["runs"] == listed
    assert page["total"] == len(listed)
    if "until" not in query:
        assert listed, f"{query} should match some of the fixture's runs"


def test_runs_are_paged_on_the_server_as_runs_lists_them(ui_runs: UiRuns, tmp_path: Path) -> None:
    store = _copy(ui_runs.store, tmp_path / "store")
    add_copies(store, ui_runs.of("success"), 113)  # 120 runs: three pages of 50
    listed = cli_json(store, "runs", "--limit", "1000")
    by_cost = cli_json(store, "runs", "--limit", "1000", "--sort", "cost")
    assert len(listed) == 120
    with ui_server(store) as server:
        pages = [get_json(server, f"/api/runs?page={n}") for n in (1, 2, 3)]
        assert [(p["page"], p["pages"], p["total"], len(p["runs"])) for p in pages] == [
            (1, 3, 120, 50),
            (2, 3, 120, 50),
            (3, 3, 120, 20),
        ]
        assert [row for p in pages for row in p["runs"]] == listed
        assert get_json(server, "/api/runs?sort=cost&page=2")["runs"] == by_cost[50:100]
        code, body = get(server, "/?page=2")
        assert code == 200
        assert b'rel="prev" href="/?sort=time&amp;page=1"' in body
        assert b'rel="next" href="/?sort=time&amp;page=3"' in body
        assert "page 4: there are 3 pages" in get_json(server, "/api/runs?page=4", status=400)["error"]


@pytest.mark.parametrize("by", ["team", "user", "model", "agent", "conversation", "day"])
def test_the_cost_json_is_cost_json(ui: Any, ui_runs: UiRuns, by: str) -> None:
    assert get_json(ui, f"/api/cost?by={by}") == cli_json(ui_runs.store, "cost", "--by", by)
    assert get_json(ui, f"/api/cost?by={by}&since=7d") == cli_json(ui_runs.store, "cost", "--by", by, "--since", "7d")


def test_the_cost_page_shows_the_rows_of_cost_json(ui: Any, ui_runs: UiRuns) -> None:
    code, body = get(ui, "/cost?by=team")
    assert code == 200
    html = body.decode()
    for row in cli_json(ui_runs.store, "cost", "--by", "team"):
        assert f'data-key="{row["key"]}"' in html
        micro = round(row["cost_usd"] * 1_000_000)
        assert f"${micro // 1_000_000}.{micro % 1_000_000:06d}" in html


@pytest.mark.parametrize("by", ["team", "model", "day"])
def test_each_days_figures_are_those_of_the_clis_code_over_that_day(ui: Any, ui_runs: UiRuns, by: str) -> None:
    from otel_agents._internal.export.store.reader import Store
    from otel_agents._internal.report.cost import cost_report

    store = Store(ui_runs.store)
    days = get_json(ui, f"/api/cost/days?by={by}")["days"]
    assert days, "the fixture's runs ran today"
    stopped = 0
    for day in days:
        start = datetime.fromisoformat(day["day"]).replace(tzinfo=UTC)
        end = start + timedelta(days=1)
        since_ns, until_ns = int(start.timestamp()) * 10**9, int(end.timestamp()) * 10**9
        assert day["rows"] == cost_report(store, by, since_ns=since_ns, until_ns=until_ns), day["day"]
        whole = cost_report(store, "day", since_ns=since_ns, until_ns=until_ns)
        assert day["total"] == (whole[0] if whole else None)
        for kind, count in day["stops"].items():
            listed = cli_json(
                ui_runs.store, "runs", "--stop-kind", kind, "--since", day["day"], "--until", end.date().isoformat()
            )
            assert count == len(listed), (day["day"], kind)
            stopped += count
    assert stopped >= 2, "the fixture's loop-guard and message-limit stops are counted"


def test_a_run_json_is_explain_json_with_its_spans(ui: Any, ui_runs: UiRuns) -> None:
    run_id = ui_runs.id("loop_guard")
    answer = get_json(ui, f"/api/runs/{run_id[:10]}")
    spans = answer.pop("spans")
    assert answer == cli_json(ui_runs.store, "explain", run_id)
    shown = cli_json(ui_runs.store, "show", run_id)["spans"]
    assert [{k: v for k, v in s.items() if k != "events"} for s in spans] == shown, "show --json's spans, in order"
    assert all(isinstance(s["events"], list) for s in spans) and any(s["events"] for s in spans)


def test_a_run_page_shows_its_outcomes_and_links_the_other_runs_of_its_conversation(ui: Any, ui_runs: UiRuns) -> None:
    first, second = ui_runs.resumed
    (row,) = [r for r in cli_json(ui_runs.store, "runs", "--limit", "100") if r["run_id"] == second["run_id"]]
    assert row["outcomes"], "the fixture records an outcome for the resumed run"
    code, body = get(ui, f"/runs/{second['run_id']}")
    assert code == 200
    html = body.decode()
    outcomes = html[html.index('id="outcomes"') :].split("</dd>")[0]
    for outcome in row["outcomes"]:
        assert f"{outcome['name']}: {outcome['label']}" in outcomes
    conversation = html[html.index('id="conversation"') :].split("</section>")[0]
    assert f'href="/runs/{first["run_id"]}"' in conversation
    assert f'href="/runs/{second["run_id"]}"' not in conversation, "the other runs, not this one"


def test_a_spans_detail_shows_its_attributes_and_events(ui: Any, ui_runs: UiRuns) -> None:
    from otel_agents._internal.export.store.reader import Store

    row = ui_runs.of("failing_tool")
    spans = Store(ui_runs.store).spans(row["trace_id"])
    with_events = [s for s in spans if s.data.get("events")]
    assert with_events, "the failing tool's run has spans with events (its exception)"
    span = with_events[0]
    code, body = get(ui, f"/runs/{row['run_id']}/spans/{span.span_id}")
    assert code == 200
    html = body.decode()
    for key in span.attributes:
        assert f'<td class="key">{key}</td>' in html
    for event in span.data["events"]:
        assert f"<summary>{event['name']} " in html
        for key in event.get("attributes") or {}:
            assert f'<td class="key">{key}</td>' in html


def test_the_downloaded_trace_is_read_back_by_explain_file(ui: Any, ui_runs: UiRuns, tmp_path: Path) -> None:
    run_id = ui_runs.id("failing_tool")
    code, headers, body = request(ui, f"/api/runs/{run_id}/otlp.json")
    assert code == 200
    assert headers["content-disposition"].startswith("attachment;"), headers
    saved = tmp_path / "trace.json"
    saved.write_bytes(body)
    from_file = json.loads(cli("explain", "--file", str(saved), "--json").stdout)
    from_store = cli_json(ui_runs.store, "explain", run_id)
    from_store["run"]["outcomes"] = from_file["run"]["outcomes"]  # recorded after the run: in the store only
    assert from_file == from_store


def test_compare_gives_each_difference(ui: Any, ui_runs: UiRuns) -> None:
    first, second = (r["run_id"] for r in ui_runs.resumed)
    answer = get_json(ui, f"/api/compare?a={first}&b={second}")
    a, b = cli_json(ui_runs.store, "explain", first), cli_json(ui_runs.store, "explain", second)
    assert answer["a"] == a and answer["b"] == b
    for key in ("turns", "input_tokens", "output_tokens", "duration_s"):
        assert answer["difference"][key] == pytest.approx(b["run"][key] - a["run"][key]), key
    assert answer["difference"]["cost_usd"] == pytest.approx(b["run"]["cost_usd"] - a["run"]["cost_usd"])


def test_compare_says_how_the_stop_findings_and_each_turn_differ(ui: Any, ui_runs: UiRuns) -> None:
    first, second = ui_runs.id("success"), ui_runs.id("loop_guard")
    a, b = cli_json(ui_runs.store, "explain", first), cli_json(ui_runs.store, "explain", second)
    difference = get_json(ui, f"/api/compare?a={first}&b={second}")["difference"]
    assert difference["stop_kind_changed"] is True and a["run"]["stop_kind"] != b["run"]["stop_kind"]
    kinds_a, kinds_b = {f["kind"] for f in a["findings"]}, {f["kind"] for f in b["findings"]}
    assert difference["findings_only_in_a"] == sorted(kinds_a - kinds_b)
    assert difference["findings_only_in_b"] == sorted(kinds_b - kinds_a) and "repeated_messages" in kinds_b

    code, body = get(ui, f"/compare?a={first}&b={second}")
    assert code == 200
    html = body.decode()
    turns = html[html.index('id="compare-turns"') :].split("</section>")[0]
    rows = turns.split("<tbody>")[1].split("</tbody>")[0].split("</tr>")[:-1]
    assert len(rows) == max(len(a["turns"]), len(b["turns"]))
    for index, row in enumerate(rows):
        assert row.startswith(f'<tr><td class="num">{index}</td>')
        if index < len(a["turns"]) and index < len(b["turns"]):
            ta, tb = (t["turns"][index] for t in (a, b))
            change = (tb["input_tokens"] + tb["output_tokens"]) - (ta["input_tokens"] + ta["output_tokens"])
            assert f'<td class="num diff">{change:+,}</td>' in row if change else "±0" in row


# --- safe by default ------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:{port}", "localhost", "localhost:{port}", "LOCALHOST:{port}"])
def test_the_bound_address_and_localhost_are_served(ui: Any, host: str) -> None:
    code, _ = get(ui, "/", host=host.format(port=ui.port))
    assert code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example", "192.168.1.10:{port}", ""]
)
def test_another_host_header_is_refused_so_dns_rebinding_reads_nothing(ui: Any, host: str) -> None:
    for path in ("/", "/api/runs", "/static/app.js"):
        code, body = get(ui, path, host=host.format(port=ui.port))
        assert code == 403, (host, path, code)
        assert b"run_id" not in body


def test_an_allowed_host_is_served(ui_runs: UiRuns) -> None:
    with ui_server(ui_runs.store, "--allow-host", "agents.internal") as server:
        assert get(server, "/api/runs", host="agents.internal")[0] == 200
        assert get(server, "/api/runs", host=f"agents.internal:{server.port}")[0] == 200
        assert get(server, "/api/runs", host="other.internal")[0] == 403


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_only_get_and_head_are_served(ui: Any, method: str) -> None:
    code, headers, _ = request(ui, "/api/runs", method=method)
    assert code == 405
    assert headers["allow"] == "GET, HEAD"


def test_every_answer_carries_a_policy_with_no_inline_script(ui: Any, ui_runs: UiRuns) -> None:
    for path in ("/", f"/runs/{ui_runs.id('markup')}", "/cost", "/api/runs", "/runs/ffff", "/static/style.css"):
        _, headers, _ = request(ui, path)
        policy = headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"


def test_stored_markup_is_sent_escaped(ui: Any, ui_runs: UiRuns) -> None:
    run_id = ui_runs.id("markup")
    spans = get_json(ui, f"/api/runs/{run_id}")["spans"]
    chat = next(s for s in spans if s["name"].startswith("chat"))
    _, body = get(ui, f"/runs/{run_id}?span={chat['span_id']}")
    html = body.decode()
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "<script>window.__xss" not in html and "<img src=x" not in html
    assert "<script" not in html.replace('<script src="/static/app.js" defer></script>', "")


def test_no_request_changes_the_stores_main_file(ui_runs: UiRuns) -> None:
    main = ui_runs.store / "spans.sqlite3"
    before = digest(main)
    first, second = (r["run_id"] for r in ui_runs.resumed)
    (span_id, *_) = (s["span_id"] for s in cli_json(ui_runs.store, "show", first)["spans"])
    with ui_server(ui_runs.store) as server:
        for path in (
            "/",
            "/?partial=rows",
            f"/runs/{first}?open={span_id}&skip=1",
            f"/runs/{first}?span={span_id}",
            f"/runs/{first}/spans/{span_id}",
            f"/api/compare?a={first}&b={second}",
            "/static/app.js",
            "/?sort=cost&team=review",
            "/api/runs?finding=tool_errors",
            f"/runs/{first}",
            f"/api/runs/{first}",
            f"/api/runs/{first}/otlp.json",
            "/cost?by=model",
            "/api/cost?by=day",
            "/api/cost/days?by=team",
            f"/compare?a={first}&b={second}",
            "/runs/0000",
        ):
            assert get(server, path)[0] in (200, 404), path
    assert digest(main) == before


# --- bad input: a page that says what is wrong ----------------------------------------------------


def test_an_unknown_run_is_a_404_that_says_so(ui: Any) -> None:
    answer = get_json(ui, "/api/runs/0123456789abcdef", status=404)
    assert "0123456789abcdef" in answer["error"]
    code, headers, body = request(ui, "/runs/0123456789abcdef")
    assert code == 404 and headers["content-type"].startswith("text/html")
    assert b"0123456789abcdef" in body and b"Traceback" not in body


def test_an_ambiguous_prefix_is_a_404_listing_its_matches(ui_runs: UiRuns, tmp_path: Path) -> None:
    store = _copy(ui_runs.store, tmp_path / "twins")
    row = ui_runs.success
    twin = row["run_id"][:6] + "f" * 26 if row["run_id"][6] != "f" else row["run_id"][:6] + "0" * 26
    with sqlite3.connect(store / "spans.sqlite3") as connection:  # a second run whose id starts the same
        connection.execute(
            "INSERT INTO runs (run_id, trace_id, team, started_ns, ended_ns) "
            "SELECT ?, trace_id, team, started_ns + 1, ended_ns FROM runs WHERE run_id = ?",
            (twin, row["run_id"]),
        )
    prefix = row["run_id"][:6]
    with ui_server(store) as server:
        answer = get_json(server, f"/api/runs/{prefix}", status=404)
        assert "ambiguous" in answer["error"]
        assert sorted(m["run_id"] for m in answer["matches"]) == sorted([row["run_id"], twin])
        _, body = get(server, f"/runs/{prefix}")
        for run_id in (row["run_id"], twin):
            assert f'href="/runs/{run_id}"'.encode() in body


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("since=yesterday", "since"),
        ("until=2026-13-40", "until"),
        ("stop_kind=bored", "stop_kind"),
        ("finding=nonsense", "finding"),
        ("sort=price", "sort"),
        ("page=0", "page"),
        ("colour=blue", "colour"),
        ("outcome==", "outcome"),
        ("since=1d&until=2d", "since"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(ui: Any, query: str, named: str) -> None:
    answer = get_json(ui, f"/api/runs?{query}", status=400)
    assert answer["error"].startswith(named) or f"'{named}'" in answer["error"], answer
    code, body = get(ui, f"/?{query}")
    assert code == 400 and named.encode() in body and b"Traceback" not in body


def test_a_bad_cost_parameter_is_a_400_naming_it(ui: Any) -> None:
    assert "by" in get_json(ui, "/api/cost?by=planet", status=400)["error"]
    assert "since" in get_json(ui, "/api/cost?since=forever", status=400)["error"]


def test_an_empty_store_says_how_to_put_a_run_in_it(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    with ui_server(tmp_path / "store") as server:
        code, body = get(server, "/")
        assert code == 200 and b"otel-agents demo" in body
        assert get_json(server, "/api/runs") == {
            "runs": [],
            "total": 0,
            "page": 1,
            "pages": 1,
            "per_page": 50,
            "sort": "time",
            "filters": {},
        }
        code, body = get(server, "/cost")
        assert code == 200 and b"otel-agents demo" in body


def test_a_missing_store_directory_is_said(tmp_path: Path) -> None:
    with ui_server(tmp_path / "nowhere") as server:
        code, body = get(server, "/")
        assert code == 503 and b"does not exist" in body
        assert "does not exist" in get_json(server, "/api/runs", status=503)["error"]


def test_a_store_of_a_newer_schema_is_said_as_the_cli_says_it(ui_runs: UiRuns, tmp_path: Path) -> None:
    store = tmp_path / "newer"
    store.mkdir()
    with sqlite3.connect(store / "spans.sqlite3") as connection:
        connection.execute("PRAGMA user_version = 999")
    said = cli("--store", str(store), "runs").stderr
    assert "newer" in said
    with ui_server(store) as server:
        error = get_json(server, "/api/runs", status=503)["error"]
        assert error in said


def test_a_damaged_store_is_said(tmp_path: Path) -> None:
    store = tmp_path / "damaged"
    store.mkdir()
    (store / "spans.sqlite3").write_bytes(b"this is not a database" * 100)
    said = cli("--store", str(store), "runs").stderr
    with ui_server(store) as server:
        error = get_json(server, "/api/runs", status=503)["error"]
        assert "damaged" in error and error in said, "said as the CLI says it"
        code, body = get(server, "/")
        assert code == 503 and b"damaged" in body and b"Traceback" not in body
    assert (store / "spans.sqlite3").read_bytes() == b"this is not a database" * 100, "a reader moves nothing"


def test_compare_without_two_runs_is_a_400(ui: Any) -> None:
    assert "two runs" in get_json(ui, "/api/compare?a=abc", status=400)["error"]


# --- the command --------------------------------------------------------------------------------


def test_sigint_stops_it_at_once_with_exit_0(ui_runs: UiRuns) -> None:
    with ui_server(ui_runs.store, expect_exit=None) as server:
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=10) == 0


OPENER = """#!{python}
import os, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=30) as answer:
    page = answer.read().decode()
with open({opened!r} + ".partial", "w") as out:
    out.write(sys.argv[1] + "\\n" + str(answer.status) + "\\n" + page)
os.replace({opened!r} + ".partial", {opened!r})
"""


def test_open_opens_the_page_in_the_default_browser(ui_runs: UiRuns, tmp_path: Path) -> None:
    # the default browser is what $BROWSER names (Python's webbrowser): here a script that loads the
    # URL it is given and writes what it got
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(OPENER.format(python=sys.executable, opened=str(opened)))
    browser.chmod(0o755)
    with ui_server(ui_runs.store, "--open", env={"BROWSER": str(browser)}) as server:
        browser_done = wait_for_file(opened, server)
    url, status, page = browser_done.split("\n", 2)
    assert url == server.url
    assert status == "200" and ui_runs.id("success")[:12] in page


def wait_for_file(path: Path, server: Any, within_s: float = 60) -> str:
    """The file's text once the browser script has put it in place (whole: it renames it there)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.is_file():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"--open opened no browser within {within_s} s; stderr:\n{server.stderr()[-2000:]}")


def test_a_port_in_use_is_said_in_one_line(ui: Any, ui_runs: UiRuns) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "otel_agents", "--store", str(ui_runs.store), "ui", "--port", str(ui.port)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert (
        done.stderr.strip().startswith("otel-agents ui: cannot listen on 127.0.0.1:")
        and done.stderr.strip().endswith("(--port 0 takes a free port)")
        and "\n" not in done.stderr.strip()
    )


def test_a_bad_port_is_a_usage_error() -> None:
    done = cli("ui", "--port", "70000")
    assert done.returncode == 2 and "--port 70000" in done.stderr


def test_the_demo_ends_by_naming_the_page(tmp_path: Path) -> None:
    done = cli("--store", str(tmp_path / "store"), "demo")
    assert done.returncode == 0, done.stderr
    assert " ui\n" in done.stdout and "web page" in done.stdout


def test_without_the_web_extra_one_line_says_which_install_brings_it() -> None:
    blocked = (
        "import sys; sys.modules['starlette'] = None; from otel_agents.cli import main; raise SystemExit(main(['ui']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    head = (
        "otel-agents: error: otel-agents ui needs the extra otel-agents[ui] (starlette not installed): "
        f"{sys.executable} -m pip install "
    )
    assert line.startswith(head), "this Python's pip: the one otel-agents runs in"
    # this otel-agents is installed from a clone, editable (scripts/_venv.sh: pip install -e): named
    editable, requirement = shlex.split(line.removeprefix(head))
    clone = Path(requirement.removesuffix("[ui]"))
    assert editable == "-e" and requirement.endswith("[ui]")
    assert 'name = "otel-agents"' in (clone / "pyproject.toml").read_text()


@pytest.mark.parametrize(
    ("direct_url", "requirement"),
    [
        (None, "'otel-agents[ui]'"),  # from an index: no direct_url.json
        (
            '{"url": "file:///home/ana/src/otel-agents", "dir_info": {"editable": true}}',
            "-e '/home/ana/src/otel-agents[ui]'",
        ),
        ('{"url": "file:///home/ana/my%20src/otel-agents/", "dir_info": {}}', "'/home/ana/my src/otel-agents[ui]'"),
        (
            '{"url": "file:///tmp/dist/otel_agents-0.5.0-py3-none-any.whl", "archive_info": {}}',
            "'otel-agents[ui] @ file:///tmp/dist/otel_agents-0.5.0-py3-none-any.whl'",
        ),
        ('{"url": "https://example.com/otel_agents-0.5.0-py3-none-any.whl", "archive_info": {}}', "'otel-agents[ui]'"),
        ("not json", "'otel-agents[ui]'"),
    ],
)
def test_the_install_it_names_is_where_this_otel_agents_came_from(direct_url: str | None, requirement: str) -> None:
    from otel_agents.cli._ui import extra_requirement

    assert extra_requirement(direct_url if direct_url is not None else "{}") == requirement


def _copy(store: Path, to: Path) -> Path:
    to.mkdir()
    with sqlite3.connect(store / "spans.sqlite3") as source, sqlite3.connect(to / "spans.sqlite3") as target:
        source.backup(target)
    return to


def test_a_trace_whose_run_has_not_ended_is_shown_as_open(ui_runs: UiRuns, tmp_path: Path) -> None:
    store = _copy(ui_runs.store, tmp_path / "open")
    row = ui_runs.failing_tool
    with sqlite3.connect(store / "spans.sqlite3") as connection:  # as if the run span had not ended yet
        connection.execute("DELETE FROM runs WHERE run_id = ?", (row["run_id"],))
        connection.execute("DELETE FROM spans WHERE trace_id = ? AND name LIKE 'invoke_workflow%'", (row["trace_id"],))
    with ui_server(store) as server:
        code, body = get(server, f"/runs/{row['trace_id']}")
        assert code == 200, body[:500]
        assert b"no finished run" in body


def test_a_trace_cut_short_by_a_lost_span_says_so(ui_runs: UiRuns, tmp_path: Path) -> None:
    store = _copy(ui_runs.store, tmp_path / "cut")
    row = ui_runs.loop_guard
    with sqlite3.connect(store / "spans.sqlite3") as connection:  # an agent's span lost on the way
        (span_id,) = connection.execute(
            "SELECT span_id FROM spans WHERE trace_id = ? AND name LIKE 'invoke_agent%' ORDER BY start_ns LIMIT 1",
            (row["trace_id"],),
        ).fetchone()
        connection.execute("DELETE FROM spans WHERE span_id = ?", (span_id,))
    with ui_server(store) as server:
        code, body = get(server, f"/runs/{row['run_id']}")
        assert code == 200
        assert b"cut short" in body

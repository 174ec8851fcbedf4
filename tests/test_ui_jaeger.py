"""`otel-agents ui --jaeger URL`: the runs and run pages read from the built Jaeger v2's query API
(issue 48 items 1, 2, 4, 5).

The runs are the web page's fixture runs (tests/support/ui_store_app.py: the real
`OpenAIChatCompletionClient` against the local OpenAI-compatible server), made once by that app with
its store AND an OTLP endpoint (the built Jaeger's): every run goes to both, exported at ratio 1.
So "the same run" is one run, read from each source: the runs list from Jaeger is the store's, and
each run page's JSON from Jaeger is the store's page's JSON of that run, outcomes recorded after the
run ended excepted (they reach the store only, as `explain` documents). A trace holding no run (a
model call outside any run) is listed nowhere; one cut short by a lost span says so on its page.
Bad input (a Jaeger refusing, silent, answering an error, or not Jaeger) is a 503 naming the URL,
and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from tests.support.backends import built_backends
from tests.support.bad_backends import refusing_endpoint, silent_endpoint
from tests.support.cli import cli
from tests.support.jaeger import Jaeger, poll, running_jaeger
from tests.support.local_http import serving
from tests.support.ui_server import UiServer, get, get_json, request, ui_server
from tests.support.ui_store import fill_ui_store

pytestmark = [pytest.mark.backend, pytest.mark.slow]

SERVICE = "ui-jaeger"
BARE_SERVICE = "ui-jaeger-bare"
"""A service whose only trace is a model call outside any run: it holds no run."""
CUT_SERVICE = "ui-jaeger-cut"
"""A service holding one run whose trace lost a span on the way."""
EARLIER_NS = 2 * 3600 * 1_000_000_000


# --- starting things -------------------------------------------------------------------------------


@contextmanager
def jaeger_ui(url: str, *args: str, env: Mapping[str, str] | None = None) -> Iterator[UiServer]:
    """`otel-agents ui --jaeger URL ARGS --port 0`, started by tests/support/ui_server.py as a user
    starts it, without `--store` (with --jaeger the store is not read, and giving both is refused)."""
    with ui_server(None, "--jaeger", url, *args, env=env) as server:
        yield server


@dataclass
class Made:
    jaeger: Jaeger
    store: Path
    rows: list[dict[str, Any]]
    """`runs --json` of the store, newest first: the runs the app made."""
    bare_trace: str
    """The trace of a model call outside any run (service `BARE_SERVICE`)."""
    cut_run: str
    """A run of `CUT_SERVICE` whose trace lost one span (a turn) on the way."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.jaeger.ports.query_http}"


def call_outside_any_run(jaeger: Jaeger) -> str:
    """One model call of the real client outside any run, exported to Jaeger: its trace id."""
    from autogen_core.models import UserMessage

    import otel_agents
    from tests.support.openai_server import OpenAIServer
    from tests.support.teams import openai_client

    with OpenAIServer() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_METRICS_EXPORTER", "none")
        with otel_agents.configure(service_name=BARE_SERVICE, endpoint=jaeger.otlp_http, store=False) as telemetry:
            from opentelemetry import trace

            tracer = trace.get_tracer("ui-jaeger-test")
            with tracer.start_as_current_span("request") as span:
                trace_id = f"{span.get_span_context().trace_id:032x}"
                asyncio.run(openai_client(server).create([UserMessage(content="hello", source="user")]))
            assert telemetry.force_flush()
    return trace_id


def send_copy(store: Path, row: Mapping[str, Any], endpoint: str, *, service: str, drop_turn: bool = False) -> str:
    """A copy of the stored run of `row` (fresh trace, span, run and conversation ids, started two hours earlier:
    outside the runs page's default window) sent to Jaeger's OTLP/HTTP endpoint as service
    `service`; `drop_turn`: without its first turn's span (its children then arrive without their
    parent, as when a span is lost). Its run id."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from otel_agents._internal import keys as sc
    from otel_agents._internal.export.replay import readable_span
    from otel_agents._internal.export.store.reader import Store
    from otel_agents._internal.export.store.rows import StoredSpan

    template = Store(store).spans(row["trace_id"])
    rng = random.Random(row["run_id"] + service)
    trace_id, run_id = f"{rng.getrandbits(128):032x}", f"{rng.getrandbits(128):032x}"
    conversation = f"{rng.getrandbits(128):032x}"
    ids = {span.span_id: f"{rng.getrandbits(64) | 1:016x}" for span in template}
    dropped = next(s.span_id for s in template if s.name.startswith("invoke_agent ")) if drop_turn else None
    spans = []
    for span in template:
        if span.span_id == dropped:
            continue
        fresh = {sc.RUN_ID: run_id, sc.GEN_AI_CONVERSATION_ID: conversation}
        attributes = {k: fresh.get(k, v) for k, v in span.data["attributes"].items()}
        resource = {**span.data.get("resource", {}), "service.name": service}
        events = [{**event, "timestamp": event["timestamp"] - EARLIER_NS} for event in span.data.get("events", [])]
        data = {**span.data, "attributes": attributes, "resource": resource, "events": events}
        parent = ids.get(span.parent_span_id) if span.parent_span_id else None
        start, end = span.start_ns - EARLIER_NS, span.end_ns - EARLIER_NS
        spans.append(readable_span(StoredSpan(trace_id, ids[span.span_id], parent, span.name, start, end, data)))
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    return run_id


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    backends = built_backends()
    workdir = tmp_path_factory.mktemp("ui-jaeger")
    store = workdir / "store"
    with running_jaeger(backends.jaeger, workdir) as jaeger:
        # the web page's fixture runs, made by their app with its store and Jaeger's OTLP endpoint
        otlp = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http,
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_SERVICE_NAME": SERVICE,
        }
        rows = fill_ui_store(store, env=otlp, within_s=180).rows
        assert len(rows) == 7, rows
        bare = call_outside_any_run(jaeger)
        cut = send_copy(store, rows[-1], jaeger.otlp_http, service=CUT_SERVICE, drop_turn=True)
        for trace_id in [*(row["trace_id"] for row in rows), bare]:

            def held(wanted: str = trace_id) -> list[dict[str, Any]]:
                return jaeger.v3_trace(wanted)

            assert poll(held, bool, within_s=60), f"{trace_id} never reached Jaeger"
        yield Made(jaeger, store, rows, bare, cut)


@pytest.fixture(scope="module")
def ui(made: Made) -> Iterator[UiServer]:
    with jaeger_ui(made.url) as server:
        yield server


@pytest.fixture(scope="module")
def store_ui(made: Made) -> Iterator[UiServer]:
    from tests.support.ui_server import ui_server

    with ui_server(made.store) as server:
        yield server


def without_late_outcomes(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row without its outcomes: the fixture app records each after its run ended, so they reach
    the store only (as `explain` documents for Jaeger)."""
    return {k: v for k, v in row.items() if k != "outcomes"}


# --- the runs ----------------------------------------------------------------------------------------


def test_the_runs_from_jaeger_are_the_stores_runs_and_a_trace_without_a_run_is_listed_nowhere(
    made: Made, ui: UiServer
) -> None:
    listed = get_json(ui, "/api/runs")  # the last hour's: the app's runs, not the cut copy (2 h ago)
    assert [row["run_id"] for row in listed["runs"]] == [row["run_id"] for row in made.rows]
    from_jaeger = {row["run_id"]: row for row in listed["runs"]}
    for row in made.rows:
        assert without_late_outcomes(from_jaeger[row["run_id"]]) == without_late_outcomes(row), row["run_id"]
    assert made.bare_trace not in {row["trace_id"] for row in listed["runs"]}
    assert listed["source"]["sorted"] == "within the window fetched"
    assert set(listed["source"]["services"]) >= {SERVICE, BARE_SERVICE, CUT_SERVICE}
    assert listed["source"]["filtered"] is None
    code, body = get(ui, "/")
    assert code == 200
    page = body.decode()
    assert "sorted within the window fetched" in page
    assert f"Jaeger at {made.url}" in page
    for row in made.rows:
        assert f'data-run-id="{row["run_id"]}"' in page


def test_only_the_services_given_are_read(made: Made) -> None:
    with jaeger_ui(made.url, "--service", SERVICE) as only:
        listed = get_json(only, "/api/runs")
        assert [row["run_id"] for row in listed["runs"]] == [row["run_id"] for row in made.rows]
        assert listed["source"]["services"] == [SERVICE]
    with jaeger_ui(made.url, "--service", BARE_SERVICE) as bare:
        assert get_json(bare, "/api/runs")["runs"] == []
        code, body = get(bare, "/")
        assert code == 200 and b"No runs in Jaeger at" in body


@pytest.mark.parametrize(
    "filters",
    [
        {"team": "review"},
        {"user_id": "ben"},
        {"stop_kind": "max_messages"},
        {"finding": "tool_errors"},
        {"team": "research", "user_id": "ana"},
    ],
    ids=lambda f: ",".join(f),
)
def test_the_filters_list_what_the_store_lists(
    made: Made, ui: UiServer, store_ui: UiServer, filters: dict[str, str]
) -> None:
    query = urlencode({**filters, "since": made.rows[-1]["started_at"]})
    from_jaeger = get_json(ui, f"/api/runs?{query}")
    from_store = get_json(store_ui, f"/api/runs?{query}")
    assert from_store["runs"], "the filter matches some of the runs"
    assert len(from_store["runs"]) < len(made.rows), "and not all of them"
    assert [without_late_outcomes(r) for r in from_jaeger["runs"]] == [
        without_late_outcomes(r) for r in from_store["runs"]
    ]
    searched = [name for name in ("team", "user_id", "stop_kind") if name in filters]
    assert from_jaeger["source"]["searched_by"] == searched, "Jaeger's tag search takes these"
    said = "by Jaeger's tag search" if searched else "on the runs read from Jaeger"
    assert from_jaeger["source"]["filtered"].startswith(said)
    code, body = get(ui, f"/?{query}")
    assert code == 200 and f"filtered {said}".replace("'", "&#39;") in body.decode()


def test_the_runs_are_paged_by_time_window(made: Made, ui: UiServer, store_ui: UiServer) -> None:
    oldest, middle = made.rows[-1], made.rows[len(made.rows) // 2]
    window = {"since": oldest["started_at"], "until": middle["started_at"]}
    from_jaeger = get_json(ui, f"/api/runs?{urlencode(window)}")
    from_store = get_json(store_ui, f"/api/runs?{urlencode(window)}")
    assert 0 < len(from_jaeger["runs"]) < len(made.rows)
    assert [r["run_id"] for r in from_jaeger["runs"]] == [r["run_id"] for r in from_store["runs"]]
    source = from_jaeger["source"]
    assert source["older"]["until"] == source["since"], "the older window ends where this one starts"
    assert source["newer"]["since"] == source["until"], "the newer window starts where this one ends"
    older = get_json(ui, f"/api/runs?{urlencode(source['older'])}")
    assert older["runs"] == [], "nothing before the oldest run"
    newer = get_json(ui, f"/api/runs?{urlencode(source['newer'])}")
    assert middle["run_id"] in {r["run_id"] for r in newer["runs"]}, "the run at the window's end opens the next"
    assert middle["run_id"] not in {r["run_id"] for r in from_jaeger["runs"]}
    assert get_json(ui, "/api/runs?page=2", status=400)["error"].startswith("page 2: Jaeger has no offset")
    code, body = get(ui, f"/?{urlencode(window)}")
    assert code == 200 and b"older window" in body and b"newer window" in body


@pytest.mark.parametrize("sort", ["cost", "duration", "tokens"])
def test_a_sort_orders_the_window_as_the_store_orders_the_same_runs(
    made: Made, ui: UiServer, store_ui: UiServer, sort: str
) -> None:
    query = urlencode({"since": made.rows[-1]["started_at"], "sort": sort, "team": "review"})
    from_jaeger = get_json(ui, f"/api/runs?{query}")
    from_store = get_json(store_ui, f"/api/runs?{query}")
    assert len(from_store["runs"]) >= 2
    assert [r["run_id"] for r in from_jaeger["runs"]] == [r["run_id"] for r in from_store["runs"]]


def test_a_window_holding_more_traces_than_one_search_returns_says_so(made: Made) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from otel_agents._internal.export.replay import readable_span
    from otel_agents._internal.export.store.rows import StoredSpan
    from otel_agents.ui.jaeger import SEARCH_DEPTH

    many = "ui-jaeger-many"
    rng = random.Random(48)
    start = time.time_ns() - 60 * 1_000_000_000
    data = {"resource": {"service.name": many}, "attributes": {}}
    spans = [
        readable_span(
            StoredSpan(
                f"{rng.getrandbits(128):032x}",
                f"{rng.getrandbits(64) | 1:016x}",
                None,
                "request",
                start + n,
                start + n + 1000,
                data,
            )
        )
        for n in range(SEARCH_DEPTH + 1)
    ]
    exporter = OTLPSpanExporter(endpoint=f"{made.jaeger.otlp_http}/v1/traces")
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    with jaeger_ui(made.url, "--service", many) as only:

        def cut() -> list[str]:
            answer: list[str] = get_json(only, "/api/runs")["source"]["cut"]
            return answer

        assert poll(cut, bool, within_s=60) == [many]
        assert get_json(only, "/api/runs")["runs"] == [], "traces without a run: listed nowhere"
        code, body = get(only, "/")
        assert code == 200
        assert f"Jaeger returned its most traces ({SEARCH_DEPTH}) for {many} in this window".encode() in body


# --- one run -----------------------------------------------------------------------------------------


def test_a_run_page_from_jaeger_is_the_stores_page_of_the_same_run(
    made: Made, ui: UiServer, store_ui: UiServer
) -> None:
    for row in made.rows:
        from_jaeger = get_json(ui, f"/api/runs/{row['run_id']}")
        from_store = get_json(store_ui, f"/api/runs/{row['run_id']}")
        from_store["run"].pop("outcomes")
        assert from_jaeger["run"].pop("outcomes") == [], "recorded after the run ended: in the store only"
        assert from_jaeger == from_store, row["run_id"]
        by_trace = get_json(ui, f"/api/runs/{row['trace_id']}")
        by_trace["run"].pop("outcomes")
        assert by_trace == from_jaeger, "the trace id opens the same run"
        code, body = get(ui, f"/runs/{row['run_id']}")
        assert code == 200, body[:500]
        assert row["run_id"].encode() in body and b"cut short" not in body


def test_a_run_page_from_jaeger_lists_the_other_runs_of_its_conversation_as_the_stores_does(
    made: Made, ui: UiServer, store_ui: UiServer
) -> None:
    def conversation(server: UiServer, run_id: str) -> str | None:
        code, body = get(server, f"/runs/{run_id}")
        assert code == 200
        found = re.search(r'<section id="conversation">.*?</section>', body.decode(), re.S)
        return found[0] if found else None

    listed = 0
    for row in made.rows:
        from_store = conversation(store_ui, row["run_id"])
        assert conversation(ui, row["run_id"]) == from_store, row["run_id"]
        listed += from_store is not None
    assert listed == 2, "the resumed conversation's two runs each list the other"


def test_a_trace_cut_short_by_a_lost_span_says_so_on_its_page(made: Made, ui: UiServer) -> None:
    assert poll(lambda: get(ui, f"/api/runs/{made.cut_run}")[0], lambda code: code == 200, within_s=30) == 200
    code, body = get(ui, f"/runs/{made.cut_run}")
    assert code == 200
    assert b"This trace was cut short" in body


def test_a_run_jaeger_does_not_hold_is_a_404_naming_it(made: Made, ui: UiServer) -> None:
    unknown = "0123456789abcdef0123456789abcdef"
    answer = get_json(ui, f"/api/runs/{unknown}", status=404)
    assert answer["error"] == f"no run or trace {unknown} in Jaeger at {made.url}"
    code, body = get(ui, f"/runs/{unknown}")
    assert code == 404 and unknown.encode() in body
    prefix = made.rows[0]["run_id"][:8]
    assert "not a prefix" in get_json(ui, f"/api/runs/{prefix}", status=404)["error"]


def test_compare_and_the_otlp_download_read_jaeger(made: Made, ui: UiServer, store_ui: UiServer) -> None:
    a, b = made.rows[0]["run_id"], made.rows[1]["run_id"]
    from_jaeger = get_json(ui, f"/api/compare?a={a}&b={b}")
    from_store = get_json(store_ui, f"/api/compare?a={a}&b={b}")
    for answer in (from_jaeger, from_store):
        answer["a"]["run"].pop("outcomes")
        answer["b"]["run"].pop("outcomes")
    assert from_jaeger == from_store
    code, headers, body = request(ui, f"/api/runs/{a}/otlp.json")
    assert code == 200 and headers["content-disposition"].startswith("attachment")
    from otel_agents._internal.explain.otlp_json import spans_of_text

    assert {s.trace_id for s in spans_of_text(body.decode())} == {made.rows[0]["trace_id"]}


# --- the cost page without Prometheus ----------------------------------------------------------------


def test_without_prometheus_the_cost_page_says_where_its_figures_would_come_from(ui: UiServer) -> None:
    code, body = get(ui, "/cost")
    assert code == 200
    assert b"--prometheus URL" in body
    answer = get_json(ui, "/api/cost", status=503)
    assert "--prometheus URL" in answer["error"]
    assert "--prometheus URL" in get_json(ui, "/api/cost/days", status=503)["error"]


# --- bad input -----------------------------------------------------------------------------------------


def assert_says_which(server: UiServer, url: str, words: str) -> None:
    """/api/runs, the runs page and a run page are 503s naming `url` and saying `words`; the server
    keeps serving (the next request is answered, its static files too)."""
    answer = get_json(server, "/api/runs", status=503)
    assert url in answer["error"] and words in answer["error"], answer
    code, body = get(server, "/")
    assert code == 503 and url.encode() in body and words.encode() in body
    code, body = get(server, f"/runs/{'ab' * 16}")
    assert code == 503 and url.encode() in body
    assert get(server, "/static/style.css")[0] == 200
    assert get_json(server, "/api/runs", status=503) == answer, "still serving, still saying which"


def test_a_jaeger_that_refuses_connections_is_named(tmp_path: Path) -> None:
    with refusing_endpoint() as url, jaeger_ui(url) as ui:
        assert_says_which(ui, url, "cannot reach Jaeger")


def test_a_silent_jaeger_is_given_up_on_after_the_bound(tmp_path: Path) -> None:
    # the bound is the server's own (5 s; the variable shortens it for this test): the test waits for
    # the page's answer, not for a time
    with silent_endpoint() as url, jaeger_ui(url, env={"OTEL_AGENTS_UI_TIMEOUT_S": "0.5"}) as ui:
        assert_says_which(ui, url, "did not answer")
        assert "within 0.5 s" in get_json(ui, "/api/runs", status=503)["error"]


@contextmanager
def answering_with(status: int, content_type: str, body: bytes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


def test_a_jaeger_answering_an_error_is_named_with_its_message(tmp_path: Path) -> None:
    error = json.dumps({"error": {"httpCode": 500, "message": "storage is on fire"}}).encode()
    with answering_with(500, "application/json", error) as url, jaeger_ui(url) as ui:
        assert_says_which(ui, url, "500: storage is on fire")


def test_something_that_is_not_jaeger_is_named(tmp_path: Path) -> None:
    page = b"<!doctype html><title>a wiki</title><p>hello"
    with answering_with(200, "text/html", page) as url, jaeger_ui(url) as ui:
        assert_says_which(ui, url, "did not answer with JSON")
    not_services = json.dumps({"hello": ["world"], "services": 3}).encode()
    with answering_with(200, "application/json", not_services) as url, jaeger_ui(url) as ui:
        assert_says_which(ui, url, "did not answer with Jaeger")


def test_an_answer_past_the_bound_is_refused_not_held(tmp_path: Path) -> None:
    from otel_agents.ui.jaeger import MAX_ANSWER_BYTES

    huge = b'{"services": [' + b" " * MAX_ANSWER_BYTES + b"]}"
    with answering_with(200, "application/json", huge) as url, jaeger_ui(url) as ui:
        assert_says_which(ui, url, f"more than {MAX_ANSWER_BYTES // 2**20} MiB")


# --- the command line ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--jaeger", "localhost:16686"], "--jaeger 'localhost:16686': expected the base URL"),
        (["--jaeger", "ftp://127.0.0.1:16686"], "--jaeger 'ftp://127.0.0.1:16686': expected the base URL"),
        (["--jaeger", "http://127.0.0.1:99999"], "--jaeger 'http://127.0.0.1:99999': the port is not a number"),
        (["--prometheus", "127.0.0.1:9090"], "--prometheus '127.0.0.1:9090': expected the base URL"),
        (["--service", "api"], "--service names Jaeger's services: give --jaeger URL with it"),
    ],
)
def test_a_bad_source_option_exits_2_with_one_line_naming_it(args: list[str], said: str) -> None:
    done = cli("ui", "--port", "0", *args)
    assert done.returncode == 2
    assert done.stderr.strip() == f"otel-agents: error: {said}" or said in done.stderr.strip().splitlines()[-1]
    assert said in done.stderr


def test_the_store_and_jaeger_together_are_refused(tmp_path: Path) -> None:
    done = cli("--store", str(tmp_path), "ui", "--port", "0", "--jaeger", "http://127.0.0.1:16686")
    assert done.returncode == 2
    assert "the page reads one source" in done.stderr


# --- in a browser ----------------------------------------------------------------------------------------


def test_the_runs_page_and_a_run_page_from_jaeger_in_a_browser(made: Made, ui: UiServer) -> None:
    from tests.support.browser import chromium

    with chromium() as browser:
        browser.open(ui.url)
        page = browser.page
        shown = page.locator("table#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
        assert set(shown) >= {row["run_id"] for row in made.rows}
        assert "sorted within the window fetched" in page.locator("#source").inner_text()
        newest = made.rows[0]
        with page.expect_navigation():
            page.click(f"a.run[data-run-id='{newest['run_id']}']")
        assert page.url.endswith(f"/runs/{quote(newest['run_id'])}")
        body = page.locator("main").inner_text()
        assert newest["run_id"][:12] in page.title()
        assert newest["team"] in body
        assert "cut short" not in body
        browser.assert_no_errors()

"""`otel-agents ui --jaeger URL` against local servers that answer as Jaeger does, or badly (review
of issue 48, findings 1, 3, 5-12): one deadline for a page's reads of Jaeger; a body held or
dribbled after its headers (an error answer's too) is a 503 naming the URL, within that bound; the
services Jaeger knows are kept a while; a page reads a bounded number of traces and says what it
left out (services past the cap, traces past the cap); ids from Jaeger that are not 32 lowercase hex
digits never reach a URL; a failure of the conversation's other runs, or of the cost page's
costliest runs, is a notice on a page still served; a window that does not start before it ends is
a 400; the command line's URL and timeout checks exit 2 with one line.

The servers pace themselves (a held body is released by the test's event at its end); the tests
wait on the page's answers, never on a time."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from tests.support.bad_backends import refusing_endpoint
from tests.support.cli import cli
from tests.support.jaeger_answers import NO_TRACES, jaeger_like, run_trace, send_json
from tests.support.prometheus_answers import EMPTY, answering, as_json
from tests.support.ui_server import UiServer, get, get_json, ui_server

TRACE = "6ca6613412e15fb948a5b2b38229596d"
RUN = "ab" * 16
SHORT = {"OTEL_AGENTS_UI_TIMEOUT_S": "0.5"}


@contextmanager
def jaeger_ui(url: str, *args: str, env: dict[str, str] | None = None) -> Iterator[UiServer]:
    with ui_server(None, "--jaeger", url, *args, env=env) as server:
        yield server


# --- a whole page within the bound ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["error-then-held", "dribbled"])
def test_a_body_held_or_dribbled_after_its_headers_is_a_503_naming_the_url(how: str) -> None:
    released = threading.Event()

    def handle(request: BaseHTTPRequestHandler, path: str, query: dict[str, list[str]]) -> None:
        request.send_response(500 if how == "error-then-held" else 200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", "1000000")
        request.end_headers()
        request.wfile.write(b'{"error": ')
        request.wfile.flush()
        if how == "error-then-held":
            released.wait(60)
            return
        while not released.wait(0.05):  # a byte now and then: each socket read is answered in time
            request.wfile.write(b" ")
            request.wfile.flush()

    try:
        with jaeger_like(handle) as (url, _), jaeger_ui(url, env=SHORT) as ui:
            answer = get_json(ui, "/api/runs", status=503)
            assert url in answer["error"] and "did not answer" in answer["error"], answer
            code, body = get(ui, "/")
            assert code == 503 and url.encode() in body
            code, body = get(ui, f"/runs/{TRACE}")
            assert code == 503 and url.encode() in body
            assert get(ui, "/static/style.css")[0] == 200, "still serving"
    finally:
        released.set()


def test_a_page_s_reads_of_jaeger_share_one_deadline() -> None:
    # each answer comes in 0.3 s, within the 0.5 s bound; a run page that Jaeger holds as no trace
    # asks again by run id (the services, then a tag search): together past the bound
    released = threading.Event()

    def handle(request: BaseHTTPRequestHandler, path: str, query: dict[str, list[str]]) -> None:
        released.wait(0.3)  # the server's pace
        if path == "/api/v3/services":
            send_json(request, 200, {"services": ["svc"]})
        elif path == "/api/traces":
            send_json(request, 200, {"data": []})
        else:
            send_json(request, 404, NO_TRACES)

    try:
        with jaeger_like(handle) as (url, _), jaeger_ui(url, env=SHORT) as ui:
            code, body = get(ui, f"/runs/{RUN}")
            assert code == 503, body[:500]
            assert url.encode() in body and b"did not answer" in body
    finally:
        released.set()


def test_the_services_jaeger_knows_are_kept_between_pages() -> None:
    def handle(request: BaseHTTPRequestHandler, path: str, query: dict[str, list[str]]) -> None:
        if path == "/api/v3/services":
            send_json(request, 200, {"services": ["svc"]})
        else:
            send_json(request, 404, NO_TRACES)

    with jaeger_like(handle) as (url, asked), jaeger_ui(url) as ui:
        for _ in range(3):
            assert get_json(ui, "/api/runs")["runs"] == []
        assert asked.count("/api/v3/services") == 1
        assert asked.count("/api/v3/traces") == 3


# --- what a page reads, and what it says it left out -------------------------------------------------


def test_a_tag_search_past_the_traces_a_page_reads_says_so_and_ids_not_hex_never_reach_a_url() -> None:
    from otel_agents.ui.jaeger import TRACES_BY_ID

    found = TRACES_BY_ID + 50
    traces = [{"traceID": f"{n + 1:x}", "spans": [{"startTime": 1_000_000 + n}]} for n in range(found)]
    traces.append({"traceID": "../../api/v3/services", "spans": [{"startTime": 9_000_000}]})
    traces.append({"traceID": "AB" * 16 + "?x", "spans": [{"startTime": 9_000_000}]})

    def handle(request: BaseHTTPRequestHandler, path: str, query: dict[str, list[str]]) -> None:
        if path == "/api/v3/services":
            send_json(request, 200, {"services": ["svc"]})
        elif path == "/api/traces":
            send_json(request, 200, {"data": traces})
        else:
            send_json(request, 404, NO_TRACES)

    with jaeger_like(handle) as (url, asked), jaeger_ui(url) as ui:
        listed = get_json(ui, "/api/runs?team=review")
        assert listed["source"]["unread_traces"] == found - TRACES_BY_ID
        read = [p for p in asked.paths if p.startswith("/api/v3/traces/")]
        assert all(re.fullmatch(r"/api/v3/traces/[0-9a-f]{32}", p) for p in read), read[:5]
        assert sorted(read) == sorted(f"/api/v3/traces/{n + 1:032x}" for n in range(50, found)), "the newest found"
        code, body = get(ui, "/?team=review")
        assert code == 200
        assert f"found {found - TRACES_BY_ID} more traces than a page reads ({TRACES_BY_ID}".encode() in body


def test_services_past_the_cap_are_said_on_the_page_and_in_the_source() -> None:
    from otel_agents.ui.jaeger import MAX_SERVICES

    services = [f"s{n:02d}" for n in range(MAX_SERVICES + 5)]

    def handle(request: BaseHTTPRequestHandler, path: str, query: dict[str, list[str]]) -> None:
        if path == "/api/v3/services":
            send_json(request, 200, {"services": services})
        else:
            send_json(request, 404, NO_TRACES)

    with jaeger_like(handle) as (url, asked), jaeger_ui(url) as ui:
        source = get_json(ui, "/api/runs")["source"]
        assert source["skipped_services"] == services[MAX_SERVICES:]
        assert source["services"] == services[:MAX_SERVICES]
        assert asked.count("/api/v3/traces") == MAX_SERVICES
        code, body = get(ui, "/")
        assert code == 200
        assert f"Jaeger knows {len(services)} services; the first {MAX_SERVICES} were searched".encode() in body


def test_the_other_runs_of_a_conversation_that_cannot_be_read_are_a_notice_on_the_run_page() -> None:
    import time

    document = run_trace(TRACE, RUN, conversation="c1", start_ns=time.time_ns() - 60_000_000_000)

    def handle(request: BaseHTTPRequestHandler, path: str, query: dict[str, list[str]]) -> None:
        if path == f"/api/v3/traces/{TRACE}":
            send_json(request, 200, document)
        elif path == "/api/v3/services":
            send_json(request, 200, {"services": ["svc"]})
        else:
            send_json(request, 500, {"error": {"message": "storage is on fire"}})

    with jaeger_like(handle) as (url, _), jaeger_ui(url) as ui:
        code, body = get(ui, f"/runs/{TRACE}")
        assert code == 200, body[:500]
        text = body.decode()
        assert "The other runs of this conversation could not be read" in text
        assert "storage is on fire" in text and url in text
        assert get_json(ui, f"/api/runs/{TRACE}")["run"]["run_id"] == RUN


def test_a_run_id_that_is_not_hex_is_no_run() -> None:
    import time

    from otel_agents.ui.jaeger import run_of, stored_spans

    for bad in ("../x", "AB" * 16, "ab" * 15, "ab" * 16 + "#"):
        (span,) = stored_spans(run_trace(TRACE, bad, start_ns=time.time_ns()))
        assert run_of(span) is None, bad
    (span,) = stored_spans(run_trace(TRACE, RUN, start_ns=time.time_ns()))
    run = run_of(span)
    assert run is not None and run.run_id == RUN


# --- time ranges ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("since=2026-12-05T04:00:00Z&until=2026-12-05T04:00:00Z", "since 2026-12-05T04:00:00"),
        ("since=2999-01-01T00:00:00Z", "since 2999-01-01T00:00:00"),
    ],
    ids=["equal", "since-after-now"],
)
def test_a_window_that_does_not_start_before_it_ends_is_a_400_naming_both(query: str, said: str) -> None:
    with refusing_endpoint() as url, jaeger_ui(url) as ui:
        answer = get_json(ui, f"/api/runs?{query}", status=400)
        assert said in answer["error"] and "is not before until" in answer["error"], answer
        code, body = get(ui, f"/?{query}")
        assert code == 400 and b"is not before until" in body


# --- the cost page with both sources -----------------------------------------------------------------


def test_a_jaeger_failing_the_cost_page_s_costliest_runs_falls_back_to_the_exemplars() -> None:
    with (
        answering(lambda path: as_json(200, EMPTY[path])) as prometheus,
        refusing_endpoint() as jaeger,
        jaeger_ui(jaeger, "--prometheus", prometheus) as ui,
    ):
        code, body = get(ui, "/cost")
        assert code == 200, body[:800]
        text = body.decode()
        assert f"The costliest runs are those the exemplars name: Jaeger at {jaeger} could not be read" in text
        assert "The costliest runs the exemplars name" in text
        assert get(ui, "/api/cost")[0] == 200


def test_the_cost_by_day_from_prometheus_has_the_store_s_keys(tmp_path: Path) -> None:
    with (
        answering(lambda path: as_json(200, EMPTY[path])) as prometheus,
        ui_server(tmp_path, "--prometheus", prometheus) as ui,
    ):
        days = get_json(ui, "/api/cost/days?by=team&since=7d")
        assert days["by"] == "team" and days["source"] == "prometheus"
        assert isinstance(days["days"], list) and all("day" in d and "rows" in d for d in days["days"]), days
        assert "since 9999d" in get_json(ui, "/api/cost/days?since=9999d", status=400)["error"].replace("'", "")


def test_the_cost_from_prometheus_alone_needs_no_store(tmp_path: Path) -> None:
    with (
        answering(lambda path: as_json(200, EMPTY[path])) as prometheus,
        ui_server(tmp_path / "absent", "--prometheus", prometheus) as ui,
    ):
        assert get_json(ui, "/api/cost?by=team&since=7d")["source"] == "prometheus"
        assert get_json(ui, "/api/cost/days?by=team&since=7d")["by"] == "team"
        code, body = get(ui, "/cost")
        assert code == 200 and prometheus.encode() in body
        assert "no store at" in get_json(ui, "/api/runs", status=503)["error"], "the runs still read the store"


# --- the command line -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "5.5", "60", "soon", "nan"])
def test_a_bad_timeout_variable_exits_2_with_one_line_naming_it(value: str) -> None:
    done = cli("ui", "--port", "0", "--jaeger", "http://127.0.0.1:16686", env={"OTEL_AGENTS_UI_TIMEOUT_S": value})
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"OTEL_AGENTS_UI_TIMEOUT_S={value!r}" in line and "at most 5" in line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--jaeger", "http://ana:secret@127.0.0.1:16686"], "--jaeger: a URL with credentials in it is refused"),
        (["--prometheus", "http://ana:secret@127.0.0.1:9090"], "--prometheus: a URL with credentials in it is refused"),
        (["--prometheus", "http://127.0.0.1:9090#x"], "--prometheus 'http://127.0.0.1:9090#x': expected the base URL"),
        (["--jaeger", "http://127.0.0.1:16686#x"], "--jaeger 'http://127.0.0.1:16686#x': expected the base URL"),
    ],
)
def test_a_source_url_the_page_cannot_use_exits_2_with_one_line(args: list[str], said: str) -> None:
    done = cli("ui", "--port", "0", *args)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert said in line
    assert "secret" not in line


def test_explain_from_jaeger_refuses_credentials_as_the_page_does() -> None:
    done = cli("explain", TRACE, "--jaeger", "http://ana:secret@127.0.0.1:16686")
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "--jaeger: a URL with credentials in it is refused" in done.stderr
    assert "secret" not in done.stderr


def test_the_timeout_variable_bounds_prometheus_too(tmp_path: Path) -> None:
    released = threading.Event()

    def handle(request: BaseHTTPRequestHandler, path: str, query: dict[str, list[str]]) -> None:
        released.wait(60)  # never answers until the test ends

    try:
        with jaeger_like(handle) as (prometheus, _), ui_server(tmp_path, "--prometheus", prometheus, env=SHORT) as ui:
            answer = get_json(ui, "/api/cost", status=503)
            assert prometheus in answer["error"] and "0.5" in answer["error"], answer
    finally:
        released.set()

"""`otel-agents ui --prometheus URL`, started as a user starts it, over deploy/'s chain (runs of the
real OpenAI client, OTLP to the built Collector, traces in the built Jaeger, Debian's Prometheus with
exemplar storage scraping the Collector): /api/cost is Prometheus's answer to the dashboard's
queries, not the store's sums; the cost page's points, in headless Chromium, open the runs they name
(the run page takes a trace id), from the store that holds the same runs and, with `--jaeger`, from
Jaeger, whose window then gives the costliest runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from otel_agents._internal.export.store.reader import StoredRun
from tests.support.browser import chromium
from tests.support.ui_server import UiServer, get, ui_server
from tests.test_from_a_cost_spike_to_its_run import Chain, chain
from tests.test_ui_jaeger import jaeger_ui
from tests.test_ui_prometheus import RANGE, answer_at, dashboard_query, number, runs_in_prometheus_and_jaeger

pytestmark = pytest.mark.backend

__all__ = ["chain"]
SERVICE = "ui-prometheus-page"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def runs(chain: Chain, store: Path) -> list[StoredRun]:
    """Three runs through the chain, each run's cost exemplar in Prometheus and its trace in Jaeger
    (and the run in `store`)."""
    return runs_in_prometheus_and_jaeger(chain, store, SERVICE)


@pytest.fixture(scope="module")
def ui(chain: Chain, runs: list[StoredRun], store: Path) -> Iterator[UiServer]:
    with ui_server(store, "--prometheus", chain.prometheus.url) as server:
        yield server


@pytest.fixture(scope="module")
def at_scale(chain: Chain, runs: list[StoredRun]) -> Iterator[UiServer]:
    """`otel-agents ui --jaeger URL --prometheus URL`: runs from Jaeger, cost from Prometheus."""
    with jaeger_ui(f"http://127.0.0.1:{chain.jaeger.ports.query_http}", "--prometheus", chain.prometheus.url) as server:
        yield server


def test_the_cost_json_is_prometheuss_answer_to_the_dashboards_queries(
    ui: UiServer, chain: Chain, runs: list[StoredRun]
) -> None:
    status, body = get(ui, f"/api/cost?by=team&since={RANGE}")
    assert status == 200, body[:500]
    figures: dict[str, Any] = json.loads(body)
    assert figures["source"] == "prometheus" and figures["prometheus"] == chain.prometheus.url
    at = figures["at"]
    assert figures["cost_usd"] == number(answer_at(chain.prometheus, dashboard_query("Cost in range (USD)"), at))
    by_team = {
        series["metric"]["gen_ai_workflow_name"]: float(series["value"][1])
        for series in answer_at(chain.prometheus, dashboard_query("Cost by team"), at)
    }
    assert {row["key"]: row["cost_usd"] for row in figures["rows"]} == by_team
    assert SERVICE in by_team


def test_a_dimension_prometheus_cannot_group_by_is_a_bad_request_that_names_those_it_can(ui: UiServer) -> None:
    status, body = get(ui, "/api/cost?by=user")
    assert status == 400
    assert "team, model, agent, day" in json.loads(body)["error"]


def test_clicking_a_cost_point_opens_its_run(ui: UiServer, runs: list[StoredRun]) -> None:
    run_of = {run.trace_id: run for run in runs}
    with chromium() as browser:
        browser.open(f"{ui.url}cost?since={RANGE}")
        assert "Prometheus's estimates" in browser.page.locator("#estimate").inner_text()
        points = browser.page.locator("svg a.exemplar")
        named = set(points.evaluate_all("links => links.map(a => a.dataset.traceId)"))
        assert set(run_of) <= named, "each run's cost point is on the chart"
        last = points.last  # drawn last, so on top of any point it overlaps
        trace_id = last.get_attribute("data-trace-id")
        with browser.page.expect_navigation():
            last.click()
        assert browser.page.url == f"{ui.url}runs/{trace_id}"
        shown = browser.page.locator("h1 code").get_attribute("data-run-id")
        assert shown == run_of[str(trace_id)].run_id, "the point opens the run its trace holds"
        browser.assert_no_errors()


def test_without_javascript_the_points_are_links_to_the_runs(ui: UiServer, runs: list[StoredRun]) -> None:
    """The points are plain links in the SVG: with JavaScript off they are there and open the run."""
    with chromium(java_script=False) as browser:
        browser.open(f"{ui.url}cost?since={RANGE}")
        points = browser.page.locator("svg a.exemplar")
        hrefs = {points.nth(i).get_attribute("href") for i in range(points.count())}
        assert {f"/runs/{run.trace_id}" for run in runs} <= hrefs
        last = points.last
        trace_id = last.get_attribute("data-trace-id")
        with browser.page.expect_navigation():
            last.click()
        assert browser.page.url == f"{ui.url}runs/{trace_id}"
        browser.assert_no_errors()


def test_at_scale_a_cost_point_opens_its_run_from_jaeger_and_jaegers_window_gives_the_costliest(
    at_scale: UiServer, runs: list[StoredRun]
) -> None:
    run_of = {run.trace_id: run for run in runs}
    with chromium() as browser:
        browser.open(f"{at_scale.url}cost?since={RANGE}")
        assert "Prometheus's estimates" in browser.page.locator("#estimate").inner_text()
        costliest = browser.page.locator("#costliest a[data-run-id]")
        listed = {costliest.nth(i).get_attribute("data-run-id") for i in range(costliest.count())}
        assert {run.run_id for run in runs} <= listed, "the costliest runs of Jaeger's window for the range"
        points = browser.page.locator("svg a.exemplar")
        last = points.last
        trace_id = str(last.get_attribute("data-trace-id"))
        assert trace_id in run_of
        with browser.page.expect_navigation():
            last.click()
        assert browser.page.url == f"{at_scale.url}runs/{trace_id}"
        assert browser.page.locator("h1 code").get_attribute("data-run-id") == run_of[trace_id].run_id
        browser.assert_no_errors()

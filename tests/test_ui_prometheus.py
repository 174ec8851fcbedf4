"""The cost page from Prometheus (issue 48), through deploy/'s chain: runs of the real OpenAI client
against the local server, exported by OTLP to the built Collector (traces on to the built Jaeger,
metrics on its OpenMetrics endpoint), scraped by Debian's Prometheus started with deploy/'s flags
(exemplar storage on) and by one without them.

The page's figures are what Prometheus answers to the dashboard's queries (asked again here, at the
same time, from the dashboard file itself); its cost chart's points are the run-cost exemplars, each
a link to /runs/<trace_id> of a trace Jaeger holds; without exemplar storage the chart has no point
and says why."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.parse
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from otel_agents._internal.export.store.reader import Store, StoredRun
from otel_agents._internal.report.runs import RunFilter, list_runs
from otel_agents.ui.app import templates
from otel_agents.ui.pages import Page
from otel_agents.ui.prometheus import TRACE_ID_LABEL, PrometheusCost
from tests.support import grafana
from tests.support.grafana_links import exemplar_trace_label
from tests.support.jaeger import poll
from tests.support.openai_server import OpenAIServer
from tests.support.prometheus import Prometheus
from tests.test_from_a_cost_spike_to_its_run import (
    RUN_COST,
    Chain,
    chain,
    exemplar_traces,
    held_by_jaeger,
    run_through_the_chain,
)

pytestmark = pytest.mark.backend

__all__ = ["chain"]  # the chain fixture of the cost-spike test: Jaeger, the Collector, two Prometheus
RANGE = "30m"
RANGE_S = "1800s"
"""The range the page is asked for, as the dashboard's `$__range` (and, over the range, `$__rate_interval`)."""


def answer_at(prometheus: Prometheus, promql: str, at: float) -> list[dict[str, Any]]:
    """Prometheus's answer to an instant query at `at`, asked directly."""
    url = f"{prometheus.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def number(result: list[dict[str, Any]]) -> float:
    (only,) = result
    return float(only["value"][1])


def dashboard_query(title: str, ref: str = "A") -> str:
    """A panel's query from deploy/'s dashboard file, as Grafana writes it with Service and Team
    "All" over a range of RANGE (each point's window the whole range)."""
    (expr,) = [
        target["expr"]
        for panel in grafana.dashboard()["panels"]
        if panel["title"] == title
        for target in panel["targets"]
        if target["refId"] == ref
    ]
    windows = str(expr).replace("$__range", RANGE_S).replace("$__rate_interval", RANGE_S)
    return grafana.interpolate(windows, {"job": ".*", "team": ".*"})


def render(context: dict[str, Any]) -> str:
    site = Page(context["title"], "(Prometheus)")  # the title, and what the header says the page reads
    return templates().get_template("cost_prometheus.html").render(site=site, **context)


async def runs_scraped_with_exemplars(chain: Chain, server: OpenAIServer, store: Path, service: str) -> list[StoredRun]:
    """Three runs of `service` through the chain (users ana, ben, cy; each in `store` too), once each
    run's cost exemplar is in Prometheus."""
    since = time.time() - 5
    runs = await run_through_the_chain(chain, server, store, service=service, users=["ana", "ben", "cy"])
    traces = {run.trace_id for run in runs}
    found = poll(
        lambda: exemplar_traces(chain.prometheus, f'{RUN_COST}{{exported_job="{service}"}}', since),
        lambda found: traces <= found.get(RUN_COST, set()),
        within_s=60,
    )
    assert traces <= found.get(RUN_COST, set()), found
    return runs


def runs_in_prometheus_and_jaeger(chain: Chain, store: Path, service: str) -> list[StoredRun]:
    """The same, from a server of its own, once each run's trace is in Jaeger too (for a module's
    fixture, outside any event loop)."""
    with OpenAIServer() as server:
        runs = asyncio.run(runs_scraped_with_exemplars(chain, server, store, service))
    for trace_id in {run.trace_id for run in runs}:
        assert poll(partial(held_by_jaeger, chain.jaeger, trace_id), bool, within_s=60), f"{trace_id} not in Jaeger"
    return runs


async def test_the_pages_figures_are_prometheuss_answers_to_the_dashboards_queries(
    chain: Chain, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    service = "ui-prometheus-figures"
    await runs_scraped_with_exemplars(chain, openai_server, tmp_path, service)
    at = time.time()
    assert poll(lambda: chain.prometheus.scraped_since(at + 1), bool, within_s=30), "every sample up to `at` is in"
    figures = PrometheusCost(chain.prometheus.url).cost_json("team", RANGE, at=at)
    asked_at = figures["at"]

    assert figures["source"] == "prometheus" and figures["prometheus"] == chain.prometheus.url
    assert "estimates" in figures["estimate"] and "extrapolates" in figures["estimate"]
    assert figures["queries"]["cost"]["query"] == dashboard_query("Cost in range (USD)")
    assert figures["cost_usd"] == number(answer_at(chain.prometheus, dashboard_query("Cost in range (USD)"), asked_at))
    assert figures["runs"] == number(answer_at(chain.prometheus, dashboard_query("Runs in range"), asked_at))
    quantiles = {"median": "A", "p95": "B", "max": "C"}
    for name, ref in quantiles.items():
        promql = dashboard_query("Cost per run (median, p95, max)", ref)
        assert figures["run_cost_usd"][name] == number(answer_at(chain.prometheus, promql, asked_at)), name
    by_team = {
        series["metric"]["gen_ai_workflow_name"]: float(series["value"][1])
        for series in answer_at(chain.prometheus, dashboard_query("Cost by team"), asked_at)
    }
    assert {row["key"]: row["cost_usd"] for row in figures["rows"]} == by_team
    assert by_team[service] > 0, "this test's team is a row, with its cost"


async def test_the_cost_by_day_has_the_stores_keys_and_is_prometheuss_answers(
    chain: Chain, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    """/api/cost/days from Prometheus: a row a UTC day, each the dashboard's cost by team and cost in
    range over that day's part of the range, as Prometheus answers them asked directly."""
    service = "ui-prometheus-days"
    await runs_scraped_with_exemplars(chain, openai_server, tmp_path, service)
    at = time.time()
    assert poll(lambda: chain.prometheus.scraped_since(at + 1), bool, within_s=30), "every sample up to `at` is in"
    days = PrometheusCost(chain.prometheus.url).days_json("team", RANGE, at=at)

    assert days["by"] == "team" and days["source"] == "prometheus" and days["prometheus"] == chain.prometheus.url
    today = days["days"][-1]
    assert today["day"] == time.strftime("%Y-%m-%d", time.gmtime(at))
    rows_asked, total_asked = days["queries"]["rows_today"], days["queries"]["total_today"]
    by_team = {
        series["metric"]["gen_ai_workflow_name"]: float(series["value"][1])
        for series in answer_at(chain.prometheus, rows_asked["query"], float(rows_asked["time"]))
    }
    assert {row["key"]: row["cost_usd"] for row in today["rows"]} == by_team
    assert by_team[service] > 0, "this test's team is a row of today, with its cost"
    total = number(answer_at(chain.prometheus, total_asked["query"], float(total_asked["time"])))
    assert today["total"] == {"key": today["day"], "cost_usd": total}


async def test_the_cost_charts_points_are_the_runs_exemplars_and_open_runs_jaeger_holds(
    chain: Chain, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    service = "ui-prometheus-points"
    runs = await runs_scraped_with_exemplars(chain, openai_server, tmp_path, service)
    assert TRACE_ID_LABEL == exemplar_trace_label(), "the label deploy/'s Grafana follows to Jaeger"

    context = PrometheusCost(chain.prometheus.url).cost_context("team", RANGE)
    ours = [point for point in context["exemplars"] if point["team"] == service]
    assert {point["trace_id"] for point in ours} == {run.trace_id for run in runs}
    cost_of = {run.trace_id: run.cost_usd for run in runs}
    for point in ours:
        assert point["cost_usd"] == pytest.approx(cost_of[point["trace_id"]], rel=1e-9), "a point is its run's cost"
        trace_id: str = point["trace_id"]
        assert poll(lambda t=trace_id: held_by_jaeger(chain.jaeger, t), bool, within_s=60), f"{trace_id} not in Jaeger"
    assert context["no_exemplars"] is None
    assert context["costliest_from"] == "exemplars"
    costs = [row["cost_usd"] for row in context["costliest"]]
    assert costs == sorted(costs, reverse=True) and len(costs) == len({r["trace_id"] for r in context["costliest"]})

    page = render(context)
    links = set(re.findall(r'<a class="exemplar" href="/runs/([0-9a-f]{32})"', page))
    assert {run.trace_id for run in runs} <= links, "each run's point on the chart opens its run"
    assert chain.prometheus.url in page and "estimates" in page
    assert 'id="no-exemplars"' not in page


async def test_the_costliest_runs_come_from_the_window_given_when_there_is_one(
    chain: Chain, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    service = "ui-prometheus-window"
    runs = await runs_scraped_with_exemplars(chain, openai_server, tmp_path, service)
    asked: list[int] = []

    def costliest(since_ns: int) -> list[dict[str, Any]]:
        asked.append(since_ns)
        return list_runs(Store(tmp_path), RunFilter(since_ns=since_ns), sort="cost", limit=10).rows

    at = time.time()
    context = PrometheusCost(chain.prometheus.url).cost_context("team", RANGE, costliest, at=at)
    assert asked == [int((context["at"] - 1800) * 1_000_000_000)], "the window starts where the range does"
    assert context["costliest_from"] == "jaeger"
    assert [row["run_id"] for row in context["costliest"]] == [
        run.run_id for run in sorted(runs, key=lambda run: (-(run.cost_usd or 0), -run.started_ns))
    ]
    page = render(context)
    for run in runs:
        assert f'href="/runs/{run.run_id}"' in page


async def test_a_prometheus_without_exemplar_storage_gives_a_chart_without_points_that_says_why(
    chain: Chain, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    service = "ui-prometheus-no-storage"
    await runs_scraped_with_exemplars(chain, openai_server, tmp_path, service)

    context = PrometheusCost(chain.without_exemplars.url).cost_context("team", RANGE)
    assert context["cost_usd"], "the same series, so the same kind of figures"
    assert context["exemplars"] == [] and context["costliest"] == []
    assert context["no_exemplars"] is not None
    assert "--enable-feature=exemplar-storage" in context["no_exemplars"]
    assert chain.without_exemplars.url in context["no_exemplars"]
    page = render(context)
    assert 'class="exemplar"' not in page
    assert 'id="no-exemplars"' in page and "--enable-feature=exemplar-storage" in page


def test_a_prometheus_that_refuses_the_query_is_said_so_with_its_own_error_text(chain: Chain, tmp_path: Path) -> None:
    """Debian's Prometheus allowed ten samples a query: it answers the page's queries with its error."""
    from otel_agents.ui.prometheus import PrometheusUnavailable
    from tests.support.prometheus import start_prometheus

    strict = start_prometheus(tmp_path, [chain.collector.scrape_target], flags=["--query.max-samples=10"])
    try:
        began = time.time()
        assert poll(lambda: strict.scraped_since(began), bool, within_s=30), "a scrape, so queries load samples"
        with pytest.raises(PrometheusUnavailable) as refused:
            PrometheusCost(strict.url).cost_json("team", RANGE)
    finally:
        strict.stop()
    message = str(refused.value)
    assert message.startswith(f"Prometheus at {strict.url} answered 422 to /api/v1/query"), message
    assert "too many samples" in message, "Prometheus's own error text"

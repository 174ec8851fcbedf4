"""`otel-agents ui --jaeger URL --prometheus URL`: the pages at scale, the store not read, over
deploy/'s chain (runs of the real OpenAI client, OTLP to the built Collector, traces in the built
Jaeger, Debian's Prometheus with exemplar storage scraping the Collector): the runs come from
Jaeger, the cost page from Prometheus with its costliest runs from Jaeger's window, and each cost
point opens its run read from Jaeger (issue 48 items 1, 2, 4, 5). A Prometheus that cannot be read
is a 503 naming its URL while the runs are still served."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from otel_agents._internal.export.store.reader import StoredRun
from tests.support.bad_backends import refusing_endpoint
from tests.support.ui_server import UiServer, get, get_json
from tests.test_from_a_cost_spike_to_its_run import Chain, chain
from tests.test_ui_jaeger import jaeger_ui
from tests.test_ui_prometheus import runs_in_prometheus_and_jaeger

pytestmark = [pytest.mark.backend, pytest.mark.slow]

__all__ = ["chain"]
SERVICE = "ui-at-scale"
RANGE = "30m"
EXEMPLAR_LINK = re.compile(r'<a class="exemplar" href="/runs/([0-9a-f]{32})"')


@pytest.fixture(scope="module")
def runs(chain: Chain, tmp_path_factory: pytest.TempPathFactory) -> list[StoredRun]:
    """Three runs through the chain: each run's cost exemplar in Prometheus, its trace in Jaeger."""
    return runs_in_prometheus_and_jaeger(chain, tmp_path_factory.mktemp("store"), SERVICE)


def jaeger_url(chain: Chain) -> str:
    return f"http://127.0.0.1:{chain.jaeger.ports.query_http}"


@pytest.fixture(scope="module")
def ui(chain: Chain, runs: list[StoredRun]) -> Iterator[UiServer]:
    with jaeger_ui(jaeger_url(chain), "--prometheus", chain.prometheus.url) as server:
        yield server


def test_the_runs_come_from_jaeger_and_the_cost_from_prometheus(
    ui: UiServer, chain: Chain, runs: list[StoredRun]
) -> None:
    listed = get_json(ui, "/api/runs")
    assert {row["run_id"] for row in listed["runs"]} == {run.run_id for run in runs}
    assert listed["source"]["jaeger"] == jaeger_url(chain)
    figures = get_json(ui, f"/api/cost?by=team&since={RANGE}")
    assert figures["source"] == "prometheus" and figures["prometheus"] == chain.prometheus.url
    assert SERVICE in {row["key"] for row in figures["rows"]}
    days = get_json(ui, f"/api/cost/days?by=team&since={RANGE}")
    assert days["source"] == "prometheus"
    assert days["by"] == "team" and isinstance(days["days"], list) and days["days"], "the store's keys: days, by"
    assert all({"day", "rows"} <= day.keys() for day in days["days"])


def test_the_cost_pages_costliest_runs_are_jaegers_window_and_its_points_open_runs_from_jaeger(
    ui: UiServer, runs: list[StoredRun]
) -> None:
    code, body = get(ui, f"/cost?since={RANGE}")
    assert code == 200, body[:1000]
    page = body.decode()
    assert "The ten costliest runs (Jaeger&#39;s window)" in page or "The ten costliest runs (Jaeger's window)" in page
    by_cost = get_json(ui, f"/api/runs?{urlencode({'sort': 'cost', 'since': RANGE})}")["runs"]
    shown = re.findall(r'<a href="/runs/([0-9a-f]{32})" data-run-id="\1">', page)
    assert shown == [row["run_id"] for row in by_cost][:10]
    assert set(shown) == {run.run_id for run in runs}
    pointed = set(EXEMPLAR_LINK.findall(page))
    assert {run.trace_id for run in runs} <= pointed, "each run's cost point is on the chart"
    run_of = {run.trace_id: run for run in runs}
    for trace_id in pointed & set(run_of):
        opened = get_json(ui, f"/api/runs/{trace_id}")
        assert opened["run"]["run_id"] == run_of[trace_id].run_id, "the point opens the run its trace holds"
        code, body = get(ui, f"/runs/{trace_id}")
        assert code == 200 and f'data-run-id="{run_of[trace_id].run_id}"'.encode() in body


def test_a_prometheus_that_cannot_be_read_is_named_and_the_runs_are_still_served(
    chain: Chain, runs: list[StoredRun], tmp_path: Path
) -> None:
    with refusing_endpoint() as url, jaeger_ui(jaeger_url(chain), "--prometheus", url) as ui:
        code, body = get(ui, "/cost")
        assert code == 503 and url.encode() in body
        answer = get_json(ui, "/api/cost", status=503)
        assert url in answer["error"]
        assert url in get_json(ui, "/api/cost/days", status=503)["error"]
        assert {row["run_id"] for row in get_json(ui, "/api/runs")["runs"]} == {run.run_id for run in runs}
        assert get(ui, "/cost")[0] == 503, "still serving, still saying which"

"""The dashboard's PromQL lives in one place (otel_agents/_internal/report/promql.py): deploy/'s Grafana
dashboard is made from it and the web page's cost from Prometheus asks the same queries, so a change to
one that the other does not follow fails here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from otel_agents._internal.report import promql
from tests.support.grafana import DASHBOARD, dashboard, interpolate, panel_queries


def test_the_committed_dashboard_is_exactly_what_promql_makes() -> None:
    made = subprocess.run(
        [sys.executable, "-m", "otel_agents._internal.report.promql"], capture_output=True, text=True, check=True
    ).stdout
    assert DASHBOARD.read_text() == made, (
        "deploy/grafana/dashboards/autogen-team-runs.json differs from promql.py's: change the queries in "
        "promql.py and run `python -m otel_agents._internal.report.promql > "
        + str(DASHBOARD.relative_to(DASHBOARD.parents[3]))
        + "`"
    )


def test_every_query_the_page_asks_is_a_target_of_the_dashboard_as_grafana_reads_it() -> None:
    targets = {target["expr"] for panel in dashboard()["panels"] for target in panel["targets"]}
    asked = [
        promql.COST_IN_RANGE,
        promql.RUNS_IN_RANGE,
        promql.RUN_COST_MEDIAN,
        promql.RUN_COST_P95,
        promql.RUN_COST_MAX,
        *promql.COST_BY.values(),
        promql.RUNS_BY_STOP_KIND,
        promql.SPEND_PER_SUCCESS,
        promql.SUCCESS_SHARE,
    ]
    assert [query.expr for query in asked if query.expr not in targets] == []
    (shown,) = [t for p in dashboard()["panels"] for t in p["targets"] if t.get("exemplar")]
    assert promql.RUN_COST_HISTOGRAM in shown["expr"], "the page's exemplar points are the panel's"


def test_filling_the_variables_is_what_grafana_writes_for_all() -> None:
    values = {"job": ".*", "team": ".*", "label": "tenant"}
    grafana = dict(panel_queries(dashboard(), values))
    page = promql.fill(promql.COST_IN_RANGE.expr, {**values, "__range": "5m"})
    assert page == grafana["Cost in range (USD)"] == interpolate(promql.COST_IN_RANGE.expr, values)
    with pytest.raises(ValueError, match=r"\$__range"):
        promql.fill(promql.COST_IN_RANGE.expr, values)


def test_the_dashboard_file_parses_as_the_same_dashboard() -> None:
    assert json.loads(DASHBOARD.read_text()) == promql.dashboard()

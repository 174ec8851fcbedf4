"""The PromQL of deploy/'s Grafana dashboard, in one place: the dashboard is made from it and the web
page's cost from Prometheus (`otel-agents ui --prometheus URL`) asks the same queries, so the two
cannot drift.

A query is written as the dashboard writes it, with the dashboard's variables as named parameters:
`$job` (the service: a Prometheus job), `$team`, `$label` (the run attribute chosen as Cost label),
and Grafana's own `$__range` (the time range shown) and `$__rate_interval` (the window of each
point of a time series). `fill()` gives them values; the page fills `$job` and `$team` with `.*`
(every service and team, as the dashboard's "All" does) and the windows from the range it shows.

`deploy/grafana/dashboards/autogen-team-runs.json` is `python -m otel_agents._internal.report.promql`'s
output (a test checks that the file is exactly that)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

ALL: Final = ".*"
"""What the dashboard writes for `$job` or `$team` when every value is chosen (its `allValue`)."""
VARIABLES: Final = ("job", "team", "label", "__range", "__rate_interval")
"""The named parameters of the queries: the dashboard's variables and Grafana's two windows."""
_VARIABLE: Final = re.compile(r"\$(\w+)")
LABELS: Final[Mapping[str, str]] = MappingProxyType(
    {"team": "gen_ai_workflow_name", "agent": "gen_ai_agent_name", "model": "gen_ai_request_model"}
)
"""The label each dimension groups by (the dashboard's cost panels')."""
_DATASOURCE: Final = MappingProxyType({"type": "prometheus", "uid": "prometheus"})
_RUNS: Final = 'job=~"$job", gen_ai_workflow_name=~"$team"'
"""The matchers of every run metric (and the cost counter): the service and the team chosen."""
_CALLS: Final = 'job=~"$job", gen_ai_operation_name="chat"'
"""The matchers of the model-call metrics: the service chosen, chat calls."""
_SUCCESS: Final = 'gen_ai_evaluation_name="outcome", gen_ai_evaluation_score_label="success"'
_BY_LABEL: Final = (
    "Cost of runs by the run attribute chosen as Cost label: set OTEL_AGENTS_METRIC_ATTRIBUTES (e.g. tenant) "
    "and give it through otel_agents.run_attributes(attributes=...). Runs whose every call was priced; a run "
    "without the attribute is the row with an empty label."
)


@dataclass(frozen=True)
class Query:
    """One query of a panel (a Grafana target): its PromQL with the dashboard's variables."""

    expr: str
    legend: str
    ref: str = "A"
    exemplar: bool = False
    """The panel shows this query's exemplars (each point a run's trace)."""
    instant: bool = False

    def target(self) -> dict[str, Any]:
        target: dict[str, Any] = {"expr": self.expr, "legendFormat": self.legend, "refId": self.ref}
        if self.exemplar:
            target["exemplar"] = True
        if self.instant:
            target["instant"] = True
        target["datasource"] = dict(_DATASOURCE)
        return target


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str
    """Grafana's panel type: stat, timeseries or bargauge."""
    unit: str
    queries: tuple[Query, ...]
    description: str | None = None
    height: int = 8
    options: Mapping[str, Any] = field(default_factory=dict)


def fill(expr: str, values: Mapping[str, str]) -> str:
    """`expr` with each `$name` replaced by `values[name]`; ValueError naming a variable not given."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ValueError(f"PromQL variable ${name} not given a value: {expr}")
        return values[name]

    return _VARIABLE.sub(value, expr)


def _quantile(metric: str, q: str, legend: str, ref: str, selector: str = _RUNS, *, exemplar: bool = False) -> Query:
    """A quantile of a histogram over the chosen runs, each point over its `$__rate_interval`."""
    return Query(
        f"histogram_quantile({q}, sum by (le) (rate({metric}{{{selector}}}[$__rate_interval])))",
        legend,
        ref,
        exemplar=exemplar,
    )


def _median_and_p95(title: str, unit: str, histogram: str, selector: str = _RUNS) -> Panel:
    """A time series panel of a histogram's median (query A) and 95th percentile (query B)."""
    return Panel(
        f"{title} (median, p95)",
        "timeseries",
        unit,
        (_quantile(histogram, "0.5", "median", "A", selector), _quantile(histogram, "0.95", "p95", "B", selector)),
    )


def _cost_by(label: str) -> Query:
    return Query(
        f"sum by ({label}) (increase(otel_agents_cost_USD_total{{{_RUNS}}}[$__rate_interval]))", f"{{{{{label}}}}}"
    )


COST_IN_RANGE: Final = Query(f"sum(increase(otel_agents_cost_USD_total{{{_RUNS}}}[$__range]))", "cost")
RUNS_IN_RANGE: Final = Query(f"sum(increase(otel_agents_runs_total{{{_RUNS}}}[$__range]))", "runs")
RUN_COST_HISTOGRAM: Final = "otel_agents_run_cost_USD_bucket"
"""The run-cost histogram, whose exemplars name the runs' traces (the cost-per-run panel shows them)."""
RUN_COST_MEDIAN: Final = _quantile(RUN_COST_HISTOGRAM, "0.5", "median", "A", exemplar=True)
RUN_COST_P95: Final = _quantile(RUN_COST_HISTOGRAM, "0.95", "p95", "B")
RUN_COST_MAX: Final = _quantile(RUN_COST_HISTOGRAM, "1", "max (bucket bound)", "C")
COST_BY: Final = MappingProxyType({dimension: _cost_by(label) for dimension, label in LABELS.items()})
"""The cost panels' queries by the dimension they group by (each sums the cost counter by one label)."""
TOKENS_BY_AGENT: Final = Query(
    "sum by (gen_ai_agent_name, gen_ai_token_type)"
    ' (increase(gen_ai_client_token_usage_sum{job=~"$job"}[$__rate_interval]))',
    "{{gen_ai_agent_name}} {{gen_ai_token_type}}",
)
RUNS_BY_STOP_KIND: Final = Query(
    f"sum by (otel_agents_stop_kind) (increase(otel_agents_runs_total{{{_RUNS}}}[$__rate_interval]))",
    "{{otel_agents_stop_kind}}",
)
LOOP_DETECTIONS: Final = Query(
    f"sum by (otel_agents_loop_rule) (increase(otel_agents_loop_detections_total{{{_RUNS}}}[$__rate_interval]))",
    "{{otel_agents_loop_rule}}",
)
COST_BY_LABEL: Final = Query(
    f"sum by ($label) (increase(otel_agents_run_cost_USD_sum{{{_RUNS}}}[$__rate_interval]))", "__auto"
)
COST_IN_RANGE_BY_LABEL: Final = Query(
    f"sort_desc(sum by ($label) (increase(otel_agents_run_cost_USD_sum{{{_RUNS}}}[$__range])))", "__auto", instant=True
)
SPEND_PER_SUCCESS: Final = Query(
    f"sum by (gen_ai_workflow_name) (increase(otel_agents_run_cost_USD_sum{{{_RUNS}}}[$__rate_interval]))"
    " / sum by (gen_ai_workflow_name)"
    f" (increase(otel_agents_run_outcomes_total{{{_RUNS}, {_SUCCESS}}}[$__rate_interval]))",
    "{{gen_ai_workflow_name}}",
)
SUCCESS_SHARE: Final = Query(
    f"sum by (gen_ai_workflow_name) (increase(otel_agents_run_outcomes_total{{{_RUNS}, {_SUCCESS}}}[$__rate_interval]))"
    f" / sum by (gen_ai_workflow_name) (increase(otel_agents_runs_total{{{_RUNS}}}[$__rate_interval]))",
    "{{gen_ai_workflow_name}}",
)

PANELS: Final = (
    Panel("Cost in range (USD)", "stat", "currencyUSD", (COST_IN_RANGE,), height=4),
    Panel("Runs in range", "stat", "short", (RUNS_IN_RANGE,), height=4),
    Panel(
        "Cost per run (median, p95, max)", "timeseries", "currencyUSD", (RUN_COST_MEDIAN, RUN_COST_P95, RUN_COST_MAX)
    ),
    Panel("Cost by team", "timeseries", "currencyUSD", (COST_BY["team"],)),
    Panel("Cost by agent", "timeseries", "currencyUSD", (COST_BY["agent"],)),
    Panel("Cost by model", "timeseries", "currencyUSD", (COST_BY["model"],)),
    Panel("Tokens by agent", "timeseries", "short", (TOKENS_BY_AGENT,)),
    Panel("Runs by stop kind", "timeseries", "short", (RUNS_BY_STOP_KIND,)),
    _median_and_p95("Run duration", "s", "gen_ai_workflow_duration_seconds_bucket"),
    _median_and_p95("Messages per run", "short", "otel_agents_run_messages_bucket"),
    _median_and_p95("Model call duration", "s", "gen_ai_client_operation_duration_seconds_bucket", _CALLS),
    Panel("Loop detections", "timeseries", "short", (LOOP_DETECTIONS,)),
    Panel("Cost by label", "timeseries", "currencyUSD", (COST_BY_LABEL,), description=_BY_LABEL),
    Panel(
        "Cost in range by label",
        "bargauge",
        "currencyUSD",
        (COST_IN_RANGE_BY_LABEL,),
        description=_BY_LABEL,
        options={
            "orientation": "horizontal",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        },
    ),
    Panel(
        "Spend per successful run",
        "timeseries",
        "currencyUSD",
        (SPEND_PER_SUCCESS,),
        description="All the runs' cost over the runs whose outcome was success (record_outcome, "
        "configure(outcome=...)): what a run that did its job costs, failures included",
    ),
    Panel(
        "Share of successful runs",
        "timeseries",
        "percentunit",
        (SUCCESS_SHARE,),
        description="Runs whose outcome was success over all runs, per team (teams that record outcomes)",
    ),
)
"""The dashboard's panels in order, two a row."""


def _variable(name: str, label: str, query: str, **settings: Any) -> dict[str, Any]:
    description = settings.pop("description", None)
    return {
        "name": name,
        "label": label,
        **({"description": description} if description else {}),
        "type": "query",
        "datasource": dict(_DATASOURCE),
        "query": {"query": query, "refId": name},
        "definition": query,
        **settings,
    }


def _some_or_all(name: str, label: str, query: str, **settings: Any) -> dict[str, Any]:
    """A variable of one or more of its values, or All (`ALL`), which it starts at."""
    return _variable(
        name,
        label,
        query,
        multi=True,
        includeAll=True,
        allValue=ALL,
        refresh=2,
        **settings,
        current={"text": "All", "value": "$__all"},
    )


TEMPLATING: Final = (
    _some_or_all(
        "job",
        "Service",
        "label_values(otel_agents_runs_total, job)",
        description="The service (Prometheus job): the Collector sets it from service.namespace/service.name",
        sort=1,
    ),
    _some_or_all("team", "Team", 'label_values(otel_agents_runs_total{job=~"$job"}, gen_ai_workflow_name)'),
    _variable(
        "label",
        "Cost label",
        "label_names(otel_agents_run_cost_USD_count)",
        description="A run attribute that OTEL_AGENTS_METRIC_ATTRIBUTES makes a label of the run metrics (e.g. "
        "tenant); empty while the setting is off",
        regex="/^(?!(?:__name__|le|job|instance|exported_.*|otel_scope_.*|gen_ai_.*|otel_agents_.*)$)"
        "[a-zA-Z_][a-zA-Z0-9_]*$/",
        multi=False,
        includeAll=False,
        refresh=2,
        sort=1,
        current={},
    ),
)
"""The dashboard's variables, in the order Grafana resolves them."""


def dashboard() -> dict[str, Any]:
    """deploy/'s Grafana dashboard: the panels above, two a row, and their variables."""
    panels = []
    y, row_height = 0, 0
    for number, panel in enumerate(PANELS, start=1):
        x = 0 if number % 2 else 12
        if x == 0:
            y += row_height
            row_height = panel.height
        row_height = max(row_height, panel.height)
        panels.append(
            {
                "id": number,
                "type": panel.kind,
                "title": panel.title,
                **({"description": panel.description} if panel.description else {}),
                "datasource": dict(_DATASOURCE),
                "gridPos": {"h": panel.height, "w": 12, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
                "options": json.loads(json.dumps(panel.options)),
                "targets": [query.target() for query in panel.queries],
            }
        )
    return {
        "uid": "otel-agents-team-runs",
        "title": "AutoGen team runs",
        "tags": ["otel-agents", "autogen"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 2,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [json.loads(json.dumps(variable)) for variable in TEMPLATING]},
        "panels": panels,
    }


def dashboard_text() -> str:
    """The dashboard file's text, as committed in deploy/grafana/dashboards/."""
    return json.dumps(dashboard(), indent=2) + "\n"


def main() -> None:
    sys.stdout.write(dashboard_text())


if __name__ == "__main__":
    main()

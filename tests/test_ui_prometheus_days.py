"""The cost by day from Prometheus: a row a UTC day the range touches, each the dashboard's "Cost in
range" over that day's part of the range, so the days' windows add up to the range; /api/cost/days
(`days_json`) with the store's keys, a day each, its rows by the dimension, total and stops; the
longest range within the points Prometheus gives a range query. Against a local
server that answers as Prometheus's HTTP API does (a shape test; the figures themselves are checked
against Debian's Prometheus in tests/test_ui_prometheus.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest

from otel_agents._internal.report import promql
from otel_agents.ui.prometheus import DIMENSIONS, MOST_SINCE, PrometheusCost
from tests.support.prometheus_answers import EMPTY, as_json, serving_requests

AT = datetime(2026, 12, 5, 4, 30, tzinfo=UTC).timestamp()


def answer(path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    """Each query's answer: its window in seconds (the `[Ns]` of its PromQL), at each time asked."""
    if path not in ("/api/v1/query", "/api/v1/query_range"):
        return as_json(200, EMPTY[path])
    window = int(re.findall(r"\[(\d+)s\]", query["query"][0])[0])
    if path == "/api/v1/query":
        result = [{"metric": {}, "value": [float(query["time"][0]), str(window)]}]
        return as_json(200, {"status": "success", "data": {"resultType": "vector", "result": result}})
    start, end, step = (float(query[k][0]) for k in ("start", "end", "step"))
    times = [start + k * step for k in range(int((end - start) // step) + 1)]
    result = [{"metric": {}, "values": [[t, str(window)] for t in times]}]
    return as_json(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})


def test_a_row_a_utc_day_whose_windows_add_up_to_the_range() -> None:
    with serving_requests(lambda target: answer(urlsplit(target).path, parse_qs(urlsplit(target).query))) as url:
        figures = PrometheusCost(url).cost_json("day", "7d", at=AT)

    assert [row["key"] for row in figures["rows"]] == [f"2026-11-{d}" for d in (28, 29, 30)] + [
        f"2026-12-0{d}" for d in range(1, 6)
    ], "the first day's part, six whole days, today's part"
    windows = [row["cost_usd"] for row in figures["rows"]]
    assert windows == [19.5 * 3600] + [86_400.0] * 6 + [4.5 * 3600]
    assert sum(windows) == 7 * 86_400, "the days' windows add up to the range"
    asked = [q for name, q in figures["queries"].items() if name in ("first_day", "days", "today")]
    assert {re.sub(r"\[\d+s\]", "[$__range]", q["query"]) for q in asked} == {
        promql.fill(promql.COST_IN_RANGE.expr, {"job": ".*", "team": ".*", "__range": "$__range"})
    }, "each is the dashboard's Cost in range"


def by_team_answer(path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    """As `answer`, but the cost by team answers two teams ("a" its window, "b" twice it) and the runs
    by stop kind a tenth of the window stopped by a loop guard: each figure says which query and
    window it answers."""
    promql_asked = query.get("query", [""])[0]
    if path not in ("/api/v1/query", "/api/v1/query_range") or not promql_asked.startswith("sum by ("):
        return answer(path, query)
    window = int(re.findall(r"\[(\d+)s\]", promql_asked)[0])
    if "otel_agents_stop_kind" in promql_asked:
        series = [({"otel_agents_stop_kind": "loop_guard"}, window / 10)]
    else:
        series = [({"gen_ai_workflow_name": "a"}, window), ({"gen_ai_workflow_name": "b"}, 2 * window)]
    if path == "/api/v1/query":
        result = [{"metric": labels, "value": [float(query["time"][0]), str(v)]} for labels, v in series]
        return as_json(200, {"status": "success", "data": {"resultType": "vector", "result": result}})
    start, end, step = (float(query[k][0]) for k in ("start", "end", "step"))
    times = [start + k * step for k in range(int((end - start) // step) + 1)]
    result = [{"metric": labels, "values": [[t, str(v)] for t in times]} for labels, v in series]
    return as_json(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})


def test_days_json_has_the_stores_keys_and_prometheuss_answers_a_day_each() -> None:
    with serving_requests(
        lambda target: by_team_answer(urlsplit(target).path, parse_qs(urlsplit(target).query))
    ) as url:
        days = PrometheusCost(url).days_json("team", "7d", at=AT)

    assert {"days", "by"} <= set(days) and days["by"] == "team"
    assert days["source"] == "prometheus" and days["prometheus"] == url and "estimates" in days["estimate"]
    assert [day["day"] for day in days["days"]] == [f"2026-11-{d}" for d in (28, 29, 30)] + [
        f"2026-12-0{d}" for d in range(1, 6)
    ]
    windows = [19.5 * 3600] + [86_400.0] * 6 + [4.5 * 3600]
    for day, window in zip(days["days"], windows, strict=True):
        assert day["total"] == {"key": day["day"], "cost_usd": window}, day
        assert day["rows"] == [{"key": "b", "cost_usd": 2 * window}, {"key": "a", "cost_usd": window}], day
        assert day["stops"] == {"loop_guard": window / 10, "max_messages": None}, day
    asked = {re.sub(r"\[\d+s\]", "[$__range]", q["query"]) for q in days["queries"].values()}
    every = {"job": ".*", "team": ".*", "label": "", "__range": "$__range", "__rate_interval": "$__range"}
    assert asked == {
        promql.fill(query.expr, every)
        for query in (promql.COST_IN_RANGE, promql.COST_BY["team"], promql.RUNS_BY_STOP_KIND)
    }, "each the dashboard's query, over a day's part of the range"


def test_days_json_by_day_has_a_row_a_day_its_total() -> None:
    with serving_requests(lambda target: answer(urlsplit(target).path, parse_qs(urlsplit(target).query))) as url:
        days = PrometheusCost(url).days_json("day", "24h", at=AT)

    assert [(day["day"], day["rows"]) for day in days["days"]] == [
        ("2026-12-04", [{"key": "2026-12-04", "cost_usd": 19.5 * 3600}]),
        ("2026-12-05", [{"key": "2026-12-05", "cost_usd": 4.5 * 3600}]),
    ]


@pytest.mark.parametrize("by", DIMENSIONS)
def test_the_longest_range_asks_prometheus_fewer_points_than_it_gives(by: str) -> None:
    """Prometheus refuses a range query of more than 11,000 points."""
    with serving_requests(lambda target: answer(urlsplit(target).path, parse_qs(urlsplit(target).query))) as url:
        source = PrometheusCost(url)
        asked = [*source.cost_json(by, MOST_SINCE, at=AT)["queries"].values()]
        asked += [*source.days_json(by, MOST_SINCE, at=AT)["queries"].values()]

    points = [
        (float(q["end"]) - float(q["start"])) / float(q["step"]) + 1
        for q in asked
        if q["path"] == "/api/v1/query_range"
    ]
    assert points and max(points) <= 11_000

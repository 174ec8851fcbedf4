"""The cost by day from Prometheus: a row a UTC day the range touches, each the dashboard's "Cost in
range" over that day's part of the range, so the days' windows add up to the range. Against a local
server that answers as Prometheus's HTTP API does (a shape test; the figures themselves are checked
against Debian's Prometheus in tests/test_ui_prometheus.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

from otel_agents._internal.report import promql
from otel_agents.ui.prometheus import PrometheusCost
from tests.test_ui_prometheus_bad_input import EMPTY, as_json, serving_requests

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

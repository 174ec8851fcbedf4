"""The cost page from Prometheus (`otel-agents ui --prometheus URL`): what Prometheus answers to the
PromQL of deploy/'s Grafana dashboard (`otel_agents._internal.report.promql`, which the dashboard is
made from), never a sum of our own.

The figures are Prometheus's estimates: `increase()` over a window extrapolates from the samples it
holds to the window's edges, and a quantile of cost per run is read from histogram buckets. The
page says so, and names the Prometheus and the PromQL each figure came from.

Every query of a page is sent at once (a thread each) over Prometheus's HTTP API (`/api/v1/query`,
`/api/v1/query_range`, `/api/v1/query_exemplars`) through `bounded_get`, all by one deadline
(`timeout_s` from the page's start: an answer whose body is held or dribbled is given up on then, and
the threads end) and each answer by a byte bound (QUERY_BYTES, EXEMPLAR_BYTES). A failure is a
`PrometheusUnavailable` that says which (unreachable, slow, too large, an error status with
Prometheus's own error text, an answer any part of which is not as Prometheus's API answers) and
names the URL; a request the page should not ask (a dimension Prometheus has no label for, a range
longer than MOST_SINCE) is a `BadRequest`, raised before Prometheus is asked.

The cost chart's points are the run-cost histogram's exemplars (Prometheus keeps them with
`--enable-feature=exemplar-storage`, as deploy/ starts it): each names a run's trace (its `trace_id`
label) and its measured cost, and opens `/runs/<trace_id>`."""

from __future__ import annotations

import json
import math
import re
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from otel_agents._internal.explain.readers import server_url
from otel_agents._internal.report import promql
from otel_agents._internal.report.cost import DIMENSIONS as COST_DIMENSIONS
from otel_agents._internal.report.cost import NONE, parse_since
from otel_agents.ui.bounded_get import Unanswered, get

PROMETHEUS_TIMEOUT_S: Final = 5.0
"""The longest a page's queries may take, all of them: one deadline a page."""
QUERY_BYTES: Final = 4 * 2**20
"""The most one query's answer may hold: the page's queries are aggregates (a series a team, model
or agent; at most ~100 points each), far below it."""
EXEMPLAR_BYTES: Final = 16 * 2**20
"""The most the exemplars' answer may hold: Prometheus keeps up to 100,000 exemplars by default,
~110 bytes each in its JSON. A page holds at most 12 x 4 MiB + 16 MiB of answers."""
DIMENSIONS: Final = ("team", "model", "agent", "day")
"""The dimensions of `cost --by` that Prometheus can group by: the metrics' labels (team, model,
agent) and time. Users and conversations are no label: metrics keep low-cardinality labels only."""
DEFAULT_SINCE: Final = "24h"
"""The range shown when none is asked: Prometheus has no "all time" to sum over."""
RANGES: Final = ("1h", "24h", "7d", "30d", "90d")
MOST_SINCE: Final = RANGES[-1]
"""The longest range Prometheus is asked for (the page's longest): its answers by day stay far
within the 11,000 points Prometheus gives a range query at most."""
TRACE_ID_LABEL: Final = "trace_id"
"""The exemplar label that names a point's trace (the Collector's OpenMetrics exemplars; deploy/'s
Grafana links the same label to Jaeger)."""
EXEMPLAR_FEATURE: Final = "exemplar-storage"
COSTLIEST: Final = 10
MOST_POINTS: Final = 500
"""The most exemplars drawn (the costliest): Prometheus keeps up to 100,000 by default."""
SLOTS: Final = 24
"""About how many points a chart over time has."""
ESTIMATE: Final = (
    "Figures are Prometheus's estimates, not sums of runs: increase() over a range extrapolates from the "
    "samples Prometheus holds to the range's edges, and cost per run is read from histogram buckets."
)
_TRACE_ID: Final = re.compile(r"[0-9a-f]{32}")
_LOOP_STOPS: Final = ("loop_guard", "max_messages")
_DAY_S: Final = 86_400
_LATEST_S: Final = 253_402_300_799
"""The last second of year 9999: a later (or negative) time is no time Prometheus answers."""
_STOP_LABEL: Final = "otel_agents_stop_kind"


class PrometheusUnavailable(Exception):
    """Prometheus could not answer a query: the message names the URL and what went wrong."""


class BadRequest(ValueError):
    """A request the page should not ask Prometheus: a dimension it has no label for, or a range it
    should not be asked (not a range, or longer than MOST_SINCE). The only failure that is the
    asker's (400); every other is a PrometheusUnavailable (503)."""


@dataclass(frozen=True)
class _Ask:
    """One request to Prometheus's HTTP API: its path and parameters, whether the page needs its
    answer, and how long the answer may be."""

    path: str
    params: Mapping[str, str]
    required: bool = True
    max_bytes: int = QUERY_BYTES


def _number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _duration(seconds: float) -> str:
    return f"{max(round(seconds), 1)}s"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d")


def _instant(expr: str, at: float) -> _Ask:
    return _Ask("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})


def _ranged(expr: str, start: float, end: float, step: int) -> _Ask:
    return _Ask("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)})


# --- what Prometheus's HTTP API answers ----------------------------------------------------------


def _labels_problem(labels: Any, what: str) -> str | None:
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return f"{what} is not an object of label names to strings"
    return None


def _time_problem(t: Any) -> str | None:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= _LATEST_S:
        return f"a time that is not seconds since 1970: {t!r:.60}"
    return None


def _value_problem(v: Any) -> str | None:
    if not isinstance(v, str):
        return f"a value that is not a number in a string: {v!r:.60}"
    try:
        float(v)
    except ValueError:
        return f"a value that is not a number: {v!r:.60}"
    return None


def _sample_problem(sample: Any) -> str | None:
    if not isinstance(sample, list) or len(sample) != 2:
        return f"a sample that is not [time, value]: {sample!r:.60}"
    return _time_problem(sample[0]) or _value_problem(sample[1])


def _series_problems(result: list[Any], instant: bool) -> Iterable[str | None]:
    for series in result:
        if not isinstance(series, dict):
            yield f"a series that is not an object: {series!r:.60}"
            return
        yield _labels_problem(series.get("metric"), "a series' metric")
        if instant:
            yield _sample_problem(series.get("value"))
        elif not isinstance(series.get("values"), list):
            yield f"a series without its values: {series!r:.60}"
        else:
            yield from (_sample_problem(sample) for sample in series["values"])


def _exemplar_problems(data: list[Any]) -> Iterable[str | None]:
    for series in data:
        if not isinstance(series, dict) or not isinstance(series.get("exemplars"), list):
            yield f"a series of exemplars that is not an object with its exemplars: {series!r:.60}"
            return
        yield _labels_problem(series.get("seriesLabels"), "a series' seriesLabels")
        for exemplar in series["exemplars"]:
            if not isinstance(exemplar, dict):
                yield f"an exemplar that is not an object: {exemplar!r:.60}"
                return
            yield _labels_problem(exemplar.get("labels"), "an exemplar's labels")
            yield _value_problem(exemplar.get("value"))
            yield _time_problem(exemplar.get("timestamp"))


def _problem(path: str, data: Any) -> str | None:
    """What in a successful answer's `data` is not as Prometheus's HTTP API answers `path`; None
    when nothing is (so the page reads it without a check)."""
    if path in ("/api/v1/query", "/api/v1/query_range"):
        instant = path == "/api/v1/query"
        expected = "vector" if instant else "matrix"
        if not isinstance(data, dict) or data.get("resultType") != expected or not isinstance(data.get("result"), list):
            return f"data is not a {expected} result"
        return next((problem for problem in _series_problems(data["result"], instant) if problem), None)
    if path == "/api/v1/query_exemplars":
        if not isinstance(data, list):
            return "data is not a list of series"
        return next((problem for problem in _exemplar_problems(data) if problem), None)
    if not isinstance(data, dict):  # /api/v1/status/flags
        return "data is not an object"
    return _labels_problem(data, "data")


class PrometheusCost:
    """The cost page's figures, asked of the Prometheus at `url`."""

    def __init__(self, url: str, *, timeout_s: float = PROMETHEUS_TIMEOUT_S) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s {timeout_s!r}: expected a positive number of seconds")
        self.url = server_url(url, "--prometheus", "Prometheus")
        self.timeout_s = timeout_s

    # --- asking ------------------------------------------------------------------------------

    def _get(self, ask: _Ask, deadline: float) -> Any:
        """The `data` of Prometheus's answer to `ask`, whole by `deadline` (a `time.monotonic()`);
        PrometheusUnavailable otherwise, or when any part of it is not as Prometheus's API answers."""
        url = f"{self.url}{ask.path}?" + urllib.parse.urlencode(dict(ask.params))
        try:
            answered = get(url, timeout_s=self.timeout_s, max_bytes=ask.max_bytes, deadline=deadline)
        except Unanswered as failure:
            if failure.kind == "slow":
                raise PrometheusUnavailable(self._slow(ask)) from None
            if failure.kind == "too_large":
                raise PrometheusUnavailable(
                    f"Prometheus at {self.url} answered more than {ask.max_bytes:,} bytes to {ask.path}: "
                    "a shorter range asks less"
                ) from None
            raise PrometheusUnavailable(f"cannot reach Prometheus at {self.url}: {failure.reason}") from None
        body = answered.body
        if answered.status >= 300:
            raise PrometheusUnavailable(self._refused(ask, answered.status, body))
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's parser goes
            raise PrometheusUnavailable(self._not_the_api(ask, body)) from None
        if not isinstance(answer, dict) or answer.get("status") not in ("success", "error"):
            raise PrometheusUnavailable(self._not_the_api(ask, body))
        if answer["status"] == "error":
            raise PrometheusUnavailable(self._error_text(ask, answered.status, answer))
        data = answer.get("data")
        if ask.path == "/api/v1/query_exemplars" and data is None:  # null where nothing matches
            data = []
        problem = _problem(ask.path, data)
        if problem is not None:
            raise PrometheusUnavailable(self._not_the_api(ask, body, problem))
        return data

    def _slow(self, ask: _Ask) -> str:
        return f"Prometheus at {self.url} is slow: no whole answer to {ask.path} within {self.timeout_s:g} s"

    def _not_the_api(self, ask: _Ask, body: bytes, problem: str | None = None) -> str:
        said = problem if problem is not None else repr(" ".join(body[:120].decode("utf-8", "replace").split()))
        return (
            f"{self.url}{ask.path} did not answer as Prometheus's HTTP API does ({said}): "
            f"is {self.url} the base URL of a Prometheus?"
        )

    def _error_text(self, ask: _Ask, status: int, answer: Mapping[str, Any]) -> str:
        kind = " ".join(str(answer.get("errorType") or "error").split())[:60]
        text = " ".join(str(answer.get("error", "")).split())[:300]
        return f"Prometheus at {self.url} answered {status} to {ask.path}: {kind}: {text}"

    def _refused(self, ask: _Ask, status: int, body: bytes) -> str:
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            answer = None
        if isinstance(answer, dict) and answer.get("status") == "error":
            return self._error_text(ask, status, answer)
        return f"{self._not_the_api(ask, body)} (status {status})"

    def _all(self, asks: Mapping[str, _Ask]) -> tuple[dict[str, Any], dict[str, str]]:
        """Every request at once, all by one deadline (`timeout_s` from now; a worker thread ends by
        it, as its reader stops reading then): (answers by name, failures of the requests that are
        not required, by name). The first required failure (in `asks`' order) is raised."""
        deadline = time.monotonic() + self.timeout_s
        pool = ThreadPoolExecutor(max_workers=len(asks), thread_name_prefix="prometheus")
        try:
            futures: dict[str, Future[Any]] = {
                name: pool.submit(self._get, ask, deadline) for name, ask in asks.items()
            }
            required = {name: futures[name] for name, ask in asks.items() if ask.required}
            wait(list(required.values()), timeout=self.timeout_s + 1, return_when=FIRST_EXCEPTION)
            for future in required.values():  # the first failure in order, without waiting on the rest
                failed = future.exception() if future.done() else None
                if failed is not None:
                    raise failed
            wait(list(futures.values()), timeout=max(deadline - time.monotonic(), 0) + 1)
            answers: dict[str, Any] = {}
            failures: dict[str, str] = {}
            for name, ask in asks.items():
                future = futures[name]
                error = future.exception() if future.done() else PrometheusUnavailable(self._slow(ask))
                if error is None:
                    answers[name] = future.result()
                elif ask.required:
                    raise error
                else:
                    failures[name] = str(error)
            return answers, failures
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # what still runs ends by the deadline

    # --- the queries of a page ---------------------------------------------------------------

    @staticmethod
    def _range(since: str | None) -> tuple[str, int]:
        shown = since or DEFAULT_SINCE
        try:
            range_s = parse_since(shown, "since")
        except ValueError as error:
            raise BadRequest(str(error)) from None
        if range_s > parse_since(MOST_SINCE):
            raise BadRequest(f"since {shown!r}: at most {MOST_SINCE} from Prometheus (the longest range of the page)")
        return shown, range_s

    @staticmethod
    def _by(by: str) -> str:
        if by not in DIMENSIONS:
            if by in COST_DIMENSIONS:
                raise BadRequest(
                    f"by {by!r}: Prometheus has no {by} label (metrics keep low-cardinality labels only); "
                    f"from Prometheus the cost is by {', '.join(DIMENSIONS)}"
                )
            raise BadRequest(f"by {by!r}: expected one of {', '.join(DIMENSIONS)}")
        return by

    @staticmethod
    def _per_day(prefix: str, expr: str, begin: float, at: float) -> tuple[dict[str, _Ask], dict[str, str]]:
        """`expr` (a `$__range` query) over each UTC day's part of the range from `begin` to `at`, so
        the days' windows add up to the range: the first day's part (an instant query at its end),
        the whole days (a range query a day a step, each point the day before it) and today's part
        (an instant query at `at`). The requests by name, and the day of each instant one."""
        every = {"job": promql.ALL, "team": promql.ALL, "label": ""}

        def over(seconds: float) -> str:
            return promql.fill(expr, {**every, "__range": _duration(seconds), "__rate_interval": _duration(seconds)})

        asks: dict[str, _Ask] = {}
        days: dict[str, str] = {}
        first_midnight = (int(begin) // _DAY_S + 1) * _DAY_S
        last_midnight = int(at) // _DAY_S * _DAY_S
        if first_midnight <= last_midnight and first_midnight - begin >= 1:
            asks[f"{prefix}first_day"] = _instant(over(first_midnight - begin), first_midnight)
            days[f"{prefix}first_day"] = _day(begin)
        if first_midnight + _DAY_S <= last_midnight:
            asks[f"{prefix}days"] = _ranged(over(_DAY_S), first_midnight + _DAY_S, last_midnight, _DAY_S)
        today = at - max(last_midnight, begin)
        if today >= 1:
            asks[f"{prefix}today"] = _instant(over(today), at)
            days[f"{prefix}today"] = _day(max(last_midnight, begin))
        return asks, days

    def _plan(self, by: str, range_s: int, at: float) -> tuple[dict[str, _Ask], dict[str, Any]]:
        """The requests of a page and what each asked (name -> PromQL, time or range), for the JSON."""
        every = {"job": promql.ALL, "team": promql.ALL, "label": ""}
        over_range = {**every, "__range": _duration(range_s), "__rate_interval": _duration(range_s)}
        step = max(60, math.ceil(range_s / SLOTS / 60) * 60)
        start = at - (max(range_s // step, 1) - 1) * step
        per_step = {**every, "__range": _duration(step), "__rate_interval": _duration(step)}
        asks: dict[str, _Ask] = {
            "cost": _instant(promql.fill(promql.COST_IN_RANGE.expr, over_range), at),
            "runs": _instant(promql.fill(promql.RUNS_IN_RANGE.expr, over_range), at),
            "median": _instant(promql.fill(promql.RUN_COST_MEDIAN.expr, over_range), at),
            "p95": _instant(promql.fill(promql.RUN_COST_P95.expr, over_range), at),
            "max": _instant(promql.fill(promql.RUN_COST_MAX.expr, over_range), at),
            "stops": _instant(promql.fill(promql.RUNS_BY_STOP_KIND.expr, over_range), at),
        }
        if by == "team":
            asks["per_success"] = _instant(promql.fill(promql.SPEND_PER_SUCCESS.expr, over_range), at)
            asks["success_share"] = _instant(promql.fill(promql.SUCCESS_SHARE.expr, over_range), at)
        asks["run_cost_median"] = _ranged(promql.fill(promql.RUN_COST_MEDIAN.expr, per_step), start, at, step)
        asks["run_cost_p95"] = _ranged(promql.fill(promql.RUN_COST_P95.expr, per_step), start, at, step)
        asks["run_cost_max"] = _ranged(promql.fill(promql.RUN_COST_MAX.expr, per_step), start, at, step)
        days: dict[str, str] = {}
        if by == "day":  # a UTC day a row: the cost in range over the day (its part in the range)
            day_asks, days = self._per_day("", promql.COST_IN_RANGE.expr, at - range_s, at)
            asks.update(day_asks)
        else:
            asks["rows"] = _instant(promql.fill(promql.COST_BY[by].expr, over_range), at)
            asks["spend"] = _ranged(promql.fill(promql.COST_BY[by].expr, per_step), start, at, step)
        exemplar_query = promql.fill(promql.RUN_COST_MEDIAN.expr, over_range)
        asks["exemplars"] = _Ask(
            "/api/v1/query_exemplars",
            {"query": exemplar_query, "start": f"{at - range_s:.3f}", "end": f"{at:.3f}"},
            required=False,
            max_bytes=EXEMPLAR_BYTES,
        )
        asks["flags"] = _Ask("/api/v1/status/flags", {}, required=False)
        return asks, {"asked": _asked(asks), "step_s": step, "start": start, "days_of": days}

    def _answers(self, by: str, since: str | None, at: float | None) -> dict[str, Any]:
        by = self._by(by)
        shown, range_s = self._range(since)
        at = round(time.time() if at is None else at, 3)
        asks, plan = self._plan(by, range_s, at)
        answers, failures = self._all(asks)
        return {
            "by": by,
            "since": shown,
            "range_s": range_s,
            "at": at,
            **plan,
            "answers": answers,
            "failures": failures,
        }

    # --- the JSON ----------------------------------------------------------------------------

    def _source(self, by: str, shown: str, range_s: int, at: float) -> dict[str, Any]:
        """The keys every JSON from Prometheus starts with: where its figures come from, and that
        they are estimates."""
        return {
            "source": "prometheus",
            "prometheus": self.url,
            "estimate": ESTIMATE,
            "by": by,
            "since": shown,
            "range_s": range_s,
            "at": at,
            "at_iso": _iso(at),
        }

    def cost_json(self, by: str, since: str | None, *, at: float | None = None) -> dict[str, Any]:
        """What `/api/cost` answers from Prometheus: the dashboard queries' answers over the range
        (the last `since`, default 24h, at most MOST_SINCE) ending at `at` (a `time.time()`, default
        now), each with the PromQL asked; said to be estimates. BadRequest for a `by` Prometheus has
        no label for or a range it should not be asked; PrometheusUnavailable for anything else."""
        return self._json(self._answers(by, since, at))

    def _json(self, got: Mapping[str, Any]) -> dict[str, Any]:
        answers, by = got["answers"], got["by"]

        def scalar(name: str) -> float | None:
            return _scalar(answers.get(name))

        if by == "day":
            per_day = _days(answers, "", got["days_of"], None)
            rows: list[dict[str, Any]] = [
                {"key": day, "cost_usd": values.get(NONE)} for day, values in sorted(per_day.items())
            ]
        else:
            costs = _grouped(answers.get("rows"), promql.LABELS[by])
            rows = [{"key": key, "cost_usd": cost} for key, cost in costs.items()]
            if by == "team":
                per_success = _grouped(answers.get("per_success"), promql.LABELS["team"])
                share = _grouped(answers.get("success_share"), promql.LABELS["team"])
                for row in rows:
                    row["cost_per_outcome_usd"] = per_success.get(row["key"])
                    row["success_share"] = share.get(row["key"])
            rows.sort(key=_costliest_first)
        stops = _grouped(answers.get("stops"), _STOP_LABEL)
        return {
            **self._source(by, got["since"], got["range_s"], got["at"]),
            "cost_usd": scalar("cost"),
            "runs": scalar("runs"),
            "run_cost_usd": {"median": scalar("median"), "p95": scalar("p95"), "max": scalar("max")},
            "stops": {kind: stops.get(kind) for kind in _LOOP_STOPS},
            "rows": rows,
            "queries": got["asked"],
        }

    def days_json(self, by: str, since: str | None, *, at: float | None = None) -> dict[str, Any]:
        """What `/api/cost/days` answers from Prometheus, with the store's top-level keys ("days",
        "by"): a row a UTC day the range touches (oldest first), each Prometheus's answers over that
        day's part of the range to the dashboard's cost by `by` ("rows", costliest first), its cost
        in range ("total") and its runs by stop kind ("stops": a loop guard, a message limit); plus
        where the figures come from, that they are estimates, and the PromQL asked. Errors as
        cost_json's."""
        by = self._by(by)
        shown, range_s = self._range(since)
        at = round(time.time() if at is None else at, 3)
        begin = at - range_s
        asks, days_of = self._per_day("total_", promql.COST_IN_RANGE.expr, begin, at)
        queries = {"stops_": promql.RUNS_BY_STOP_KIND}
        if by in promql.LABELS:
            queries["rows_"] = promql.COST_BY[by]
        for prefix, query in queries.items():
            more, more_days = self._per_day(prefix, query.expr, begin, at)
            asks.update(more)
            days_of.update(more_days)
        answers, _ = self._all(asks)
        totals = _days(answers, "total_", days_of, None)
        stops = _days(answers, "stops_", days_of, _STOP_LABEL)
        by_key = _days(answers, "rows_", days_of, promql.LABELS[by]) if by in promql.LABELS else {}
        days = []
        for day in sorted(set(days_of.values()) | set(totals) | set(stops) | set(by_key) | _whole_days(begin, at)):
            if by in promql.LABELS:
                rows = [{"key": key, "cost_usd": cost} for key, cost in by_key.get(day, {}).items()]
                rows.sort(key=_costliest_first)
            else:
                rows = [{"key": day, "cost_usd": totals[day].get(NONE)}] if day in totals else []
            total = {"key": day, "cost_usd": totals[day].get(NONE)} if day in totals else None
            day_stops = stops.get(day, {})
            days.append({"day": day, "rows": rows, "total": total, "stops": {k: day_stops.get(k) for k in _LOOP_STOPS}})
        return {**self._source(by, shown, range_s, at), "days": days, "queries": _asked(asks)}

    # --- the page ----------------------------------------------------------------------------

    def cost_context(
        self,
        by: str,
        since: str | None,
        costliest: Callable[[int], list[dict[str, Any]]] | None = None,
        *,
        at: float | None = None,
    ) -> dict[str, Any]:
        """The context of templates/cost_prometheus.html: cost_json's figures, the charts (spend over
        time; cost per run over time with the exemplars as points that open their runs) and the
        costliest runs (`costliest(since_ns)`'s rows when given, e.g. Jaeger's window; else the
        exemplars')."""
        from otel_agents.ui.prometheus_chart import run_cost_chart, spend_chart

        got = self._answers(by, since, at)
        figures = self._json(got)
        exemplars, why_none, named = self._exemplars(got)
        since_s = got["at"] - got["range_s"]
        if costliest is not None:
            runs_from, rows = "jaeger", costliest(int(since_s * 1_000_000_000))[:COSTLIEST]
        else:
            runs_from, rows = "exemplars", costliest_exemplars(exemplars)
        answers = got["answers"]
        series = {
            name: answers[key]["result"]
            for name, key in (("median", "run_cost_median"), ("p95", "run_cost_p95"), ("max", "run_cost_max"))
        }
        return {
            **figures,
            "title": "Cost from Prometheus · otel-agents",
            "dimensions": DIMENSIONS,
            "ranges": RANGES if figures["since"] in RANGES else (figures["since"], *RANGES),
            "exemplars": exemplars,
            "exemplars_in_range": named,
            "no_exemplars": why_none,
            "costliest": rows,
            "costliest_from": runs_from,
            "spend_chart": spend_chart(figures, answers.get("spend", {}).get("result", []), got),
            "run_cost_chart": run_cost_chart(series, exemplars, got),
        }

    def _exemplars(self, got: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None, int]:
        """The run-cost exemplars in range to draw (each a run's trace and cost; the MOST_POINTS
        costliest), newest last; when there are none, why; and how many Prometheus returned."""
        answers, failures = got["answers"], got["failures"]
        if "exemplars" in failures:
            return [], f"Prometheus at {self.url} gave no exemplars: {failures['exemplars']}", 0
        points = []
        for series in answers.get("exemplars", []):
            labels = series.get("seriesLabels", {})
            for exemplar in series.get("exemplars", []):
                trace_id = str(exemplar.get("labels", {}).get(TRACE_ID_LABEL, "")).lower()
                value, at = _number(exemplar.get("value")), _number(exemplar.get("timestamp"))
                if not _TRACE_ID.fullmatch(trace_id) or value is None or at is None:
                    continue
                points.append(
                    {
                        "trace_id": trace_id,
                        "cost_usd": value,
                        "at": at,
                        "at_iso": _iso(at),
                        "team": labels.get(promql.LABELS["team"]),
                        "service": labels.get("job"),
                    }
                )
        named = len(points)
        if named > MOST_POINTS:  # the costliest: a spike's runs are the ones to open
            points = sorted(points, key=lambda point: -point["cost_usd"])[:MOST_POINTS]
        points.sort(key=lambda point: point["at"])
        if points:
            return points, None, named
        features = str(answers.get("flags", {}).get("enable-feature", ""))
        if "flags" in answers and EXEMPLAR_FEATURE not in features.split(","):
            kept_none = (
                f"Prometheus at {self.url} keeps no exemplars: it runs without "
                f"--enable-feature={EXEMPLAR_FEATURE} (deploy/'s compose files start it with it), so no "
                "point leads to a run."
            )
            return [], kept_none, 0
        none_in_range = (
            "No run-cost exemplar in this range: Prometheus keeps one a histogram bucket each scrape, for runs "
            "whose trace is kept (sampled in), and only while they are in its exemplar storage."
        )
        return [], none_in_range, 0


def _asked(asks: Mapping[str, _Ask]) -> dict[str, dict[str, str]]:
    """What each request asked, by name (its path and parameters), but the flags."""
    return {name: dict(ask.params) | {"path": ask.path} for name, ask in asks.items() if name != "flags"}


def _scalar(data: Mapping[str, Any] | None) -> float | None:
    """The value of a one-series vector (checked as Prometheus answers); None without a series."""
    result = (data or {}).get("result", [])
    return _number(result[0]["value"][1]) if result else None


def _grouped(data: Mapping[str, Any] | None, label: str) -> dict[str, float | None]:
    """A vector's values by the value of `label` (NONE where a series has none)."""
    return {
        str(series["metric"].get(label) or NONE): _number(series["value"][1])
        for series in (data or {}).get("result", [])
    }


def _days(
    answers: Mapping[str, Any], prefix: str, days_of: Mapping[str, str], label: str | None
) -> dict[str, dict[str, float | None]]:
    """The answers to a `_per_day` plan (named with `prefix`) by UTC day, then by `label`'s value
    (NONE for each, when `label` is None)."""
    per_day: dict[str, dict[str, float | None]] = {}
    for which in ("first_day", "today"):
        for series in (answers.get(prefix + which) or {}).get("result", []):
            key = NONE if label is None else str(series["metric"].get(label) or NONE)
            per_day.setdefault(days_of[prefix + which], {})[key] = _number(series["value"][1])
    for series in (answers.get(prefix + "days") or {}).get("result", []):
        key = NONE if label is None else str(series["metric"].get(label) or NONE)
        for t, v in series["values"]:
            per_day.setdefault(_day(float(t) - _DAY_S), {})[key] = _number(v)
    return per_day


def _whole_days(begin: float, at: float) -> set[str]:
    """Every UTC day from `begin`'s to the day of the last second before `at`."""
    days = set()
    t = float(int(begin) // _DAY_S * _DAY_S)
    while t < at:
        days.add(_day(t))
        t += _DAY_S
    return days


def _costliest_first(row: Mapping[str, Any]) -> tuple[float, str]:
    return -float(row["cost_usd"] or 0.0), str(row["key"])


def costliest_exemplars(exemplars: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The costliest runs the exemplars name, one row a trace (its highest cost point)."""
    best: dict[str, dict[str, Any]] = {}
    for point in exemplars:
        held = best.get(point["trace_id"])
        if held is None or point["cost_usd"] > held["cost_usd"]:
            best[point["trace_id"]] = point
    return sorted(best.values(), key=lambda point: (-point["cost_usd"], point["trace_id"]))[:COSTLIEST]

"""The cost page from Prometheus (`otel-agents ui --prometheus URL`): what Prometheus answers to the
PromQL of deploy/'s Grafana dashboard (`otel_agents._internal.report.promql`, which the dashboard is
made from), never a sum of our own.

The figures are Prometheus's estimates: `increase()` over a window extrapolates from the samples it
holds to the window's edges, and a quantile of cost per run is read from histogram buckets. The
page says so, and names the Prometheus and the PromQL each figure came from.

Every query of a page is sent at once (a thread each) over Prometheus's HTTP API (`/api/v1/query`,
`/api/v1/query_range`, `/api/v1/query_exemplars`), each bounded by `timeout_s`; a failure is a
`PrometheusUnavailable` that says which (unreachable, slow, an error status with Prometheus's own
error text, an answer that is not Prometheus's API) and names the URL.

The cost chart's points are the run-cost histogram's exemplars (Prometheus keeps them with
`--enable-feature=exemplar-storage`, as deploy/ starts it): each names a run's trace (its `trace_id`
label) and its measured cost, and opens `/runs/<trace_id>`."""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from otel_agents._internal.report import promql
from otel_agents._internal.report.cost import DIMENSIONS as COST_DIMENSIONS
from otel_agents._internal.report.cost import NONE, parse_since

PROMETHEUS_TIMEOUT_S: Final = 5.0
"""The longest one query may take."""
DIMENSIONS: Final = ("team", "model", "agent", "day")
"""The dimensions of `cost --by` that Prometheus can group by: the metrics' labels (team, model,
agent) and time. Users and conversations are no label: metrics keep low-cardinality labels only."""
LABELS: Final = {"team": "gen_ai_workflow_name", "agent": "gen_ai_agent_name", "model": "gen_ai_request_model"}
"""The label each dimension groups by (the dashboard's cost panels')."""
DEFAULT_SINCE: Final = "24h"
"""The range shown when none is asked: Prometheus has no "all time" to sum over."""
RANGES: Final = ("1h", "24h", "7d", "30d", "90d")
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


class PrometheusUnavailable(Exception):
    """Prometheus could not answer a query: the message names the URL and what went wrong."""


@dataclass(frozen=True)
class _Ask:
    """One request to Prometheus's HTTP API: its path and parameters, and the data shape expected."""

    path: str
    params: Mapping[str, str]
    shape: type
    required: bool = True


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


class PrometheusCost:
    """The cost page's figures, asked of the Prometheus at `url`."""

    def __init__(self, url: str, *, timeout_s: float = PROMETHEUS_TIMEOUT_S) -> None:
        parsed = urllib.parse.urlsplit(url.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
            raise ValueError(f"--prometheus {url!r}: expected Prometheus's base URL, http://HOST:PORT")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s {timeout_s!r}: expected a positive number of seconds")
        self.url = url.strip().rstrip("/")
        self.timeout_s = timeout_s

    # --- asking ------------------------------------------------------------------------------

    def _get(self, ask: _Ask) -> Any:
        url = f"{self.url}{ask.path}?" + urllib.parse.urlencode(dict(ask.params))
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            raise PrometheusUnavailable(self._refused(ask, error.code, error.read())) from None
        except TimeoutError:
            raise PrometheusUnavailable(self._slow(ask)) from None
        except OSError as error:  # URLError: refused, unknown host; a timeout inside it
            reason = getattr(error, "reason", None) or error
            if isinstance(reason, TimeoutError):
                raise PrometheusUnavailable(self._slow(ask)) from None
            raise PrometheusUnavailable(f"cannot reach Prometheus at {self.url}: {reason}") from None
        try:
            answer = json.loads(body)
        except ValueError:
            raise PrometheusUnavailable(self._not_the_api(ask, body)) from None
        if not isinstance(answer, dict) or answer.get("status") not in ("success", "error"):
            raise PrometheusUnavailable(self._not_the_api(ask, body))
        if answer["status"] == "error":
            raise PrometheusUnavailable(self._error_text(ask, 200, answer))
        data = answer.get("data")
        if ask.shape is list and data is None:  # query_exemplars answers null where nothing matches
            data = []
        if not isinstance(data, ask.shape):
            raise PrometheusUnavailable(self._not_the_api(ask, body))
        if (
            isinstance(data, dict)
            and ask.path.endswith(("/query", "/query_range"))
            and not isinstance(data.get("result"), list)
        ):
            raise PrometheusUnavailable(self._not_the_api(ask, body))
        return data

    def _slow(self, ask: _Ask) -> str:
        return f"Prometheus at {self.url} is slow: no answer to {ask.path} within {self.timeout_s:g} s"

    def _not_the_api(self, ask: _Ask, body: bytes) -> str:
        sample = " ".join(body[:120].decode("utf-8", "replace").split())
        return (
            f"{self.url}{ask.path} did not answer as Prometheus's HTTP API does ({sample!r}): "
            f"is {self.url} the base URL of a Prometheus?"
        )

    def _error_text(self, ask: _Ask, status: int, answer: Mapping[str, Any]) -> str:
        kind = answer.get("errorType") or "error"
        text = " ".join(str(answer.get("error", "")).split())[:300]
        return f"Prometheus at {self.url} answered {status} to {ask.path}: {kind}: {text}"

    def _refused(self, ask: _Ask, status: int, body: bytes) -> str:
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and answer.get("status") == "error":
            return self._error_text(ask, status, answer)
        return f"{self._not_the_api(ask, body)} (status {status})"

    def _all(self, asks: Mapping[str, _Ask]) -> tuple[dict[str, Any], dict[str, str]]:
        """Every request at once, each within the timeout: (answers by name, failures of the requests
        that are not required, by name). The first required failure (in `asks`' order) is raised."""
        pool = ThreadPoolExecutor(max_workers=len(asks), thread_name_prefix="prometheus")
        try:
            futures: dict[str, Future[Any]] = {name: pool.submit(self._get, ask) for name, ask in asks.items()}
            deadline = time.monotonic() + self.timeout_s
            required = {name: futures[name] for name, ask in asks.items() if ask.required}
            wait(list(required.values()), timeout=self.timeout_s, return_when=FIRST_EXCEPTION)
            for future in required.values():  # the first failure in order, without waiting on the rest
                failed = future.exception() if future.done() else None
                if failed is not None:
                    raise failed
            wait(list(futures.values()), timeout=max(deadline - time.monotonic(), 0))
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
            pool.shutdown(wait=False, cancel_futures=True)

    # --- the queries of a page ---------------------------------------------------------------

    @staticmethod
    def _range(since: str | None) -> tuple[str, int]:
        shown = since or DEFAULT_SINCE
        return shown, parse_since(shown, "since")

    @staticmethod
    def _by(by: str) -> str:
        if by not in DIMENSIONS:
            if by in COST_DIMENSIONS:
                raise ValueError(
                    f"by {by!r}: Prometheus has no {by} label (metrics keep low-cardinality labels only); "
                    f"from Prometheus the cost is by {', '.join(DIMENSIONS)}"
                )
            raise ValueError(f"by {by!r}: expected one of {', '.join(DIMENSIONS)}")
        return by

    def _plan(self, by: str, range_s: int, at: float) -> tuple[dict[str, _Ask], dict[str, Any]]:
        """The requests of a page and what each asked (name -> PromQL, time or range), for the JSON."""
        every = {"job": promql.ALL, "team": promql.ALL, "label": ""}
        over_range = {**every, "__range": _duration(range_s), "__rate_interval": _duration(range_s)}
        step = max(60, math.ceil(range_s / SLOTS / 60) * 60)
        start = at - (max(range_s // step, 1) - 1) * step
        per_step = {**every, "__range": _duration(step), "__rate_interval": _duration(step)}
        instant: dict[str, str] = {
            "cost": promql.fill(promql.COST_IN_RANGE.expr, over_range),
            "runs": promql.fill(promql.RUNS_IN_RANGE.expr, over_range),
            "median": promql.fill(promql.RUN_COST_MEDIAN.expr, over_range),
            "p95": promql.fill(promql.RUN_COST_P95.expr, over_range),
            "max": promql.fill(promql.RUN_COST_MAX.expr, over_range),
            "stops": promql.fill(promql.RUNS_BY_STOP_KIND.expr, over_range),
        }
        if by == "team":
            instant["per_success"] = promql.fill(promql.SPEND_PER_SUCCESS.expr, over_range)
            instant["success_share"] = promql.fill(promql.SUCCESS_SHARE.expr, over_range)
        ranged: dict[str, tuple[str, float, float, int]] = {
            "run_cost_median": (promql.fill(promql.RUN_COST_MEDIAN.expr, per_step), start, at, step),
            "run_cost_p95": (promql.fill(promql.RUN_COST_P95.expr, per_step), start, at, step),
            "run_cost_max": (promql.fill(promql.RUN_COST_MAX.expr, per_step), start, at, step),
        }
        if by == "day":  # a UTC day a row: the cost in range over the day (its part in the range)
            begin = at - range_s
            first_midnight = (int(begin) // _DAY_S + 1) * _DAY_S
            last_midnight = int(at) // _DAY_S * _DAY_S
            if first_midnight <= last_midnight and first_midnight - begin >= 1:
                first_part = {**every, "__range": _duration(first_midnight - begin)}
                ranged["first_day"] = (
                    promql.fill(promql.COST_IN_RANGE.expr, first_part),
                    first_midnight,
                    first_midnight,
                    60,
                )
            if first_midnight + _DAY_S <= last_midnight:
                whole_days = {**every, "__range": _duration(_DAY_S)}
                ranged["days"] = (
                    promql.fill(promql.COST_IN_RANGE.expr, whole_days),
                    first_midnight + _DAY_S,
                    last_midnight,
                    _DAY_S,
                )
            today = at - max(last_midnight, begin)
            if today >= 1:
                instant["today"] = promql.fill(promql.COST_IN_RANGE.expr, {**every, "__range": _duration(today)})
        else:
            instant["rows"] = promql.fill(promql.COST_BY[by].expr, over_range)
            ranged["spend"] = (promql.fill(promql.COST_BY[by].expr, per_step), start, at, step)
        asks: dict[str, _Ask] = {
            name: _Ask("/api/v1/query", {"query": expr, "time": f"{at:.3f}"}, dict) for name, expr in instant.items()
        }
        for name, (expr, begin, end, every_s) in ranged.items():
            asks[name] = _Ask(
                "/api/v1/query_range",
                {"query": expr, "start": f"{begin:.3f}", "end": f"{end:.3f}", "step": str(every_s)},
                dict,
            )
        exemplar_query = promql.fill(promql.RUN_COST_MEDIAN.expr, over_range)
        asks["exemplars"] = _Ask(
            "/api/v1/query_exemplars",
            {"query": exemplar_query, "start": f"{at - range_s:.3f}", "end": f"{at:.3f}"},
            list,
            required=False,
        )
        asks["flags"] = _Ask("/api/v1/status/flags", {}, dict, required=False)
        asked = {name: dict(ask.params) | {"path": ask.path} for name, ask in asks.items() if name != "flags"}
        return asks, {"asked": asked, "step_s": step, "start": start}

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

    def cost_json(self, by: str, since: str | None, *, at: float | None = None) -> dict[str, Any]:
        """What `/api/cost` answers from Prometheus: the dashboard queries' answers over the range
        (the last `since`, default 24h) ending at `at` (a `time.time()`, default now), each with the
        PromQL asked; said to be estimates."""
        return self._json(self._answers(by, since, at))

    def _json(self, got: Mapping[str, Any]) -> dict[str, Any]:
        answers, by = got["answers"], got["by"]

        def scalar(name: str) -> float | None:
            result = answers.get(name, {}).get("result", [])
            return _number(result[0]["value"][1]) if result else None

        def grouped(name: str, label: str) -> dict[str, float | None]:
            return {
                str(series["metric"].get(label) or NONE): _number(series["value"][1])
                for series in answers.get(name, {}).get("result", [])
            }

        if by == "day":
            days = {
                datetime.fromtimestamp(float(t) - _DAY_S, tz=UTC).strftime("%Y-%m-%d"): _number(v)
                for name in ("first_day", "days")
                for series in answers.get(name, {}).get("result", [])
                for t, v in series["values"]
            }
            if "today" in answers:
                days[datetime.fromtimestamp(got["at"], tz=UTC).strftime("%Y-%m-%d")] = scalar("today")
            rows: list[dict[str, Any]] = [{"key": day, "cost_usd": cost} for day, cost in sorted(days.items())]
        else:
            costs = grouped("rows", LABELS[by])
            rows = [{"key": key, "cost_usd": cost} for key, cost in costs.items()]
            if by == "team":
                per_success = grouped("per_success", LABELS["team"])
                share = grouped("success_share", LABELS["team"])
                for row in rows:
                    row["cost_per_outcome_usd"] = per_success.get(row["key"])
                    row["success_share"] = share.get(row["key"])
            rows.sort(key=lambda row: (-float(row["cost_usd"] or 0.0), str(row["key"])))
        stops = grouped("stops", "otel_agents_stop_kind")
        return {
            "source": "prometheus",
            "prometheus": self.url,
            "estimate": ESTIMATE,
            "by": by,
            "since": got["since"],
            "range_s": got["range_s"],
            "at": got["at"],
            "at_iso": _iso(got["at"]),
            "cost_usd": scalar("cost"),
            "runs": scalar("runs"),
            "run_cost_usd": {"median": scalar("median"), "p95": scalar("p95"), "max": scalar("max")},
            "stops": {kind: stops.get(kind) for kind in _LOOP_STOPS},
            "rows": rows,
            "queries": got["asked"],
        }

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
            runs_from, rows = "exemplars", _costliest_exemplars(exemplars)
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
                        "team": labels.get(LABELS["team"]),
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


def _costliest_exemplars(exemplars: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The costliest runs the exemplars name, one row a trace (its highest cost point)."""
    best: dict[str, dict[str, Any]] = {}
    for point in exemplars:
        held = best.get(point["trace_id"])
        if held is None or point["cost_usd"] > held["cost_usd"]:
            best[point["trace_id"]] = point
    return sorted(best.values(), key=lambda point: (-point["cost_usd"], point["trace_id"]))[:COSTLIEST]

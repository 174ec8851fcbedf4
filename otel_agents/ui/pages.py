"""The pages and their JSON: each page is drawn from the JSON of its `/api/` path, which the same
report code makes for the CLI (`runs --json`, `cost --json`, `explain --json`).

The pages read one source: the embedded store (through its reader, which never writes) or, with
`otel-agents ui --jaeger URL`, Jaeger's query API (`otel_agents.ui.jaeger`, whose spans and runs are
the store's rows, so the same code draws them); the cost page reads Prometheus with `--prometheus
URL` (`otel_agents.ui.prometheus`). Every failure a user can meet is an `Answer` (a page, or
`{"error": ...}` under `/api/`) saying what is wrong: a bad filter (400), an unknown or ambiguous run
(404, with the prefix's matches), a missing, damaged or newer store, or a Jaeger or Prometheus that
cannot be read (503, naming its URL)."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, get_args

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from otel_agents._internal import keys as sc
from otel_agents._internal.explain.errors import ExplainError
from otel_agents._internal.explain.model import iso_utc
from otel_agents._internal.explain.text import summary_line
from otel_agents._internal.export.store.reader import RunNotFound, Store, StoredRun, StoredSpan, run_subtree
from otel_agents._internal.export.store.rows import stored_span
from otel_agents._internal.export.store.schema import StoreDamaged, StoreError, StoreVersionError
from otel_agents._internal.report import cost as cost_report_module
from otel_agents._internal.report.explained import explain_stored_with_spans
from otel_agents._internal.report.runs import SORTS, RunFilter, list_runs, run_filter, runs_per_day
from otel_agents._internal.report.trace import shown_costs, span_json, tree_order
from otel_agents._internal.run.stop import StopKind
from otel_agents.ui import charts
from otel_agents.ui.jaeger import MAX_SERVICES, TRACES_BY_ID, JaegerSource, JaegerUnavailable, NotInJaeger, run_of
from otel_agents.ui.prometheus import COSTLIEST, BadRequest, PrometheusUnavailable
from otel_agents.ui.waterfall import waterfall

if TYPE_CHECKING:
    from jinja2 import Environment

    from otel_agents._internal.explain.model import Explanation
    from otel_agents.ui.prometheus import PrometheusCost

logger = logging.getLogger(__name__)

PER_PAGE: Final = 50
TURN_ROWS: Final = 500
"""The most turns a run's page lists in its table (every turn is in its JSON)."""
TURN_BARS: Final = 200
"""The most turns drawn as bars."""
RUN_FILTERS: Final = ("team", "user_id", "stop_kind", "outcome", "finding", "since", "until")
STOP_KINDS: Final = get_args(StopKind)
COST_RANGES: Final = ("24h", "7d", "30d", "90d")
LOOP_STOPS: Final = ("loop_guard", "max_messages")
"""The stops the cost page counts over time: a loop guard's, a message limit's."""
JAEGER_WINDOW_S: Final = 3600
"""The window the runs page reads from Jaeger when `since` is not given: the hour up to `until`."""
NO_PROMETHEUS: Final = (
    "The cost figures come from Prometheus when the runs come from Jaeger: start the page with "
    "--prometheus URL, the Prometheus that scrapes the Collector's metrics (deploy/'s: http://localhost:9090). "
    "The embedded store is not read with --jaeger."
)
EMPTY_STORE: Final = (
    "No runs in this store yet. Put one in: run `otel-agents demo` (an offline demo team), or call "
    "`otel_agents.configure()` in your app (or start it under `opentelemetry-instrument`) and run a team: "
    "with no OTLP endpoint set, its runs land in this store."
)


class Answer(Exception):
    """A request that cannot be answered with its page: the status and what to say."""

    def __init__(self, status: int, message: str, *, matches: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.matches = list(matches)


def _money(value: float | None) -> str:
    """Dollars to the micro-dollar, as every command shows them (the JSON's figure, exactly)."""
    if value is None:
        return "-"
    micro = round(value * 1_000_000)
    return f"${micro // 1_000_000:,}.{micro % 1_000_000:06d}"


def _tokens(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:,.1f} s"


def _when(iso: str | None) -> str:
    return "-" if not iso else iso[:19].replace("T", " ")


def _signed(value: float | int | None, kind: str = "tokens") -> str:
    if value is None:
        return "-"
    if kind == "money":
        return ("+" if value > 0 else "-" if value < 0 else "±") + _money(abs(float(value)))
    if kind == "seconds":
        return ("+" if value > 0 else "-" if value < 0 else "±") + _seconds(abs(float(value)))
    return f"{value:+,}" if value else "±0"


FILTERS: Final[Mapping[str, Callable[..., str]]] = MappingProxyType(
    {
        "money": _money,
        "tokens": _tokens,
        "seconds": _seconds,
        "when": _when,
        "signed": _signed,
    }
)


@dataclass
class Page:
    """What every page template gets besides its own figures."""

    title: str
    source: str
    """What the pages read (the store's directory, or Jaeger), as the header shows it."""
    notices: list[str] = field(default_factory=list)


def _ns_of(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1e9)


def _day(iso: str) -> str:
    return iso[:10]


Source = Store | JaegerSource
"""What a page reads its runs from: the embedded store, or Jaeger's query API."""


class Site:
    """The pages over one source: a store directory, or Jaeger (`jaeger`); the cost page over the
    store, or Prometheus (`prometheus`, built once when the page starts)."""

    def __init__(
        self,
        directory: Path,
        environment: Environment,
        *,
        jaeger: JaegerSource | None = None,
        prometheus: PrometheusCost | None = None,
    ) -> None:
        self.directory = directory
        self.environment = environment
        self.jaeger = jaeger
        self.prometheus = prometheus

    @property
    def source_name(self) -> str:
        """What the pages read, as the header shows it."""
        return str(self.jaeger) if self.jaeger is not None else str(self.directory)

    # --- reading -----------------------------------------------------------------------------

    def _source(self, notices: list[str]) -> Source:
        """What this page reads: the store, or Jaeger with one deadline for the page's reads."""
        if self.jaeger is not None:
            return self.jaeger.for_page()
        if not self.directory.exists():
            raise Answer(
                503,
                f"no store at {self.directory}: the directory does not exist. Give the store your app writes to "
                "(otel-agents ui --store DIR, or OTEL_AGENTS_STORE), or put a run in this one: otel-agents demo",
            )
        if not self.directory.is_dir():
            raise Answer(503, f"no store at {self.directory}: not a directory")
        return Store(self.directory, notice=notices.append)

    def _guarded(
        self,
        request: Request,
        build: Callable[[Any, list[str]], Any],
        *,
        api: bool,
        template: str | None = None,
        reads_source: bool = True,
    ) -> Response:
        """`build(source, notices)`'s answer, or the page saying why there is none. `reads_source`
        False: the page reads no runs (the cost from Prometheus alone), so no store is opened."""
        notices: list[str] = []
        try:
            source = self._source(notices) if reads_source else None
            result = build(source, notices)
        except Answer as answer:
            return self._problem(request, answer, api=api, notices=notices)
        except NotInJaeger as error:
            return self._problem(request, Answer(404, str(error)), api=api, notices=notices)
        except JaegerUnavailable as error:
            return self._problem(request, Answer(503, str(error)), api=api, notices=notices)
        except PrometheusUnavailable as error:
            return self._problem(request, Answer(503, str(error)), api=api, notices=notices)
        except (StoreVersionError, StoreDamaged) as error:
            return self._problem(request, Answer(503, str(error)), api=api, notices=notices)
        except StoreError as error:
            return self._problem(request, Answer(503, str(error)), api=api, notices=notices)
        except Exception as error:  # a page that failed says so, never with a traceback on the page
            logger.exception("otel-agents ui: %s failed", request.url.path)
            message = f"this page failed: {type(error).__name__}: {error}".splitlines()[0]
            return self._problem(request, Answer(500, message), api=api, notices=notices)
        if isinstance(result, Response):
            return result
        if api:
            return JSONResponse(result)
        assert template is not None
        return self._html(template, result, notices)

    def _html(self, template: str, context: Mapping[str, Any], notices: Sequence[str], status: int = 200) -> Response:
        page = Page(title=str(context.get("title", "otel-agents")), source=self.source_name, notices=list(notices))
        body = self.environment.get_template(template).render(site=page, **context)
        return HTMLResponse(body, status_code=status)

    def _problem(self, request: Request, answer: Answer, *, api: bool, notices: Sequence[str] = ()) -> Response:
        if api:
            payload: dict[str, Any] = {"error": answer.message}
            if answer.matches:
                payload["matches"] = answer.matches
            return JSONResponse(payload, status_code=answer.status)
        return self._html(
            "error.html",
            {"title": f"{answer.status}: otel-agents", "status": answer.status, "answer": answer},
            notices,
            status=answer.status,
        )

    async def not_found(self, request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        message = "no such page" if status == 404 else "only GET and HEAD are served"
        return self._problem(request, Answer(status, message), api=request.url.path.startswith("/api/"))

    # --- the runs list -----------------------------------------------------------------------

    @staticmethod
    def _filters(request: Request, extra: Iterable[str] = ()) -> tuple[RunFilter, dict[str, str], str, int]:
        params = request.query_params
        known = {*RUN_FILTERS, "sort", "page", *extra}
        unknown = sorted(set(params) - known)
        if unknown:
            raise Answer(400, f"unknown parameter {unknown[0]!r}: the runs take {', '.join(sorted(known))}")
        given = {name: params[name].strip() for name in RUN_FILTERS if params.get(name, "").strip()}
        try:
            where = run_filter(
                team=given.get("team"),
                user_id=given.get("user_id"),
                stop_kind=given.get("stop_kind"),
                outcome=given.get("outcome"),
                finding=given.get("finding"),
                since=given.get("since"),
                until=given.get("until"),
            )
        except ValueError as error:
            raise Answer(400, _as_parameter(str(error))) from None
        sort = params.get("sort", "time") or "time"
        if sort not in SORTS:
            raise Answer(400, f"sort {sort!r}: expected one of {', '.join(SORTS)}")
        raw_page = params.get("page", "1") or "1"
        if not raw_page.isdigit() or int(raw_page) < 1:
            raise Answer(400, f"page {raw_page!r}: expected a page number from 1")
        return where, given, sort, int(raw_page)

    def _runs(self, source: Source, request: Request, extra: Iterable[str] = ()) -> dict[str, Any]:
        if isinstance(source, JaegerSource):
            return self._jaeger_runs(source, request, extra)
        where, given, sort, page = self._filters(request, extra)
        found = list_runs(source, where, sort=sort, limit=PER_PAGE, offset=(page - 1) * PER_PAGE)
        pages = max(math.ceil(found.total / PER_PAGE), 1)
        if page > pages and found.total:
            raise Answer(400, f"page {page}: there are {pages} pages of runs for these filters")
        return {
            "runs": found.rows,
            "total": found.total,
            "page": page,
            "pages": pages,
            "per_page": PER_PAGE,
            "sort": sort,
            "filters": given,
        }

    def _jaeger_runs(self, jaeger: JaegerSource, request: Request, extra: Iterable[str] = ()) -> dict[str, Any]:
        """The runs of one time window read from Jaeger (it has no offset: the page's links move the
        window), filtered on the runs read and sorted within the window fetched."""
        where, given, sort, page = self._filters(request, extra)
        if page != 1:
            raise Answer(400, f"page {page}: Jaeger has no offset; its runs are paged by window (since, until)")
        now = time.time_ns()
        until_ns = where.until_ns if where.until_ns is not None else now
        since_ns = where.since_ns if where.since_ns is not None else until_ns - JAEGER_WINDOW_S * 1_000_000_000
        if since_ns >= until_ns:
            raise Answer(
                400,
                f"since {iso_utc(since_ns)} is not before until {iso_utc(until_ns)}: a window of Jaeger's runs "
                "starts before it ends",
            )
        window = jaeger.window(since_ns, until_ns, replace(where, since_ns=None, until_ns=None))
        rows = _sorted_rows(window.rows, sort)
        width = until_ns - since_ns
        kept = {k: v for k, v in given.items() if k not in ("since", "until")}
        older = {**kept, "since": iso_utc(since_ns - width), "until": iso_utc(since_ns)}
        newer = {**kept, "since": iso_utc(until_ns), "until": iso_utc(until_ns + width)} if until_ns < now else None
        return {
            "runs": rows,
            "total": len(rows),
            "page": 1,
            "pages": 1,
            "per_page": len(rows),
            "sort": sort,
            "filters": given,
            "source": {
                "jaeger": jaeger.url,
                "services": window.services,
                "since": iso_utc(since_ns),
                "until": iso_utc(until_ns),
                "sorted": "within the window fetched",
                "filtered": _filtered(given, window.searched_by),
                "searched_by": list(window.searched_by),
                "cut": window.cut,
                "searched_traces_per_service": window.depth,
                "skipped_services": window.skipped_services,
                "unread_traces": window.unread,
                "older": older,
                "newer": newer,
            },
        }

    def runs_api(self, request: Request) -> Response:
        return self._guarded(request, lambda source, _: self._runs(source, request), api=True)

    def runs_page(self, request: Request) -> Response:
        partial = request.query_params.get("partial") == "rows"

        def build(source: Source, notices: list[str]) -> Any:
            listed = self._runs(source, request, extra=("partial",))
            if isinstance(source, JaegerSource):
                window = listed["source"]
                notices.extend(
                    _window_notices(
                        window["cut"],
                        window["searched_traces_per_service"],
                        window["skipped_services"],
                        window["unread_traces"],
                    )
                )
                empty = (
                    f"No runs in {source} from {window['since']} to {window['until']}"
                    f" (services: {', '.join(window['services']) or 'none yet'})."
                    if listed["total"] == 0 and not listed["filters"].keys() - {"since", "until"}
                    else None
                )
            else:
                empty = (
                    EMPTY_STORE
                    if listed["total"] == 0 and not listed["filters"] and not list_runs(source, limit=1).total
                    else None
                )
            query = {**listed["filters"], "sort": listed["sort"]}
            context = {
                "title": "Runs · otel-agents",
                **listed,
                "empty": empty,
                "stop_kinds": STOP_KINDS,
                "sorts": SORTS,
                "query": query,
                "live": listed["page"] == 1 and listed["sort"] == "time" and "source" not in listed,
                "poll": "/api/runs?" + _query({**listed["filters"], "sort": "time"}),
                "rows_url": "/?" + _query({**listed["filters"], "sort": "time", "partial": "rows"}),
            }
            if partial:
                return self._html("runs_rows.html", context, notices)
            return self._html("runs.html", context, notices)

        return self._guarded(request, build, api=False)

    # --- one run -----------------------------------------------------------------------------

    def _explained(self, source: Source, ident: str) -> tuple[Explanation, StoredRun | None, list[StoredSpan]]:
        if isinstance(source, JaegerSource):
            return _explained_from_jaeger(source, ident)
        try:
            explanation, held = explain_stored_with_spans(source, ident)
        except ExplainError as error:
            raise Answer(404, str(error), matches=self._matches(source, ident, str(error))) from None
        except RunNotFound as error:
            raise Answer(404, str(error), matches=self._matches(source, ident, str(error))) from None
        except ValueError as error:
            raise Answer(404, str(error)) from None
        run_id = explanation.run.run_id
        stored = source.find_run(run_id) if run_id is not None else None
        spans = held
        if run_id is not None:
            spans = _with_orphans(run_subtree(run_id, spans), spans)
        return explanation, stored, spans

    @staticmethod
    def _matches(store: Store, ident: str, message: str) -> list[dict[str, Any]]:
        cleaned = ident.strip().lower()
        if "ambiguous" not in message:
            return []
        return [
            {"run_id": r.run_id, "team": r.team, "started_at": iso_utc(r.started_ns)}
            for r in store.runs_with_prefix(cleaned, 10)
        ]

    def _run_json(self, source: Source, ident: str) -> dict[str, Any]:
        explanation, _, spans = self._explained(source, ident)
        payload = explanation.to_dict()
        # as `show --json` gives them, in its order, with their events (and any part cut off from
        # the run by a lost span)
        ordered = tree_order(spans)
        payload["spans"] = [{**span_json(span), "events": span.data.get("events") or []} for _, span in ordered]
        return payload

    def run_api(self, request: Request) -> Response:
        ident = request.path_params["run"]
        return self._guarded(request, lambda source, _: self._run_json(source, ident), api=True)

    def run_page(self, request: Request) -> Response:
        ident = request.path_params["run"]
        opened = request.query_params.get("open") or None
        chosen = request.query_params.get("span") or None
        raw_skip = request.query_params.get("skip", "0").strip() or "0"

        def build(source: Source, notices: list[str]) -> Any:
            if not raw_skip.isdigit():
                raise Answer(400, f"skip {raw_skip!r}: expected how many spans to skip, from 0")
            explanation, run, spans = self._explained(source, ident)
            costs = shown_costs(run, spans)[1] if run is not None else {}
            drawn = waterfall(spans, costs, opened, skip=int(raw_skip))
            data = explanation.to_dict()
            others = _other_runs(source, run, notices)
            detail = next((s for s in spans if s.span_id == chosen), None) if chosen else None
            state = _run_state(explanation, run, drawn.orphans)
            return {
                "title": f"Run {(explanation.run.run_id or explanation.run.trace_id)[:12]} · otel-agents",
                "x": data,
                "explanation": explanation,
                "summary": summary_line(explanation),
                "state": state,
                "waterfall": drawn,
                "turn_rows": data["turns"][:TURN_ROWS],
                "turn_bars": min(len(data["turns"]), TURN_BARS),
                "ident": explanation.run.run_id or explanation.run.trace_id,  # the links' own: hex, whole
                "others": others,
                "detail": _span_detail(detail, costs) if detail is not None else None,
                "agent_chart": charts.hbars(
                    "tokens per agent",
                    [
                        (
                            a["agent"],
                            a["input_tokens"] + a["output_tokens"],
                            f"{a['input_tokens'] + a['output_tokens']:,} tokens · {_money(a['cost_usd'])}",
                        )
                        for a in data["agents"]
                    ],
                )
                if data["agents"]
                else None,
                "turn_chart": charts.hbars(
                    "tokens per turn",
                    [
                        (
                            f"{t['index']} {t['agent']}",
                            t["input_tokens"] + t["output_tokens"],
                            f"{t['input_tokens'] + t['output_tokens']:,} · {_money(t['cost_usd'])}",
                        )
                        for t in data["turns"][:TURN_BARS]
                    ],
                )
                if data["turns"]
                else None,
                "context_chart": _context_chart(explanation),
            }

        return self._guarded(request, build, api=False, template="run.html")

    def span_part(self, request: Request) -> Response:
        ident, span_id = request.path_params["run"], request.path_params["span"]

        def build(source: Source, notices: list[str]) -> Any:
            _, run, spans = self._explained(source, ident)
            costs = shown_costs(run, spans)[1] if run is not None else {}
            span = next((s for s in spans if s.span_id == span_id), None)
            if span is None:
                raise Answer(404, f"no span {span_id!r} in run {ident!r}")
            return self._html("span_detail.html", {"detail": _span_detail(span, costs)}, notices)

        return self._guarded(request, build, api=False)

    def otlp_download(self, request: Request) -> Response:
        ident = request.path_params["run"]

        def build(source: Source, notices: list[str]) -> Any:
            explanation, _, spans = self._explained(source, ident)
            text = _otlp_json(spans)
            name = f"otel-agents-{(explanation.run.run_id or explanation.run.trace_id)[:16]}.otlp.json"
            return Response(
                text,
                media_type="application/json",
                headers={"content-disposition": f'attachment; filename="{name}"'},
            )

        return self._guarded(request, build, api=True)

    # --- cost --------------------------------------------------------------------------------

    @staticmethod
    def _cost_params(request: Request, allowed: Iterable[str] = ("by", "since")) -> tuple[str, str | None, int | None]:
        params = request.query_params
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise Answer(400, f"unknown parameter {unknown[0]!r}: the cost takes {', '.join(allowed)}")
        by = params.get("by", "team") or "team"
        if by not in cost_report_module.DIMENSIONS:
            raise Answer(400, f"by {by!r}: expected one of {', '.join(cost_report_module.DIMENSIONS)}")
        since = params.get("since") or None
        since_ns = None
        if since is not None:
            try:
                since_ns = time.time_ns() - cost_report_module.parse_since(since) * 1_000_000_000
            except ValueError as error:
                raise Answer(400, str(error).replace("--since", "since")) from None
        return by, since, since_ns

    @staticmethod
    def _costliest(
        jaeger: JaegerSource, notices: list[str], failed: list[str]
    ) -> Callable[[int], list[dict[str, Any]]]:
        """The costliest runs since a time, from Jaeger's window up to now (for the cost page). What
        the window left out is a notice; a Jaeger that cannot be read is one too (recorded in
        `failed`: the page falls back to the exemplars) and the rows are none."""

        def costliest(since_ns: int) -> list[dict[str, Any]]:
            try:
                window = jaeger.window(since_ns, time.time_ns())
            except JaegerUnavailable as error:
                failed.append(str(error))
                notices.append(
                    f"The costliest runs are those the exemplars name: Jaeger at {jaeger.url} could not be read "
                    f"({error})"
                )
                return []
            left_out = _window_notices(window.cut, window.depth, window.skipped_services, window.unread)
            if left_out:
                notices.append("The costliest runs are of the traces Jaeger's window returned, not the whole range:")
                notices.extend(left_out)
            return _sorted_rows(window.rows, "cost")[:COSTLIEST]

        return costliest

    def _cost_source(self, request: Request) -> Any:
        """The cost's answer when it does not come from the store: Prometheus's (`--prometheus`), or
        an Answer saying where it would come from (`--jaeger` alone); None: from the store."""
        if self.prometheus is not None:
            return self.prometheus
        if self.jaeger is not None:
            self._cost_params(request)  # a bad parameter is still one
            raise Answer(503, NO_PROMETHEUS)
        return None

    def cost_api(self, request: Request) -> Response:
        def build(source: Source, _: list[str]) -> Any:
            prometheus = self._cost_source(request)
            by, since, since_ns = self._cost_params(request)
            if prometheus is not None:
                return _by_prometheus(prometheus.cost_json, by, since)
            assert isinstance(source, Store)
            return cost_report_module.cost_report(source, by, since_ns=since_ns)

        return self._guarded(request, build, api=True, reads_source=self._cost_reads_runs)

    @property
    def _cost_reads_runs(self) -> bool:
        """Whether the cost pages read the runs' source: not from Prometheus alone (`--prometheus`
        without `--jaeger`: the store need not exist)."""
        return self.prometheus is None or self.jaeger is not None

    def _days(self, store: Store, by: str, since_ns: int | None) -> dict[str, Any]:
        """Per day (UTC) of the range: the rows of `cost --json --by BY` over that day's runs, the
        day's total (its row of `cost --by day`: runs by outcome), and its runs stopped by a loop
        guard or a message limit. From the first day with runs to today."""
        per_day = cost_report_module.cost_report_per_day(store, by, since_ns=since_ns)
        if not per_day:
            return {"days": [], "by": by}
        totals = {row["key"]: row for row in cost_report_module.cost_report(store, "day", since_ns=since_ns)}
        stopped = {kind: runs_per_day(store, RunFilter(since_ns=since_ns, stop_kind=kind)) for kind in LOOP_STOPS}
        first = date.fromisoformat(min(per_day))
        last = max(datetime.now(UTC).date(), date.fromisoformat(max(per_day)))
        days = []
        day = first
        while day <= last:
            key = day.isoformat()
            stops = {kind: stopped[kind].get(key, 0) for kind in LOOP_STOPS}
            days.append({"day": key, "rows": per_day.get(key, []), "total": totals.get(key), "stops": stops})
            day += timedelta(days=1)
        return {"days": days, "by": by}

    def cost_days_api(self, request: Request) -> Response:
        def build(source: Source, _: list[str]) -> Any:
            prometheus = self._cost_source(request)
            by, since, since_ns = self._cost_params(request)
            if prometheus is not None:  # the store's top-level keys: days, by (and where they came from)
                return _by_prometheus(prometheus.days_json, by, since)
            assert isinstance(source, Store)
            return self._days(source, by, since_ns)

        return self._guarded(request, build, api=True, reads_source=self._cost_reads_runs)

    def cost_page(self, request: Request) -> Response:
        def build(source: Source, notices: list[str]) -> Any:
            if self.prometheus is not None:
                by, since, _ = self._cost_params(request)
                failed: list[str] = []
                from_jaeger = self._costliest(source, notices, failed) if isinstance(source, JaegerSource) else None
                context = _by_prometheus(self.prometheus.cost_context, by, since, costliest=from_jaeger)
                if failed:  # Jaeger could not be read: the exemplars' costliest runs, as without --jaeger
                    from otel_agents.ui.prometheus import costliest_exemplars

                    context = {
                        **context,
                        "costliest": costliest_exemplars(context["exemplars"]),
                        "costliest_from": "exemplars",
                    }
                return self._html("cost_prometheus.html", context, notices)
            by, since, since_ns = self._cost_params(request)
            if isinstance(source, JaegerSource):
                return {
                    "title": "Cost · otel-agents",
                    "empty": NO_PROMETHEUS,
                    "by": by,
                    "since": since,
                    "dimensions": cost_report_module.DIMENSIONS,
                    "ranges": COST_RANGES,
                    "rows": [],
                }
            rows = cost_report_module.cost_report(source, by, since_ns=since_ns)
            if not rows and not list_runs(source, limit=1).total:
                return {
                    "title": "Cost · otel-agents",
                    "empty": EMPTY_STORE,
                    "by": by,
                    "since": since,
                    "dimensions": cost_report_module.DIMENSIONS,
                    "ranges": COST_RANGES,
                    "rows": [],
                }
            days = self._days(source, by, since_ns)["days"]
            slots = [d["day"] for d in days]
            spend = {
                row["key"]: {
                    d["day"]: (r["cost_usd"] or 0.0) for d in days for r in d["rows"] if r["key"] == row["key"]
                }
                for row in rows
            }
            costliest = list_runs(source, RunFilter(since_ns=since_ns), sort="cost", limit=COSTLIEST).rows
            per_success = [d["total"].get("cost_per_outcome_usd") if d["total"] else None for d in days]
            share = [
                (d["total"]["outcomes"].get("success", 0) / d["total"]["runs"] * 100)
                if d["total"] and d["total"].get("outcomes") and d["total"]["runs"]
                else None
                for d in days
            ]
            stop_series = [charts.Series(kind, [d["stops"][kind] for d in days]) for kind in LOOP_STOPS]
            return {
                "title": "Cost · otel-agents",
                "empty": None,
                "by": by,
                "since": since,
                "dimensions": cost_report_module.DIMENSIONS,
                "ranges": COST_RANGES,
                "rows": rows,
                "days": days,
                "costliest": costliest,
                "spend_chart": charts.stacked_bars(
                    f"spend per day by {by}", slots, charts.day_series(slots, spend), unit="$"
                ),
                "success_chart": charts.line("spend per successful run, per day", per_success, "day", "$")
                if any(v is not None for v in per_success)
                else None,
                "share_chart": charts.line("share of successful runs, per day (%)", share, "day")
                if any(v is not None for v in share)
                else None,
                "stops_chart": charts.stacked_bars(
                    "runs stopped by a loop guard or a message limit", slots, stop_series
                ),
                "per_success": list(zip(slots, per_success, share, strict=True)),
            }

        return self._guarded(request, build, api=False, template="cost.html", reads_source=self._cost_reads_runs)

    # --- compare -----------------------------------------------------------------------------

    def _compare(self, source: Source, request: Request) -> dict[str, Any]:
        params = request.query_params
        unknown = sorted(set(params) - {"a", "b"})
        if unknown:
            raise Answer(400, f"unknown parameter {unknown[0]!r}: compare takes a and b")
        a, b = params.get("a", "").strip(), params.get("b", "").strip()
        if not a or not b:
            raise Answer(400, "compare needs two runs: /compare?a=RUN&b=RUN (run ids, unique prefixes or trace ids)")
        left, right = self._explained(source, a)[0], self._explained(source, b)[0]
        return {"a": left, "b": right}

    def compare_api(self, request: Request) -> Response:
        def build(source: Source, _: list[str]) -> Any:
            compared = self._compare(source, request)
            left, right = compared["a"].to_dict(), compared["b"].to_dict()
            return {"a": left, "b": right, "difference": _difference(left, right)}

        return self._guarded(request, build, api=True)

    def compare_page(self, request: Request) -> Response:
        def build(source: Source, notices: list[str]) -> Any:
            compared = self._compare(source, request)
            left, right = compared["a"].to_dict(), compared["b"].to_dict()
            return {
                "title": "Compare · otel-agents",
                "a": left,
                "b": right,
                "difference": _difference(left, right),
                "ids": (request.query_params["a"], request.query_params["b"]),
                "agents": _side_by_side(left["agents"], right["agents"], "agent"),
                "turns": _side_by_side(left["turns"], right["turns"], "index"),
                "context_chart": _compare_context_chart(compared["a"], compared["b"]),
            }

        return self._guarded(request, build, api=False, template="compare.html")


# --- helpers ---------------------------------------------------------------------------------------


def _by_prometheus(ask: Callable[..., dict[str, Any]], by: str, since: str | None, **more: Any) -> dict[str, Any]:
    """Prometheus's answer for `by`: a dimension it cannot group by, or a range it should not be
    asked, is a bad request (its BadRequest, raised before Prometheus is asked)."""
    try:
        return ask(by, since, **more)
    except BadRequest as error:
        raise Answer(400, str(error)) from None


def _other_runs(source: Source, run: StoredRun | None, notices: list[str]) -> list[StoredRun]:
    """The other runs of the run's conversation; from Jaeger, a failure to read them is a notice (the
    run itself was read)."""
    if run is None or not run.conversation_id:
        return []
    try:
        runs = source.conversation_runs(run.conversation_id)
    except JaegerUnavailable as error:
        notices.append(f"The other runs of this conversation could not be read: {error}")
        return []
    return [r for r in runs if r.run_id != run.run_id]


def _window_notices(cut: Sequence[str], depth: int, skipped: Sequence[str], unread: int) -> list[str]:
    """What a window read from Jaeger left out, as the page says it."""
    said = []
    if cut:
        said.append(
            f"Jaeger returned its most traces ({depth}) for {', '.join(cut)} in this window: older runs of the "
            "window may be missing. Narrow the window (since, until)."
        )
    if skipped:
        said.append(
            f"Jaeger knows {MAX_SERVICES + len(skipped)} services; the first {MAX_SERVICES} were searched, not "
            f"{', '.join(skipped[:5])}{' and more' if len(skipped) > 5 else ''}: name the services (--service)."
        )
    if unread:
        said.append(
            f"Jaeger's tag search found {unread} more traces than a page reads ({TRACES_BY_ID}, the newest): "
            "older runs of the window may be missing. Narrow the window (since, until)."
        )
    return said


def _filtered(given: Mapping[str, str], searched_by: Sequence[str]) -> str | None:
    """How the runs from Jaeger were filtered, as the runs page says it (None: they were not)."""
    if not given.keys() & {"team", "user_id", "stop_kind", "outcome", "finding"}:
        return None
    if searched_by:
        return f"by Jaeger's tag search ({', '.join(searched_by)}), then on the runs read"
    return "on the runs read from Jaeger (its search takes no outcome or finding)"


def _sorted_rows(rows: Sequence[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """`runs --json` rows in the order `runs --sort` gives (`SORTS`): newest first for `time`, else
    highest first, ties newest first (a run without a cost last for `cost`)."""
    newest = sorted(rows, key=lambda r: (r["started_at"], r["run_id"]), reverse=True)
    if sort == "cost":
        return sorted(newest, key=lambda r: (r["cost_usd"] is None, -(r["cost_usd"] or 0.0)))
    if sort == "duration":
        return sorted(newest, key=lambda r: -r["duration_s"])
    if sort == "tokens":
        return sorted(newest, key=lambda r: -((r["input_tokens"] or 0) + (r["output_tokens"] or 0)))
    return newest


def _query(values: Mapping[str, Any]) -> str:
    from urllib.parse import urlencode

    return urlencode({k: v for k, v in values.items() if v not in (None, "")})


def href(path: str, base: Mapping[str, Any] | None = None, **changes: Any) -> str:
    """`path` with the query `base` updated by `changes` (a link that keeps the page's filters)."""
    query = _query({**(base or {}), **changes})
    return f"{path}?{query}" if query else path


_OPTIONS: Final = MappingProxyType({"--user": "user_id", "--stop-kind": "stop_kind"})


def _as_parameter(message: str) -> str:
    """The `runs` option a message names, as the page's parameter (`--stop-kind 'x'` -> `stop_kind 'x'`)."""
    option, space, rest = message.partition(" ")
    if option.startswith("--") and space:
        return f"{_OPTIONS.get(option, option[2:].replace('-', '_'))} {rest}"
    return message


def _span_detail(span: StoredSpan, costs: Mapping[str, int | None]) -> dict[str, Any]:
    cost = costs.get(span.span_id) if sc.COST_USD in span.attributes else None
    return {
        "span": span,
        "duration_s": (span.end_ns - span.start_ns) / 1e9,
        "status": span.data.get("status", {}),
        "attributes": sorted((k, _shown(v)) for k, v in span.attributes.items()),
        "events": [
            {
                "name": str(event.get("name", "")),
                "at_s": (int(event.get("timestamp") or 0) - span.start_ns) / 1e9,
                "attributes": sorted((k, _shown(v)) for k, v in (event.get("attributes") or {}).items()),
            }
            for event in span.data.get("events") or []
        ],
        "cost_usd": None if cost is None else cost / 1_000_000,
    }


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _explained_from_jaeger(jaeger: JaegerSource, ident: str) -> tuple[Explanation, StoredRun | None, list[StoredSpan]]:
    """The run `ident` names (a whole run id or trace id) read whole from Jaeger, explained as the
    store's run is: its explanation, its run row (None: the trace holds no finished run) and the
    spans its page draws (the run's, and those a lost span cut off)."""
    from otel_agents._internal.explain.analysis import explain_spans

    held, run_hint = jaeger.spans_of(ident)
    trace_id = held[0].trace_id
    try:
        explanation = explain_spans([stored_span(s) for s in held], run_hint, where=f"trace {trace_id}")
    except ExplainError as error:
        raise Answer(404, f"{error} (in Jaeger at {jaeger.url})") from None
    run_id = explanation.run.run_id
    if run_id is None:
        return explanation, None, held
    run = next((r for r in map(run_of, held) if r is not None and r.run_id == run_id), None)
    return explanation, run, _with_orphans(run_subtree(run_id, held), held)


def _with_orphans(run: list[StoredSpan], trace: Sequence[StoredSpan]) -> list[StoredSpan]:
    """The run's spans and, where the trace was cut short (a span lost on the way), the spans whose
    parent is not stored, with what descends from them: they may be this run's."""
    stored = {s.span_id for s in trace}
    lost = [s for s in trace if s.parent_span_id and s.parent_span_id not in stored]
    if not lost:
        return run
    kept = {s.span_id for s in run}
    children: dict[str, list[StoredSpan]] = {}
    for span in trace:
        if span.parent_span_id:
            children.setdefault(span.parent_span_id, []).append(span)
    pending = [s for s in lost if s.span_id not in kept]
    extra: list[StoredSpan] = []
    while pending:
        span = pending.pop()
        if span.span_id in kept:
            continue
        kept.add(span.span_id)
        extra.append(span)
        pending += children.get(span.span_id, [])
    return [*run, *extra]


def _run_state(explanation: Explanation, run: StoredRun | None, orphans: int) -> str | None:
    if run is None:
        return (
            "This trace holds no finished run: its run span is not stored (the run is still open, or it was cut "
            "short before its end). What has arrived so far is shown."
        )
    if orphans:
        return (
            f"This trace was cut short: {orphans} span{'s' if orphans != 1 else ''} arrived without "
            "their parent (a span lost on the way); they are drawn at the top level."
        )
    return None


def _context_chart(explanation: Explanation) -> Markup | None:
    points: list[float | None] = [turn.first_input_tokens for turn in explanation.turns]
    if not points or all(p is None for p in points):
        return None
    return charts.line("input tokens of each turn's first call (the context)", points)


def _compare_context_chart(a: Explanation, b: Explanation) -> Markup | None:
    left = [t.first_input_tokens for t in a.turns]
    right = [t.first_input_tokens for t in b.turns]
    if not any(p is not None for p in [*left, *right]):
        return None
    return charts.lines(
        "input tokens of each turn's first call (the context), A and B",
        [
            charts.Series("A", [math.nan if p is None else float(p) for p in left]),
            charts.Series("B", [math.nan if p is None else float(p) for p in right]),
        ],
    )


_DIFFERENCES: Final = (
    ("turns", "tokens"),
    ("messages", "tokens"),
    ("calls", "tokens"),
    ("input_tokens", "tokens"),
    ("output_tokens", "tokens"),
    ("cost_usd", "money"),
    ("duration_s", "seconds"),
)


def _difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """B minus A for each figure both runs have (null where either is unknown)."""
    out: dict[str, Any] = {}
    for key, _ in _DIFFERENCES:
        left, right = a["run"].get(key), b["run"].get(key)
        out[key] = None if left is None or right is None else round(right - left, 6)
    growth_a, growth_b = a["context"].get("growth_tokens_per_turn"), b["context"].get("growth_tokens_per_turn")
    out["growth_tokens_per_turn"] = None if growth_a is None or growth_b is None else round(growth_b - growth_a, 3)
    out["stop_kind_changed"] = a["run"].get("stop_kind") != b["run"].get("stop_kind")
    kinds_a = {f["kind"] for f in a["findings"]}
    kinds_b = {f["kind"] for f in b["findings"]}
    out["findings_only_in_a"] = sorted(kinds_a - kinds_b)
    out["findings_only_in_b"] = sorted(kinds_b - kinds_a)
    return out


def _side_by_side(
    left: Sequence[Mapping[str, Any]], right: Sequence[Mapping[str, Any]], key: str
) -> list[dict[str, Any]]:
    """Rows of A and B matched by `key` (agent name, turn index), with B minus A."""
    by_a = {row[key]: row for row in left}
    by_b = {row[key]: row for row in right}
    rows = []
    for name in list(dict.fromkeys([*by_a, *by_b])):
        ra, rb = by_a.get(name), by_b.get(name)
        tokens_a = None if ra is None else ra["input_tokens"] + ra["output_tokens"]
        tokens_b = None if rb is None else rb["input_tokens"] + rb["output_tokens"]
        cost_a = None if ra is None else ra.get("cost_usd")
        cost_b = None if rb is None else rb.get("cost_usd")
        rows.append(
            {
                "key": name,
                "agent_a": None if ra is None else ra.get("agent"),
                "agent_b": None if rb is None else rb.get("agent"),
                "tokens_a": tokens_a,
                "tokens_b": tokens_b,
                "tokens_diff": None if tokens_a is None or tokens_b is None else tokens_b - tokens_a,
                "cost_a": cost_a,
                "cost_b": cost_b,
                "cost_diff": None if cost_a is None or cost_b is None else round(cost_b - cost_a, 6),
            }
        )
    return rows


def _otlp_json(spans: Sequence[StoredSpan]) -> str:
    """The spans as one OTLP/JSON `ExportTraceServiceRequest` (ids in hex, as the specification asks),
    which `otel-agents explain --file` reads back."""
    from google.protobuf import json_format  # type: ignore[import-untyped]
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_agents._internal.export.replay import readable_span

    message = json_format.MessageToDict(encode_spans([readable_span(s) for s in spans]))
    for resource in message.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for name in ("traceId", "spanId", "parentSpanId"):
                    if span.get(name):
                        span[name] = _hex(span[name])
                for link in span.get("links", []):
                    for name in ("traceId", "spanId"):
                        if link.get(name):
                            link[name] = _hex(link[name])
    return json.dumps(message)


def _hex(value: str) -> str:
    import base64

    return base64.b64decode(value).hex()

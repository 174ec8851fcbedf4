"""The page's runs read from Jaeger's query API (`otel-agents ui --jaeger URL`), as the store's rows.

Jaeger v2's `/api/v3` (OTLP JSON; the reader `explain --jaeger` uses) gives the traces of a time
window per service (`/api/v3/traces?query.service_name=...&query.start_time_min=...`, at most
`SEARCH_DEPTH` of them, newest stored first) and a trace by its id (`/api/v3/traces/{id}`); its
services are `/api/v3/services`. Its HTTP search takes no attributes (Jaeger 2.12's gateway leaves
them empty), so a run id is looked up through the older `/api/traces?service=&tags=` search, whose
trace ids are then read whole through `/api/v3`.

Each span becomes a `StoredSpan` as the store's writer would have stored it (kind, status,
attributes, events, links, resource, scope), each run span a `StoredRun` (its row in the store), so
the run page, its waterfall, explain's analysis and `runs --json`'s rows are drawn by the same code
from either source. A page's requests share one deadline (`for_page`: every Jaeger read of one page
within `timeout_s`, 5 s; `otel-agents ui` takes it from `OTEL_AGENTS_UI_TIMEOUT_S`), each answer is
read whole by that deadline and at most `MAX_ANSWER_BYTES` long (`otel_agents.ui.bounded_get`), and a
page reads at most `MAX_TRACES` traces; every failure is a `JaegerUnavailable` naming the URL and
what went wrong. Ids from Jaeger are checked (32 lowercase hexadecimal digits) before they reach a
URL or a link; what is not one is dropped.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final

from otel_agents._internal import keys as sc
from otel_agents._internal.explain.errors import NotOtlpJson
from otel_agents._internal.explain.otlp_json import (
    attributes_of,
    field_of,
    hex_id,
    nanos,
    read_as_otlp_json,
    scoped_spans,
)
from otel_agents._internal.explain.readers import server_url
from otel_agents._internal.export.store.rows import StoredOutcome, StoredRun, StoredSpan, stored_span
from otel_agents._internal.export.store.schema import stored_text
from otel_agents._internal.report.runs import Listed, RunFilter, run_json
from otel_agents.ui.bounded_get import Unanswered, get

TIMEOUT_S: Final = 5.0
"""The longest one page's reads of Jaeger may take, together."""
SEARCH_DEPTH: Final = 500
"""The most traces one service's search of a window returns (Jaeger's `query.num_traces`)."""
MAX_SERVICES: Final = 50
"""The most services one window is searched over (each a request); the others are said to be skipped."""
MAX_TRACES: Final = 2000
"""The most traces one page's window reads: each service's search asks for at most this many over
the services searched (`SEARCH_DEPTH` each up to 4 services)."""
TRACES_BY_ID: Final = 200
"""The most traces one page reads whole one by one (those a tag search found): the newest found."""
SERVICES_CACHE_S: Final = 30.0
"""How long the services Jaeger knows are kept before they are asked again."""
WORKERS: Final = 8
"""Requests to Jaeger in flight at once."""
LOOKUP_DAYS: Final = 7
"""How far back a run id, or a conversation's runs, are looked up."""
CONVERSATION_RUNS: Final = 50
"""The most traces a conversation's runs are read from, for a run page's list of them."""
MAX_ANSWER_BYTES: Final = 32 * 1024 * 1024
"""The most one answer of Jaeger's is read (memory stays bounded: WORKERS answers at a time)."""
_KINDS: Final = MappingProxyType({0: "INTERNAL", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"})
_KIND_NAMES: Final = MappingProxyType(
    {
        "SPAN_KIND_UNSPECIFIED": "INTERNAL",
        "SPAN_KIND_INTERNAL": "INTERNAL",
        "SPAN_KIND_SERVER": "SERVER",
        "SPAN_KIND_CLIENT": "CLIENT",
        "SPAN_KIND_PRODUCER": "PRODUCER",
        "SPAN_KIND_CONSUMER": "CONSUMER",
    }
)
_STATUS: Final = MappingProxyType({1: "OK", 2: "ERROR", "STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"})
_HEX: Final = frozenset("0123456789abcdef")
JAEGER_OWN: Final = "@jaeger@"
"""The prefix of the attributes Jaeger adds to what it was sent (`@jaeger@warnings`): not the app's."""
_RUN_OPERATIONS: Final = (sc.OPERATION_INVOKE_WORKFLOW, sc.OPERATION_INVOKE_AGENT)


class JaegerUnavailable(Exception):
    """Jaeger could not be asked, or did not answer as its query API does: the message names the URL."""


class NotInJaeger(Exception):
    """Jaeger holds no such trace or run."""


def checked_url(url: str, option: str = "--jaeger") -> str:
    """The base URL of Jaeger's query API (its UI's address), without a trailing slash; ValueError
    naming `option` when it is not one (`bounded_get.server_url`: no credentials either)."""
    return server_url(url, option, "Jaeger's UI or query API")


def is_hex_id(value: str) -> bool:
    """Whether `value` is a whole trace id or run id as the store writes them: 32 lowercase hex digits."""
    return len(value) == 32 and set(value) <= _HEX


def trace_id_of(value: Any) -> str | None:
    """A trace id as Jaeger's `/api/traces` gives it (hex, its leading zeros maybe dropped) as 32
    lowercase hex digits; None when it is not one (dropped, never put in a URL)."""
    if not isinstance(value, str):
        return None
    cleaned = value.strip().lower()
    if not 0 < len(cleaned) <= 32 or not set(cleaned) <= _HEX:
        return None
    return cleaned.rjust(32, "0")


def _rfc3339(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _plain_attributes(items: Any) -> dict[str, Any]:
    return {k: _plain(v) for k, v in attributes_of(items).items()}


def _kind(value: Any) -> str:
    if isinstance(value, int):
        return _KINDS.get(value, "INTERNAL")
    return _KIND_NAMES.get(str(value), "INTERNAL")


def _span(span: Mapping[str, Any], resource: dict[str, Any], scope: Mapping[str, Any]) -> StoredSpan:
    trace_id = hex_id(field_of(span, "traceId", "trace_id"), 16, "trace id")
    span_id = hex_id(field_of(span, "spanId", "span_id"), 8, "span id")
    if trace_id is None or span_id is None:
        raise NotOtlpJson("a span without a trace id or a span id")
    start = nanos(field_of(span, "startTimeUnixNano", "start_time_unix_nano"), "start")
    end = max(nanos(field_of(span, "endTimeUnixNano", "end_time_unix_nano"), "end"), start)
    given_status = span.get("status")
    status: Mapping[str, Any] = given_status if isinstance(given_status, Mapping) else {}
    flags = span.get("flags")
    flag_bits = int(flags) if isinstance(flags, int) or (isinstance(flags, str) and flags.isdigit()) else 0
    events: list[dict[str, Any]] = [
        {
            "name": str(event.get("name", "")),
            "timestamp": nanos(field_of(event, "timeUnixNano", "time_unix_nano"), "event time"),
            "attributes": _plain_attributes(event.get("attributes")),
        }
        for event in span.get("events") or ()
        if isinstance(event, Mapping)
    ]
    events.sort(key=lambda event: int(event["timestamp"]))  # as they happened (Jaeger may reorder them)
    data = {
        "kind": _kind(span.get("kind", 0)),
        "trace_flags": (flag_bits & 0xFF) or 1,  # exported spans were sampled
        "parent_is_remote": bool(flag_bits & 0x100 and flag_bits & 0x200),
        "status": {"code": _STATUS.get(status.get("code"), "UNSET"), "description": status.get("message") or None},
        "attributes": {
            k: v for k, v in _plain_attributes(span.get("attributes")).items() if not k.startswith(JAEGER_OWN)
        },
        "events": events,
        "links": [
            {
                "trace_id": hex_id(field_of(link, "traceId", "trace_id"), 16, "link's trace id"),
                "span_id": hex_id(field_of(link, "spanId", "span_id"), 8, "link's span id"),
                "attributes": _plain_attributes(link.get("attributes")),
            }
            for link in span.get("links") or ()
            if isinstance(link, Mapping)
        ],
        "resource": resource,
        "scope": {"name": str(scope.get("name") or ""), "version": str(scope.get("version") or "")},
    }
    parent = hex_id(field_of(span, "parentSpanId", "parent_span_id"), 8, "parent span id")
    return StoredSpan(trace_id, span_id, parent, str(span.get("name", "")), start, end, data)


def stored_spans(document: Any) -> list[StoredSpan]:
    """The spans of Jaeger's `/api/v3` answer (OTLP JSON) as the store's rows, ordered by start as
    the store reads them. NotOtlpJson when it is not OTLP JSON."""
    out: list[StoredSpan] = []
    resource: Mapping[str, Any] | None = None
    attributes: dict[str, Any] = {}
    with read_as_otlp_json():
        for scoped in scoped_spans(document):
            if scoped.resource is not resource:  # read once, shared by the resource's spans
                resource, attributes = scoped.resource, _plain_attributes(scoped.resource.get("attributes"))
            out.append(_span(scoped.span, attributes, scoped.scope))
    out.sort(key=lambda s: s.start_ns)
    return out


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _number(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_of(span: StoredSpan) -> StoredRun | None:
    """The run a run span is, as the store's writer rows it (None: not a run span, or one whose run
    id is not 32 lowercase hex digits, as otel-agents writes them: it could not be opened)."""
    attributes = span.attributes
    run_id = attributes.get(sc.RUN_ID)
    if attributes.get(sc.GEN_AI_OPERATION_NAME) not in _RUN_OPERATIONS or not isinstance(run_id, str):
        return None
    if not is_hex_id(run_id):
        return None
    return StoredRun(
        run_id=run_id,
        trace_id=span.trace_id,
        team=stored_text(attributes.get(sc.GEN_AI_WORKFLOW_NAME)),
        started_ns=span.start_ns,
        ended_ns=span.end_ns,
        messages=_number(attributes.get(sc.MESSAGE_COUNT)),
        input_tokens=_number(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)),
        output_tokens=_number(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)),
        cost_usd=_number(attributes.get(sc.COST_USD)),
        stop_reason=stored_text(attributes.get(sc.STOP_REASON)),
        stop_kind=stored_text(attributes.get(sc.STOP_KIND)),
        user_id=stored_text(attributes.get(sc.USER_ID)),
        session_id=stored_text(attributes.get(sc.SESSION_ID)),
        conversation_id=stored_text(attributes.get(sc.GEN_AI_CONVERSATION_ID)),
        unknown_calls=_count(attributes.get(sc.USAGE_UNKNOWN_CALLS)),
    )


def outcomes_of(span: StoredSpan, run_id: str) -> list[StoredOutcome]:
    """The outcomes on a run span (its `gen_ai.evaluation.result` events), by name."""
    found: dict[str, StoredOutcome] = {}
    for event in span.data.get("events") or ():
        attributes = event.get("attributes") or {}
        if event.get("name") != sc.GEN_AI_EVALUATION_RESULT_EVENT:
            continue
        name, label = attributes.get(sc.GEN_AI_EVALUATION_NAME), attributes.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
        if isinstance(name, str) and isinstance(label, str) and name not in found:
            score = attributes.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
            found[name] = StoredOutcome(run_id, name, label, score if isinstance(score, int | float) else None)
    return [found[name] for name in sorted(found)]


def summary_of(spans: Sequence[StoredSpan], run_id: str) -> Listed:
    """The run's turns and finding kinds, as the store's writer summarises a run."""
    from otel_agents._internal.explain.analysis import explain_spans

    try:
        explanation = explain_spans([stored_span(s) for s in spans], run_id)
    except Exception:  # as the store's summary: a run that cannot be explained lists no turns
        return Listed(None, ())
    return Listed(explanation.run.turns, tuple(explanation.finding_kinds))


@dataclass(frozen=True)
class Window:
    """The runs of a time window: each a `runs --json` row, with turns and findings."""

    rows: list[dict[str, Any]]
    since_ns: int
    until_ns: int
    cut: list[str] = field(default_factory=list)
    """Services whose search returned its most (`depth`) traces: older ones of the window are not read."""
    services: list[str] = field(default_factory=list)
    searched_by: tuple[str, ...] = ()
    """The filters Jaeger's tag search applied (the others, and these again, applied to the runs read)."""
    depth: int = SEARCH_DEPTH
    """The most traces each service's search asked for (`MAX_TRACES` shared over the services)."""
    skipped_services: list[str] = field(default_factory=list)
    """Services Jaeger knows past the first `MAX_SERVICES`: not searched."""
    unread: int = 0
    """Traces a tag search found that were not read (past `TRACES_BY_ID`, the oldest found)."""


TAG_SEARCH: Final = (("team", sc.GEN_AI_WORKFLOW_NAME), ("user_id", sc.USER_ID), ("stop_kind", sc.STOP_KIND))
"""The filters Jaeger's tag search applies, each as the run span's attribute it matches."""


def tags_of(where: RunFilter) -> dict[str, str]:
    """The tags Jaeger's search takes for `where` (its team, user and stop kind)."""
    return {key: value for name, key in TAG_SEARCH if isinstance(value := getattr(where, name), str)}


def _matches(row: Mapping[str, Any], where: RunFilter) -> bool:
    from otel_agents._internal.report.cost import parse_outcome

    if where.team is not None and row["team"] != where.team:
        return False
    if where.user_id is not None and row["user_id"] != where.user_id:
        return False
    if where.stop_kind is not None and row["stop_kind"] != where.stop_kind:
        return False
    if where.finding is not None and where.finding not in (row.get("findings") or ()):
        return False
    if where.outcome is not None:
        name, label = parse_outcome(where.outcome)
        if not any(o["name"] == name and o["label"] == label for o in row["outcomes"]):
            return False
    if where.conversation is not None and not str(row.get("conversation_id") or "").startswith(where.conversation):
        return False
    return True


def rows_of_trace(spans: Sequence[StoredSpan]) -> list[tuple[StoredRun, dict[str, Any]]]:
    """The runs a trace holds (none: it holds no run), each with its `runs --json` row."""
    out = []
    for span in spans:
        run = run_of(span)
        if run is None:
            continue
        out.append((run, run_json(run, outcomes_of(span, run.run_id), summary=summary_of(spans, run.run_id))))
    return out


class _Services:
    """The services Jaeger knows, kept `SERVICES_CACHE_S` (shared by the copies `for_page` makes)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: list[str] | None = None
        self.asked_at = 0.0


class JaegerSource:
    """Jaeger's query API at `url`, for the services `services` (none given: every service it knows).

    `for_page()` gives the copy one page reads through: its requests share one deadline."""

    def __init__(self, url: str, services: Iterable[str] = (), *, timeout_s: float = TIMEOUT_S) -> None:
        if not 0 < timeout_s <= TIMEOUT_S:
            raise ValueError(f"timeout_s {timeout_s!r}: expected seconds from 0 (exclusive) to {TIMEOUT_S:g}")
        self.url = checked_url(url)
        self.services = tuple(dict.fromkeys(s.strip() for s in services if s.strip()))
        self.timeout_s = timeout_s
        self.deadline: float | None = None
        self._known = _Services()

    def __str__(self) -> str:
        return f"Jaeger at {self.url}"

    def for_page(self) -> JaegerSource:
        """This source for one page: every request it makes ends by `timeout_s` from now."""
        page = copy.copy(self)  # shares the services kept
        page.deadline = time.monotonic() + self.timeout_s
        return page

    # --- asking ------------------------------------------------------------------------------

    def _get(self, path: str, params: Mapping[str, str] | None = None, *, empty_on_404: bool = False) -> Any:
        """Jaeger's JSON answer at `path`; None for a 404 when `empty_on_404` (its "No traces
        found"). JaegerUnavailable naming the URL otherwise."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"{self.url}{path}{query}"
        try:
            answer = get(url, timeout_s=self.timeout_s, max_bytes=MAX_ANSWER_BYTES, deadline=self.deadline)
        except Unanswered as failure:
            if failure.kind == "slow":
                raise JaegerUnavailable(
                    f"Jaeger at {self.url} did not answer {url} within {self.timeout_s:g} s ({failure.reason})"
                ) from None
            if failure.kind == "too_large":
                raise JaegerUnavailable(
                    f"Jaeger at {self.url} answered {url} with more than {MAX_ANSWER_BYTES // 2**20} MiB: narrow "
                    "the window (since, until) or name the services (--service)"
                ) from None
            raise JaegerUnavailable(f"cannot reach Jaeger at {self.url} ({url}): {failure.reason}") from None
        if answer.status != 200:
            if answer.status == 404 and empty_on_404 and _jaeger_error(answer.body) is not None:
                return None
            text = answer.body
            detail = _jaeger_error(text) or " ".join(text.decode("utf-8", "replace").split())[:200]
            raise JaegerUnavailable(f"Jaeger at {self.url} answered {url} with {answer.status}: {detail}")
        try:
            return json.loads(answer.body)
        except ValueError:
            raise JaegerUnavailable(
                f"{url} did not answer with JSON: is {self.url} Jaeger's query API (its UI's address)?"
            ) from None

    def known_services(self) -> list[str]:
        """The services Jaeger knows (`/api/v3/services`), asked at most every `SERVICES_CACHE_S`."""
        kept = self._known
        with kept.lock:
            if kept.known is not None and time.monotonic() - kept.asked_at < SERVICES_CACHE_S:
                return list(kept.known)
        answer = self._get("/api/v3/services")
        services = answer.get("services", []) if isinstance(answer, dict) else None
        if not isinstance(services, list) or not all(isinstance(s, str) for s in services):
            raise JaegerUnavailable(
                f"{self.url}/api/v3/services did not answer with Jaeger's services: is {self.url} Jaeger's query API?"
            )
        known = sorted(services)
        with kept.lock:
            kept.known, kept.asked_at = known, time.monotonic()
        return list(known)

    def _services(self) -> tuple[list[str], list[str]]:
        """The services to search, and those skipped (past `MAX_SERVICES` of those Jaeger knows)."""
        if self.services:
            return list(self.services), []
        known = self.known_services()
        return known[:MAX_SERVICES], known[MAX_SERVICES:]

    def _spans_of(self, answer: Any, url: str) -> list[StoredSpan]:
        try:
            return stored_spans(answer)
        except NotOtlpJson as error:
            raise JaegerUnavailable(
                f"{url} did not answer with OTLP JSON ({error}): is {self.url} Jaeger's query API?"
            ) from None

    def _search(self, service: str, since_ns: int, until_ns: int, depth: int) -> tuple[list[StoredSpan], bool]:
        params = {
            "query.service_name": service,
            "query.start_time_min": _rfc3339(since_ns),
            "query.start_time_max": _rfc3339(until_ns),
            "query.num_traces": str(depth),
        }
        answer = self._get("/api/v3/traces", params, empty_on_404=True)
        if answer is None:
            return [], False
        spans = self._spans_of(answer, f"{self.url}/api/v3/traces")
        return spans, len({s.trace_id for s in spans}) >= depth

    def window(self, since_ns: int, until_ns: int, where: RunFilter | None = None) -> Window:
        """The runs started in [since_ns, until_ns) that `where` matches (filtered on the traces
        read), from every trace of the window that holds a run (at most `MAX_TRACES` read)."""
        where = where if where is not None else RunFilter()
        services, skipped = self._services()
        tags = tags_of(where)
        traces: dict[str, dict[str, StoredSpan]] = {}
        cut = []
        depth = min(SEARCH_DEPTH, max(1, MAX_TRACES // max(len(services), 1)))
        unread = 0
        if services and tags:
            with ThreadPoolExecutor(max_workers=min(WORKERS, len(services))) as pool:
                tagged = list(pool.map(lambda s: self._tagged(s, tags, since_ns, until_ns, depth), services))
            cut = [service for service, (_, full) in zip(services, tagged, strict=True) if full]
            found: dict[str, int] = {}
            for ids, _ in tagged:
                for trace_id, started in ids.items():
                    found[trace_id] = max(started, found.get(trace_id, started))
            newest = sorted(found, key=lambda t: (found[t], t), reverse=True)
            wanted, unread = sorted(newest[:TRACES_BY_ID]), max(len(newest) - TRACES_BY_ID, 0)
            if wanted:
                with ThreadPoolExecutor(max_workers=min(WORKERS, len(wanted))) as pool:
                    for spans in pool.map(self._trace_or_none, wanted):
                        for span in spans:
                            traces.setdefault(span.trace_id, {})[span.span_id] = span
        elif services:
            with ThreadPoolExecutor(max_workers=min(WORKERS, len(services))) as pool:
                searched = list(pool.map(lambda s: self._search(s, since_ns, until_ns, depth), services))
            for service, (spans, full) in zip(services, searched, strict=True):
                if full:
                    cut.append(service)
                for span in spans:  # a trace across services comes once per service: each span once
                    traces.setdefault(span.trace_id, {})[span.span_id] = span
        rows = []
        for spans_by_id in traces.values():
            spans = sorted(spans_by_id.values(), key=lambda s: s.start_ns)
            for run, row in rows_of_trace(spans):
                if since_ns <= run.started_ns < until_ns and _matches(row, where):
                    rows.append(row)
        return Window(
            rows,
            since_ns,
            until_ns,
            cut,
            services,
            tuple(name for name, key in TAG_SEARCH if key in tags),
            depth=depth,
            skipped_services=skipped,
            unread=unread,
        )

    def _tagged(
        self, service: str, tags: Mapping[str, str], since_ns: int, until_ns: int, limit: int = SEARCH_DEPTH
    ) -> tuple[dict[str, int], bool]:
        """The traces of `service` in the window holding a span with every tag of `tags` (Jaeger's
        `/api/traces` tag search; its `/api/v3` search takes no attributes), each id with its newest
        span's start (µs), and whether the search returned its most. An id that is not hex is dropped.

        Its answer holds the traces whole, but in Jaeger's own (v1) JSON model, not OTLP: the traces
        are read again through `/api/v3` (at most `TRACES_BY_ID`) so that one reader makes the
        store's rows, as a run page must equal the store's."""
        params = {
            "service": service,
            "tags": json.dumps(dict(tags)),
            "start": str(since_ns // 1000),
            "end": str(until_ns // 1000 + 1),
            "limit": str(limit),
        }
        answer = self._get("/api/traces", params, empty_on_404=True)
        data = answer.get("data") if isinstance(answer, dict) else None
        if answer is not None and not isinstance(data, list | type(None)):
            raise JaegerUnavailable(f"{self.url}/api/traces did not answer with Jaeger's traces: is it Jaeger?")
        found: dict[str, int] = {}
        for trace in data or ():
            trace_id = trace_id_of(trace.get("traceID")) if isinstance(trace, dict) else None
            if trace_id is None:
                continue
            assert isinstance(trace, dict)
            starts = [
                s["startTime"]
                for s in trace.get("spans") or ()
                if isinstance(s, dict) and isinstance(s.get("startTime"), int)
            ]
            found[trace_id] = max(starts, default=0)
        return found, len(found) >= limit

    def _trace_or_none(self, trace_id: str) -> list[StoredSpan]:
        try:
            return self.trace(trace_id)
        except NotInJaeger:  # gone since the search (Jaeger's memory storage keeps a bounded number)
            return []

    # --- one trace -----------------------------------------------------------------------------

    def trace(self, trace_id: str) -> list[StoredSpan]:
        """The trace's spans, read whole; NotInJaeger when Jaeger has none."""
        if not is_hex_id(trace_id):
            raise NotInJaeger(f"{trace_id!r} is not a trace id (32 lowercase hexadecimal digits)")
        url = f"{self.url}/api/v3/traces/{trace_id}"
        answer = self._get(f"/api/v3/traces/{trace_id}", empty_on_404=True)
        spans = [] if answer is None else self._spans_of(answer, url)
        if not spans:
            raise NotInJaeger(f"no trace {trace_id} in Jaeger at {self.url}")
        return spans

    def trace_of_run(self, run_id: str) -> str | None:
        """The trace holding the run `run_id`, through Jaeger's tag search (`/api/traces`) over the
        services (the last 7 days, as far as Jaeger keeps them); None when none does."""
        if not is_hex_id(run_id):
            return None
        services, _ = self._services()
        if not services:
            return None
        now = time.time_ns()
        since_ns = now - LOOKUP_DAYS * 86_400 * 1_000_000_000
        tags = {sc.RUN_ID: run_id}
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(services))) as pool:
            found = pool.map(lambda s: self._tagged(s, tags, since_ns, now + 60_000_000_000, 2)[0], services)
            ids = set().union(*found)
        return min(ids) if ids else None

    def conversation_runs(self, conversation_id: str, *, within_s: int = LOOKUP_DAYS * 86_400) -> list[StoredRun]:
        """The runs of one conversation (exactly this id) Jaeger holds from the last `within_s`,
        oldest first (at most `CONVERSATION_RUNS`): its tag search, the traces read whole."""
        services, _ = self._services()
        if not services:
            return []
        now = time.time_ns()
        tags = {sc.GEN_AI_CONVERSATION_ID: conversation_id}
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(services))) as pool:
            found = list(
                pool.map(
                    lambda s: self._tagged(s, tags, now - within_s * 1_000_000_000, now, CONVERSATION_RUNS), services
                )
            )
        wanted = sorted(set().union(*(ids for ids, _ in found)))[:CONVERSATION_RUNS]
        runs: dict[str, StoredRun] = {}
        if wanted:
            with ThreadPoolExecutor(max_workers=min(WORKERS, len(wanted))) as pool:
                for spans in pool.map(self._trace_or_none, wanted):
                    for run in map(run_of, spans):
                        if run is not None and run.conversation_id == conversation_id:
                            runs[run.run_id] = run
        return sorted(runs.values(), key=lambda run: run.started_ns)

    def spans_of(self, ident: str) -> tuple[list[StoredSpan], str | None]:
        """The spans of the trace `ident` names (a whole trace id, or a whole run id), and the run to
        show among them (None: the trace's only run). NotInJaeger naming what was looked for."""
        wanted = ident.strip().lower()
        if not is_hex_id(wanted):
            raise NotInJaeger(
                f"{ident!r}: Jaeger looks a run up by its whole run id or trace id (32 hexadecimal digits), "
                "not a prefix"
            )
        try:
            spans = self.trace(wanted)
        except NotInJaeger:
            spans = []
        if spans and any(s.attributes.get(sc.RUN_ID) == wanted for s in spans):
            return spans, wanted
        if spans:
            return spans, None
        trace_id = self.trace_of_run(wanted)
        if trace_id is None:
            raise NotInJaeger(f"no run or trace {wanted} in Jaeger at {self.url}")
        return self.trace(trace_id), wanted


def _jaeger_error(body: bytes) -> str | None:
    """The message of Jaeger's JSON error answer (`{"error": {"message": ...}}`, or v1's
    `{"errors": [{"msg": ...}]}`), None when the body is not one."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    error = answer.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return " ".join(error["message"].split())[:200]
    errors = answer.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        return " ".join(str(errors[0].get("msg", "")).split())[:200]
    if answer.get("data") is None and "errors" in answer:
        return "no such trace"
    return None

"""A stored run's trace as `show` and the web page draw it: its spans depth first, each model call's
share of the run's cost, and the spans as `show --json` and `/api/runs/RUN` give them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from otel_agents._internal import keys as sc
from otel_agents._internal.report.cost import exact_cost, run_micro

if TYPE_CHECKING:
    from otel_agents._internal.export.store.reader import StoredRun, StoredSpan


def tree_order(spans: Sequence[StoredSpan]) -> list[tuple[int, StoredSpan]]:
    """Spans depth first, parents before children, siblings by start: (depth, span)."""
    ids = {s.span_id for s in spans}
    roots: list[StoredSpan] = []
    children: dict[str, list[StoredSpan]] = {}
    for span in sorted(spans, key=lambda s: (s.start_ns, s.end_ns)):
        if span.parent_span_id and span.parent_span_id in ids:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)
    rows: list[tuple[int, StoredSpan]] = []
    pending: list[tuple[int, StoredSpan]] = [(0, root) for root in reversed(roots)]
    while pending:  # iteratively: a trace of 30,000 spans may nest deeper than Python's recursion
        depth, span = pending.pop()
        rows.append((depth, span))
        pending += [(depth + 1, child) for child in reversed(children.get(span.span_id, []))]
    return rows


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def call_costs(spans: Sequence[StoredSpan]) -> dict[str, int | None]:
    """The micro-dollars of each model call (`chat` span) of one run, by span id: the exact sum of
    the run's priced calls rounded once and shared by largest remainder, as `cost` and `explain`
    share it (None: no price, or usage unknown)."""
    from otel_agents._internal.genai.prices import micro_shares

    calls = sorted(
        (s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OPERATION_CHAT),
        key=lambda s: (s.start_ns, s.span_id),
    )
    exact = []
    for call in calls:
        attributes = call.attributes
        tokens_in = _number(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)) or 0
        tokens_out = _number(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)) or 0
        known = sc.GEN_AI_USAGE_INPUT_TOKENS in attributes or sc.ERROR_TYPE in attributes
        exact.append(exact_cost(_number(attributes.get(sc.COST_USD)), tokens_in, tokens_out, known))
    return {call.span_id: share for call, share in zip(calls, micro_shares(exact), strict=True)}


def shown_costs(run: StoredRun, spans: Sequence[StoredSpan]) -> tuple[int | None, dict[str, int | None]]:
    """The run's cost in micro-dollars (its calls' sum, rounded once) and what each span carrying a
    cost shows: each call its share, the run's own span the run's cost."""
    costs = call_costs(spans)
    total = run_micro(run.cost_usd, list(costs.values()))
    for span in spans:
        if span.attributes.get(sc.RUN_ID) == run.run_id:
            costs[span.span_id] = total
    return total, costs


def span_json(span: StoredSpan) -> dict[str, Any]:
    """A span as `show --json` gives it (the web page's `/api/runs/RUN` adds its events)."""
    from otel_agents._internal.explain.model import iso_utc

    return {
        "name": span.name,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "started_at": iso_utc(span.start_ns),
        "duration_s": round((span.end_ns - span.start_ns) / 1e9, 6),
        "status": span.data.get("status", {}).get("code"),
        "attributes": span.attributes,
    }


def failed(span: StoredSpan) -> bool:
    return bool(span.data.get("status", {}).get("code") == "ERROR")

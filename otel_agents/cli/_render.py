"""Terminal rendering of stored runs: the runs table and a trace tree with a waterfall."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from otel_agents._internal import keys as sc
from otel_agents._internal.export.store import StoredRun, StoredSpan

_BAR = 24


def iso_utc(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_json(run: StoredRun) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "trace_id": run.trace_id,
        "team": run.team,
        "started_at": iso_utc(run.started_ns),
        "duration_s": round((run.ended_ns - run.started_ns) / 1e9, 6),
        "messages": run.messages,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "cost_usd": run.cost_usd,
        "stop_reason": run.stop_reason,
        "stop_kind": run.stop_kind,
    }


def money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:.4f}" if value >= 0.01 or value == 0 else f"${value:.6f}"


def runs_table(runs: Sequence[StoredRun]) -> str:
    header = f"{'RUN':<12} {'STARTED (UTC)':<20} {'TEAM':<20} {'DUR':>7} {'MSGS':>5} {'TOKENS':>9} {'COST':>10}  STOP"
    lines = [header]
    for run in runs:
        tokens = (run.input_tokens or 0) + (run.output_tokens or 0)
        lines.append(
            f"{run.run_id[:12]:<12} {iso_utc(run.started_ns)[:19].replace('T', ' '):<20} "
            f"{(run.team or '')[:20]:<20} {(run.ended_ns - run.started_ns) / 1e9:>6.2f}s {run.messages or 0:>5} "
            f"{tokens:>9,} {money(run.cost_usd):>10}  {run.stop_kind or ''}"
        )
    return "\n".join(lines)


def tree_order(spans: Sequence[StoredSpan]) -> list[tuple[str, StoredSpan]]:
    """Spans depth first, parents before children, siblings by start: (tree label, span)."""
    ids = {s.span_id for s in spans}
    roots: list[StoredSpan] = []
    children: dict[str, list[StoredSpan]] = {}
    for span in sorted(spans, key=lambda s: (s.start_ns, s.end_ns)):
        if span.parent_span_id and span.parent_span_id in ids:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)
    rows: list[tuple[str, StoredSpan]] = []

    def walk(span: StoredSpan, prefix: str, last: bool, top: bool) -> None:
        rows.append((span.name if top else f"{prefix}{'└─ ' if last else '├─ '}{span.name}", span))
        kids = children.get(span.span_id, [])
        for i, child in enumerate(kids):
            walk(child, prefix if top else prefix + ("   " if last else "│  "), i == len(kids) - 1, False)

    for root in roots:
        walk(root, "", True, True)
    return rows


def _bar(span: StoredSpan, start: int, total: int) -> str:
    if total <= 0:
        return "█".ljust(_BAR)
    left = min(_BAR - 1, int((span.start_ns - start) / total * _BAR))
    width = max(1, round((span.end_ns - span.start_ns) / total * _BAR))
    return (" " * left + "█" * min(width, _BAR - left)).ljust(_BAR)


def _details(span: StoredSpan) -> str:
    attributes = span.attributes
    parts: list[str] = []
    agent = attributes.get(sc.GEN_AI_AGENT_NAME)
    if agent:
        parts.append(str(agent))
    tokens_in, tokens_out = (
        attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS),
        attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    )
    if tokens_in is not None or tokens_out is not None:
        parts.append(f"{tokens_in or 0:,} in / {tokens_out or 0:,} out")
    cost = attributes.get(sc.COST_USD)
    if cost is not None:
        parts.append(money(float(cost)))
    if span.data.get("status", {}).get("code") == "ERROR":
        parts.append(f"ERROR {attributes.get(sc.ERROR_TYPE, '')}".rstrip())
    return "  ".join(parts)


def trace_tree(run: StoredRun, spans: Sequence[StoredSpan]) -> str:
    """The trace as a tree: name, waterfall bar, duration, then agent, tokens and cost per span."""
    start = min((s.start_ns for s in spans), default=run.started_ns)
    end = max((s.end_ns for s in spans), default=run.ended_ns)
    rows = tree_order(spans)
    width = min(60, max((len(label) for label, _ in rows), default=10))
    head = (
        f"run {run.run_id}  trace {run.trace_id}\n"
        f"{run.team or ''}: {run.messages or 0} messages, "
        f"{run.input_tokens or 0:,} in / {run.output_tokens or 0:,} out, "
        f"cost {money(run.cost_usd)}, stopped: {run.stop_reason or run.stop_kind or '-'}"
    )
    lines = [head, ""]
    for label, span in rows:
        shown = label if len(label) <= width else label[: width - 1] + "…"
        duration = (span.end_ns - span.start_ns) / 1e9
        lines.append(f"{shown:<{width}}  {_bar(span, start, end - start)} {duration:>8.3f}s  {_details(span)}".rstrip())
    return "\n".join(lines)


def trace_json(run: StoredRun, spans: Sequence[StoredSpan]) -> dict[str, Any]:
    return {
        "run": run_json(run),
        "spans": [
            {
                "name": s.name,
                "span_id": s.span_id,
                "parent_span_id": s.parent_span_id,
                "started_at": iso_utc(s.start_ns),
                "duration_s": round((s.end_ns - s.start_ns) / 1e9, 6),
                "status": s.data.get("status", {}).get("code"),
                "attributes": s.attributes,
            }
            for _, s in tree_order(spans)
        ],
    }

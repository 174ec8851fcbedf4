"""A stored run's summary: what `runs`, `cost` and the web page list and total runs by, so that
they read no span. Per run (`run_summaries`): its turns and the kinds of its findings, as `explain`
finds them with the default thresholds, and what it puts into `cost`'s rows by team, user,
conversation and day (`usage.run_usages`); per run and (model, agent) (`run_calls`): what its model
calls put into the rows by model and agent (`usage.call_usages`, summed).

The store's writer summarises a run in the transaction that writes its run row, over the run's
spans as the store holds them then (the run span usually arrives with or after its children), and
again when spans of its time arrive later; runs stored before summaries existed are summarised by
the next writers, a bounded number at a time. A reader computes a missing summary in memory
(`Store`), never writing it. One computation for both: `summarise`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from otel_agents._internal.export.store.rows import StoredRun, calls_of, span_rows, stored_span
from otel_agents._internal.export.store.schema import RUN_COLUMNS
from otel_agents._internal.export.store.usage import Usage, call_usages, run_usages

SUMMARY_COLUMNS: Final = "run_id, turns, findings, micro_usd, unpriced_calls, unpriced_tokens, unknown_usage_calls"
CALL_COLUMNS: Final = (
    "run_id, model, agent, calls, input_tokens, output_tokens, micro_usd, unpriced_calls, unpriced_tokens, "
    "unknown_usage_calls"
)


@dataclass
class Summaries:
    """Rows for `run_summaries` and `run_calls`."""

    runs: list[tuple[Any, ...]] = field(default_factory=list)
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def insert(self, connection: sqlite3.Connection, schema: str = "main") -> None:
        """Replace the summaries of these runs in `schema`'s tables (`main`, or a reader's `temp`)."""
        ids = [(row[0],) for row in self.runs]
        connection.executemany(f"DELETE FROM {schema}.run_summaries WHERE run_id = ?", ids)
        connection.executemany(f"DELETE FROM {schema}.run_calls WHERE run_id = ?", ids)
        connection.executemany(f"INSERT INTO {schema}.run_summaries VALUES ({', '.join('?' * 7)})", self.runs)
        connection.executemany(f"INSERT INTO {schema}.run_calls VALUES ({', '.join('?' * 10)})", self.calls)


def _explained(spans: list[Any], run_id: str) -> tuple[int | None, list[str]]:
    """The run's turns and finding kinds (None and none when it cannot be explained)."""
    from otel_agents._internal.explain.analysis import explain_spans

    try:
        explanation = explain_spans(spans, run_id)
    except Exception:  # a summary never fails a write: the list shows no turns for it
        return None, []
    return explanation.run.turns, explanation.finding_kinds


def _per_model_and_agent(run_id: str, calls: list[Any]) -> list[tuple[Any, ...]]:
    groups: dict[tuple[str | None, str | None], list[Usage]] = {}
    for call, usage in zip(calls, call_usages(calls), strict=True):
        groups.setdefault((call.model, call.agent), []).append(usage)
    rows = []
    for (model, agent), usages in groups.items():
        priced = [u.micro_usd for u in usages if u.micro_usd is not None]
        rows.append(
            (
                run_id,
                model,
                agent,
                len(usages),
                sum(u.input_tokens for u in usages),
                sum(u.output_tokens for u in usages),
                sum(priced) if priced else None,
                sum(u.unpriced_calls for u in usages),
                sum(u.unpriced_tokens for u in usages),
                sum(u.unknown_usage_calls for u in usages),
            )
        )
    return rows


def summarise(connection: sqlite3.Connection, run_ids: Iterable[str]) -> Summaries:
    """The summaries of `run_ids` from the `runs` and `spans` tables `connection` reads (each trace
    read once)."""
    wanted = list(dict.fromkeys(run_ids))
    runs: list[StoredRun] = []
    for at in range(0, len(wanted), 500):  # SQLite's bound on parameters, with room
        part = wanted[at : at + 500]
        query = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id IN ({', '.join('?' * len(part))})"
        runs += [StoredRun(*row) for row in connection.execute(query, part)]
    by_trace: dict[str, list[StoredRun]] = {}
    for run in runs:
        by_trace.setdefault(run.trace_id, []).append(run)
    out = Summaries()
    for trace_id, of_trace in by_trace.items():
        rows = connection.execute("SELECT * FROM spans WHERE trace_id = ? ORDER BY start_ns", (trace_id,)).fetchall()
        stored = span_rows(rows)
        ids: Collection[str] = {run.run_id for run in of_trace}
        calls = calls_of(((s.span_id, s.parent_span_id, s.name, s.data) for s in stored), ids)
        spans = [stored_span(s) for s in stored]
        for run in of_trace:
            own = [c for c in calls if c.run_id == run.run_id]
            (usage,) = run_usages([run], own)
            turns, kinds = _explained(spans, run.run_id)
            out.runs.append(
                (
                    run.run_id,
                    turns,
                    json.dumps(kinds),
                    usage.micro_usd,
                    usage.unpriced_calls,
                    usage.unpriced_tokens,
                    usage.unknown_usage_calls,
                )
            )
            out.calls += _per_model_and_agent(run.run_id, own)
    return out

"""`otel-agents explain RUN --json` from the store, as the CLI prints it and the web page shows it:
the run's trace read from the store, explained, with the outcomes the store holds for it merged in
(those recorded after the run ended as well)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from otel_agents._internal.explain.findings import Thresholds
    from otel_agents._internal.explain.model import Explanation
    from otel_agents._internal.export.store.reader import Store, StoredSpan


def explain_stored(
    store: Store, ident: str, thresholds: Thresholds | None = None, *, run: str | None = None
) -> Explanation:
    """The explanation of the stored run `ident` names (a run id, a unique prefix of one, or a trace
    id; `run`: the run, when that trace holds several). ExplainError (RunNotFound, SeveralRuns,
    NotARun) when there is none such; StoreError when the store cannot be read."""
    return explain_stored_with_spans(store, ident, thresholds, run=run)[0]


def explain_stored_with_spans(
    store: Store, ident: str, thresholds: Thresholds | None = None, *, run: str | None = None
) -> tuple[Explanation, list[StoredSpan]]:
    """`explain_stored`, and the spans of the trace it explained as the store holds them (read once)."""
    from otel_agents._internal.explain.analysis import explain_spans
    from otel_agents._internal.export.store.explained import read_stored

    read, held = read_stored(store, ident)
    if run is not None:
        read = replace(read, run=run)
    explanation = explain_spans(read.spans, read.run, thresholds, where=read.where)
    if explanation.run.run_id is None:
        return explanation, held
    return with_stored_outcomes(explanation, store), held


def with_stored_outcomes(explanation: Explanation, store: Store) -> Explanation:
    """The run's outcomes as the store has them: those recorded after it ended as well."""
    run = explanation.run
    stored = store.outcomes([run.run_id or ""]).get(run.run_id or "", [])
    merged = {name: (name, label, score) for name, label, score in run.outcomes}
    merged.update({o.name: (o.name, o.label, o.score) for o in stored})
    outcomes = tuple(merged[name] for name in sorted(merged))
    return replace(explanation, run=replace(run, outcomes=outcomes))

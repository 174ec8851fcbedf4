"""The store's rows as the readers and the writer's summaries read them: a run, an outcome, a model
call, a span; and the model calls of a trace's runs, each in the run it descends from."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from otel_agents._internal import keys as sc
from otel_agents._internal.explain.model import Span, SpanEvent
from otel_agents._internal.explain.readers import plain_attributes
from otel_agents._internal.export.store.schema import stored_text


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    trace_id: str
    team: str | None
    started_ns: int
    ended_ns: int
    messages: int | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    stop_reason: str | None
    stop_kind: str | None
    user_id: str | None = None
    session_id: str | None = None
    conversation_id: str | None = None
    unknown_calls: int | None = None
    """Model calls whose client reported no usage: then the cost is unknown and the tokens a lower bound."""


@dataclass(frozen=True)
class StoredOutcome:
    """An outcome of a stored run (`record_outcome`, `configure(outcome=...)`)."""

    run_id: str
    name: str
    label: str
    score: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "score": self.score}


@dataclass(frozen=True)
class StoredCall:
    """One model call (a `chat` span) of a stored run."""

    run_id: str
    model: str | None
    agent: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    usage_known: bool = True
    """False: the client reported no usage (a stream without usage): its tokens and cost are unknown."""


@dataclass(frozen=True)
class StoredSpan:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    data: dict[str, Any]

    @property
    def attributes(self) -> dict[str, Any]:
        attributes: dict[str, Any] = self.data.get("attributes", {})
        return attributes


def _owning_run(span_id: str, parent_of: dict[str, str | None], run_of_span: dict[str, str]) -> str | None:
    """The run whose span `span_id` descends from (the nearest one), if any."""
    seen = 0
    current: str | None = span_id
    while current is not None and seen < 10_000:
        if current in run_of_span:
            return run_of_span[current]
        current = parent_of.get(current)
        seen += 1
    return None


def run_subtree(run_id: str, spans: Sequence[StoredSpan]) -> list[StoredSpan]:
    """The spans of one run: its run span and what descends from it (a trace may hold several runs
    started under one app span)."""
    roots = [s.span_id for s in spans if s.attributes.get(sc.RUN_ID) == run_id]
    if not roots:
        return list(spans)
    children: dict[str | None, list[StoredSpan]] = {}
    for span in spans:
        children.setdefault(span.parent_span_id, []).append(span)
    keep = {roots[0]}
    pending = [roots[0]]
    while pending:
        for child in children.get(pending.pop(), []):
            if child.span_id not in keep:
                keep.add(child.span_id)
                pending.append(child.span_id)
    return [s for s in spans if s.span_id in keep]


def _number(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def calls_of(
    rows: Iterable[tuple[str, str | None, str, str | dict[str, Any]]], runs: Collection[str] | None = None
) -> list[StoredCall]:
    """The model calls (`chat` spans) among `rows` (span id, parent span id, name, data as stored or
    as parsed), in
    the order given, each counted in the run whose span it descends from (runs started under one app
    span share a trace: a call belongs to one of them only); `runs`: only the calls of these runs."""
    parent_of: dict[str, str | None] = {}
    run_of_span: dict[str, str] = {}
    chats: list[tuple[str, dict[str, Any]]] = []
    for span_id, parent_id, name, data in rows:
        parent_of[span_id] = parent_id
        attributes = (json.loads(data) if isinstance(data, str) else data).get("attributes", {})
        if isinstance(attributes.get(sc.RUN_ID), str):
            run_of_span[span_id] = attributes[sc.RUN_ID]
        if name == "chat" or name.startswith("chat "):
            chats.append((span_id, attributes))
    calls: list[StoredCall] = []
    for span_id, attributes in chats:
        run_id = _owning_run(span_id, parent_of, run_of_span)
        if run_id is None or (runs is not None and run_id not in runs):
            continue
        if attributes.get(sc.GEN_AI_OPERATION_NAME) != sc.OPERATION_CHAT:
            continue
        cost = attributes.get(sc.COST_USD)
        calls.append(
            StoredCall(
                run_id=run_id,
                model=stored_text(attributes.get(sc.GEN_AI_RESPONSE_MODEL))
                or stored_text(attributes.get(sc.GEN_AI_REQUEST_MODEL)),
                agent=stored_text(attributes.get(sc.GEN_AI_AGENT_NAME)),
                input_tokens=_number(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)),
                output_tokens=_number(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)),
                cost_usd=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
                usage_known=sc.GEN_AI_USAGE_INPUT_TOKENS in attributes or sc.ERROR_TYPE in attributes,
            )
        )
    return calls


def stored_span(stored: StoredSpan) -> Span:
    """A stored span as `explain` reads spans."""
    data = stored.data
    status = data.get("status") or {}
    return Span(
        name=stored.name,
        trace_id=stored.trace_id,
        span_id=stored.span_id,
        parent_id=stored.parent_span_id or None,
        start_ns=stored.start_ns,
        end_ns=stored.end_ns,
        attributes=plain_attributes(stored.attributes),
        events=tuple(
            SpanEvent(str(e.get("name", "")), int(e.get("timestamp") or 0), plain_attributes(e.get("attributes")))
            for e in data.get("events") or ()
        ),
        status=str(status.get("code") or "UNSET"),
    )


def span_rows(rows: Iterable[Sequence[Any]]) -> list[StoredSpan]:
    """`SELECT * FROM spans` rows as spans."""
    return [StoredSpan(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6])) for row in rows]

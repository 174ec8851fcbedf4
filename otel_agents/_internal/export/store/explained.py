"""A stored run read back as `explain` reads it: its spans as the analysis's `Span`s (only the run's
trace is read), and, for the store's writer, the summary of a run that `runs`, `cost` and the web
page list runs by (its turns and the kinds of its findings)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_agents._internal.explain.errors import RunNotFound
from otel_agents._internal.explain.model import Span, SpanEvent
from otel_agents._internal.explain.readers import Read, is_trace_id, plain_attributes

if TYPE_CHECKING:
    from otel_agents._internal.export.store.reader import Store, StoredSpan


def stored_span(stored: StoredSpan) -> Span:
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


def read_store(store: Store, ident: str) -> Read:
    """The trace of the run `ident` names (a run id or a unique prefix of one), or the trace `ident`
    is the id of: only that trace's spans are read."""
    from otel_agents._internal.export.store.reader import RunNotFound as NotInStore

    wanted = ident.strip().lower()
    try:
        run = store.find_run(ident)
    except NotInStore as error:
        if is_trace_id(wanted):
            spans = [stored_span(s) for s in store.spans(wanted)]
            if spans:
                return Read(spans, None, f"trace {wanted}")
            raise RunNotFound(f"no run or trace {ident!r} in the store at {store.directory}") from None
        raise RunNotFound(str(error)) from None
    spans = [stored_span(s) for s in store.spans(run.trace_id)]
    if not spans:
        raise RunNotFound(f"run {run.run_id} is listed in the store at {store.directory}, but its spans are not")
    return Read(spans, run.run_id, f"trace {run.trace_id}")

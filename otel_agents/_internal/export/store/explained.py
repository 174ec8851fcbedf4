"""A stored run read back as `explain` reads it: its spans as the analysis's `Span`s (only the run's
trace is read)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_agents._internal.explain.errors import RunNotFound
from otel_agents._internal.explain.readers import Read, is_trace_id
from otel_agents._internal.export.store.rows import stored_span

if TYPE_CHECKING:
    from otel_agents._internal.export.store.reader import Store, StoredSpan

__all__ = ["read_store", "read_stored", "stored_span"]


def read_store(store: Store, ident: str) -> Read:
    """The trace of the run `ident` names (a run id or a unique prefix of one), or the trace `ident`
    is the id of: only that trace's spans are read."""
    return read_stored(store, ident)[0]


def read_stored(store: Store, ident: str) -> tuple[Read, list[StoredSpan]]:
    """`read_store`, and the trace's spans as the store holds them (read once, for a reader that
    shows them too)."""
    from otel_agents._internal.export.store.reader import RunNotFound as NotInStore

    wanted = ident.strip().lower()
    try:
        run = store.find_run(ident)
    except NotInStore as error:
        if is_trace_id(wanted):
            held = store.spans(wanted)
            if held:
                return Read([stored_span(s) for s in held], None, f"trace {wanted}"), held
            raise RunNotFound(f"no run or trace {ident!r} in the store at {store.directory}") from None
        raise RunNotFound(str(error)) from None
    held = store.spans(run.trace_id)
    if not held:
        raise RunNotFound(f"run {run.run_id} is listed in the store at {store.directory}, but its spans are not")
    return Read([stored_span(s) for s in held], run.run_id, f"trace {run.trace_id}"), held

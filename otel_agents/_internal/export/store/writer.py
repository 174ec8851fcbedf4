"""Writing the store: finished spans encoded as rows (a run span also as a `runs` row, with its
summary), the size limit kept by dropping whole traces, oldest first; the exporter the app's
pipeline writes through, which drops and counts the spans of a store it cannot write, and never
raises into the run."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_agents._internal import keys as sc
from otel_agents._internal import process_state
from otel_agents._internal.export.fork import HeldAcrossForks
from otel_agents._internal.export.scrub import encodable
from otel_agents._internal.export.store.schema import (
    ADDED_IN_1,
    ADDED_IN_2,
    RUN_COLUMNS,
    StoreFile,
    StoreVersionError,
    is_damage,
    move_damaged_aside,
    stored_text,
)
from otel_agents._internal.export.store.summary import summarise
from otel_agents._internal.export.store_path import unwritable

logger = logging.getLogger(__name__)


SUMMARIES_A_WRITE: Final = 200
"""Runs stored before summaries existed that one write summarises at most (newest first)..."""
SUMMARY_SECONDS_A_WRITE: Final = 0.5
"""... and for this long at most, past the first (so an export never stalls long on old runs)."""
ORPHAN_OUTCOME_NS: Final = 3600 * 1_000_000_000
"""An outcome whose run the store does not hold an hour after it was recorded goes at the next trim."""


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _encode(span: ReadableSpan) -> tuple[Any, ...]:
    context = span.context
    assert context is not None
    parent = span.parent.span_id if span.parent is not None else None
    data = {
        "kind": span.kind.name,
        "trace_flags": int(context.trace_flags),
        "parent_is_remote": bool(span.parent.is_remote) if span.parent is not None else False,
        "status": {"code": span.status.status_code.name, "description": span.status.description},
        "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
        "events": [
            {
                "name": e.name,
                "timestamp": e.timestamp,
                "attributes": {k: _plain(v) for k, v in (e.attributes or {}).items()},
            }
            for e in span.events
        ],
        "links": [
            {
                "trace_id": _hex(link.context.trace_id, 32),
                "span_id": _hex(link.context.span_id, 16),
                "attributes": {k: _plain(v) for k, v in (link.attributes or {}).items()},
            }
            for link in span.links
        ],
        "resource": {k: _plain(v) for k, v in span.resource.attributes.items()},
        "scope": {
            "name": span.instrumentation_scope.name if span.instrumentation_scope else "",
            "version": span.instrumentation_scope.version if span.instrumentation_scope else None,
        },
    }
    return (
        _hex(context.trace_id, 32),
        _hex(context.span_id, 16),
        _hex(parent, 16) if parent is not None else None,
        span.name,
        span.start_time or 0,
        span.end_time or span.start_time or 0,
        json.dumps(data, separators=(",", ":"), default=str),
    )


_RUN_OPERATIONS: Final = (sc.OPERATION_INVOKE_WORKFLOW, sc.OPERATION_INVOKE_AGENT)
"""A run's root: a team's or an agent's run (`invoke_workflow`), an agent's `on_messages` (`invoke_agent`)."""


def _run_row(span: ReadableSpan) -> tuple[Any, ...] | None:
    attributes = span.attributes or {}
    run_id = attributes.get(sc.RUN_ID)
    if attributes.get(sc.GEN_AI_OPERATION_NAME) not in _RUN_OPERATIONS or not run_id:
        return None
    assert span.context is not None
    return (
        run_id,
        _hex(span.context.trace_id, 32),
        attributes.get(sc.GEN_AI_WORKFLOW_NAME),
        span.start_time or 0,
        span.end_time or 0,
        attributes.get(sc.MESSAGE_COUNT),
        attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS),
        attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS),
        attributes.get(sc.COST_USD),
        attributes.get(sc.STOP_REASON),
        attributes.get(sc.STOP_KIND),
        *(stored_text(attributes.get(key)) for _, key in ADDED_IN_1),
        *(_count(attributes.get(key)) for _, key in ADDED_IN_2),
    )


def _outcome_rows(span: ReadableSpan, run: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The outcomes on a run's span (`gen_ai.evaluation.result` events): (run id, name, label,
    score, when)."""
    rows = []
    for event in span.events:
        attributes = event.attributes or {}
        if event.name != sc.GEN_AI_EVALUATION_RESULT_EVENT:
            continue
        name, label = attributes.get(sc.GEN_AI_EVALUATION_NAME), attributes.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
        if isinstance(name, str) and isinstance(label, str):
            score = attributes.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
            rows.append((run[0], name, label, score if isinstance(score, int | float) else None, event.timestamp))
    return rows


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


_outcome_writes = HeldAcrossForks()
"""Held while an outcome recorded after its run's end is written (`StoreWriter.write_outcome`,
outside any exporter): a fork waits for it, as for the store exporter's write."""
process_state.hold(
    __name__,
    "_outcome_writes",
    bound="one lock, held while an outcome is written",
    size=lambda: int(_outcome_writes.lock.locked()),
    forget=None,  # a lock: nothing to forget
)


class StoreWriter(StoreFile):
    """Writes spans to the store directory."""

    def __init__(self, directory: Path | str, *, max_bytes: int | None = None) -> None:
        super().__init__(directory, max_bytes=max_bytes)
        self._all_summarised = False
        """Every stored run has its summary (runs stored since have theirs from their write)."""

    def settle(self) -> None:
        """Open and close the store as a writer: the last connection to close folds the write-ahead
        log into the database file and removes the `-wal` and `-shm` files a reader left."""
        with self._connect(create=True):
            pass

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        """Write `spans` (their runs too). A damaged store file is moved aside and the batch written
        to a fresh store in its place: later runs are not dropped with it."""
        spans = [encodable(span) for span in spans]  # SQLite refuses a lone surrogate as the CLI prints it
        rows = [_encode(span) for span in spans]
        runs, outcomes = [], []
        for span in spans:
            run = _run_row(span)
            if run is not None:
                runs.append(run)
                outcomes += _outcome_rows(span, run)
        try:
            self._write(rows, runs, outcomes)
        except sqlite3.DatabaseError as error:
            if not is_damage(error):
                raise
            moved = move_damaged_aside(self.directory)
            if moved is not None:
                logger.warning(
                    "otel-agents: the store file %s is damaged (%s): moved it to %s and started a fresh store",
                    self.path,
                    error,
                    moved,
                )
            self._write(rows, runs, outcomes)

    def write_outcome(self, run_id: str, name: str, label: str, score: float | None) -> bool:
        """Store an outcome recorded after its run ended; False when the run has one of that name
        already (recorded by another process, say)."""
        with _outcome_writes, self._connect(create=True) as connection:
            cursor = connection.execute(
                "INSERT OR IGNORE INTO outcomes VALUES (?, ?, ?, ?, ?)", (run_id, name, label, score, time.time_ns())
            )
            return cursor.rowcount == 1

    def _write(self, rows: list[tuple[Any, ...]], runs: list[tuple[Any, ...]], outcomes: list[tuple[Any, ...]]) -> None:
        with self._connect(create=True) as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany("INSERT OR REPLACE INTO spans VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                connection.executemany(
                    f"INSERT OR REPLACE INTO runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * 15)})", runs
                )
                connection.executemany("INSERT OR IGNORE INTO outcomes VALUES (?, ?, ?, ?, ?)", outcomes)
                summarise(connection, self._touched(connection, rows, runs)).insert(connection)
                self._summarise_older(connection)
                self._trim(connection)
                connection.execute("COMMIT")
            except BaseException:
                try:
                    connection.execute("ROLLBACK")
                except sqlite3.Error:  # no transaction left (a damaged file): the first error tells
                    pass
                raise

    @staticmethod
    def _touched(connection: sqlite3.Connection, rows: list[tuple[Any, ...]], runs: list[tuple[Any, ...]]) -> list[str]:
        """The runs whose summary this batch changes: the runs it holds, and stored runs of its
        traces that spans of this batch fall within in time (late spans of an ended run)."""
        touched = [run[0] for run in runs]
        spans_of: dict[str, tuple[int, int]] = {}
        for row in rows:
            trace_id, start = row[0], row[4]
            low, high = spans_of.get(trace_id, (start, start))
            spans_of[trace_id] = (min(low, start), max(high, start))
        for trace_id, (low, high) in spans_of.items():
            touched += [
                run_id
                for (run_id,) in connection.execute(
                    "SELECT run_id FROM runs WHERE trace_id = ? AND started_ns <= ? AND ended_ns >= ?",
                    (trace_id, high, low),
                )
            ]
        return list(dict.fromkeys(touched))

    def _summarise_older(self, connection: sqlite3.Connection) -> None:
        """Summarise some of the runs stored before summaries existed (a store of schema version 3
        or older, migrated), newest first: at most `SUMMARIES_A_WRITE`, for
        `SUMMARY_SECONDS_A_WRITE` at most after the first."""
        if self._all_summarised:
            return
        missing = [
            run_id
            for (run_id,) in connection.execute(
                "SELECT run_id FROM runs WHERE run_id NOT IN (SELECT run_id FROM run_summaries) "
                "ORDER BY started_ns DESC LIMIT ?",
                (SUMMARIES_A_WRITE,),
            )
        ]
        if not missing:
            self._all_summarised = True
            return
        deadline = time.monotonic() + SUMMARY_SECONDS_A_WRITE
        for at in range(0, len(missing), 10):
            summarise(connection, missing[at : at + 10]).insert(connection)
            if time.monotonic() >= deadline:
                return

    def _used_bytes(self, connection: sqlite3.Connection) -> int:
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * page_size)

    def _trim(self, connection: sqlite3.Connection) -> None:
        """Drop whole traces, oldest first, until the data fits the size limit."""
        if self.max_bytes is None:
            return
        trimmed = False
        while self._used_bytes(connection) > self.max_bytes:
            oldest = connection.execute("SELECT trace_id FROM spans ORDER BY start_ns LIMIT 1").fetchone()
            if oldest is None:
                break
            trimmed = True
            connection.execute("DELETE FROM spans WHERE trace_id = ?", oldest)
            for table in ("outcomes", "run_summaries", "run_calls"):
                connection.execute(
                    f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM runs WHERE trace_id = ?)", oldest
                )
            connection.execute("DELETE FROM runs WHERE trace_id = ?", oldest)
        if not trimmed:
            return
        # with the oldest runs, outcomes of runs the store never got, an hour after they were recorded
        stale = time.time_ns() - ORPHAN_OUTCOME_NS
        connection.execute(
            "DELETE FROM outcomes WHERE recorded_ns < ? AND run_id NOT IN (SELECT run_id FROM runs)", (stale,)
        )


class StoreSpanExporter(SpanExporter):
    """Writes finished spans to the embedded store; drops and counts them when it cannot.

    It says nothing itself: while it cannot write, `failure` says why, and the pipeline's outage
    warning (one per outage) gives that reason."""

    def __init__(self, directory: Path | str, *, max_bytes: int | None = None) -> None:
        # what summarising a run imports, imported now and not at the first write: that may come as
        # the app exits on Ctrl-C, and an import then (its dataclasses run `exec`) makes CPython
        # forget the KeyboardInterrupt, so the app exits with status 1 instead of by SIGINT
        import otel_agents._internal.explain.analysis  # noqa: F401

        self.store = StoreWriter(directory, max_bytes=max_bytes)
        self._lock = HeldAcrossForks()
        """Held by each write, and across each fork (a fork waits for the write under way: the
        child writes with connections of its own)."""
        self.dropped_spans = 0
        self.failure: str | None = None
        """Why the last batch could not be written (None: it was)."""
        self._shut_down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shut_down:
            self.dropped_spans += len(spans)
            return SpanExportResult.FAILURE
        with self._lock:
            try:
                self.store.write(spans)
            except Exception as error:  # never into the run: counted, and told by the pipeline
                self.dropped_spans += len(spans)
                self.failure = self._why_not_written(error)
                return SpanExportResult.FAILURE
            self.failure = None
            return SpanExportResult.SUCCESS

    def _why_not_written(self, error: Exception) -> str:
        if isinstance(error, StoreVersionError):
            return f"cannot write to the store at {self.store.directory}: {error}"
        problem = unwritable(self.store.directory)
        if problem is not None:
            return problem
        if isinstance(error, (OSError, sqlite3.Error)):  # a path, or SQLite's words: no user content
            return f"cannot write to the store at {self.store.directory}: {type(error).__name__}: {error}"
        return f"cannot write to the store at {self.store.directory}: {type(error).__name__}"

    def shutdown(self) -> None:
        self._shut_down = True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

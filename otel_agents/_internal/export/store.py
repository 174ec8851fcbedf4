"""The embedded store: finished spans in a local SQLite database, read back by the CLI.

One file, `spans.sqlite3`, in the store directory (created readable by its owner only). WAL mode
and a busy timeout let several processes write at once. Spans keep their original trace and span
ids and timestamps, so `otel-agents export` can replay them to any OTLP endpoint later. The store
stays under its size limit by dropping whole traces, oldest first. A store that cannot be written
drops the spans, counts them and logs; it never raises into the run.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_agents._internal import keys as sc

logger = logging.getLogger(__name__)

DATABASE: Final = "spans.sqlite3"

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS spans (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_span_id TEXT,
    name TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS spans_by_start ON spans (start_ns);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    trace_id TEXT NOT NULL,
    team TEXT,
    started_ns INTEGER NOT NULL,
    ended_ns INTEGER NOT NULL,
    messages INTEGER,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost_usd REAL,
    stop_reason TEXT,
    stop_kind TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_ns);
CREATE INDEX IF NOT EXISTS runs_by_trace ON runs (trace_id);
"""


class StoreError(Exception):
    """The store cannot be read, or a run is not in it."""


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


def _run_row(span: ReadableSpan) -> tuple[Any, ...] | None:
    attributes = span.attributes or {}
    run_id = attributes.get(sc.RUN_ID)
    if attributes.get(sc.GEN_AI_OPERATION_NAME) != sc.OPERATION_INVOKE_WORKFLOW or not run_id:
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
    )


class Store:
    """The store directory: write spans, read runs and traces back."""

    def __init__(self, directory: Path | str, *, max_bytes: int | None = None) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DATABASE
        self.max_bytes = max_bytes

    @contextmanager
    def _connect(self, *, create: bool) -> Iterator[sqlite3.Connection]:
        if create:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not self.path.exists():
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        elif not self.path.is_file():
            raise FileNotFoundError(self.path)
        with closing(sqlite3.connect(self.path, timeout=10, isolation_level=None)) as connection:
            connection.execute("PRAGMA busy_timeout = 10000")
            if create:
                connection.execute("PRAGMA journal_mode = WAL")
                connection.executescript(_SCHEMA)
            yield connection

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        rows = [_encode(span) for span in spans]
        runs = [row for row in (_run_row(span) for span in spans) if row is not None]
        with self._connect(create=True) as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany("INSERT OR REPLACE INTO spans VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                connection.executemany("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)
                self._trim(connection)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise

    def _used_bytes(self, connection: sqlite3.Connection) -> int:
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * page_size)

    def _trim(self, connection: sqlite3.Connection) -> None:
        """Drop whole traces, oldest first, until the data fits the size limit."""
        if self.max_bytes is None:
            return
        while self._used_bytes(connection) > self.max_bytes:
            oldest = connection.execute("SELECT trace_id FROM spans ORDER BY start_ns LIMIT 1").fetchone()
            if oldest is None:
                return
            connection.execute("DELETE FROM spans WHERE trace_id = ?", oldest)
            connection.execute("DELETE FROM runs WHERE trace_id = ?", oldest)

    def _read(self, query: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._connect(create=False) as connection:
                return list(connection.execute(query, parameters))
        except FileNotFoundError:
            return []
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the store at {self.path}: {error}") from None

    def runs(self, limit: int | None = None) -> list[StoredRun]:
        query = "SELECT * FROM runs ORDER BY started_ns DESC"
        rows = self._read(query + " LIMIT ?", (limit,)) if limit is not None else self._read(query)
        return [StoredRun(*row) for row in rows]

    def find_run(self, prefix: str) -> StoredRun:
        """The run whose id starts with `prefix`; StoreError when none or several do."""
        cleaned = prefix.strip().lower()
        if not cleaned or any(c not in "0123456789abcdef" for c in cleaned):
            raise StoreError(f"{prefix!r} is not a run id (hexadecimal)")
        rows = self._read("SELECT * FROM runs WHERE run_id LIKE ? ORDER BY started_ns DESC LIMIT 2", (cleaned + "%",))
        if not rows:
            raise StoreError(f"no run {prefix!r} in the store at {self.directory}")
        if len(rows) > 1:
            raise StoreError(f"run id prefix {prefix!r} is ambiguous; give more characters")
        return StoredRun(*rows[0])

    def spans(self, trace_id: str | None = None) -> list[StoredSpan]:
        if trace_id is None:
            rows = self._read("SELECT * FROM spans ORDER BY start_ns")
        else:
            rows = self._read("SELECT * FROM spans WHERE trace_id = ? ORDER BY start_ns", (trace_id,))
        return [StoredSpan(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6])) for row in rows]


class StoreSpanExporter(SpanExporter):
    """Writes finished spans to the embedded store; drops and counts them when it cannot."""

    def __init__(self, directory: Path | str, *, max_bytes: int | None = None) -> None:
        self.store = Store(directory, max_bytes=max_bytes)
        self._lock = threading.Lock()
        self.dropped_spans = 0
        self._failing = False
        self._shut_down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shut_down:
            self.dropped_spans += len(spans)
            return SpanExportResult.FAILURE
        with self._lock:
            try:
                self.store.write(spans)
            except Exception as error:  # never into the run: count and tell once per outage
                self.dropped_spans += len(spans)
                if not self._failing:
                    logger.warning(
                        "otel-agents: cannot write to the store at %s (%s); dropping spans until it can "
                        "(%d dropped so far)",
                        self.store.directory,
                        type(error).__name__,
                        self.dropped_spans,
                    )
                self._failing = True
                return SpanExportResult.FAILURE
            self._failing = False
            return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._shut_down = True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

"""The embedded store: finished spans in a local SQLite database, read back by the CLI.

One file, `spans.sqlite3`, in the store directory (created readable by its owner only). WAL mode
and a busy timeout let several processes write at once. Spans keep their original trace and span
ids and timestamps, so `otel-agents export` can replay them to any OTLP endpoint later. The store
stays under its size limit by dropping whole traces, oldest first. A store that cannot be written
drops the spans, counts them and logs; it never raises into the run.

The schema has a version (SQLite's `user_version`, `SCHEMA_VERSION` here). Whoever opens an older
store, a writer or a reader, migrates it in place in one transaction (version 0 to 1: the `runs`
table gets `user_id`, `session_id` and `conversation_id`, filled from the stored run spans); a store
of a newer version is refused with `StoreVersionError`, never written or misread.
"""

from __future__ import annotations

import json
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
from otel_agents._internal.export.store_path import DATABASE, unwritable

SCHEMA_VERSION: Final = 2
"""The store layout this code writes and reads (SQLite `PRAGMA user_version`; 0: before versions)."""

_TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS spans (
        trace_id TEXT NOT NULL,
        span_id TEXT NOT NULL,
        parent_span_id TEXT,
        name TEXT NOT NULL,
        start_ns INTEGER NOT NULL,
        end_ns INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (trace_id, span_id)
    )""",
    "CREATE INDEX IF NOT EXISTS spans_by_start ON spans (start_ns)",
    """CREATE TABLE IF NOT EXISTS runs (
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
        stop_kind TEXT,
        user_id TEXT,
        session_id TEXT,
        conversation_id TEXT,
        unknown_calls INTEGER
    )""",
    "CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_ns)",
    "CREATE INDEX IF NOT EXISTS runs_by_trace ON runs (trace_id)",
)
_ADDED_IN_1: Final = (
    ("user_id", sc.USER_ID),
    ("session_id", sc.SESSION_ID),
    ("conversation_id", sc.GEN_AI_CONVERSATION_ID),
)
"""The `runs` columns version 1 added, and the run span attribute each is read from."""
_ADDED_IN_2: Final = (("unknown_calls", sc.USAGE_UNKNOWN_CALLS),)
"""Version 2: how many of the run's model calls reported no usage (NULL: none, or stored before)."""
_INDEXES_OF_1: Final = (
    "CREATE INDEX IF NOT EXISTS runs_by_user ON runs (user_id)",
    "CREATE INDEX IF NOT EXISTS runs_by_conversation ON runs (conversation_id)",
)
_RUN_COLUMNS: Final = (
    "run_id, trace_id, team, started_ns, ended_ns, messages, input_tokens, output_tokens, cost_usd, "
    "stop_reason, stop_kind, user_id, session_id, conversation_id, unknown_calls"
)


class StoreError(Exception):
    """The store cannot be read, or a run is not in it."""


class RunNotFound(StoreError):
    """No run, or more than one, answers to the id asked for (or it is not an id)."""


class StoreVersionError(StoreError):
    """The store was made by a newer otel-agents (a schema version above ours): refused."""


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
        *(_text(attributes.get(key)) for _, key in _ADDED_IN_1),
        *(_count(attributes.get(key)) for _, key in _ADDED_IN_2),
    )


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _migrate(connection: sqlite3.Connection, path: Path) -> None:
    """Bring the store to SCHEMA_VERSION in one transaction; refuse a newer one."""
    version = _version(connection)
    if version == SCHEMA_VERSION:
        return
    _refuse_newer(version, path)
    connection.execute("BEGIN IMMEDIATE")  # one migrator at a time; the others wait, then see it done
    try:
        version = _version(connection)
        _refuse_newer(version, path)
        if version < SCHEMA_VERSION:
            for statement in _TABLES:
                connection.execute(statement)
            columns = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
            for added, kind in ((_ADDED_IN_1, "TEXT"), (_ADDED_IN_2, "INTEGER")):
                for column, _ in added:
                    if column not in columns:
                        connection.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
            for statement in _INDEXES_OF_1:
                connection.execute(statement)
            _backfill(connection)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def _refuse_newer(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"the store at {path} has schema version {version}, newer than this otel-agents reads "
            f"({SCHEMA_VERSION}); upgrade otel-agents or use another store"
        )


def _backfill(connection: sqlite3.Connection) -> None:
    """Runs stored before version 1: user, session and conversation from their run spans."""
    missing = {
        row[0]
        for row in connection.execute(
            "SELECT run_id FROM runs WHERE user_id IS NULL AND session_id IS NULL AND conversation_id IS NULL"
        )
    }
    if not missing:
        return
    spans = connection.execute("SELECT data FROM spans WHERE name = 'invoke_workflow' OR name LIKE 'invoke_workflow %'")
    for (data,) in spans:
        try:
            attributes = json.loads(data).get("attributes", {})
        except (ValueError, AttributeError):
            continue
        run_id = attributes.get(sc.RUN_ID)
        if attributes.get(sc.GEN_AI_OPERATION_NAME) != sc.OPERATION_INVOKE_WORKFLOW or run_id not in missing:
            continue
        connection.execute(
            "UPDATE runs SET user_id = ?, session_id = ?, conversation_id = ? WHERE run_id = ?",
            (*(_text(attributes.get(key)) for _, key in _ADDED_IN_1), run_id),
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
            _refuse_newer(_version(connection), self.path)  # before anything is changed
            if create:
                connection.execute("PRAGMA journal_mode = WAL")
            _migrate(connection, self.path)
            yield connection

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        rows = [_encode(span) for span in spans]
        runs = [row for row in (_run_row(span) for span in spans) if row is not None]
        with self._connect(create=True) as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany("INSERT OR REPLACE INTO spans VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                connection.executemany(
                    f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * 15)})", runs
                )
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

    def runs(
        self,
        limit: int | None = None,
        *,
        user: str | None = None,
        conversation: str | None = None,
        team: str | None = None,
        since_ns: int | None = None,
    ) -> list[StoredRun]:
        """Runs, newest first; each filter given must match (`conversation`: an id or a prefix of one)."""
        where, parameters = self._where(user=user, conversation=conversation, team=team, since_ns=since_ns)
        query = f"SELECT {_RUN_COLUMNS} FROM runs{where} ORDER BY started_ns DESC"
        if limit is not None:
            query, parameters = query + " LIMIT ?", [*parameters, limit]
        return [StoredRun(*row) for row in self._read(query, parameters)]

    @staticmethod
    def _where(
        *, user: str | None, conversation: str | None, team: str | None, since_ns: int | None
    ) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        parameters: list[Any] = []
        if user is not None:
            clauses.append("user_id = ?")
            parameters.append(user)
        if conversation is not None:
            clauses.append("substr(conversation_id, 1, ?) = ?")
            parameters += [len(conversation), conversation]
        if team is not None:
            clauses.append("team = ?")
            parameters.append(team)
        if since_ns is not None:
            clauses.append("started_ns >= ?")
            parameters.append(since_ns)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), parameters

    def conversation_runs(self, conversation_id: str) -> list[StoredRun]:
        """The runs of one conversation (exactly this id), oldest first."""
        query = f"SELECT {_RUN_COLUMNS} FROM runs WHERE conversation_id = ? ORDER BY started_ns"
        return [StoredRun(*row) for row in self._read(query, (conversation_id,))]

    def calls(self, since_ns: int | None = None) -> list[StoredCall]:
        """The model calls (`chat` spans) of the stored runs started at or after `since_ns`, each
        counted in the run whose span it descends from (runs started under one app span share a
        trace: a call belongs to one of them only)."""
        rows = self._read(
            "SELECT span_id, parent_span_id, name, data FROM spans WHERE trace_id IN "
            "(SELECT trace_id FROM runs WHERE started_ns >= ?) ORDER BY start_ns",
            (since_ns if since_ns is not None else -(2**63),),
        )
        parent_of: dict[str, str | None] = {}
        run_of_span: dict[str, str] = {}
        chats: list[tuple[str, dict[str, Any]]] = []
        for span_id, parent_id, name, data in rows:
            parent_of[span_id] = parent_id
            attributes = json.loads(data).get("attributes", {})
            if isinstance(attributes.get(sc.RUN_ID), str):
                run_of_span[span_id] = attributes[sc.RUN_ID]
            if name == "chat" or name.startswith("chat "):
                chats.append((span_id, attributes))
        since = since_ns if since_ns is not None else -(2**63)
        recent = {row[0] for row in self._read("SELECT run_id FROM runs WHERE started_ns >= ?", (since,))}
        calls: list[StoredCall] = []
        for span_id, attributes in chats:
            run_id = _owning_run(span_id, parent_of, run_of_span)
            if run_id is None or run_id not in recent:
                continue
            if attributes.get(sc.GEN_AI_OPERATION_NAME) != sc.OPERATION_CHAT:
                continue
            cost = attributes.get(sc.COST_USD)
            calls.append(
                StoredCall(
                    run_id=run_id,
                    model=_text(attributes.get(sc.GEN_AI_RESPONSE_MODEL))
                    or _text(attributes.get(sc.GEN_AI_REQUEST_MODEL)),
                    agent=_text(attributes.get(sc.GEN_AI_AGENT_NAME)),
                    input_tokens=_number(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)),
                    output_tokens=_number(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)),
                    cost_usd=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
                    usage_known=sc.GEN_AI_USAGE_INPUT_TOKENS in attributes or sc.ERROR_TYPE in attributes,
                )
            )
        return calls

    def find_run(self, prefix: str) -> StoredRun:
        """The run whose id starts with `prefix`; RunNotFound when none or several do (StoreError
        when the store cannot be read)."""
        cleaned = prefix.strip().lower()
        if not cleaned or any(c not in "0123456789abcdef" for c in cleaned):
            raise RunNotFound(f"{prefix!r} is not a run id (hexadecimal)")
        rows = self._read(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id LIKE ? ORDER BY started_ns DESC LIMIT 2", (cleaned + "%",)
        )
        if not rows:
            raise RunNotFound(f"no run {prefix!r} in the store at {self.directory}")
        if len(rows) > 1:
            raise RunNotFound(f"run id prefix {prefix!r} is ambiguous; give more characters")
        return StoredRun(*rows[0])

    def spans(self, trace_id: str | None = None) -> list[StoredSpan]:
        if trace_id is None:
            rows = self._read("SELECT * FROM spans ORDER BY start_ns")
        else:
            rows = self._read("SELECT * FROM spans WHERE trace_id = ? ORDER BY start_ns", (trace_id,))
        return [StoredSpan(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6])) for row in rows]


class StoreSpanExporter(SpanExporter):
    """Writes finished spans to the embedded store; drops and counts them when it cannot.

    It says nothing itself: while it cannot write, `failure` says why, and the pipeline's outage
    warning (one per outage) gives that reason."""

    def __init__(self, directory: Path | str, *, max_bytes: int | None = None) -> None:
        self.store = Store(directory, max_bytes=max_bytes)
        self._lock = threading.Lock()
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

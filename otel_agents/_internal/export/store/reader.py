"""Reading the store back (the CLI): runs, their model calls and their traces. Spans keep their
original trace and span ids and timestamps, so `otel-agents export` can replay them to any OTLP
endpoint later.

A store this process cannot write (a read-only mount, another user's files) is read all the same:
read-only, else as an immutable file, which skips the runs still in its write-ahead log; `Store`
says so once through its `notice`."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from otel_agents._internal import keys as sc
from otel_agents._internal.export.store.schema import (
    RUN_COLUMNS,
    StoreDamaged,
    StoreError,
    StoreFile,
    cannot_write,
    is_damage,
    stored_text,
)

_READ_WRITE, _READ_ONLY, _IMMUTABLE = range(3)
"""How a store is opened to read, in the order tried: as a writer opens it (migrating an older
one), read-only (`mode=ro`), then as an immutable file (`immutable=1`: no `-shm` file needed)."""
MAY_MISS_NEWEST: Final = (
    "the store at {path} cannot be written by you (a read-only mount, or another user's files), so it "
    "was read from its database file alone, without its write-ahead log: the view may miss the newest runs"
)
"""The notice of a store read as an immutable file."""


class RunNotFound(StoreError):
    """No run, or more than one, answers to the id asked for (or it is not an id)."""


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


class Store(StoreFile):
    """The store directory: read runs and traces back. `notice` is told, once, when the store can
    only be read as an immutable file (`MAY_MISS_NEWEST`)."""

    def __init__(self, directory: Path | str, *, notice: Callable[[str], None] | None = None) -> None:
        super().__init__(directory)
        self._notice = notice
        self._opened_as = _READ_WRITE
        self._noticed = False

    def _open(self, how: int) -> AbstractContextManager[sqlite3.Connection]:
        return (
            self._connect(create=False) if how == _READ_WRITE else self._connect_read_only(immutable=how == _IMMUTABLE)
        )

    def _rows(self, query: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows, read the first way that works, from the last one that did."""
        while True:
            try:
                with self._open(self._opened_as) as connection:
                    rows = list(connection.execute(query, parameters))
            except sqlite3.OperationalError as error:
                if self._opened_as == _IMMUTABLE or not cannot_write(error):
                    raise
                self._opened_as += 1
                continue
            if self._opened_as == _IMMUTABLE and not self._noticed:
                self._noticed = True
                if self._notice is not None:
                    self._notice(MAY_MISS_NEWEST.format(path=self.path))
            return rows

    def _read(self, query: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._rows(query, parameters)
        except FileNotFoundError:
            return []
        except PermissionError:  # a directory another user keeps to themselves
            raise StoreError(
                f"cannot read the store at {self.path}: its directory is not open to you (its owner can share "
                f"it: chmod a+rx {self.directory}, and a+r on the file)"
            ) from None
        except sqlite3.Error as error:
            if is_damage(error) and self._opened_as == _IMMUTABLE:
                raise StoreDamaged(
                    f"cannot read the store at {self.path}: it reads as damaged ({error}); as you cannot write it, "
                    "it was read without locks, and a write under way looks like this: try again"
                ) from None
            if is_damage(error):
                raise StoreDamaged(
                    f"cannot read the store at {self.path}: the file is damaged ({error}); the next traced run "
                    f"that writes to this store moves it aside (as {self.path.name}.damaged-<time>) and starts "
                    f"a fresh store; or move it aside yourself (mv {self.path} {self.path}.damaged)"
                ) from None
            if cannot_write(error) and not os.access(self.path, os.R_OK):
                raise StoreError(
                    f"cannot read the store at {self.path}: the file is not readable by you (its owner can share "
                    "it: chmod a+r)"
                ) from None
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
        query = f"SELECT {RUN_COLUMNS} FROM runs{where} ORDER BY started_ns DESC"
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
        query = f"SELECT {RUN_COLUMNS} FROM runs WHERE conversation_id = ? ORDER BY started_ns"
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

    def find_run(self, prefix: str) -> StoredRun:
        """The run whose id starts with `prefix`; RunNotFound when none or several do (StoreError
        when the store cannot be read)."""
        cleaned = prefix.strip().lower()
        if not cleaned or any(c not in "0123456789abcdef" for c in cleaned):
            raise RunNotFound(f"{prefix!r} is not a run id (hexadecimal)")
        rows = self._read(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id LIKE ? ORDER BY started_ns DESC LIMIT 2", (cleaned + "%",)
        )
        if not rows:
            raise RunNotFound(f"no run {prefix!r} in the store at {self.directory}")
        if len(rows) > 1:
            raise RunNotFound(f"run id prefix {prefix!r} is ambiguous; give more characters")
        return StoredRun(*rows[0])

    def outcomes(self, run_ids: Sequence[str] | None = None) -> dict[str, list[StoredOutcome]]:
        """The outcomes of `run_ids` (None: of every run), by run, each run's by name."""
        found: dict[str, list[StoredOutcome]] = {}
        query = "SELECT run_id, name, label, score FROM outcomes"
        if run_ids is None:
            rows = self._read(f"{query} ORDER BY run_id, name")
        else:
            rows = []
            wanted = list(dict.fromkeys(run_ids))
            for at in range(0, len(wanted), 500):  # SQLite's bound on parameters, with room
                part = wanted[at : at + 500]
                rows += self._read(f"{query} WHERE run_id IN ({', '.join('?' * len(part))}) ORDER BY name", part)
        for run_id, name, label, score in rows:
            found.setdefault(run_id, []).append(StoredOutcome(run_id, name, label, score))
        return found

    def spans(self, trace_id: str | None = None) -> list[StoredSpan]:
        if trace_id is None:
            rows = self._read("SELECT * FROM spans ORDER BY start_ns")
        else:
            rows = self._read("SELECT * FROM spans WHERE trace_id = ? ORDER BY start_ns", (trace_id,))
        return [StoredSpan(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6])) for row in rows]

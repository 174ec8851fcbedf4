"""Reading the store back (the CLI, the web page): runs, their model calls and their traces. Spans
keep their original trace and span ids and timestamps, so `otel-agents export` can replay them to
any OTLP endpoint later.

Readers never write or migrate the store: every read goes through a connection that cannot write
(the database file's bytes stay as they are; SQLite may make its `-wal` and `-shm` files beside
it). A store of an older schema is read as a migrated one would be (`read_as_current`), and runs
without a summary yet are summarised in memory (`summaries=True`). A store this process cannot
write (a read-only mount, another user's files) is read all the same: where SQLite cannot open its
`-shm` file, as an immutable file, which skips the runs still in its write-ahead log; `Store` says
so once through its `notice`."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from otel_agents._internal.export.store.rows import (
    StoredCall,
    StoredOutcome,
    StoredRun,
    StoredSpan,
    calls_of,
    run_subtree,
    span_rows,
)
from otel_agents._internal.export.store.schema import (
    RUN_COLUMNS,
    StoreDamaged,
    StoreError,
    StoreFile,
    cannot_write,
    is_damage,
    read_as_current,
)
from otel_agents._internal.export.store.summary import Summaries, summarise

__all__ = [
    "MAY_MISS_NEWEST",
    "RunNotFound",
    "Store",
    "StoredCall",
    "StoredOutcome",
    "StoredRun",
    "StoredSpan",
    "run_subtree",
]

_READ_ONLY, _IMMUTABLE = range(2)
"""How a store is opened to read, in the order tried: read-only (`mode=ro`), then as an immutable
file (`immutable=1`: no `-shm` file needed)."""
MAY_MISS_NEWEST: Final = (
    "the store at {path} cannot be written by you (a read-only mount, or another user's files), so it "
    "was read from its database file alone, without its write-ahead log: the view may miss the newest runs"
)
"""The notice of a store read as an immutable file."""

Statement = tuple[str, Sequence[Any]]


class RunNotFound(StoreError):
    """No run, or more than one, answers to the id asked for (or it is not an id)."""


class Store(StoreFile):
    """The store directory: read runs and traces back. `notice` is told, once, when the store can
    only be read as an immutable file (`MAY_MISS_NEWEST`)."""

    def __init__(self, directory: Path | str, *, notice: Callable[[str], None] | None = None) -> None:
        super().__init__(directory)
        self._notice = notice
        self._opened_as = _READ_ONLY
        self._noticed = False
        self._summarised: dict[str, Summaries] = {}
        """Summaries this reader computed (of runs the store holds none for): a run's spans do not
        change once a writer has summarised older runs, so they are kept for the next reads."""

    @contextmanager
    def _open(self, how: int, summaries: bool) -> Iterator[sqlite3.Connection]:
        with self._connect_read_only(immutable=how == _IMMUTABLE) as connection:
            read_as_current(connection)
            if summaries:
                self._missing_summaries(connection)
            yield connection

    def _missing_summaries(self, connection: sqlite3.Connection) -> None:
        """Summaries of the runs the store has none for, computed in memory, made visible as
        `run_summaries` and `run_calls` (the store's and these) in the connection's temporary
        database."""
        stored = connection.execute(
            "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'run_summaries'"
        ).fetchone()
        source = "main.run_summaries" if stored else "temp.run_summaries"
        query = f"SELECT run_id FROM runs WHERE run_id NOT IN (SELECT run_id FROM {source})"
        missing = [run_id for (run_id,) in connection.execute(query)]
        if not missing:
            return
        unknown = [run_id for run_id in missing if run_id not in self._summarised]
        if unknown:
            computed = summarise(connection, unknown)
            for row in computed.runs:
                self._summarised[row[0]] = Summaries([row], [call for call in computed.calls if call[0] == row[0]])
        found = Summaries()
        for run_id in missing:
            known = self._summarised.get(run_id)
            if known is not None:
                found.runs += known.runs
                found.calls += known.calls
        if stored:
            connection.execute("CREATE TEMP TABLE computed_summaries AS SELECT * FROM main.run_summaries WHERE 0")
            connection.execute("CREATE TEMP TABLE computed_calls AS SELECT * FROM main.run_calls WHERE 0")
            connection.executemany(f"INSERT INTO temp.computed_summaries VALUES ({', '.join('?' * 7)})", found.runs)
            connection.executemany(f"INSERT INTO temp.computed_calls VALUES ({', '.join('?' * 10)})", found.calls)
            connection.execute(
                "CREATE TEMP VIEW run_summaries AS SELECT * FROM main.run_summaries UNION ALL "
                "SELECT * FROM temp.computed_summaries"
            )
            connection.execute(
                "CREATE TEMP VIEW run_calls AS SELECT * FROM main.run_calls UNION ALL SELECT * FROM temp.computed_calls"
            )
        else:
            found.insert(connection, "temp")

    def query(self, *statements: Statement, summaries: bool = False) -> list[list[tuple[Any, ...]]]:
        """Each statement's rows, read through one connection; with `summaries`, the tables
        `run_summaries` and `run_calls` hold every run's (computed in memory where the store has
        none yet). StoreError (StoreDamaged) when the store cannot be read; no rows when it is not
        there."""
        try:
            return self._rows(statements, summaries)
        except FileNotFoundError:
            return [[] for _ in statements]
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

    def _rows(self, statements: Sequence[Statement], summaries: bool) -> list[list[tuple[Any, ...]]]:
        """The rows, read the first way that works, from the last one that did."""
        while True:
            try:
                with self._open(self._opened_as, summaries) as connection:
                    rows = [list(connection.execute(query, parameters)) for query, parameters in statements]
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
        return self.query((query, parameters))[0]

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
        since = since_ns if since_ns is not None else -(2**63)
        recent = {row[0] for row in self._read("SELECT run_id FROM runs WHERE started_ns >= ?", (since,))}
        return calls_of(rows, recent)

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

    def runs_with_prefix(self, prefix: str, limit: int = 10) -> list[StoredRun]:
        """The runs whose id starts with `prefix` (hexadecimal), newest first, at most `limit`:
        what an ambiguous prefix matches."""
        cleaned = prefix.strip().lower()
        if not cleaned or any(c not in "0123456789abcdef" for c in cleaned):
            return []
        query = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id LIKE ? ORDER BY started_ns DESC LIMIT ?"
        return [StoredRun(*row) for row in self._read(query, (cleaned + "%", limit))]

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
        return span_rows(rows)

"""The store's file and schema: one SQLite database, `spans.sqlite3`, in the store directory
(created readable by its owner only; WAL mode and a busy timeout let several processes write at once).

The schema has a version (SQLite's `user_version`, `SCHEMA_VERSION` here). A writer that opens an
older store migrates it in place in one transaction (version 0 to 1: the `runs` table gets
`user_id`, `session_id` and `conversation_id`, filled from the stored run spans; 2: `unknown_calls`;
3: `outcomes`; 4: `run_summaries` and `run_calls`, filled by the writers that follow, a bounded
number of runs a write); a store of a newer version is refused with `StoreVersionError`, never
written or misread.

Readers never write or migrate the store: they read through a connection that cannot write
(`StoreFile._connect_read_only`), and read an older store as a migrated one reads, what it lacks
made up in the connection's own temporary tables (`Store`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Final

from otel_agents._internal import keys as sc
from otel_agents._internal.export.store_path import DATABASE

SCHEMA_VERSION: Final = 4
"""The store layout this code writes and reads (SQLite `PRAGMA user_version`; 0: before versions)."""

SUMMARY_TABLE: Final = """(
    run_id TEXT PRIMARY KEY,
    turns INTEGER,
    findings TEXT NOT NULL,
    micro_usd INTEGER,
    unpriced_calls INTEGER NOT NULL,
    unpriced_tokens INTEGER NOT NULL,
    unknown_usage_calls INTEGER NOT NULL
)"""
"""A run's summary: `turns` NULL when the run could not be explained; `findings` a JSON array of
kinds, in explain's order; `micro_usd` the run's priced part as `cost` counts it (NULL: nothing
priced), and what of it has no price or no known usage."""
CALLS_TABLE: Final = """(
    run_id TEXT NOT NULL,
    model TEXT,
    agent TEXT,
    calls INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    micro_usd INTEGER,
    unpriced_calls INTEGER NOT NULL,
    unpriced_tokens INTEGER NOT NULL,
    unknown_usage_calls INTEGER NOT NULL
)"""
"""The model calls of one run with one model and agent, summed (`micro_usd` NULL: none priced)."""

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
    # Version 3: outcomes, one a run and name (the run's span events, and those recorded after it)
    """CREATE TABLE IF NOT EXISTS outcomes (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        label TEXT NOT NULL,
        score REAL,
        recorded_ns INTEGER NOT NULL,
        PRIMARY KEY (run_id, name)
    )""",
    # Version 4: each run's summary (export/store/summary.py), written with its run
    f"CREATE TABLE IF NOT EXISTS run_summaries {SUMMARY_TABLE}",
    f"CREATE TABLE IF NOT EXISTS run_calls {CALLS_TABLE}",
    "CREATE INDEX IF NOT EXISTS run_calls_by_run ON run_calls (run_id)",
)
ADDED_IN_1: Final = (
    ("user_id", sc.USER_ID),
    ("session_id", sc.SESSION_ID),
    ("conversation_id", sc.GEN_AI_CONVERSATION_ID),
)
"""The `runs` columns version 1 added, and the run span attribute each is read from."""
ADDED_IN_2: Final = (("unknown_calls", sc.USAGE_UNKNOWN_CALLS),)
"""Version 2: how many of the run's model calls reported no usage (NULL: none, or stored before)."""
_INDEXES_OF_1: Final = (
    "CREATE INDEX IF NOT EXISTS runs_by_user ON runs (user_id)",
    "CREATE INDEX IF NOT EXISTS runs_by_conversation ON runs (conversation_id)",
)
RUN_COLUMNS: Final = (
    "run_id, trace_id, team, started_ns, ended_ns, messages, input_tokens, output_tokens, cost_usd, "
    "stop_reason, stop_kind, user_id, session_id, conversation_id, unknown_calls"
)


class StoreError(Exception):
    """The store cannot be read, or a run is not in it."""


class StoreVersionError(StoreError):
    """The store was made by a newer otel-agents (a schema version above ours): refused."""


class StoreDamaged(StoreError):
    """The store's file is not a SQLite database any more, or its pages are corrupt."""


_DAMAGE: Final = ("file is not a database", "database disk image is malformed")
"""What SQLite says of a file that is not a database, or of one whose pages are corrupt."""
_DAMAGE_CODES: Final = frozenset({11, 26})
"""SQLITE_CORRUPT and SQLITE_NOTADB, where Python tells the error code (an extended code, such as
SQLITE_CORRUPT_INDEX, 779: its low byte is the primary code)."""
DAMAGED_KEPT: Final = 3
"""Damaged store files kept beside the store (the oldest removed first)."""


_CANNOT_WRITE: Final = ("attempt to write a readonly database", "unable to open database file")
"""What SQLite says when it cannot write the store or a file beside it: a read-only mount, another
user's files, a directory where its `-shm` file cannot be made."""
_CANNOT_WRITE_CODES: Final = frozenset({8, 14})
"""SQLITE_READONLY and SQLITE_CANTOPEN, with their extended codes (SQLITE_READONLY_DIRECTORY, 1544:
the `-shm` file cannot be made in a directory that cannot be written; its low byte is the primary
code)."""


def cannot_write(error: BaseException) -> bool:
    """Whether `error` says SQLite cannot write the store or the files beside it (a store that is
    only locked, or damaged, is not)."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    return (isinstance(code, int) and code & 0xFF in _CANNOT_WRITE_CODES) or any(
        text in str(error) for text in _CANNOT_WRITE
    )


def is_damage(error: BaseException) -> bool:
    """Whether `error` says the store's file is damaged (not a database, or malformed); a store
    that is only locked is not."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    return (isinstance(code, int) and code & 0xFF in _DAMAGE_CODES) or any(text in str(error) for text in _DAMAGE)


def not_a_database(path: Path) -> sqlite3.DatabaseError | None:
    """SQLite's "file is not a database" for `path`, found through a read-only connection: a
    read-write connection to such a file deletes its `-wal` and `-shm` files when it closes (which
    must go aside with it), and a plain `open()` of the file would release SQLite's locks in this
    process when closed. None for a database, an empty file (a store being created) or no file."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as connection:
            connection.execute("PRAGMA user_version").fetchone()
    except sqlite3.DatabaseError as error:
        return error if is_damage(error) else None
    return None


def _still_damaged(path: Path) -> BaseException | None:
    """The error a fresh look at `path` gives, if it is damaged (None: it is not, or not there);
    read-only, so that SQLite leaves its `-wal` and `-shm` files where they are. Only after a write
    failed as damaged, so the full `integrity_check` it costs is paid then: `quick_check` passes a
    store whose index no longer matches its table, which fails the writes that delete from it."""
    if not path.exists():
        return None
    header = not_a_database(path)
    if header is not None:
        return header
    try:
        uri = f"{path.absolute().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as connection:
            connection.execute("PRAGMA user_version").fetchone()
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            if connection.execute("PRAGMA integrity_check(1)").fetchone() != ("ok",):
                return sqlite3.DatabaseError("database disk image is malformed")
    except sqlite3.DatabaseError as error:
        return error if is_damage(error) else None
    return None


def move_damaged_aside(directory: Path) -> Path | None:
    """Move the store's damaged file (and its `-wal` and `-shm` files) aside, as
    `spans.sqlite3.damaged-<YYYYMMDDTHHMMSSZ>`, so that a fresh store starts in its place; keep the
    newest `DAMAGED_KEPT` such files. Under a lock on the directory, so that two processes do not
    race: the second finds the file already replaced (and fine), and moves nothing. Where it went,
    or None when nothing was damaged any more."""
    import fcntl

    path = directory / DATABASE
    with (directory / f"{DATABASE}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if _still_damaged(path) is None:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        same_second = [_damaged_age(p)[1] for p in _damaged_copies(directory) if _damaged_age(p)[0] == stamp]
        # numbered past the newest of this second (not the first free number: the oldest may be gone)
        name = f"{DATABASE}.damaged-{stamp}" + (f"-{max(same_second) + 1}" if same_second else "")
        target = directory / name
        for suffix in ("-wal", "-shm"):
            beside = path.with_name(path.name + suffix)
            if beside.exists():
                os.replace(beside, target.with_name(target.name + suffix))
        os.replace(path, target)
        _keep_newest_damaged(directory)
    return target


def _damaged_age(path: Path) -> tuple[str, int]:
    stamp, _, number = path.name.removeprefix(f"{DATABASE}.damaged-").partition("-")
    return stamp, int(number) if number.isdigit() else 0


def _damaged_copies(directory: Path) -> list[Path]:
    return [p for p in directory.glob(f"{DATABASE}.damaged-*") if not p.name.endswith(("-wal", "-shm"))]


def _keep_newest_damaged(directory: Path) -> None:
    for old in sorted(_damaged_copies(directory), key=_damaged_age)[:-DAMAGED_KEPT]:
        for each in (old, old.with_name(old.name + "-wal"), old.with_name(old.name + "-shm")):
            each.unlink(missing_ok=True)


def stored_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


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
            for added, kind in ((ADDED_IN_1, "TEXT"), (ADDED_IN_2, "INTEGER")):
                for column, _ in added:
                    if column not in columns:
                        connection.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
            for statement in _INDEXES_OF_1:
                connection.execute(statement)
            backfill(connection)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


BUSY_TIMEOUT_S: Final = 10.0
"""How long a connection waits for another process's lock on the store."""


def _use_wal(connection: sqlite3.Connection) -> None:
    """The store in WAL mode, which the file keeps once set. Setting it, even to the mode it has
    already, takes a lock SQLite does not wait for ("database is locked" at once while another
    process writes or closes): so it is set only when the file is not in WAL yet, and tried again
    while another process holds that lock (or sets WAL itself), for the busy timeout at most."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if _journal_mode(connection, "PRAGMA journal_mode") == "wal":
                return
            if _journal_mode(connection, "PRAGMA journal_mode = WAL") == "wal":
                return
        except sqlite3.OperationalError:
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise sqlite3.OperationalError(f"could not put {DATABASE} in WAL mode")
        time.sleep(0.01)


def _journal_mode(connection: sqlite3.Connection, statement: str) -> str:
    return str(connection.execute(statement).fetchone()[0]).lower()


def _version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def _refuse_newer(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"the store at {path} has schema version {version}, newer than this otel-agents reads "
            f"({SCHEMA_VERSION}); upgrade otel-agents or use another store"
        )


def backfill(connection: sqlite3.Connection) -> None:
    """Runs stored before version 1: user, session and conversation from their run spans (in the
    `runs` table the connection sees: the store's, or a reader's temporary copy)."""
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
            (*(stored_text(attributes.get(key)) for _, key in ADDED_IN_1), run_id),
        )


def _table_statements() -> dict[str, str]:
    """Each table's CREATE statement, by table name."""
    found = {}
    for statement in _TABLES:
        words = statement.split(None, 6)
        if words[:5] == ["CREATE", "TABLE", "IF", "NOT", "EXISTS"]:
            found[words[5]] = statement
    return found


def read_as_current(connection: sqlite3.Connection) -> None:
    """Make a read-only connection to a store of an older schema read as a current one, without
    writing it: what the store lacks is made up in the connection's own temporary database (which
    SQLite searches first): the `runs` columns added since (those of version 1 filled from the run
    spans, as the migration fills them), and empty tables for those added since."""
    if _version(connection) >= SCHEMA_VERSION:
        return
    tables = {name for (name,) in connection.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
    for name, statement in _table_statements().items():
        if name not in tables:
            connection.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
    if "runs" not in tables:
        return
    columns = {row[1] for row in connection.execute("PRAGMA main.table_info(runs)")}
    wanted = [column.strip() for column in RUN_COLUMNS.split(",")]
    if all(column in columns for column in wanted):
        return
    select = ", ".join(column if column in columns else f"NULL AS {column}" for column in wanted)
    connection.execute(f"CREATE TEMP TABLE runs AS SELECT {select} FROM main.runs")
    if any(column not in columns for column, _ in ADDED_IN_1):
        backfill(connection)


class StoreFile:
    """The store directory and its database, opened (created, migrated) for each use."""

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
        damage = not_a_database(self.path)
        if damage is not None:  # before a read-write connection opens it (and deletes its -wal and -shm)
            raise damage
        with closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as connection:
            connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            _refuse_newer(_version(connection), self.path)  # before anything is changed
            if create:
                _use_wal(connection)
            _migrate(connection, self.path)
            yield connection

    @contextmanager
    def _connect_read_only(self, *, immutable: bool) -> Iterator[sqlite3.Connection]:
        """A connection that never writes: `mode=ro` reads the store as a writer sees it, its
        write-ahead log (`-wal`) included, where SQLite can open the `-shm` file beside it (or make
        it). Where it cannot (a store this process cannot write), `immutable=1` reads the database
        file alone and takes no locks: runs still in the `-wal` file are not seen, and a write under
        way can make a read fail. A store of an older schema is read as it is (the reader makes up
        what it lacks); a newer one is refused (`StoreVersionError`)."""
        if not self.path.is_file():
            raise FileNotFoundError(self.path)
        uri = f"{self.path.absolute().as_uri()}?mode=ro{'&immutable=1' if immutable else ''}"
        with closing(sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as connection:
            connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            _refuse_newer(_version(connection), self.path)
            yield connection

"""The store's schema version: an older store is migrated in place by the next writer (several
processes at once), read as a migrated one by a reader that writes nothing (since schema 4: readers
never migrate), and a newer one is refused in one line and left as it is."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import otel_agents
from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.export.store.schema import SCHEMA_VERSION, StoreVersionError
from otel_agents._internal.export.store.writer import StoreSpanExporter
from otel_agents._internal.export.store_path import DATABASE
from tests.support.teams import writers_room

ROOT = Path(__file__).resolve().parents[1]

# The schema of the stores written before versions (user_version 0), as otel-agents 0.x made them.
V0_SCHEMA = """
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
V0_RUN_COLUMNS = (
    "run_id, trace_id, team, started_ns, ended_ns, messages, input_tokens, output_tokens, cost_usd, stop_reason, "
    "stop_kind"
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_agents.cli", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


async def recorded_runs(directory: Path) -> None:
    """Three real runs: one for a user with a session, one in a given conversation, one for nobody."""
    with otel_agents.configure(store=directory) as telemetry:
        with otel_agents.run_attributes(user_id="ana", session_id="s-1"):
            await writers_room(max_messages=3, name="with-user").run(task="go")
        with otel_agents.run_attributes(conversation_id="ticket-7"):
            await writers_room(max_messages=2, name="in-a-conversation").run(task="go")
        await writers_room(max_messages=2, name="for-nobody").run(task="go")
        telemetry.force_flush()


def old_store(source: Path, directory: Path, *, strip: tuple[str, ...] = ()) -> Path:
    """A version-0 store at `directory` holding `source`'s spans and runs (the runs without the new
    columns); `strip`: run span attributes to drop, as a run recorded before they existed."""
    directory.mkdir()
    with sqlite3.connect(source / DATABASE) as new, sqlite3.connect(directory / DATABASE) as old:
        old.executescript(V0_SCHEMA)
        spans = new.execute("SELECT * FROM spans").fetchall()
        for attribute in strip:
            spans = [(*s[:6], s[6].replace(f'"{attribute}":', f'"dropped.{attribute}":')) for s in spans]
        old.executemany("INSERT INTO spans VALUES (?, ?, ?, ?, ?, ?, ?)", spans)
        old.executemany(
            f"INSERT INTO runs VALUES ({', '.join('?' * 11)})", new.execute(f"SELECT {V0_RUN_COLUMNS} FROM runs")
        )
        assert old.execute("PRAGMA user_version").fetchone() == (0,)
    return directory


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio

    directory = tmp_path_factory.mktemp("source")
    asyncio.run(recorded_runs(directory))
    return directory


def schema(directory: Path) -> tuple[int, list[str]]:
    with sqlite3.connect(directory / DATABASE) as connection:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        columns = [row[1] for row in connection.execute("PRAGMA table_info(runs)")]
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return version, columns


def test_a_new_store_has_the_current_version(source: Path) -> None:
    version, columns = schema(source)
    assert version == SCHEMA_VERSION == 4
    assert columns[-4:] == ["user_id", "session_id", "conversation_id", "unknown_calls"]
    with sqlite3.connect(source / DATABASE) as connection:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        summarised = connection.execute("SELECT count(*) FROM run_summaries").fetchone()[0]
    assert {"spans", "runs", "outcomes", "run_summaries", "run_calls"} <= tables and summarised == 3


def test_reading_an_old_store_reads_it_as_migrated_and_writes_nothing(source: Path, tmp_path: Path) -> None:
    # Changed in schema 4: a reader used to migrate an older store in place; now only a writer does
    old = old_store(source, tmp_path / "old")
    before = {r.run_id: r for r in Store(source).runs()}
    assert schema(old)[0] == 0 and "user_id" not in schema(old)[1]
    main_file = (old / DATABASE).read_bytes()

    done = cli("--store", str(old), "runs", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(cli("--store", str(source), "runs", "--json").stdout)
    assert schema(old) == (0, V0_RUN_COLUMNS.split(", ")), "not migrated"
    assert (old / DATABASE).read_bytes() == main_file, "the database file's bytes unchanged by the read"
    migrated = {r.run_id: r for r in Store(old).runs()}
    assert migrated == before, "every run, its old columns as they were and the new ones from its run span"
    by_team = {r.team: r for r in migrated.values()}
    assert (by_team["with-user"].user_id, by_team["with-user"].session_id) == ("ana", "s-1")
    assert by_team["in-a-conversation"].conversation_id == "ticket-7" and by_team["in-a-conversation"].user_id is None
    assert by_team["for-nobody"].user_id is None and by_team["for-nobody"].conversation_id is not None
    assert len(Store(old).spans()) == len(Store(source).spans())
    assert cli("--store", str(old), "runs", "--user", "ana", "--json").stdout.count('"run_id"') == 1
    assert (old / DATABASE).read_bytes() == main_file


def test_runs_recorded_before_attribution_keep_empty_columns(source: Path, tmp_path: Path) -> None:
    old = old_store(source, tmp_path / "old", strip=("user.id", "session.id", "gen_ai.conversation.id"))
    runs = Store(old).runs()
    assert len(runs) == 3 and schema(old)[0] == 0, "read as it is"
    assert all((r.user_id, r.session_id, r.conversation_id) == (None, None, None) for r in runs)
    done = cli("--store", str(old), "show", runs[0].run_id)
    assert done.returncode == 0, done.stderr
    assert "no conversation recorded" in done.stdout.splitlines()[2]


async def test_writing_to_an_old_store_migrates_it_and_adds_the_new_run(source: Path, tmp_path: Path) -> None:
    old = old_store(source, tmp_path / "old")
    with otel_agents.configure(store=old) as telemetry:
        with otel_agents.run_attributes(user_id="ben"):
            await writers_room(max_messages=2, name="after-the-upgrade").run(task="go")
        telemetry.force_flush()
    assert schema(old)[0] == SCHEMA_VERSION
    runs = {r.team: r for r in Store(old).runs()}
    assert set(runs) == {"with-user", "in-a-conversation", "for-nobody", "after-the-upgrade"}
    assert runs["after-the-upgrade"].user_id == "ben" and runs["with-user"].user_id == "ana"


def test_several_processes_writing_to_an_old_store_at_once_migrate_it_once(source: Path, tmp_path: Path) -> None:
    # Changed in schema 4: these were readers, which migrated then; writers migrate now
    old = old_store(source, tmp_path / "old")
    code = textwrap.dedent(
        f"""
        from otel_agents._internal.export.store.reader import Store
        from otel_agents._internal.export.store.writer import StoreWriter
        StoreWriter({str(old)!r}).write([])
        runs = Store({str(old)!r}).runs(user="ana")
        assert [r.session_id for r in runs] == ["s-1"], runs
        """
    )
    readers = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True) for _ in range(6)
    ]
    for reader in readers:
        _, errors = reader.communicate(timeout=120)
        assert reader.returncode == 0, errors  # a second ALTER TABLE would fail: "duplicate column name"
    assert schema(old) == (
        SCHEMA_VERSION,
        [*V0_RUN_COLUMNS.split(", "), "user_id", "session_id", "conversation_id", "unknown_calls"],
    )


@pytest.mark.parametrize(
    "command", [["runs"], ["runs", "--json"], ["show", "abc"], ["cost", "--by", "team"]], ids=" ".join
)
def test_a_newer_store_is_refused_in_one_line(source: Path, tmp_path: Path, command: list[str]) -> None:
    newer = old_store(source, tmp_path / "newer")
    with sqlite3.connect(newer / DATABASE) as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    done = cli("--store", str(newer), *command)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        f"otel-agents: error: the store at {newer / DATABASE} has schema version {SCHEMA_VERSION + 1}, newer "
        f"than this otel-agents reads ({SCHEMA_VERSION}); upgrade otel-agents or use another store"
    )
    assert done.stdout == ""
    assert schema(newer)[0] == SCHEMA_VERSION + 1 and "user_id" not in schema(newer)[1], "left as it was"


async def test_a_newer_store_is_not_written_and_the_run_never_notices(
    source: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    newer = old_store(source, tmp_path / "newer")
    with sqlite3.connect(newer / DATABASE) as connection:
        connection.execute("PRAGMA user_version = 7")
    with pytest.raises(StoreVersionError, match="schema version 7"):
        Store(newer).runs()
    exporter = StoreSpanExporter(newer)
    with otel_agents.configure(span_exporter=exporter) as telemetry:
        result = await writers_room(max_messages=2, name="refused").run(task="go")
        telemetry.force_flush()
    assert result.stop_reason is not None and exporter.dropped_spans > 0
    (warning,) = [r for r in caplog.records if "cannot write to the store" in r.getMessage()]
    assert warning.levelno == logging.WARNING and "schema version 7" in warning.getMessage()
    with sqlite3.connect(newer / DATABASE) as connection:
        assert connection.execute("SELECT count(*) FROM runs WHERE team = 'refused'").fetchone() == (0,)
        assert connection.execute("PRAGMA user_version").fetchone() == (7,)
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",), "not even its journal mode"


def test_a_version_1_store_gains_the_unknown_calls_column(source: Path, tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    shutil.copytree(source, v1)
    with sqlite3.connect(v1 / DATABASE) as connection:
        connection.execute("ALTER TABLE runs DROP COLUMN unknown_calls")
        connection.execute("PRAGMA user_version = 1")
    before = {r.run_id: r for r in Store(source).runs()}
    assert {r.run_id: r for r in Store(v1).runs()} == before
    assert schema(v1)[0] == 1, "a reader does not migrate"
    from otel_agents._internal.export.store.writer import StoreWriter

    StoreWriter(v1).write([])
    assert {r.run_id: r for r in Store(v1).runs()} == before
    assert schema(v1)[0] == SCHEMA_VERSION and schema(v1)[1][-1] == "unknown_calls"  # 2 when written


def test_a_version_2_store_gains_the_outcomes_table_and_an_outcome_is_trimmed_with_its_run(
    source: Path, tmp_path: Path
) -> None:
    v2 = tmp_path / "v2"
    shutil.copytree(source, v2)
    with sqlite3.connect(v2 / DATABASE) as connection:
        connection.execute("DROP TABLE outcomes")
        connection.execute("PRAGMA user_version = 2")
    runs = Store(v2).runs()
    assert [r.run_id for r in runs] == [r.run_id for r in Store(source).runs()]
    assert schema(v2)[0] == 2 and Store(v2).outcomes() == {}, "read as it is: no outcomes table, no outcome"

    from otel_agents._internal.export.store.writer import StoreWriter

    assert StoreWriter(v2).write_outcome(runs[-1].run_id, "outcome", "success", None)
    assert not StoreWriter(v2).write_outcome(runs[-1].run_id, "outcome", "failure", None), "one a run and name"
    assert [o.label for o in Store(v2).outcomes()[runs[-1].run_id]] == ["success"]
    assert schema(v2)[0] == SCHEMA_VERSION, "the writer migrated it"
    StoreWriter(v2, max_bytes=1).write([])  # a write trims the oldest runs, whole: the outcome with its run
    assert Store(v2).outcomes() == {}

"""A damaged store never loses the runs after it (issue "Nothing lost", item 3): its file is moved
aside, with its `-wal` and `-shm` files, under a lock two processes share, a fresh store takes its
place, one warning names both paths; the CLI only says so and how to recover; a store of a newer
schema is refused by name and never touched. And a SystemExit that lands while the store is
written leaves it whole."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import otel_agents
from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.export.store.schema import DAMAGED_KEPT, SCHEMA_VERSION
from tests.support.teams import writers_room

ROOT = Path(__file__).resolve().parents[1]
DATABASE = "spans.sqlite3"


def damaged_copies(store: Path) -> list[str]:
    return sorted(p.name for p in store.glob(f"{DATABASE}.damaged-*"))


def not_a_database(store: Path) -> None:
    store.mkdir(parents=True, exist_ok=True)
    (store / DATABASE).write_bytes(b"this is not a database, it was overwritten\n" * 200)


async def one_run(store: Path, name: str = "writers-room") -> None:
    telemetry = otel_agents.configure(store=store)
    await writers_room(max_messages=3, name=name).run(task="go")
    telemetry.shutdown()


async def test_a_store_file_that_is_not_a_database_is_moved_aside_and_the_run_stored_afresh(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_database(tmp_path)
    (tmp_path / f"{DATABASE}-wal").write_bytes(b"old write-ahead log")
    (tmp_path / f"{DATABASE}-shm").write_bytes(b"old shared memory")
    caplog.set_level(logging.WARNING)
    await one_run(tmp_path)

    assert [run.team for run in Store(tmp_path).runs()] == ["writers-room"], "the run is in a fresh store"
    (moved,) = damaged_copies(tmp_path)[:1]
    assert moved.startswith(f"{DATABASE}.damaged-2") and moved.endswith("Z")
    assert damaged_copies(tmp_path) == [moved, f"{moved}-shm", f"{moved}-wal"], "its -wal and -shm went with it"
    assert (tmp_path / moved).read_bytes().startswith(b"this is not a database")
    said = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(said) == 1, said
    assert str(tmp_path / DATABASE) in said[0] and str(tmp_path / moved) in said[0]


async def test_a_store_whose_pages_are_corrupt_is_moved_aside_too(tmp_path: Path) -> None:
    await one_run(tmp_path, name="before")
    database = tmp_path / DATABASE
    with sqlite3.connect(database) as connection:  # everything in the main file, then spoil its pages
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(database.read_bytes())
    for at in range(4096, len(data), 97):  # past the first page (the header): the tables' pages
        data[at] = (data[at] + 91) % 256
    database.write_bytes(bytes(data))
    await one_run(tmp_path, name="after")
    assert [run.team for run in Store(tmp_path).runs()] == ["after"]
    assert len([n for n in damaged_copies(tmp_path) if not n.endswith(("-wal", "-shm"))]) == 1


async def test_at_most_three_damaged_copies_are_kept_the_oldest_removed(tmp_path: Path) -> None:
    for round_number in range(DAMAGED_KEPT + 2):
        not_a_database(tmp_path)
        (tmp_path / DATABASE).write_bytes(f"damage number {round_number}".encode() * 100)
        await one_run(tmp_path)
    kept = damaged_copies(tmp_path)
    assert len(kept) == DAMAGED_KEPT
    texts = [(tmp_path / name).read_bytes()[:15] for name in kept]
    assert texts == [b"damage number 2", b"damage number 3", b"damage number 4"], "the newest three"


def test_two_processes_meeting_one_damaged_store_move_it_once_and_lose_no_run(tmp_path: Path) -> None:
    not_a_database(tmp_path)
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path.insert(0, {str(ROOT)!r})
        import otel_agents
        from tests.support.teams import writers_room

        async def main(name):
            with otel_agents.configure(store={str(tmp_path)!r}):
                for _ in range(3):
                    await writers_room(max_messages=3, name=name).run(task="go")

        asyncio.run(main(sys.argv[1]))
        """
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", script, name], stderr=subprocess.PIPE, text=True)
        for name in ("first", "second")
    ]
    errors = [process.communicate(timeout=120)[1] for process in processes]
    assert [p.returncode for p in processes] == [0, 0], errors
    assert sorted(run.team or "" for run in Store(tmp_path).runs()) == ["first"] * 3 + ["second"] * 3
    assert len(damaged_copies(tmp_path)) == 1, "moved aside once"
    said = [line for error in errors for line in error.splitlines() if "damaged" in line]
    assert len(said) == 1, errors


def cli(store: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_agents", "--store", str(store), *arguments],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_cli_says_a_store_is_damaged_and_how_to_recover_and_moves_nothing(tmp_path: Path) -> None:
    not_a_database(tmp_path)
    before = (tmp_path / DATABASE).read_bytes()
    done = cli(tmp_path, "runs")
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert f"cannot read the store at {tmp_path / DATABASE}: the file is damaged (file is not a database)" in line
    assert "moves it aside" in line and f"mv {tmp_path / DATABASE}" in line
    assert (tmp_path / DATABASE).read_bytes() == before and damaged_copies(tmp_path) == []


async def test_a_store_of_a_newer_schema_is_refused_by_name_and_never_touched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await one_run(tmp_path, name="older")
    with sqlite3.connect(tmp_path / DATABASE) as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 7}")
    before = (tmp_path / DATABASE).read_bytes()
    caplog.set_level(logging.WARNING)
    await one_run(tmp_path, name="refused")
    assert (tmp_path / DATABASE).read_bytes() == before and damaged_copies(tmp_path) == []
    assert any(f"schema version {SCHEMA_VERSION + 7}, newer" in r.getMessage() for r in caplog.records)
    done = cli(tmp_path, "runs")
    assert done.returncode == 2 and f"schema version {SCHEMA_VERSION + 7}, newer" in done.stderr


@pytest.mark.every_python
def test_a_system_exit_landing_while_the_store_is_written_leaves_it_whole(tmp_path: Path) -> None:
    """A signal handler raises SystemExit at moments spread over a big write on the main thread
    (a flush): the process exits with the handler's code, the store opens, passes its integrity
    check and holds what was written before."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        import otel_agents
        from tests.support.teams import writers_room

        async def main():
            telemetry = otel_agents.configure(store={str(tmp_path)!r})
            await writers_room(max_messages=3, name="before").run(task="go")
            assert telemetry.force_flush()
            for _ in range(40):  # spans waiting in the queue: the flush below writes them here
                await writers_room(max_messages=20, name="during").run(task="go")
            signal.signal(signal.SIGALRM, lambda *_: sys.exit(7))
            signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
            telemetry.force_flush()
            signal.pause()

        asyncio.run(main())
        """
    )
    for moment in ("0.001", "0.004", "0.012", "0.03"):
        store = tmp_path
        done = subprocess.run(
            [sys.executable, "-c", script, moment], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 7, done.stderr[-3000:]
        with sqlite3.connect(store / DATABASE) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert "before" in {run.team for run in Store(store).runs(limit=None)}
        os.environ.pop("OTEL_AGENTS_STORE", None)

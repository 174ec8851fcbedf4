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
from contextlib import closing
from pathlib import Path

import pytest

import otel_agents
from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.export.store.schema import DAMAGED_KEPT, SCHEMA_VERSION, is_damage
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


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for i in range(8):
        value = (value << 7) | (data[at + i] & 0x7F)
        if data[at + i] < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


def damage_index(database: Path, index: str) -> int:
    """Change the first key of every entry of `index` (an index on one integer column) in place, as a
    torn or misdirected write of its pages would: the b-tree stays well formed (`quick_check` says
    ok), but no entry matches its row any more (`integrity_check` does not). How many it changed."""
    with closing(sqlite3.connect(database)) as connection:  # everything in the main file first
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (root,) = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (index,)).fetchone()
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    data = bytearray(database.read_bytes())
    pages, changed = [root], 0
    while pages:  # interior index pages (type 2) lead to leaves (type 10); the root is never page 1
        start = (pages.pop() - 1) * page_size
        interior = data[start] == 0x02
        header = 12 if interior else 8
        if interior:
            pages.append(int.from_bytes(data[start + 8 : start + 12], "big"))
        for n in range(int.from_bytes(data[start + 3 : start + 5], "big")):
            pointer = start + header + 2 * n
            cell = start + int.from_bytes(data[pointer : pointer + 2], "big")
            if interior:
                pages.append(int.from_bytes(data[cell : cell + 4], "big"))
                continue
            _, record = _varint(data, cell)  # the payload's size, then the record
            header_size, types = _varint(data, record)
            assert _varint(data, types)[0] == 6, "the key is an 8-byte integer"
            data[record + header_size + 7] ^= 0x55  # its lowest byte
            changed += 1
    database.write_bytes(bytes(data))
    return changed


def spans_by_run(store: Path) -> dict[str, list[str]]:
    """Each stored run's span names, after checking its trace is whole: one root, every parent there."""
    reader, names = Store(store), {}
    for run in reader.runs(limit=None):
        spans = reader.spans(run.trace_id)
        ids = {s.span_id for s in spans}
        assert [s.parent_span_id for s in spans if s.parent_span_id not in ids] == [None], run.team
        names[run.team or ""] = sorted(s.name for s in spans)
    return names


async def test_a_store_whose_index_is_damaged_is_moved_aside_when_a_write_fails_on_it_and_no_span_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the trim's deletes touch the damaged index: the runs' inserts go through, the first trim
    fails as corrupt. The store goes aside then, and that batch and the ones after it go to a fresh
    store, whole."""
    store, undamaged = tmp_path / "store", tmp_path / "undamaged"
    with otel_agents.configure(store=store):
        for i in range(8):
            await writers_room(max_messages=6, name=f"before-{i}").run(task="go" * 50)
    database = store / DATABASE
    assert damage_index(database, "spans_by_start") == 8 * len(spans_by_run(store)["before-0"])
    with closing(sqlite3.connect(database)) as connection:
        assert connection.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        assert connection.execute("PRAGMA integrity_check(1)").fetchall() != [("ok",)]
    damaged = database.read_bytes()

    # below what the store holds, so the next write trims; above what three runs fill in a fresh
    # store (with schema 4's run summaries 0.1 MiB was not: a fresh store trimmed one of the three)
    bound_mb = 0.9 * len(damaged) / 2**20
    monkeypatch.setenv("OTEL_AGENTS_STORE_MAX_MB", f"{bound_mb:.3f}")
    assert len(damaged) > bound_mb * 2**20
    caplog.set_level(logging.WARNING)
    dropped = {}
    for directory in (store, undamaged):
        with otel_agents.configure(store=directory) as telemetry:
            for i in range(3):
                await writers_room(max_messages=6, name=f"after-{i}").run(task="go" * 50)
        dropped[directory] = telemetry.dropped_spans

    assert dropped == {store: 0, undamaged: 0}
    assert spans_by_run(store).keys() == {"after-0", "after-1", "after-2"}, "the later runs, in a fresh store"
    assert spans_by_run(store) == spans_by_run(undamaged), "each whole, as an undamaged store holds it"
    (moved,) = [name for name in damaged_copies(store) if not name.endswith(("-wal", "-shm"))]
    assert (store / moved).read_bytes() == damaged, "the damaged file, moved as it was"
    assert damaged_copies(store) == [moved, f"{moved}-shm", f"{moved}-wal"], "its -wal and -shm went with it"
    said = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(said) == 1, said
    assert str(database) in said[0] and str(store / moved) in said[0]
    assert (store / f"{DATABASE}.lock").exists(), "moved under the lock two processes share"
    with closing(sqlite3.connect(database)) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_an_extended_corrupt_code_is_damage_and_a_locked_store_is_not() -> None:
    corrupt_index = sqlite3.DatabaseError("index corruption")
    corrupt_index.sqlite_errorcode = 779  # SQLITE_CORRUPT_INDEX, as Python gives it
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = 5
    assert is_damage(corrupt_index) and not is_damage(locked)


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

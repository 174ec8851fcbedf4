"""The `otel-agents` command reads a store it cannot write: on a read-only mount, or another user's
files. Each test fills a store with the demo's real traced runs, makes it read-only in a way root
cannot bypass either, runs the real command in a subprocess and checks the store's files are
unchanged by the read."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from otel_agents._internal.export.store.schema import SCHEMA_VERSION
from otel_agents._internal.export.store.writer import StoreWriter
from otel_agents._internal.export.store_path import DATABASE

ROOT = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).parent / "otel-agents"
NOTICE = (
    "otel-agents: note: the store at {path} cannot be written by you (a read-only mount, or another user's "
    "files), so it was read from its database file alone, without its write-ahead log: the view may miss the "
    "newest runs"
)
NOBODY = 65534
HOLD = """
import sqlite3, sys, time
sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM runs").fetchone()
print(flush=True)
time.sleep(300)
"""
"""A process with the store open: while it is, a writer's last connection leaves its log unfolded."""


def command(*args: str | Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, str(CLI), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )


def _unshare_prefix(source: Path, view: Path) -> tuple[str, ...]:
    """A command prefix that runs the command with `source` bind-mounted read-only at `view`, in a
    mount namespace of its own (as root; else in a user namespace, where that is allowed)."""
    as_user = () if os.geteuid() == 0 else ("--user", "--map-root-user")
    script = 'mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" && shift 2 && exec "$@"'
    return (
        "unshare",
        *as_user,
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
        str(source),
        str(view),
    )


def read_only_mount(store: Path) -> tuple[Path, tuple[str, ...]]:
    """The path to read `store` at and the prefix that mounts it there read-only."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to make a read-only mount")
    view = store.parent / f"{store.name}-read-only"
    view.mkdir()
    prefix = _unshare_prefix(store, view)
    probe = subprocess.run([*prefix, "touch", str(view / "probe")], capture_output=True, text=True, check=False)
    if "Read-only file system" not in probe.stderr:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip() or 'the file was written'}")
    return view, prefix


def another_users_files(store: Path) -> tuple[Path, tuple[str, ...]]:
    """`store` as another user's files that any user may read (directory 0755, files 0644); as root,
    the files go to uid 65534 and the command runs with no capabilities (setpriv), so that root's
    permission checks are a user's. The path to read and the prefix."""
    store.chmod(0o755)
    for each in store.iterdir():
        each.chmod(0o644)
    if os.geteuid() != 0:  # one's own files, made read-only: SQLite meets the same refusals
        store.chmod(0o555)
        for each in store.iterdir():
            each.chmod(0o444)
        return store, ()
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv(1) to drop root's capabilities")
    for each in (store, *store.iterdir()):
        os.chown(each, NOBODY, NOBODY)
    prefix = ("setpriv", "--inh-caps=-all", "--bounding-set=-all", "--")
    probe = subprocess.run([*prefix, "touch", str(store / "probe")], capture_output=True, text=True, check=False)
    if "Permission denied" not in probe.stderr:
        pytest.skip(f"dropping root's capabilities did not stop a write: {probe.stderr.strip()!r}")
    return store, prefix


WAYS: dict[str, Callable[[Path], tuple[Path, tuple[str, ...]]]] = {
    "read-only mount": read_only_mount,
    "another user's files": another_users_files,
}


def fingerprint(store: Path) -> dict[str, str]:
    """The store directory's files and a hash of each."""
    return {each.name: hashlib.sha256(each.read_bytes()).hexdigest() for each in sorted(store.iterdir())}


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store the demo's two traced runs (ana's and ben's) were written to, closed as a run's
    process leaves it: the database file alone, no `-wal` or `-shm` beside it."""
    store = tmp_path_factory.mktemp("filled") / "store"
    done = command("--store", store, "demo")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in store.iterdir()) == [DATABASE]
    return store


@pytest.fixture
def store(filled: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(filled, copy)
    return copy


@pytest.mark.parametrize("way", list(WAYS))
def test_the_cli_lists_shows_and_explains_a_store_it_cannot_write_and_says_it_may_miss_the_newest_runs(
    store: Path, way: str
) -> None:
    writable = json.loads(command("--store", store, "runs", "--json").stdout)
    assert sorted(run["user_id"] for run in writable) == ["ana", "ben"]
    ana = next(run["run_id"] for run in writable if run["user_id"] == "ana")
    # a reader opens the store read-only (since schema 4), so it leaves SQLite's -wal and -shm files
    # beside it; the next writer's last connection removes them: the store as a run's process leaves it
    StoreWriter(store).settle()
    assert sorted(p.name for p in store.iterdir()) == [DATABASE]
    path, prefix = WAYS[way](store)
    before = fingerprint(store)
    notice = NOTICE.format(path=path / DATABASE)

    listed = command("--store", path, "runs", prefix=prefix)
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.splitlines() == [notice]
    assert "writers-room  ana" in listed.stdout and "writers-room  ben" in listed.stdout, listed.stdout
    as_json = command("--store", path, "runs", "--json", prefix=prefix)
    assert json.loads(as_json.stdout) == writable, "every run, as the writable store gives them"
    assert as_json.stderr.splitlines() == [notice]
    shown = command("--store", path, "show", ana[:8], prefix=prefix)
    assert shown.returncode == 0, shown.stderr
    assert "invoke_workflow writers-room" in shown.stdout and "execute_tool web_search" in shown.stdout
    assert shown.stderr.splitlines() == [notice]
    explained = command("--store", path, "explain", ana[:8], "--json", prefix=prefix)
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["run"]["run_id"] == ana
    assert explained.stderr.splitlines() == [notice], "one notice, however often the store is read"

    assert fingerprint(store) == before, "the read wrote nothing: no -shm made, the database's bytes unchanged"


@pytest.mark.parametrize("way", list(WAYS))
def test_runs_still_in_the_write_ahead_log_are_read_where_its_shm_file_is_there(store: Path, way: str) -> None:
    # another connection kept open (then killed) keeps the demo's writer from folding its log into the file
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(store / DATABASE)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "\n"
        again = command("--store", store, "demo")
        assert again.returncode == 0, again.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (store / f"{DATABASE}-wal").stat().st_size > 0 and (store / f"{DATABASE}-shm").exists()
    path, prefix = WAYS[way](store)
    before = fingerprint(store)

    done = command("--store", path, "runs", "--json", prefix=prefix)
    assert done.returncode == 0, done.stderr
    assert sorted(run["user_id"] for run in json.loads(done.stdout)) == ["ana", "ana", "ben", "ben"]
    assert done.stderr == "", "read with its log, the view misses nothing: no notice"
    assert fingerprint(store) == before


@pytest.mark.parametrize("way", list(WAYS))
def test_an_older_store_it_cannot_write_is_read_as_it_is(store: Path, way: str) -> None:
    # Changed in schema 4: such a store was refused ("it cannot be migrated"); readers never migrate
    # now, so it is read as it is, what it lacks made up in memory
    writable = json.loads(command("--store", store, "runs", "--json").stdout)
    StoreWriter(store).settle()
    with sqlite3.connect(store / DATABASE) as connection:
        connection.execute("DROP TABLE run_summaries")
        connection.execute("DROP TABLE run_calls")
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    connection.close()
    path, prefix = WAYS[way](store)
    before = fingerprint(store)

    done = command("--store", path, "runs", "--json", prefix=prefix)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == writable, "every run with its turns and findings, computed in memory"
    cost = command("--store", path, "cost", "--by", "model", "--json", prefix=prefix)
    assert cost.returncode == 0 and json.loads(cost.stdout)[0]["runs"] == 2, cost.stderr
    assert fingerprint(store) == before


@pytest.mark.parametrize("kept", ["directory", "file"])
def test_another_users_store_kept_to_themselves_is_an_error_not_no_runs(store: Path, kept: str) -> None:
    path, prefix = another_users_files(store)
    owners_only = os.geteuid() == 0  # as the store is made (else one's own, closed to all)
    if kept == "directory":
        path.chmod(0o700 if owners_only else 0o000)
    else:
        (path / DATABASE).chmod(0o600 if owners_only else 0o000)

    done = command("--store", path, "runs", prefix=prefix)
    assert (done.returncode, done.stdout) == (1, "")
    why = {
        "directory": f"its directory is not open to you (its owner can share it: chmod a+rx {path}, and a+r on "
        "the file)",
        "file": "the file is not readable by you (its owner can share it: chmod a+r)",
    }[kept]
    assert done.stderr.splitlines() == [f"otel-agents: error: cannot read the store at {path / DATABASE}: {why}"]

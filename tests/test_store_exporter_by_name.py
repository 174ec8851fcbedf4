"""The embedded store as a traces exporter by name (DESIGN section 3, "Settings"): an app of ours
run unchanged by `opentelemetry-instrument` with the documented recipe,

    OTEL_TRACES_EXPORTER=otel_agents_store OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none

writes its runs to the store the CLI reads, behind the content guard, quietly: nothing connects
to the distro's default OTLP endpoint (localhost:4317), and stderr is empty."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from otel_agents._internal.export.store.reader import Store
from tests.support.forks import said_in_a_forked_child
from tests.support.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "support" / "zero_code_app.py"
BIN = Path(sys.executable).parent
RECIPE = {"OTEL_TRACES_EXPORTER": "otel_agents_store", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}


class Listener:
    """Listens on 127.0.0.1:4317, the distro's default OTLP/gRPC endpoint, counting connections."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind(("127.0.0.1", 4317))
        except OSError as error:
            pytest.fail(f"127.0.0.1:4317 is taken ({error}): this test watches it")
        self.socket.listen(8)
        self.socket.settimeout(0.2)
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.socket.accept()
            except OSError:
                continue
            self.connections += 1
            client.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close()


def test_the_recipe_writes_the_store_quietly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    listener = Listener()
    try:
        with OpenAIServer() as server:
            done = subprocess.run(
                [str(BIN / "opentelemetry-instrument"), sys.executable, str(APP)],
                env={
                    "PATH": os.environ["PATH"],
                    "PYTHONPATH": str(ROOT),
                    "HOME": str(tmp_path),
                    "XDG_DATA_HOME": str(tmp_path / "data"),
                    "OPENAI_BASE_URL": server.base_url,
                    "OPENAI_API_KEY": "test-key",
                    "OTEL_AGENTS_STORE": str(store),
                    # the other instrumentations installed here capture content of their own
                    "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "autogen_agentchat,openai,httpx,httpx2",
                    **RECIPE,
                },
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", done.stderr[-3000:]
    assert listener.connections == 0, "nothing connects to localhost:4317"
    runs = Store(store).runs(limit=None)
    assert [run.team for run in runs] == ["writers-room"] * 2 and {run.stop_kind for run in runs} == {"max_messages"}
    for run in runs:
        spans = Store(store).spans(run.trace_id)
        assert len([s for s in spans if s.parent_span_id is None]) == 1, "each run one trace"
        assert "Write a line about tracing." not in json.dumps([s.attributes for s in spans]), "no content"
    listed = subprocess.run(
        [str(BIN / "otel-agents"), "--store", str(store), "runs", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert len(json.loads(listed.stdout)) == 2


def _exported_in_a_forked_child(exporter: object, span: object) -> tuple[str, int]:
    """What `exporter.export([span])` returns in a child forked now (its name), and the child's wait
    status (`said_in_a_forked_child`)."""
    return said_in_a_forked_child(lambda: exporter.export([span]).name)  # type: ignore[attr-defined]


def _the_child_writes_its_own_span(
    exporter: object, store: Path, forking: threading.Event, writer: threading.Thread
) -> None:
    """A child forked while `writer` writes to `store`, half-way until `forking` is set, exports a
    span of its own, and the store then holds it."""
    span = _ended_span("the child's")
    try:
        said, status = _exported_in_a_forked_child(exporter, span)
    finally:
        forking.set()  # (without the fork's wait: after the fork)
        writer.join(timeout=30)
    assert said == "SUCCESS", f"the child's export: {said or 'stuck'} (wait status {status})"
    assert len(Store(store).spans(format(span.get_span_context().trace_id, "032x"))) == 1


def _ended_span(name: str) -> Any:
    from opentelemetry.sdk.trace import TracerProvider

    span = TracerProvider().get_tracer("fork").start_span(name)
    span.end()
    return span


@pytest.mark.every_python
def test_a_child_forked_while_the_guard_was_busy_still_writes_its_own_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker pool forks while the parent's export thread is inside the content guard (its locks
    held then): the child's own exports are written, not left waiting for ever on locks nobody in
    it releases."""
    from otel_agents._internal.export.store_exporter import StoreExporter

    monkeypatch.setenv("OTEL_AGENTS_STORE", str(tmp_path / "store"))
    exporter = StoreExporter()
    span = _ended_span("a span")
    held = (exporter._guarded._lock, exporter._guarded._one_at_a_time)
    for lock in held:  # as the parent's export thread holds them
        lock.acquire()
    try:
        said, status = _exported_in_a_forked_child(exporter, span)
    finally:
        for lock in held:
            lock.release()
    assert said == "SUCCESS", f"the child's export: {said or 'stuck on a lock'} (wait status {status})"
    assert len(Store(tmp_path / "store").spans(format(span.get_span_context().trace_id, "032x"))) == 1


@pytest.mark.every_python
def test_a_fork_waits_for_the_store_write_under_way_so_the_child_writes_its_own_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork in the middle of the parent's store write would leave SQLite's locks of that write's
    transaction in the child ("database is locked" at each of its writes): the fork waits for that
    write to end, and the child then writes its own spans."""
    import sqlite3

    from otel_agents._internal.export.store_exporter import StoreExporter
    from otel_agents._internal.export.store_path import DATABASE

    monkeypatch.setenv("OTEL_AGENTS_STORE", str(tmp_path / "store"))
    exporter = StoreExporter()
    assert exporter.export([_ended_span("the first")]).name == "SUCCESS"  # the database exists
    store = exporter._guarded.exporter
    in_transaction, forking = threading.Event(), threading.Event()

    def write_until_a_fork_comes() -> None:  # the parent's export thread, half-way through a write
        with store._lock:
            connection = sqlite3.connect(tmp_path / "store" / DATABASE, isolation_level=None)
            connection.execute("BEGIN IMMEDIATE")
            in_transaction.set()
            forking.wait()
            connection.execute("COMMIT")
            connection.close()

    waits_for_the_write = store._lock.before_fork

    def fork_comes() -> None:
        forking.set()  # the write goes on to its end
        waits_for_the_write()

    monkeypatch.setattr(store._lock, "before_fork", fork_comes)
    writer = threading.Thread(target=write_until_a_fork_comes)
    writer.start()
    assert in_transaction.wait(timeout=30)
    _the_child_writes_its_own_span(exporter, tmp_path / "store", forking, writer)


@pytest.mark.every_python
def test_a_fork_waits_for_an_outcome_being_stored_so_the_child_writes_its_own_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, for an outcome recorded after its run's end, which `record_outcome` writes to the
    store itself (outside the exporter): here the parent's write stops half-way, in its transaction,
    until a fork comes."""
    from contextlib import contextmanager

    from otel_agents._internal.export.store import writer
    from otel_agents._internal.export.store_exporter import StoreExporter

    monkeypatch.setenv("OTEL_AGENTS_STORE", str(tmp_path / "store"))
    exporter = StoreExporter()
    assert exporter.export([_ended_span("the first")]).name == "SUCCESS"  # the database exists
    in_transaction, forking = threading.Event(), threading.Event()
    connect = writer.StoreWriter._connect

    @contextmanager
    def half_way_until_a_fork_comes(self: Any, *, create: bool) -> Any:
        if threading.current_thread().name != "the outcome's write":  # the exporter's writes: as they are
            with connect(self, create=create) as connection:
                yield connection
            return
        with connect(self, create=create) as connection:
            connection.execute("BEGIN IMMEDIATE")
            yield connection  # the outcome's row written in the transaction
            in_transaction.set()
            forking.wait()
            connection.execute("COMMIT")

    monkeypatch.setattr(writer.StoreWriter, "_connect", half_way_until_a_fork_comes)
    writes = writer._outcome_writes
    waits_for_the_write = writes.before_fork

    def fork_comes() -> None:
        if writes.lock.acquire(blocking=False):
            return  # no write under way: the lock held across the fork, as `before_fork` holds it
        forking.set()  # a write under way goes on to its end, and the fork waits for it
        waits_for_the_write()

    monkeypatch.setattr(writes, "before_fork", fork_comes)
    outcome = threading.Thread(
        target=lambda: writer.StoreWriter(tmp_path / "store").write_outcome("run-1", "review", "accepted", None),
        name="the outcome's write",
    )
    outcome.start()
    assert in_transaction.wait(timeout=30)
    _the_child_writes_its_own_span(exporter, tmp_path / "store", forking, outcome)
    assert [o.label for o in Store(tmp_path / "store").outcomes(["run-1"])["run-1"]] == ["accepted"], (
        "the parent's outcome"
    )

"""The embedded store: survives the process, takes concurrent writers, stays small, never raises."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.export.store.writer import StoreSpanExporter
from otel_agents._internal.export.store_path import DATABASE
from tests.support.teams import writers_room

pytestmark = [pytest.mark.every_python]

ROOT = Path(__file__).resolve().parents[1]


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def run_teams_in_a_process(store: Path, runs: int, name: str) -> subprocess.Popen[str]:
    code = textwrap.dedent(
        f"""
        import asyncio, otel_agents
        from tests.support.teams import writers_room

        async def main():
            with otel_agents.configure(store={str(store)!r}):
                for i in range({runs}):
                    async for _ in otel_agents.tap(writers_room(max_messages=3, name={name!r}).run_stream(task="go")):
                        pass
        asyncio.run(main())
        """
    )
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, text=True, stderr=subprocess.PIPE)


def test_runs_survive_the_process_that_wrote_them(tmp_path: Path) -> None:
    writer = run_teams_in_a_process(tmp_path, 2, "first-process")
    _, errors = writer.communicate(timeout=120)
    assert writer.returncode == 0, errors

    runs = Store(tmp_path).runs()
    assert [r.team for r in runs] == ["first-process", "first-process"]
    assert all(r.messages == 3 and r.stop_kind == "max_messages" for r in runs)


def test_two_processes_writing_at_once(tmp_path: Path) -> None:
    writers = [run_teams_in_a_process(tmp_path, 15, f"process-{i}") for i in range(2)]
    for writer in writers:
        _, errors = writer.communicate(timeout=180)
        assert writer.returncode == 0, errors

    runs = Store(tmp_path).runs()
    assert sorted(r.team or "" for r in runs) == ["process-0"] * 15 + ["process-1"] * 15
    with sqlite3.connect(tmp_path / DATABASE) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    for run in runs:
        spans = Store(tmp_path).spans(run.trace_id)
        assert len([s for s in spans if s.name.startswith("message ")]) == 3


async def test_spans_keep_their_ids_and_timestamps(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    with otel_agents.configure(store=tmp_path) as telemetry:
        telemetry.sdk_tracer_provider.add_span_processor(SimpleSpanProcessor(memory))  # type: ignore[attr-defined]
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
        telemetry.force_flush()

    captured = {
        (format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")): s for s in memory.get_finished_spans()
    }
    stored = Store(tmp_path).spans()
    assert {(s.trace_id, s.span_id) for s in stored} == set(captured)
    for span in stored:
        original = captured[(span.trace_id, span.span_id)]
        assert (span.start_ns, span.end_ns, span.name) == (original.start_time, original.end_time, original.name)
        expected_parent = format(original.parent.span_id, "016x") if original.parent else None
        assert span.parent_span_id == expected_parent
    run = Store(tmp_path).runs()[0]
    root = next(s for s in memory.get_finished_spans() if s.parent is None)
    assert run.run_id == root.attributes["otel_agents.run.id"]
    assert run.input_tokens == root.attributes["gen_ai.usage.input_tokens"]


async def test_the_store_stays_under_its_size_by_dropping_the_oldest_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_AGENTS_STORE_MAX_MB", "0.15")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "1")  # export each run promptly
    with otel_agents.configure(store=tmp_path) as telemetry:
        for i in range(40):
            await drain(otel_agents.tap(writers_room(max_messages=6, name=f"run-{i:02d}").run_stream(task="go" * 50)))
            telemetry.force_flush()

    store = Store(tmp_path)
    runs = store.runs()
    assert 0 < len(runs) < 40, "some runs were dropped, not all"
    assert runs[0].team == "run-39", "the newest run is kept"
    kept = sorted(r.team or "" for r in runs)
    assert kept == [f"run-{i:02d}" for i in range(40 - len(runs), 40)], "the oldest went first"
    with sqlite3.connect(tmp_path / DATABASE) as connection:
        used = [connection.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "freelist_count", "page_size")]
    assert (used[0] - used[1]) * used[2] <= 0.15 * 1024 * 1024
    assert {s.trace_id for s in store.spans()} == {r.trace_id for r in runs}, "whole traces dropped"


async def test_an_unwritable_store_drops_and_counts_spans_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "store"
    exporter = StoreSpanExporter(directory)
    with otel_agents.configure(span_exporter=exporter) as telemetry:
        await drain(otel_agents.tap(writers_room(max_messages=3, name="before").run_stream(task="go")))
        telemetry.force_flush()
        assert exporter.dropped_spans == 0
        shutil.rmtree(directory)
        directory.write_text("the disk went away")  # the store's place is now a plain file
        items = await drain(otel_agents.tap(writers_room(max_messages=3, name="after").run_stream(task="go")))
        telemetry.force_flush()
        await drain(otel_agents.tap(writers_room(max_messages=2, name="later").run_stream(task="go")))
        telemetry.force_flush()

    assert [type(i).__name__ for i in items] == ["TextMessage"] * 3 + ["TaskResult"]
    assert exporter.dropped_spans >= 7 + 5
    outage = [r for r in caplog.records if r.levelno >= logging.WARNING and "until it" in r.getMessage()]
    assert len(outage) == 1, "one line per outage, not one per batch nor one per layer"
    assert f"{directory} is a file, not a directory: give a directory for the store" in outage[0].getMessage()
    assert outage[0].levelno == logging.WARNING


@pytest.mark.parametrize("named_by", ["store", "OTEL_AGENTS_STORE"])
def test_a_store_path_that_is_a_file_is_refused_naming_the_path_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named_by: str
) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a store")
    for path, says in (
        (a_file, f"{a_file} is a file, not a directory: give a directory for the store"),
        (a_file / "store", f"{a_file} is a file, so the store directory {a_file / 'store'} cannot be made in it"),
    ):
        kwargs: dict[str, Any] = {"store": path} if named_by == "store" else {}
        if named_by == "OTEL_AGENTS_STORE":
            monkeypatch.setenv("OTEL_AGENTS_STORE", str(path))
        with pytest.raises(otel_agents.ConfigError) as raised:
            otel_agents.configure(set_global=False, **kwargs)
        assert str(raised.value).startswith(f"{named_by}={str(path)!r}: {says}"), raised.value
        assert "Error" not in str(raised.value), "words, not an OS error's name"


def test_the_default_store_in_a_place_that_is_a_file_never_stops_the_app_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    (tmp_path / "otel-agents").write_text("in the way")
    with otel_agents.configure(set_global=False) as telemetry:
        with telemetry.tracer_provider.get_tracer("t").start_as_current_span("a span"):
            pass
        telemetry.force_flush()
    (outage,) = [r.getMessage() for r in caplog.records if "until it" in r.getMessage()]
    assert f"{tmp_path / 'otel-agents'} is a file, so the store directory" in outage, outage


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to any directory: there is nothing to refuse")
def test_a_store_directory_without_write_permission_is_refused_naming_the_path_and_the_fix(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        for path, says in (
            (locked, f"the store directory {locked} is not writable by you: fix its permissions"),
            (locked / "store", f"cannot make the store directory {locked / 'store'}: {locked} is not writable by you"),
        ):
            with pytest.raises(otel_agents.ConfigError) as raised:
                otel_agents.configure(set_global=False, store=path)
            assert str(raised.value).startswith(f"store={str(path)!r}: ") and says in str(raised.value)
    finally:
        locked.chmod(0o700)


async def test_the_store_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    directory = tmp_path / "private"
    with otel_agents.configure(store=directory) as telemetry:
        await drain(otel_agents.tap(writers_room(max_messages=2).run_stream(task="go")))
        telemetry.force_flush()
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(directory / DATABASE).st_mode) == 0o600


def test_the_store_goes_once_onto_a_global_provider_even_one_that_cannot_be_hashed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With OTEL_AGENTS_STORE set and another party's provider global (the distro's; Logfire's
    is a dataclass, compared by value), runs also go to the store: added once per provider."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    from otel_agents._internal.export.global_store import store_into_global_provider

    added: list[SpanProcessor] = []

    class UnhashableTracerProvider(TracerProvider):
        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other: object) -> bool:
            return self is other

        def add_span_processor(self, span_processor: SpanProcessor) -> None:
            added.append(span_processor)
            super().add_span_processor(span_processor)

    provider = UnhashableTracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    monkeypatch.setenv("OTEL_AGENTS_STORE", str(tmp_path / "store"))
    try:
        store_into_global_provider()
        store_into_global_provider()
        assert len(added) == 1
    finally:
        provider.shutdown()

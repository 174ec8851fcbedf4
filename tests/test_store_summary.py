"""The store's per-run summary (schema 4): written by the store's writer with the run, read by `runs`
and `cost` instead of the spans; a store of schema 3 summarised by the next writers a bounded number
of runs at a time while readers compute the missing summaries in memory and write nothing; trimmed
with its run. The runs are real team runs of the real OpenAI client against the local
OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_agents._internal.export.store import writer as store_writer
from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.export.store.writer import StoreWriter
from otel_agents._internal.export.store_path import DATABASE
from otel_agents._internal.report.cost import DIMENSIONS, cost_report, cost_rows, with_outcomes
from tests.support.cli import cli
from tests.support.filled_runs import fill
from tests.support.openai_server import OpenAIServer


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    store = tmp_path_factory.mktemp("summary") / "store"
    with OpenAIServer() as server:
        asyncio.run(fill(store, server))
    yield store


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(store: Path, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store / DATABASE) as connection:
        return list(connection.execute(query))


def as_json(store: Path, *args: str) -> Any:
    done = cli("--store", str(store), *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def schema_3(source: Path, directory: Path) -> Path:
    """`source` as a store of schema 3 holds it: no summaries."""
    shutil.copytree(source, directory)
    with sqlite3.connect(directory / DATABASE) as connection:
        connection.execute("DROP TABLE run_summaries")
        connection.execute("DROP TABLE run_calls")
        connection.execute("PRAGMA user_version = 3")
    connection.close()
    return directory


def test_each_run_is_summarised_as_it_arrives_as_explain_sees_it(filled: Path) -> None:
    listed = as_json(filled, "runs", "--limit", "50")
    stored = {row[0]: row for row in rows(filled, "SELECT run_id, turns, findings FROM run_summaries")}
    assert set(stored) == {run["run_id"] for run in listed} and len(stored) == 5, "every run, with its run row"
    for run in listed:
        explained = as_json(filled, "explain", run["run_id"])
        kinds = list(dict.fromkeys(f["kind"] for f in explained["findings"]))
        assert stored[run["run_id"]][1:] == (explained["run"]["turns"], json.dumps(kinds))
        assert (run["turns"], run["findings"]) == (explained["run"]["turns"], kinds)
    assert {kind for run in listed for kind in run["findings"]} >= {
        "stopped_by_limit",
        "tool_errors",
        "repeated_messages",
        "repeated_tool_calls",
    }


def test_the_summary_holds_what_cost_adds_up_from_the_spans(filled: Path) -> None:
    store = Store(filled)
    runs, calls = store.runs(), store.calls()
    labels = {run_id: o.label for run_id, found in store.outcomes().items() for o in found if o.name == "outcome"}
    for by in DIMENSIONS:
        from_spans = cost_rows(by, runs, calls)  # what `cost` computed before the summaries: every span parsed
        with_outcomes(from_spans, labels)
        report = cost_report(store, by)
        assert [{k: v for k, v in row.items() if k != "run_cost_usd"} for row in report] == [
            row.json() for row in from_spans
        ], by
        assert as_json(filled, "cost", "--by", by) == report


def test_run_cost_is_the_median_p95_and_max_of_the_rows_runs(filled: Path) -> None:
    listed = as_json(filled, "runs", "--limit", "50")
    row = as_json(filled, "cost", "--by", "team", "--outcome", "success")[0]
    assert row["key"] == "review-loop" and row["runs"] == 3
    costs = sorted(run["cost_usd"] for run in listed if run["team"] == "review-loop")
    assert row["run_cost_usd"] == {"median": costs[1], "p95": costs[2], "max": costs[2]}, "nearest rank of 3"
    by_user = {r["key"]: r["run_cost_usd"] for r in as_json(filled, "cost", "--by", "user")}
    anas = sorted(run["cost_usd"] for run in listed if run["user_id"] == "ana")
    assert by_user["ana"] == {"median": anas[0], "p95": anas[1], "max": anas[1]}, "nearest rank of 2: the lower"


def test_a_schema_3_store_is_read_without_writing_and_summarised_by_the_next_writers_a_few_at_a_time(
    filled: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = schema_3(filled, tmp_path / "v3")
    expected = {
        "runs": as_json(filled, "runs", "--limit", "50"),
        **{by: as_json(filled, "cost", "--by", by) for by in DIMENSIONS},
    }

    def read_all(store: Path) -> dict[str, Any]:
        return {
            "runs": as_json(store, "runs", "--limit", "50"),
            **{by: as_json(store, "cost", "--by", by) for by in DIMENSIONS},
        }

    before = sha(old / DATABASE)
    assert read_all(old) == expected, "the missing summaries computed in memory"
    assert sha(old / DATABASE) == before, "the database file's bytes unchanged by the reads"
    assert rows(old, "PRAGMA user_version") == [(3,)]

    monkeypatch.setattr(store_writer, "SUMMARIES_A_WRITE", 2)
    newest = [run["run_id"] for run in expected["runs"]]
    summarised = []
    for write in range(3):
        StoreWriter(old).write([])
        summarised = [row[0] for row in rows(old, "SELECT run_id FROM run_summaries")]
        assert sorted(summarised) == sorted(newest[: 2 * (write + 1)]), "the newest first, two a write"
        assert rows(old, "PRAGMA user_version") == [(4,)]
        assert read_all(old) == expected, "a store half summarised reads as a whole one"
    assert len(summarised) == 5


def test_trimming_removes_summaries_with_their_runs(filled: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(filled, store)
    assert rows(store, "SELECT count(*) FROM run_summaries") == [(5,)]
    assert rows(store, "SELECT count(DISTINCT run_id) FROM run_calls") == [(5,)]
    StoreWriter(store, max_bytes=1).write([])  # every trace goes, oldest first
    for table in ("runs", "run_summaries", "run_calls", "outcomes"):
        assert rows(store, f"SELECT count(*) FROM {table}") == [(0,)], table


def test_a_run_summary_follows_its_late_spans(filled: Path, tmp_path: Path) -> None:
    """A run's span written before some of its children (another batch): its summary is made again
    when they arrive."""
    store = tmp_path / "store"
    shutil.copytree(filled, store)
    ((run_id,),) = rows(store, "SELECT run_id FROM run_summaries WHERE findings LIKE '%tool_errors%'")
    want = rows(store, f"SELECT * FROM run_summaries WHERE run_id = '{run_id}'")
    with sqlite3.connect(store / DATABASE) as connection:
        connection.execute(f"UPDATE run_summaries SET turns = 0, findings = '[]' WHERE run_id = '{run_id}'")
    connection.close()
    (trace_id,) = rows(store, f"SELECT trace_id FROM runs WHERE run_id = '{run_id}'")[0]
    spans = [
        span for span in Store(store).spans(trace_id) if span.attributes.get("gen_ai.operation.name") == "execute_tool"
    ]
    from otel_agents._internal.export.replay import readable_spans

    store_writer.StoreWriter(store).write(readable_spans(spans))  # late spans of the run, written again
    assert rows(store, f"SELECT * FROM run_summaries WHERE run_id = '{run_id}'") == want

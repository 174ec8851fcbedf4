"""`otel-agents runs`' filters and sorts, through the real command, over a store filled by real runs
(the real OpenAI client against the local OpenAI-compatible server; see tests/support/filled_runs.py):
each filter lists exactly the runs of the whole list that match it, each sort orders them as its
figures say, and a bad value exits 2 in one line naming its option."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.report.runs import RunFilter, list_runs, run_filter
from tests.support.cli import cli
from tests.support.filled_runs import fill
from tests.support.openai_server import OpenAIServer

Row = dict[str, Any]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("filters") / "store"
    with OpenAIServer() as server:
        asyncio.run(fill(directory, server))
    yield directory


def runs(store: Path, *args: str) -> list[Row]:
    done = cli("--store", str(store), "runs", "--json", "--limit", "100", *args)
    assert done.returncode == 0, done.stderr
    rows: list[Row] = json.loads(done.stdout)
    return rows


@pytest.fixture(scope="module")
def every(store: Path) -> list[Row]:
    rows = runs(store)
    assert len(rows) == 5
    return rows


def ids(rows: list[Row]) -> list[str]:
    return [row["run_id"] for row in rows]


def labels(row: Row) -> set[str]:
    return {o["label"] if o["name"] == "outcome" else f"{o['name']}={o['label']}" for o in row["outcomes"]}


FILTERS: dict[str, tuple[list[str], Callable[[Row], bool]]] = {
    "team": (["--team", "review-loop"], lambda r: r["team"] == "review-loop"),
    "user": (["--user", "ana"], lambda r: r["user_id"] == "ana"),
    "conversation": (["--conversation", "ticket"], lambda r: (r["conversation_id"] or "").startswith("ticket")),
    "stop kind": (["--stop-kind", "max_messages"], lambda r: r["stop_kind"] == "max_messages"),
    "stop kind none": (["--stop-kind", "error"], lambda r: r["stop_kind"] == "error"),
    "outcome": (["--outcome", "success"], lambda r: "success" in labels(r)),
    "outcome of a name": (["--outcome", "quality=good"], lambda r: "quality=good" in labels(r)),
    "finding": (["--finding", "tool_errors"], lambda r: "tool_errors" in r["findings"]),
    "finding repeated": (["--finding", "repeated_messages"], lambda r: "repeated_messages" in r["findings"]),
    "two at once": (["--user", "ana", "--finding", "repeated_tool_calls"], lambda r: r["user_id"] == "ana"
                    and "repeated_tool_calls" in r["findings"]),
}  # fmt: skip


@pytest.mark.parametrize("name", list(FILTERS))
def test_each_filter_lists_the_runs_that_match_it(store: Path, every: list[Row], name: str) -> None:
    args, matches = FILTERS[name]
    expected = [row for row in every if matches(row)]
    assert runs(store, *args) == expected
    if name not in ("stop kind none",):
        assert (expected and len(expected) < len(every)) or name == "stop kind", "the filter keeps some, not all"


def test_since_and_until_keep_the_runs_started_in_that_range(store: Path, every: list[Row]) -> None:
    started = sorted(datetime.fromisoformat(row["started_at"]) for row in every)
    middle = started[2]
    at = middle.astimezone(UTC).replace(tzinfo=None).isoformat()  # no offset: UTC
    assert runs(store, "--since", at) == [r for r in every if datetime.fromisoformat(r["started_at"]) >= middle]
    assert runs(store, "--until", at) == [r for r in every if datetime.fromisoformat(r["started_at"]) < middle]
    assert runs(store, "--since", "1d") == every and runs(store, "--until", "1d") == []
    shifted = (middle + timedelta(hours=2)).astimezone(UTC).isoformat().replace("+00:00", "+02:00")
    assert runs(store, "--since", shifted) == runs(store, "--since", at), "an offset is honoured"
    day = started[0].date().isoformat()
    assert runs(store, "--since", day) == every, "a date: its midnight, UTC"


SORTS: dict[str, Callable[[Row], Any]] = {
    "cost": lambda r: r["cost_usd"],
    "duration": lambda r: r["duration_s"],
    "tokens": lambda r: r["input_tokens"] + r["output_tokens"],
}


@pytest.mark.parametrize("sort", ["time", *SORTS])
def test_each_sort_orders_the_runs_by_its_figure_highest_first_ties_newest_first(
    store: Path, every: list[Row], sort: str
) -> None:
    listed = runs(store, "--sort", sort)
    assert sorted(ids(listed)) == sorted(ids(every))
    if sort == "time":
        assert listed == every and [r["started_at"] for r in listed] == sorted(
            (r["started_at"] for r in every), reverse=True
        )
        return
    figure = SORTS[sort]
    assert [figure(r) for r in listed] == sorted((figure(r) for r in every), reverse=True)
    assert listed != every, f"the {sort} order differs from the time order in this store"
    newest_first = {row["run_id"]: place for place, row in enumerate(every)}
    for one, other in itertools.pairwise(listed):
        if figure(one) == figure(other):
            assert newest_first[one["run_id"]] < newest_first[other["run_id"]]
    assert runs(store, "--sort", sort, "--limit", "2") == listed[:2]


BAD: list[tuple[list[str], str]] = [
    (["--stop-kind", "looped"], "--stop-kind 'looped': expected one of max_messages, "),
    (["--finding", "slow"], "--finding 'slow': expected one of stopped_by_limit, "),
    (["--since", "yesterday"], "--since 'yesterday': expected a while ago"),
    (["--until", "0d"], "--until '0d': expected a positive number"),
    (["--since", "1d", "--until", "2d"], "--since '1d' is after --until '2d'"),
    (["--outcome", "quality="], "--outcome 'quality=': expected LABEL or NAME=LABEL"),
    (["--sort", "name"], "argument --sort: invalid choice: 'name'"),
]


@pytest.mark.parametrize(("args", "said"), BAD, ids=[" ".join(args) for args, _ in BAD])
def test_a_bad_value_exits_2_in_one_line_naming_its_option(store: Path, args: list[str], said: str) -> None:
    done: subprocess.CompletedProcess[str] = cli("--store", str(store), "runs", *args)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"otel-agents: error: {said}"), line


def test_the_page_and_the_cli_list_the_same_runs(store: Path, every: list[Row]) -> None:
    """`list_runs` is what the web page calls: its rows are `runs --json`'s, its total counts them all."""
    page = list_runs(Store(store), run_filter(user_id="ana"), limit=1)
    assert page.rows == [row for row in every if row["user_id"] == "ana"][:1] and page.total == 2
    second = list_runs(Store(store), RunFilter(), sort="tokens", limit=2, offset=2)
    assert second.rows == runs(store, "--sort", "tokens")[2:4] and second.total == 5
    assert run_filter(since="", team="") == RunFilter(), "empty values (an empty form field) filter nothing"

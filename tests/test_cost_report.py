"""`otel-agents cost --by ...`, `runs --user/--conversation/--team` and `show`'s conversation, on a
real store filled by real team runs (replay clients that name their models, priced by `prices=`).

The runs, at $1, $3 and $2 per million input tokens for model-a, model-b and model-c (and $2, $5
and $4 per million output tokens), so each call costs a whole number of micro-dollars:

| run | user | team | conversation | calls (agent: model input/output) | cost (micro-$) |
|---|---|---|---|---|---|
| R1, R2 | ana | drafting (one team object) | shared, made at R1 | writer: a 100/10, critic: b 200/20 | 120 + 700 |
| R3 | ben | drafting | `ticket-42` | the same | 820 |
| R4 | - | local | its own | writer: x 50/5 (no price), critic: a 40/4 | 48 priced, 55 tokens unpriced |
| R5 | carol | panel (a SelectorGroupChat) | its own | selector: c 60/1, c 70/1; writer: a 10/1; critic: b 20/2 | 350 |
| R6 | - | drafting | its own | as R1 | 820 |
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat
from autogen_core.models import CreateResult
from autogen_ext.models.replay import ReplayChatCompletionClient

import otel_agents
from otel_agents._internal.export.store.reader import Store, StoredRun
from otel_agents._internal.export.store_path import DATABASE
from tests.support.cli import cli
from tests.support.teams import MODEL_INFO, text

pytestmark = [pytest.mark.lowest_versions]

ROOT = Path(__file__).resolve().parents[1]
PRICES = {
    "model-a": {"input": 1, "output": 2},
    "model-b": {"input": 3, "output": 5},
    "model-c": {"input": 2, "output": 4},
}


class NamedModel(ReplayChatCompletionClient):
    """A replay client that reports its model name, as real clients do (so its calls are priced)."""

    def __init__(self, model: str, *replies: CreateResult) -> None:
        super().__init__(list(replies), model_info=MODEL_INFO)
        self.model = model


def drafting(runs: int = 1) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=NamedModel("model-a", *[text("draft", 100, 10)] * runs))
    critic = AssistantAgent("critic", model_client=NamedModel("model-b", *[text("notes", 200, 20)] * runs))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3), name="drafting")


def local() -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=NamedModel("model-x", text("draft", 50, 5)))
    critic = AssistantAgent("critic", model_client=NamedModel("model-a", text("notes", 40, 4)))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3), name="local")


def panel() -> SelectorGroupChat:
    writer = AssistantAgent("writer", model_client=NamedModel("model-a", text("draft", 10, 1)))
    critic = AssistantAgent("critic", model_client=NamedModel("model-b", text("APPROVE", 20, 2)))
    return SelectorGroupChat(
        [writer, critic],
        model_client=NamedModel("model-c", text("writer", 60, 1), text("critic", 70, 1)),
        termination_condition=TextMentionTermination("APPROVE"),
        allow_repeated_speaker=True,
        name="panel",
    )


async def record(directory: Path) -> None:
    with otel_agents.configure(store=directory, prices=PRICES) as telemetry:
        ana = drafting(runs=2)
        with otel_agents.run_attributes(user_id="ana", session_id="ana-session"):
            await ana.run(task="first")  # R1
            await ana.run(task="second")  # R2, the same conversation
        with otel_agents.run_attributes(user_id="ben", conversation_id="ticket-42"):
            await drafting().run(task="go")  # R3
        await local().run(task="go")  # R4
        with otel_agents.run_attributes(user_id="carol"):
            await panel().run(task="go")  # R5
        await drafting().run(task="go")  # R6
        telemetry.force_flush()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("attributed-store")
    asyncio.run(record(directory))
    return directory


def cost_json(store: Path, by: str, *more: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    done = cli("--store", str(store), "cost", "--by", by, "--json", *more, env=env)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    for each in rows:  # a key added since these rows were pinned: its figures are tested in test_store_summary.py
        assert set(each.pop("run_cost_usd")) == {"median", "p95", "max"}
    return rows


def row(
    key: str,
    runs: int,
    tokens_in: int,
    tokens_out: int,
    micro_usd: int | None,
    unpriced: tuple[int, int] = (0, 0),
    unknown_usage_calls: int = 0,
) -> dict[str, Any]:
    """A JSON row; `unpriced`: (calls, tokens) with no price."""
    cost = None if micro_usd is None else micro_usd / 1_000_000
    return {
        "key": key,
        "runs": runs,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost_usd": cost,
        "unpriced_calls": unpriced[0],
        "unpriced_tokens": unpriced[1],
        "unknown_usage_calls": unknown_usage_calls,
    }


def assert_one_line_error(done: subprocess.CompletedProcess[str], text: str) -> None:
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("otel-agents: error: ") and text in line, line
    assert "Traceback" not in done.stderr


def runs_of(store: Path) -> dict[str, StoredRun]:
    """The six runs by name (R1..R6), told apart by what the table above says of each."""
    runs = sorted(Store(store).runs(), key=lambda r: r.started_ns)
    assert len(runs) == 6
    return {f"R{i}": run for i, run in enumerate(runs, start=1)}


def test_the_store_keeps_who_ran_each_run_and_its_conversation(store: Path) -> None:
    runs = runs_of(store)
    assert [runs[r].user_id for r in sorted(runs)] == ["ana", "ana", "ben", None, "carol", None]
    assert [runs[r].team for r in sorted(runs)] == ["drafting"] * 3 + ["local", "panel", "drafting"]
    assert runs["R1"].session_id == runs["R2"].session_id == "ana-session" and runs["R3"].session_id is None
    assert runs["R1"].conversation_id == runs["R2"].conversation_id, "one team object: one conversation"
    assert runs["R3"].conversation_id == "ticket-42"
    conversations = {run.conversation_id for run in runs.values()}
    assert None not in conversations and len(conversations) == 5
    assert runs["R4"].cost_usd is None, "a call without a price: the run has no total cost"
    assert [runs[r].cost_usd for r in ("R1", "R3", "R5", "R6")] == pytest.approx([820e-6, 820e-6, 350e-6, 820e-6])


def test_cost_by_user_team_and_conversation_come_from_the_runs(store: Path) -> None:
    runs = runs_of(store)
    assert cost_json(store, "user") == [
        row("ana", 2, 600, 60, 1640),
        row("ben", 1, 300, 30, 820),
        row("carol", 1, 160, 5, 350),
        row("(none)", 2, 390, 39, 868, unpriced=(1, 55)),  # R6 and R4: no user; R4's writer has no price
    ]
    assert cost_json(store, "team") == [
        row("drafting", 4, 1200, 120, 3280),
        row("panel", 1, 160, 5, 350),
        row("local", 1, 90, 9, 48, unpriced=(1, 55)),
    ]
    by_conversation = {r["key"]: r for r in cost_json(store, "conversation")}
    assert by_conversation[str(runs["R1"].conversation_id)] == row(str(runs["R1"].conversation_id), 2, 600, 60, 1640)
    assert by_conversation["ticket-42"] == row("ticket-42", 1, 300, 30, 820)
    r4 = str(runs["R4"].conversation_id)
    assert by_conversation[r4] == row(r4, 1, 90, 9, 48, unpriced=(1, 55))
    assert len(by_conversation) == 5


def test_cost_by_model_and_agent_come_from_the_model_calls(store: Path) -> None:
    assert cost_json(store, "model") == [
        row("model-b", 5, 4 * 200 + 20, 4 * 20 + 2, 4 * 700 + 70),
        row("model-a", 6, 4 * 100 + 40 + 10, 4 * 10 + 4 + 1, 4 * 120 + 48 + 12),  # R4's critic is priced
        row("model-c", 1, 130, 2, 268),
        row("model-x", 1, 50, 5, None, unpriced=(1, 55)),  # R4's writer: its tokens counted, its cost unknown
    ]
    assert cost_json(store, "agent") == [
        row("critic", 6, 4 * 200 + 40 + 20, 4 * 20 + 4 + 2, 4 * 700 + 48 + 70),
        row("writer", 6, 4 * 100 + 10 + 50, 4 * 10 + 1 + 5, 4 * 120 + 12, unpriced=(1, 55)),
        row("(none)", 1, 130, 2, 268),  # the SelectorGroupChat choosing speakers: no agent
    ]


@pytest.mark.parametrize("by", ["team", "model", "agent", "user", "conversation", "day"])
def test_the_rows_add_up_exactly_to_the_runs(store: Path, by: str) -> None:
    runs = Store(store).runs()
    rows = cost_json(store, by)
    assert len({r["key"] for r in rows}) == len(rows)
    assert sum(r["input_tokens"] for r in rows) == sum(run.input_tokens or 0 for run in runs)
    assert sum(r["output_tokens"] for r in rows) == sum(run.output_tokens or 0 for run in runs)
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    micro = [round(cost * 1e6) for cost in priced]
    assert [m / 1e6 for m in micro] == priced, "whole micro-dollars"
    priced_runs = sum(round(run.cost_usd * 1e6) for run in runs if run.cost_usd is not None)
    assert sum(micro) == priced_runs + 48, "every report counts the priced call of R4, which has no total cost"
    assert (sum(r["unpriced_calls"] for r in rows), sum(r["unpriced_tokens"] for r in rows)) == (1, 55)
    if by not in ("model", "agent"):  # one row per run: the runs counted add up to all of them
        assert sum(r["runs"] for r in rows) == len(runs)
    table = cli("--store", str(store), "cost", "--by", by).stdout.splitlines()
    (total_line,) = [line for line in table if line.split()[:1] == ["total"]]
    assert total_line.split()[4:6] == [f"${sum(micro) // 10**6}.{sum(micro) % 10**6:06d}", "-"], "the rows' sum"


def test_run_rows_agree_with_the_runs_grouped_by_hand(store: Path) -> None:
    calls = Store(store).calls()
    expected: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for run in Store(store).runs():
        key = run.team or "(none)"
        mine = [c for c in calls if c.run_id == run.run_id]
        expected[key][0] += 1
        expected[key][1] += run.input_tokens or 0
        expected[key][2] += run.output_tokens or 0
        if run.cost_usd is not None:
            expected[key][3] += round(run.cost_usd * 1e6)
        else:  # the priced part: here each call costs whole micro-dollars
            expected[key][3] += sum(round(c.cost_usd * 1e6) for c in mine if c.cost_usd is not None)
        expected[key][4] += sum(1 for c in mine if c.cost_usd is None)
    got = {
        r["key"]: [r["runs"], r["input_tokens"], r["output_tokens"], round(r["cost_usd"] * 1e6), r["unpriced_calls"]]
        for r in cost_json(store, "team")
    }
    assert got == dict(expected)


def test_the_cost_table_has_a_bar_per_priced_row_and_an_exact_total_and_marks_what_has_no_price(
    store: Path,
) -> None:
    done = cli("--store", str(store), "cost", "--by", "agent")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("cost by agent: model calls of 6 runs")
    header = next(line for line in lines if "AGENT" in line)
    assert header.split() == ["AGENT", "RUNS", "INPUT", "TOKENS", "OUTPUT", "TOKENS", "COST", "(USD)", "SHARE"]
    rows = {
        line.split()[0]: line
        for line in lines
        if line.split() and line.split()[0] in ("critic", "writer", "(none)", "total")
    }
    assert rows["critic"].split()[1:6] == ["6", "860", "86", "$0.002918", "79.3%"]
    assert "█" in rows["critic"] and "█" in rows["writer"] and "█" in rows["(none)"]
    assert rows["writer"].split()[1:7] == ["6", "460", "46", "$0.000492", "-", "13.4%"], "priced part, marked"
    assert rows["total"].split()[1:6] == ["6", "1,450", "134", "$0.003678", "-"], "2918 + 492 + 268 micro-dollars"
    assert rows["critic"].index("$0.002918") == rows["writer"].index("$0.000492"), "the digits stay in line"
    bar = {k: rows[k].count("█") for k in ("critic", "writer")}
    assert bar["critic"] == 24 and 3 <= bar["writer"] <= 4, "bars are to scale: 492 / 2918 of 24 cells"
    assert lines[-1] == "- 55 tokens (1 model call) had no price: they are not in the cost"


def single(name: str, model: str, *replies: CreateResult) -> RoundRobinGroupChat:
    """A team of one agent whose model makes one call per run."""
    agent = AssistantAgent("talker", model_client=NamedModel(model, *replies))
    return RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(2), name=name)


async def test_two_users_on_an_unpriced_model_keep_a_row_each(tmp_path: Path) -> None:
    with otel_agents.configure(store=tmp_path, prices=PRICES) as telemetry:
        with otel_agents.run_attributes(user_id="ana", conversation_id="c-ana"):
            team = single("notes", "model-x", text("one", 100, 10), text("two", 100, 10))
            await team.run(task="one")
            await team.run(task="two")
        with otel_agents.run_attributes(user_id="ben", conversation_id="c-ben"):
            await single("helpdesk", "model-x", text("three", 100, 10)).run(task="three")
        telemetry.force_flush()

    assert cost_json(tmp_path, "user") == [
        row("ana", 2, 200, 20, None, unpriced=(2, 220)),
        row("ben", 1, 100, 10, None, unpriced=(1, 110)),
    ]
    assert [(r["key"], r["runs"]) for r in cost_json(tmp_path, "team")] == [("notes", 2), ("helpdesk", 1)]
    assert [(r["key"], r["runs"]) for r in cost_json(tmp_path, "conversation")] == [("c-ana", 2), ("c-ben", 1)]
    assert cost_json(tmp_path, "agent") == [row("talker", 3, 300, 30, None, unpriced=(3, 330))]
    done = cli("--store", str(tmp_path), "cost", "--by", "user")
    assert done.returncode == 0, done.stderr
    cells = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line.split()}
    assert cells["ana"] == ["2", "200", "20", "-"] and cells["ben"] == ["1", "100", "10", "-"], "no cost, no bar"
    assert cells["total"] == ["3", "300", "30", "-"]
    assert done.stdout.splitlines()[-1] == "- 330 tokens (3 model calls) had no price: they are not in the cost"


async def record_unknown_usage(directory: Path) -> None:
    """Three users' runs with calls that reported no usage (docs/cli.md shows their cost report)."""
    with otel_agents.configure(store=directory, prices=PRICES) as telemetry:
        with otel_agents.run_attributes(user_id="dana"):  # the writer's call priced, the critic's usage unknown
            writer = AssistantAgent("writer", model_client=NamedModel("model-a", text("draft", 100, 10)))
            critic = AssistantAgent("critic", model_client=NamedModel("model-b", text("notes", 0, 0)))
            await RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3)).run(task="go")
        with otel_agents.run_attributes(user_id="eve"):  # nothing known
            await single("blind", "model-b", text("words", 0, 0)).run(task="go")
        with otel_agents.run_attributes(user_id="fay"):  # no price, and no usage
            writer = AssistantAgent("writer", model_client=NamedModel("model-x", text("draft", 50, 5)))
            critic = AssistantAgent("critic", model_client=NamedModel("model-b", text("notes", 0, 0)))
            await RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3)).run(task="go")
        telemetry.force_flush()


async def test_calls_that_reported_no_usage_are_marked_with_a_question_mark(tmp_path: Path) -> None:
    await record_unknown_usage(tmp_path)
    assert cost_json(tmp_path, "user") == [
        row("dana", 1, 100, 10, 120, unknown_usage_calls=1),
        row("fay", 1, 50, 5, None, unpriced=(1, 55), unknown_usage_calls=1),
        row("eve", 1, 0, 0, None, unknown_usage_calls=1),
    ]
    assert cost_json(tmp_path, "model") == [
        row("model-a", 1, 100, 10, 120),
        row("model-x", 1, 50, 5, None, unpriced=(1, 55)),
        row("model-b", 3, 0, 0, None, unknown_usage_calls=3),
    ]
    done = cli("--store", str(tmp_path), "cost", "--by", "user")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    cells = {line.split()[0]: line.split()[1:] for line in lines if line.split()}
    assert cells["dana"][:5] == ["1", "100", "10", "$0.000120", "?"], "the priced part, marked"
    assert cells["eve"] == ["1", "0", "0", "?"], "nothing priced: the mark alone"
    assert cells["fay"] == ["1", "50", "5", "-?"], "both marks"
    assert cells["total"] == ["3", "150", "15", "$0.000120", "-?"]
    assert lines[-2:] == [
        "- 55 tokens (1 model call) had no price: they are not in the cost",
        "? 3 model calls reported no usage: their tokens and cost are unknown",
    ]


class Down(NamedModel):
    """A client whose call fails before any usage (the service is down)."""

    async def create(self, *args: Any, **kwargs: Any) -> CreateResult:
        raise ConnectionError("down")


async def test_a_call_that_failed_before_any_usage_costs_nothing_and_marks_nothing(tmp_path: Path) -> None:
    with otel_agents.configure(store=tmp_path, prices=PRICES) as telemetry:
        writer = AssistantAgent("writer", model_client=NamedModel("model-a", text("draft", 100, 10)))
        critic = AssistantAgent("critic", model_client=Down("model-x"))
        team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3), name="flaky")
        with pytest.raises(Exception, match="down"):
            await team.run(task="go")
        telemetry.force_flush()

    (run,) = Store(tmp_path).runs()
    assert run.stop_kind == "error" and run.cost_usd == pytest.approx(120e-6), "the run is priced"
    assert cost_json(tmp_path, "team") == [row("flaky", 1, 100, 10, 120)]
    assert cost_json(tmp_path, "model") == [row("model-a", 1, 100, 10, 120), row("model-x", 1, 0, 0, 0)]
    done = cli("--store", str(tmp_path), "cost", "--by", "model")
    assert "had no price" not in done.stdout and "no usage" not in done.stdout, done.stdout


@pytest.mark.parametrize("by", ["team", "model", "agent", "user", "conversation", "day"])
def test_json_rows_give_the_priced_part_and_count_what_it_leaves_out(store: Path, by: str) -> None:
    rows = cost_json(store, by)
    for r in rows:
        assert list(r) == [
            "key", "runs", "input_tokens", "output_tokens",
            "cost_usd", "unpriced_calls", "unpriced_tokens", "unknown_usage_calls",
        ]  # fmt: skip
        assert isinstance(r["cost_usd"], float) or (r["cost_usd"] is None and r["unpriced_calls"])
        assert all(isinstance(r[k], int) for k in ("unpriced_calls", "unpriced_tokens", "unknown_usage_calls"))
    (mixed,) = [r for r in rows if r["unpriced_calls"]]
    assert (mixed["unpriced_calls"], mixed["unpriced_tokens"], mixed["unknown_usage_calls"]) == (1, 55, 0)
    if by != "model":  # by model, R4's unpriced call has a row of its own (model-x)
        assert mixed["cost_usd"] is not None and round(mixed["cost_usd"] * 1e6) >= 48, "its priced part"


def shifted(store: Path, into: Path, shifts: dict[str, int]) -> Path:
    """A copy of the store whose runs (and their spans) started at other times: run id to new start."""
    shutil.copytree(store, into)
    with sqlite3.connect(into / DATABASE) as connection:
        for run_id, start_ns in shifts.items():
            trace_id, started = connection.execute(
                "SELECT trace_id, started_ns FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            delta = start_ns - started
            connection.execute(
                "UPDATE runs SET started_ns = started_ns + ?, ended_ns = ended_ns + ? WHERE run_id = ?",
                (delta, delta, run_id),
            )
            connection.execute(
                "UPDATE spans SET start_ns = start_ns + ?, end_ns = end_ns + ? WHERE trace_id = ?",
                (delta, delta, trace_id),
            )
    return into


def test_since_keeps_the_runs_started_in_that_last_while(store: Path, tmp_path: Path) -> None:
    import time

    runs = runs_of(store)
    ten_days_ago = time.time_ns() - 10 * 86_400 * 10**9
    old = shifted(store, tmp_path / "old", {runs["R1"].run_id: ten_days_ago, runs["R5"].run_id: ten_days_ago})
    assert cost_json(old, "user", "--since", "7d") == [
        row("ana", 1, 300, 30, 820),
        row("ben", 1, 300, 30, 820),
        row("(none)", 2, 390, 39, 868, unpriced=(1, 55)),
    ]
    assert {r["key"] for r in cost_json(old, "agent", "--since", "24h")} == {"critic", "writer"}, (
        "the calls of the runs kept: the selector's calls were in R5"
    )
    assert [r["key"] for r in cost_json(old, "user", "--since", "11d")][:3] == ["ana", "ben", "carol"]
    assert cost_json(old, "user", "--since", "30m") == cost_json(old, "user", "--since", "7d")
    for bad in ("7", "7x", "-1d", "0d", "d", "1.5h"):
        assert_one_line_error(cli("--store", str(old), "cost", "--by", "user", f"--since={bad}"), f"--since {bad!r}")


def test_days_are_utc_days(store: Path, tmp_path: Path) -> None:
    runs = runs_of(store)
    late = int(datetime(2024, 3, 9, 23, 30, tzinfo=UTC).timestamp()) * 10**9
    early = int(datetime(2024, 3, 10, 0, 30, tzinfo=UTC).timestamp()) * 10**9
    moved = shifted(store, tmp_path / "days", {runs["R1"].run_id: late, runs["R3"].run_id: early})
    new_york = {"TZ": "America/New_York"}  # both the same local day (18:30 and 19:30 on March 9)
    rows = cost_json(moved, "day", env=new_york)
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert [r["key"] for r in rows] == ["2024-03-09", "2024-03-10", today], "dates in order"
    assert rows[0] == row("2024-03-09", 1, 300, 30, 820) and rows[1] == row("2024-03-10", 1, 300, 30, 820)
    assert (rows[2]["runs"], rows[2]["unpriced_calls"]) == (4, 1), "R2, R4, R5, R6; R4's writer has no price"


def test_runs_filtered_by_user_conversation_and_team(store: Path) -> None:
    runs = runs_of(store)

    def listed(*filters: str) -> list[str]:
        done = cli("--store", str(store), "runs", "--json", *filters)
        assert done.returncode == 0, done.stderr
        return sorted(r["run_id"] for r in json.loads(done.stdout))

    def ids(*names: str) -> list[str]:
        return sorted(runs[n].run_id for n in names)

    assert listed("--user", "ana") == ids("R1", "R2")
    assert listed("--user", "carol") == ids("R5")
    assert listed("--team", "drafting") == ids("R1", "R2", "R3", "R6")
    assert listed("--conversation", "ticket-42") == ids("R3")
    conversation = str(runs["R1"].conversation_id)
    assert listed("--conversation", conversation) == ids("R1", "R2")
    assert listed("--conversation", conversation[:8]) == ids("R1", "R2"), "a prefix, as the table shows it"
    assert listed("--team", "drafting", "--user", "ben") == ids("R3")
    assert listed("--team", "panel", "--user", "ana") == []
    assert listed("--user", "nobody") == []
    (shown,) = json.loads(cli("--store", str(store), "runs", "--json", "--user", "ben").stdout)
    assert (shown["user_id"], shown["session_id"], shown["conversation_id"]) == ("ben", None, "ticket-42")
    table = cli("--store", str(store), "runs", "--user", "ana").stdout.splitlines()
    assert len(table) == 3 and all("ana" in line and conversation[:11] in line for line in table[1:])
    none = cli("--store", str(store), "runs", "--user", "nobody")
    assert (none.returncode, none.stdout.strip()) == (0, "no runs match")


def test_show_names_the_conversation_and_lists_its_other_runs(store: Path) -> None:
    runs = runs_of(store)
    conversation = str(runs["R1"].conversation_id)
    done = cli("--store", str(store), "show", runs["R2"].run_id[:10])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[2] == f"user ana  ·  session ana-session  ·  conversation {conversation}"
    at = lines.index(f"1 other run of conversation {conversation}:")
    other = lines[at + 2].split()
    started = datetime.fromtimestamp(runs["R1"].started_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert other[0] == runs["R1"].run_id and " ".join(other[1:3]) == started
    assert other[3:] == ["drafting", "3", "$0.000820", "before"]
    shown = json.loads(cli("--store", str(store), "show", runs["R2"].run_id, "--json").stdout)
    assert [r["run_id"] for r in shown["conversation_runs"]] == [runs["R1"].run_id]
    assert shown["run"]["conversation_id"] == conversation

    first = cli("--store", str(store), "show", runs["R1"].run_id).stdout.splitlines()
    at = first.index(f"1 other run of conversation {conversation}:")
    assert first[at + 2].split()[0] == runs["R2"].run_id and first[at + 2].split()[-1] == "after"

    alone = cli("--store", str(store), "show", runs["R3"].run_id).stdout.splitlines()
    assert alone[2] == "user ben  ·  conversation ticket-42"
    assert "no other runs of conversation ticket-42 in the store" in alone


async def test_show_lists_twenty_other_runs_of_a_long_conversation_then_how_many_more(tmp_path: Path) -> None:
    with otel_agents.configure(store=tmp_path, prices=PRICES) as telemetry:
        team = drafting(runs=23)
        for turn in range(23):
            await team.run(task=f"turn {turn}")
        telemetry.force_flush()
    runs = sorted(Store(tmp_path).runs(), key=lambda r: r.started_ns)
    (conversation,) = {r.conversation_id for r in runs}
    lines = cli("--store", str(tmp_path), "show", runs[-1].run_id).stdout.splitlines()
    at = lines.index(f"22 other runs of conversation {conversation}:")
    listed = [line.split()[0] for line in lines[at + 2 : at + 22]]
    assert listed == [r.run_id for r in runs[:20]], "the first twenty, oldest first"
    assert lines[at + 22] == f"and 2 more: otel-agents runs --conversation {conversation}"
    shown = json.loads(cli("--store", str(tmp_path), "show", runs[-1].run_id, "--json").stdout)
    assert len(shown["conversation_runs"]) == 22, "JSON lists them all"


async def test_runs_sharing_one_trace_are_each_counted_once(tmp_path: Path) -> None:
    from opentelemetry import trace

    with otel_agents.configure(store=tmp_path, prices=PRICES) as telemetry:
        with trace.get_tracer("app").start_as_current_span("web request"):  # both runs in its trace
            with otel_agents.run_attributes(user_id="ana"):
                await drafting().run(task="one")
            with otel_agents.run_attributes(user_id="ben"):
                await drafting().run(task="two")
        telemetry.force_flush()

    stored = Store(tmp_path).runs()
    assert len(stored) == 2 and len({r.trace_id for r in stored}) == 1, "one trace, two runs"
    by_user = {r["key"]: r for r in cost_json(tmp_path, "user")}
    by_model = {r["key"]: r for r in cost_json(tmp_path, "model")}
    assert by_user["ana"]["input_tokens"] == by_user["ben"]["input_tokens"] == 300
    assert (by_model["model-a"]["input_tokens"], by_model["model-b"]["input_tokens"]) == (200, 400)
    assert sum(r["cost_usd"] for r in by_model.values()) == sum(r["cost_usd"] for r in by_user.values())
    shown = cli("--store", str(tmp_path), "show", stored[0].run_id).stdout
    assert shown.count("invoke_workflow drafting") == 1, "one run's tree, not the whole trace"

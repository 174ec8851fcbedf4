"""`otel-agents cost` with nothing more totals per team, and `--outcome` names the outcome it
counts: `NAME=LABEL`, or `LABEL` alone for the default name (`outcome`).

Three runs, each a writer on model-a ($1 in, $2 out per million tokens), 100 tokens in and 10 out:
120 micro-dollars a run.

| run | team | outcome | quality |
|---|---|---|---|
| R1 | drafting | success | good |
| R2 | drafting | failure | good |
| R3 | review | - | poor |
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.replay import ReplayChatCompletionClient

import otel_agents
from tests.support.cli import cli
from tests.support.teams import MODEL_INFO, text

PRICES = {"model-a": {"input": 1, "output": 2}}


def team(name: str) -> RoundRobinGroupChat:
    client = ReplayChatCompletionClient([text("draft", 100, 10)], model_info=MODEL_INFO)
    client.model = "model-a"  # type: ignore[attr-defined]  # named, so priced
    writer = AssistantAgent("writer", model_client=client)
    return RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2), name=name)


async def record(store: Path) -> None:
    with otel_agents.configure(store=store, prices=PRICES) as telemetry:
        r1 = await team("drafting").run(task="go")
        r2 = await team("drafting").run(task="go")
        r3 = await team("review").run(task="go")
        assert telemetry.force_flush()
        otel_agents.record_outcome(r1, "success")
        otel_agents.record_outcome(r1, "good", name="quality")
        otel_agents.record_outcome(r2, "failure")
        otel_agents.record_outcome(r2, "good", name="quality")
        otel_agents.record_outcome(r3, "poor", name="quality")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("outcome-names")
    asyncio.run(record(directory))
    return directory


def cost(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("--store", str(store), "cost", *args)


def rows(store: Path, *args: str) -> dict[str, dict[str, Any]]:
    done = cost(store, *args, "--json")
    assert done.returncode == 0, done.stderr
    return {row["key"]: row for row in json.loads(done.stdout)}


def test_cost_alone_totals_per_team(store: Path) -> None:
    alone = cost(store)
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout == cost(store, "--by", "team").stdout
    assert alone.stdout.startswith("cost by team: 3 runs")
    assert rows(store) == rows(store, "--by", "team")
    assert {key: (row["runs"], row["cost_usd"]) for key, row in rows(store).items()} == {
        "drafting": (2, 0.00024),
        "review": (1, 0.00012),
    }


def test_outcome_name_equals_label_counts_the_runs_of_that_name(store: Path) -> None:
    by_quality = rows(store, "--by", "team", "--outcome", "quality=good")
    assert by_quality["drafting"]["outcomes"] == {"good": 2}
    assert by_quality["drafting"]["cost_per_outcome_usd"] == 0.00012, "240 micro-dollars over two good runs"
    assert by_quality["review"]["outcomes"] == {"poor": 1}
    assert by_quality["review"]["cost_per_outcome_usd"] is None, "no good run"

    table = cost(store, "--by", "team", "--outcome", "quality=good").stdout
    header = next(line for line in table.splitlines() if "RUNS" in line)
    assert header.split()[-3:] == ["QUALITY=GOOD", "PER", "QUALITY=GOOD"], header


def test_a_label_alone_is_of_the_default_outcome_name(store: Path) -> None:
    by_outcome = rows(store, "--by", "team", "--outcome", "failure")
    assert by_outcome["drafting"]["outcomes"] == {"failure": 1, "success": 1}
    assert by_outcome["drafting"]["cost_per_outcome_usd"] == 0.00024
    assert rows(store, "--by", "team", "--outcome", "outcome=failure") == by_outcome
    assert "review" in by_outcome and "outcomes" in by_outcome["review"]
    assert by_outcome["review"]["outcomes"] == {}


def test_a_label_found_only_under_another_name_says_which_name_has_it(store: Path) -> None:
    done = cost(store, "--by", "team", "--outcome", "good")
    assert done.returncode == 0, done.stderr
    assert (
        "no run has the outcome 'good' (of the default name 'outcome'); "
        "2 runs have it as 'quality': --outcome quality=good"
    ) in done.stdout


@pytest.mark.parametrize("given", ["", "=good", "quality=", " = "])
def test_an_outcome_with_no_name_or_no_label_is_an_error_of_usage(store: Path, given: str) -> None:
    done = cost(store, "--by", "team", "--outcome", given)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"otel-agents: error: --outcome {given!r}: expected LABEL or NAME=LABEL"), line

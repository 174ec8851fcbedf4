"""`otel-agents explain` and `otel_agents.explain`: where a run's tokens and cost went, what
repeated, why it stopped. Apps of ours run through the real OpenAIChatCompletionClient against the
local server, which records what it billed per request; the explanation is checked against those
bills, its sums against the run's totals, and each finding is found where it should be and only there.
(Readers other than the store and the in-process one: tests/test_explain_readers.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import CancellationToken
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.explain.findings import Thresholds
from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.genai.growth import growth_per_turn
from otel_agents._internal.genai.prices import PriceTable
from tests.conftest import Capture
from tests.support.cli import cli
from tests.support.explain_apps import (
    billed_per_turn,
    critic_never_approves,
    explain_json,
    failing_tool,
    growing_drafts,
    kinds,
    record,
    repeating_speaker,
)
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.processes import free_port
from tests.support.teams import openai_client, publishing, replay, selector_room, text, writers_room

ROOT = Path(__file__).resolve().parents[1]
EVERY_KIND = {
    "context_growth",
    "repeated_messages",
    "repeated_tool_calls",
    "tool_errors",
    "stopped_by_limit",
    "dominant_agent",
    "unknown_usage",
    "unpriced",
    "consumer_left",
}


def assert_one_line_error(done: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("otel-agents: error: ") and text in lines[0], lines[0]
    assert done.stdout == ""


def micro(usd: float | None) -> int | None:
    return None if usd is None else round(usd * 1_000_000)


def assert_adds_up(explained: dict[str, Any]) -> None:
    """The turns and `(team)` add up to the agents, and the agents to the run: tokens, calls, cost."""
    run, agents, turns = explained["run"], explained["agents"], explained["turns"]
    for key in ("input_tokens", "output_tokens", "calls"):
        assert sum(a[key] for a in agents) == run[key], key
    assert sum(a["turns"] for a in agents) == run["turns"] == len(turns)
    assert [t["index"] for t in turns] == list(range(len(turns)))
    no_agent = [a for a in agents if a["agent"] == "(team)"]
    for key in ("input_tokens", "output_tokens", "calls"):
        assert sum(t[key] for t in turns) + sum(a[key] for a in no_agent) == run[key], key
    if run["cost_usd"] is not None:
        assert sum(micro(a["cost_usd"]) or 0 for a in agents) == micro(run["cost_usd"])
        assert sum(micro(t["cost_usd"]) or 0 for t in turns) + sum(
            micro(a["cost_usd"]) or 0 for a in no_agent
        ) == micro(run["cost_usd"])
    if run["input_tokens"] + run["output_tokens"]:
        assert sum(a["token_share"] for a in agents) == pytest.approx(1, abs=1e-3)


def assert_as_billed(explained: dict[str, Any], server: OpenAIServer) -> None:
    """Each turn's tokens are what the server billed for its requests, and its cost what the
    built-in price of the billed model makes of them."""
    turns = explained["turns"]
    billed = billed_per_turn(turns, server.billed)
    assert [(t["input_tokens"], t["output_tokens"]) for t in turns] == billed
    prices = PriceTable()
    at = 0
    for turn in turns:
        mine = server.billed[at : at + turn["calls"]]
        at += turn["calls"]
        exact = sum(prices.cost(b.model, b.prompt_tokens, b.completion_tokens) or 0 for b in mine) * 1e6
        assert abs(micro(turn["cost_usd"]) - exact) <= len(mine), (turn, exact)  # each call rounded once at most
    assert explained["run"]["input_tokens"] == sum(b.prompt_tokens for b in server.billed)
    assert explained["run"]["output_tokens"] == sum(b.completion_tokens for b in server.billed)


def runs_json(store: Path) -> list[dict[str, Any]]:
    done = cli("--store", str(store), "runs", "--json")
    assert done.returncode == 0, done.stderr
    runs: list[dict[str, Any]] = json.loads(done.stdout)
    return runs


# --- the apps, each showing its finding ----------------------------------------------------------


async def test_a_critic_that_never_approves_is_stopped_by_its_limit_and_nothing_else_is_found(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    recorded = await record(critic_never_approves(openai_server, turns=6), openai_server, tmp_path)
    explained = explain_json(tmp_path, recorded.run_id[:10])

    assert kinds(explained) == {"stopped_by_limit"}
    (finding,) = explained["findings"]
    assert finding["severity"] == "warning"
    assert "max_messages" in finding["text"] and "TextMentionTermination" in finding["suggestion"]
    run = explained["run"]
    assert (run["run_id"], run["team"], run["stop_kind"], run["turns"], run["calls"]) == (
        recorded.run_id,
        "review-loop",
        "max_messages",
        6,
        6,
    )
    assert [t["agent"] for t in explained["turns"]] == ["writer", "critic"] * 3
    assert {t["team"] for t in explained["turns"]} == {"review-loop"}
    assert_as_billed(explained, openai_server)
    assert_adds_up(explained)
    assert explained["repeats"] == []


async def test_the_run_object_says_what_runs_json_says_with_turns_and_calls_added(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    recorded = await record(critic_never_approves(openai_server, turns=4), openai_server, tmp_path)
    explained = explain_json(tmp_path, recorded.run_id)
    (listed,) = runs_json(tmp_path)

    for key, value in listed.items():
        if key == "duration_s":  # runs: to the microsecond; explain: to the millisecond
            assert explained["run"][key] == round(value, 3)
        else:
            assert explained["run"][key] == value, key
    assert set(explained["run"]) - set(listed) == {"calls"}, "runs --json has turns and findings too (issue 46)"
    assert micro(explained["run"]["cost_usd"]) > 0


async def test_a_writer_whose_drafts_grow_is_found_growing_its_context_as_the_run_span_says(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    recorded = await record(growing_drafts(openai_server, turns=6), openai_server, tmp_path)
    explained = explain_json(tmp_path, recorded.run_id)

    first_prompts = [b.prompt_tokens for b in openai_server.billed]  # one call a turn
    context = explained["context"]
    assert context["first_input_tokens"] == first_prompts[0]
    assert context["last_input_tokens"] == first_prompts[-1]
    assert context["growth_tokens_per_turn"] == pytest.approx(growth_per_turn(first_prompts))
    assert context["growth_tokens_per_turn"] > 500
    growth_on_run = (recorded.run_span.attributes or {})["otel_agents.context.growth_tokens_per_turn"]
    assert context["growth_tokens_per_turn"] == pytest.approx(growth_on_run)
    assert kinds(explained) == {"context_growth", "stopped_by_limit"}
    (finding,) = [f for f in explained["findings"] if f["kind"] == "context_growth"]
    assert finding["severity"] == "warning" and "BufferedChatCompletionContext" in finding["suggestion"]
    assert_as_billed(explained, openai_server)
    assert_adds_up(explained)
    costliest = explained["costliest_turn"]
    assert costliest["index"] == 4 and costliest["agent"] == "writer", "the longest draft, from the longest context"

    raised = explain_json(tmp_path, recorded.run_id, "--context-growth", "100000")
    assert "context_growth" not in kinds(raised)
    fewer_turns = explain_json(tmp_path, recorded.run_id, "--context-growth-turns", "7")
    assert "context_growth" not in kinds(fewer_turns), "6 turns measured: under the 7 asked for"


async def test_a_tool_that_fails_is_found_with_its_name_and_error(openai_server: OpenAIServer, tmp_path: Path) -> None:
    recorded = await record(failing_tool(openai_server), openai_server, tmp_path)
    explained = explain_json(tmp_path, recorded.run_id)

    (turn,) = explained["turns"]
    assert (turn["agent"], turn["calls"], turn["tool_calls"], turn["tool_errors"]) == ("researcher", 2, 1, 1)
    assert kinds(explained) == {"tool_errors", "stopped_by_limit"}
    (finding,) = [f for f in explained["findings"] if f["kind"] == "tool_errors"]
    assert "fetch_page" in finding["text"] and "ConnectionError" in finding["text"]
    assert "Fix the failing tool" in finding["suggestion"]
    assert_as_billed(explained, openai_server)
    assert_adds_up(explained)
    assert "tool_errors" not in kinds(explain_json(tmp_path, recorded.run_id, "--tool-errors", "2"))


async def test_a_speaker_that_repeats_is_found_repeating_its_message_and_its_tool_call(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    """Needs the fingerprints on message and execute_tool spans."""
    recorded = await record(repeating_speaker(openai_server, rounds=3), openai_server, tmp_path)
    explained = explain_json(tmp_path, recorded.run_id)

    repeats = {(r["kind"], r["agent"]): r for r in explained["repeats"]}
    assert set(repeats) == {("tool_call", "looper"), ("message", "looper")}, explained["repeats"]
    assert repeats["tool_call", "looper"]["count"] == 3 and repeats["tool_call", "looper"]["turns"] == [0, 2, 4]
    assert repeats["message", "looper"]["count"] == 3 and repeats["message", "looper"]["turns"] == [1, 3, 5]
    assert all(len(r["fingerprint"]) == 16 for r in explained["repeats"])
    on_run = (recorded.run_span.attributes or {})["otel_agents.repeats"]
    assert sum(r["count"] - 1 for r in explained["repeats"]) == on_run, "the run span counts them alike"
    assert kinds(explained) == {"repeated_messages", "repeated_tool_calls", "stopped_by_limit"}
    tool_finding = next(f for f in explained["findings"] if f["kind"] == "repeated_tool_calls")
    assert "search" in tool_finding["text"] and "LoopGuard" in tool_finding["suggestion"]
    message_finding = next(f for f in explained["findings"] if f["kind"] == "repeated_messages")
    assert "looper" in message_finding["text"] and "LoopGuard" in message_finding["suggestion"]
    assert_as_billed(explained, openai_server)
    assert_adds_up(explained)

    at_four = explain_json(tmp_path, recorded.run_id, "--repeated-messages", "4", "--repeated-tool-calls", "4")
    assert kinds(at_four) == {"stopped_by_limit"}
    assert len(at_four["repeats"]) == 2, "repeats are listed whatever the thresholds"


async def test_the_text_view_reads_the_run_in_one_screen(openai_server: OpenAIServer, tmp_path: Path) -> None:
    recorded = await record(repeating_speaker(openai_server, rounds=3), openai_server, tmp_path)
    done = cli("--store", str(tmp_path), "explain", recorded.run_id[:8])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("search-loop · ") and "6 turns" in lines[0] and "stopped: max_messages" in lines[0]
    assert lines[1].startswith(f"run {recorded.run_id}")
    out = done.stdout
    assert "where the tokens went" in out and "looper" in out and "100.0%" in out
    assert "turns, in order" in out and "1 (0 failed)" not in out
    assert "looper called search with the same arguments 3 times  turns 0, 2, 4" in out
    assert "looper said the same message 3 times  turns 1, 3, 5" in out
    assert "costliest turn: #" in out and "context: " in out
    assert "warning repeated_tool_calls:" in out and "→ " in out
    assert len(lines) < 60, "one screen"


# --- where the tokens went -----------------------------------------------------------------------


async def test_speaker_selection_is_the_teams_and_the_turns_and_team_add_up_to_the_run(capture: Capture) -> None:
    await selector_room().run(task="go")
    explained = otel_agents.explain(capture.spans()).to_dict()

    agents = {a["agent"]: a for a in explained["agents"]}
    assert set(agents) == {"writer", "critic", "(team)"}
    assert agents["(team)"]["turns"] == 0 and agents["(team)"]["calls"] >= 2, "each speaker selection is a call"
    assert_adds_up(explained)


async def test_one_agent_of_three_using_most_tokens_is_dominant_and_of_two_is_not(capture: Capture) -> None:
    big = AssistantAgent("drafter", model_client=replay(text("long", 2000, 400), text("longer", 2200, 400)))
    small = [AssistantAgent(name, model_client=replay(text("ok", 30, 2), text("ok!", 30, 2))) for name in ("a", "b")]
    await RoundRobinGroupChat([big, *small], termination_condition=MaxMessageTermination(4), name="three").run(
        task="go"
    )
    explained = otel_agents.explain(capture.spans()).to_dict()
    (finding,) = [f for f in explained["findings"] if f["kind"] == "dominant_agent"]
    assert finding["severity"] == "info" and finding["text"].startswith("drafter used 9")
    assert explained["agents"][0]["agent"] == "drafter" and explained["agents"][0]["token_share"] > 0.9

    capture.exporter.clear()
    pair = [AssistantAgent("drafter", model_client=replay(text("long", 2000, 400))), small[0]]
    await RoundRobinGroupChat(pair, termination_condition=MaxMessageTermination(3), name="two").run(task="go")
    assert "dominant_agent" not in kinds(otel_agents.explain(capture.spans()).to_dict())


async def test_a_nested_teams_turns_are_in_the_list_naming_their_team(capture: Capture) -> None:
    await publishing().run(task="go")
    explained = otel_agents.explain(capture.spans()).to_dict()

    assert explained["run"]["team"] == "publishing"
    assert [(t["agent"], t["team"]) for t in explained["turns"]] == [
        ("writer", "drafting"),
        ("critic", "drafting"),
        ("editor", "publishing"),
    ]
    assert_adds_up(explained)
    text = otel_agents.explain(capture.spans())
    from otel_agents._internal.explain.text import render

    assert "TEAM" in render(text) and "drafting" in render(text)


async def test_a_long_run_is_folded_to_its_first_and_last_turns_and_the_costliest(tmp_path: Path) -> None:
    writer = AssistantAgent(
        "writer", model_client=replay(*(text(f"d{i}", 900 if i == 7 else 20, 2) for i in range(15)))
    )
    critic = AssistantAgent("critic", model_client=replay(*(text(f"n{i}", 30, 4) for i in range(15))))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(31), name="long")
    with otel_agents.configure(store=tmp_path) as telemetry:
        run = await team.run(task="go")
        assert telemetry.force_flush()
    assert len(run.messages) == 31
    (stored,) = Store(tmp_path).runs()

    folded = cli("--store", str(tmp_path), "explain", stored.run_id)
    assert folded.returncode == 0, folded.stderr
    shown = turn_numbers(folded.stdout)
    assert shown == [*range(10), 14, *range(20, 30)], "the first and last 10, and the costliest (#14)"
    assert "  … 4 turns (--all shows every turn)" in folded.stdout
    assert "  … 5 turns (--all shows every turn)" in folded.stdout
    assert "costliest turn: #14 writer, 902 tokens" in folded.stdout

    every = cli("--store", str(tmp_path), "explain", stored.run_id, "--all")
    assert turn_numbers(every.stdout) == list(range(30)) and "…" not in every.stdout


def turn_numbers(out: str) -> list[int]:
    table = out.split("turns, in order", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [int(line.split()[0]) for line in table if line.split() and line.split()[0].isdigit()]


# --- edge cases: each explained, saying what it cannot know --------------------------------------


async def test_a_run_whose_consumer_left_is_explained_as_never_finished(capture: Capture) -> None:
    async with contextlib.aclosing(otel_agents.tap(writers_room(max_messages=9).run_stream(task="go"))) as stream:
        async for item in stream:
            if getattr(item, "source", "") == "critic":
                break
    assert capture.telemetry.force_flush()
    explained = otel_agents.explain(capture.spans()).to_dict()
    assert explained["run"]["stop_kind"] == "consumer_closed"
    (finding,) = [f for f in explained["findings"] if f["kind"] == "consumer_left"]
    assert finding["severity"] == "info" and "never finished" in finding["text"]
    assert "run_stream" in finding["suggestion"]
    assert "stopped_by_limit" not in kinds(explained)


async def test_a_run_open_at_shutdown_is_explained_as_never_finished() -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    stream = otel_agents.tap(writers_room(max_messages=5).run_stream(task="go"))
    for _ in range(3):
        await stream.__anext__()
    telemetry.shutdown()
    explained = otel_agents.explain(exporter.get_finished_spans())
    await stream.aclose()
    assert explained.run.stop_kind == "shutdown"
    (finding,) = [f for f in explained.findings if f.kind == "consumer_left"]
    assert "shut down" in finding.text


async def test_a_stream_without_usage_is_explained_with_unknown_usage_and_no_cost(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script = [Reply(text="streamed words one by one")]
    talker = AssistantAgent("talker", model_client=openai_client(openai_server), model_client_stream=True)
    team = RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(2), name="streaming")
    recorded = await record(team, openai_server, tmp_path)
    explained = explain_json(tmp_path, recorded.run_id)

    assert explained["run"]["unknown_usage_calls"] == 1 and explained["run"]["cost_usd"] is None
    assert explained["turns"][0]["cost_usd"] is None
    (finding,) = [f for f in explained["findings"] if f["kind"] == "unknown_usage"]
    assert "OTEL_AGENTS_STREAM_USAGE=request" in finding["suggestion"]
    assert "unpriced" not in kinds(explained)
    done = cli("--store", str(tmp_path), "explain", recorded.run_id)
    assert "0 in / 0 out tokens+? · ? · " in done.stdout.splitlines()[0]


async def test_an_unpriced_model_is_explained_by_tokens_and_named(tmp_path: Path) -> None:
    with OpenAIServer(model="model-x") as server:
        recorded = await record(critic_never_approves(server, turns=4), server, tmp_path)
    explained = explain_json(tmp_path, recorded.run_id)

    assert explained["run"]["cost_usd"] is None
    assert all(t["cost_usd"] is None for t in explained["turns"])
    (finding,) = [f for f in explained["findings"] if f["kind"] == "unpriced"]
    assert "model-x" in finding["text"] and "OTEL_AGENTS_PRICES" in finding["suggestion"]
    by_tokens = max(explained["turns"], key=lambda t: (t["input_tokens"] + t["output_tokens"], -t["index"]))
    assert explained["costliest_turn"]["index"] == by_tokens["index"]
    assert_adds_up(explained)


async def test_an_on_messages_run_is_one_agents_with_no_turns(capture: Capture) -> None:
    agent = AssistantAgent("solo", model_client=replay(text("hello", 12, 3)))
    await agent.on_messages([TextMessage(content="hi", source="user")], CancellationToken())
    explanation = otel_agents.explain(capture.spans())
    explained = explanation.to_dict()

    assert explained["run"]["team"] == "solo" and explained["run"]["stop_kind"] == "completed"
    assert explained["turns"] == [] and explained["costliest_turn"] is None
    assert [(a["agent"], a["calls"], a["input_tokens"]) for a in explained["agents"]] == [("solo", 1, 12)]
    assert explained["context"] == {
        "growth_tokens_per_turn": None,
        "first_input_tokens": None,
        "last_input_tokens": None,
    }
    from otel_agents._internal.explain.text import render

    assert "on_messages call: one agent answering, no team and no turns" in render(explanation)


async def test_an_autogen_core_trace_is_explained_from_its_model_calls_per_handler(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "support"))
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    import zero_code_core_app

    with otel_agents.configure(store=tmp_path) as telemetry:
        await zero_code_core_app.on_one_machine()
        assert telemetry.force_flush()
    spans = Store(tmp_path).spans()
    with_calls = sorted({s.trace_id for s in spans if s.name.startswith("chat")})
    assert len(with_calls) == 2, "a trace for each draft request"

    explained = explain_json(tmp_path, with_calls[0])
    run = explained["run"]
    assert (run["run_id"], run["stop_kind"], run["messages"], run["trace_id"]) == (None, None, None, with_calls[0])
    assert [(t["agent"], t["calls"], t["team"]) for t in explained["turns"]] == [
        ("writer", 1, None),
        ("editor", 1, None),
    ]
    assert {a["agent"] for a in explained["agents"]} == {"writer", "editor"}
    assert run["calls"] == 2 and run["cost_usd"] is not None
    assert_adds_up(explained)
    done = cli("--store", str(tmp_path), "explain", with_calls[0])
    assert "no run span (an autogen-core app" in done.stdout


# --- errors, each one line with the CLI's exit codes ---------------------------------------------


@pytest.fixture
def two_runs_in_one_trace(tmp_path: Path) -> tuple[Path, str, list[str]]:
    async def both() -> None:
        with otel_agents.configure(store=tmp_path) as telemetry:
            with telemetry.tracer_provider.get_tracer("app").start_as_current_span("request"):
                await writers_room(max_messages=3).run(task="one")
                await writers_room(max_messages=3).run(task="two")
            assert telemetry.force_flush()

    asyncio.run(both())
    runs = Store(tmp_path).runs()
    assert len(runs) == 2 and len({r.trace_id for r in runs}) == 1
    return tmp_path, runs[0].trace_id, sorted(r.run_id for r in runs)


def test_a_trace_with_two_runs_needs_the_run_and_the_error_lists_them(
    two_runs_in_one_trace: tuple[Path, str, list[str]],
) -> None:
    store, trace_id, run_ids = two_runs_in_one_trace
    done = cli("--store", str(store), "explain", trace_id)
    assert_one_line_error(done, 2, f"2 runs in trace {trace_id}: name one of ")
    assert all(run_id in done.stderr for run_id in run_ids)

    chosen = explain_json(store, trace_id, "--run", run_ids[1][:8])
    assert chosen["run"]["run_id"] == run_ids[1]
    by_id = explain_json(store, run_ids[0])
    assert by_id["run"]["run_id"] == run_ids[0] and by_id["run"]["turns"] == 2, "only its own turns"


def test_an_unknown_run_is_an_error_of_usage(tmp_path: Path) -> None:
    with otel_agents.configure(store=tmp_path):
        pass
    Store(tmp_path).runs()
    assert_one_line_error(cli("--store", str(tmp_path), "explain", "deadbeef"), 2, "no run 'deadbeef'")
    assert_one_line_error(cli("--store", str(tmp_path), "explain", "not-hex"), 2, "is not a run id")
    assert_one_line_error(cli("--store", str(tmp_path), "explain", "ab" * 16), 2, "no run or trace")
    assert_one_line_error(cli("--store", str(tmp_path), "explain"), 2, "name a run")


def test_a_trace_with_no_run_and_no_model_call_is_not_a_run(tmp_path: Path) -> None:
    with otel_agents.configure(store=tmp_path) as telemetry:
        telemetry.tracer_provider.get_tracer("app").start_span("request").end()
        assert telemetry.force_flush()
    (span,) = Store(tmp_path).spans()
    done = cli("--store", str(tmp_path), "explain", span.trace_id)
    assert_one_line_error(done, 2, f"not a run: no run span and no model call (chat span) in trace {span.trace_id}")


def test_an_unreachable_jaeger_is_a_failure_at_run_time() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = cli("explain", "ab" * 16, "--jaeger", url)
    assert_one_line_error(done, 1, f"cannot reach Jaeger at {url}")
    assert_one_line_error(cli("explain", "--jaeger", url), 2, "needs the trace id")
    assert_one_line_error(cli("explain", "xyz", "--jaeger", url), 2, "is not a trace id")
    assert_one_line_error(cli("explain", "ab" * 16, "--jaeger", "localhost:16686"), 2, "expected the base URL")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("hello, not JSON\n", "line 1 is not JSON"),
        ('{"traces": []}', "a JSON object without resourceSpans"),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz", "spanId": "00"}]}]}]}',
            "a trace id is neither",
        ),
        ("", "it is empty"),
    ],
)
def test_a_file_that_is_not_otlp_json_is_an_error_of_usage(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "trace.json"
    path.write_text(content)
    done = cli("explain", "--file", str(path))
    assert_one_line_error(done, 2, f"{path} is not OTLP JSON: {says}")


def test_a_missing_file_is_an_error_of_usage(tmp_path: Path) -> None:
    assert_one_line_error(cli("explain", "--file", str(tmp_path / "none.json")), 2, "cannot read")


def test_a_threshold_out_of_range_is_an_error_naming_the_option(tmp_path: Path) -> None:
    done = cli("--store", str(tmp_path), "explain", "abc", "--repeated-messages", "0")
    assert_one_line_error(done, 2, "--repeated-messages 0: expected a whole number of at least 1")
    done = cli("--store", str(tmp_path), "explain", "abc", "--dominant-share", "1.5")
    assert_one_line_error(done, 2, "--dominant-share 1.5: expected a share between 0 and 1")


# --- the public function -------------------------------------------------------------------------


async def test_explain_in_process_needs_the_run_among_several_and_takes_a_prefix(capture: Capture) -> None:
    await writers_room(max_messages=3).run(task="one")
    await writers_room(max_messages=4).run(task="two")
    spans = capture.spans()
    run_ids = sorted(str(s.attributes["otel_agents.run.id"]) for s in spans if "otel_agents.run.id" in s.attributes)
    with pytest.raises(ValueError, match="2 runs in the spans: name one of ") as raised:
        otel_agents.explain(spans)
    assert all(run_id in str(raised.value) for run_id in run_ids)
    for run_id in run_ids:
        assert otel_agents.explain(spans, run_id[:6]).run.run_id == run_id
    with pytest.raises(ValueError, match="no run or trace 'ffff'"):
        otel_agents.explain(spans, "ffff")
    with pytest.raises(ValueError, match="not a run"):
        otel_agents.explain([])


async def test_explain_takes_each_threshold_as_a_keyword_with_the_documented_default(capture: Capture) -> None:
    signature = inspect.signature(otel_agents.explain)
    defaults = {f.name: f.default for f in fields(Thresholds)}
    assert {name: signature.parameters[name].default for name in defaults} == defaults
    assert all(signature.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in defaults)
    await writers_room(max_messages=3).run(task="go")
    with pytest.raises(ValueError, match="dominant_share=2"):
        otel_agents.explain(capture.spans(), dominant_share=2)
    assert "stopped_by_limit" in kinds(otel_agents.explain(capture.spans(), tool_errors=5).to_dict())


def test_explain_is_public_and_import_otel_agents_does_not_load_it() -> None:
    assert {"explain", "Explanation"} <= set(otel_agents.__all__)
    code = "import sys, otel_agents; print(any(m.startswith('otel_agents._internal.explain') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_docs_list_every_finding_with_its_threshold() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    section = page.split("## Explaining a run", 1)[1]
    for kind in EVERY_KIND:
        assert f"`{kind}`" in section, kind
    for option in ("--context-growth", "--context-growth-turns", "--repeated-messages", "--repeated-tool-calls"):
        assert f"`{option}" in section, option
    for key in ("growth_tokens_per_turn", "token_share", "costliest_turn", "tool_errors", "fingerprint"):
        assert f"`{key}`" in section, key

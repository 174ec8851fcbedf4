"""Unknown is not zero: a streamed call made without usage gets no tokens and no cost, and its run
says it has calls it could not count; `OTEL_AGENTS_STREAM_USAGE=request` asks for the usage."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from tests.support.cli import cli
from tests.support.config import assert_configure_refuses
from tests.support.metrics import points
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import one_trace
from tests.support.teams import openai_client


def streaming_team(server: OpenAIServer, **client_kwargs: Any) -> RoundRobinGroupChat:
    talker = AssistantAgent("talker", model_client=openai_client(server, **client_kwargs), model_client_stream=True)
    return RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(2), name="streaming")


async def test_a_stream_without_usage_has_no_tokens_no_cost_and_its_run_counts_it(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script = [Reply(text="words one by one")]
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    telemetry = otel_agents.configure(span_exporter=exporter, metric_readers=[reader])
    try:
        await streaming_team(openai_server).run(task="stream")
        telemetry.force_flush()
        tree = one_trace(exporter.get_finished_spans())
        data = reader.get_metrics_data()
    finally:
        telemetry.shutdown()

    assert "stream_options" not in openai_server.requests[0], "the app did not ask for usage"
    (call,) = tree.named("chat")
    assert "gen_ai.usage.input_tokens" not in call.attributes, "unknown, not 0"
    assert "gen_ai.usage.output_tokens" not in call.attributes
    assert "otel_agents.cost.usd" not in call.attributes
    assert tree.root.attributes["otel_agents.usage.unknown_calls"] == 1
    assert "otel_agents.cost.usd" not in tree.root.attributes, "a run with an unknown call has no cost"
    counted = points(data, "otel_agents.calls.usage_unknown")
    assert [(p.attributes["gen_ai.request.model"], p.value) for p in counted] == [("gpt-4o-mini", 1)]


async def test_a_run_whose_calls_all_reported_usage_says_nothing_of_unknown_calls(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script = [Reply(text="words")]
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    try:
        await streaming_team(openai_server, stream_options={"include_usage": True}).run(task="stream")
        telemetry.force_flush()
        tree = one_trace(exporter.get_finished_spans())
    finally:
        telemetry.shutdown()
    assert "otel_agents.usage.unknown_calls" not in tree.root.attributes
    assert tree.root.attributes["otel_agents.cost.usd"] > 0


async def test_stream_usage_request_asks_the_openai_client_for_usage(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_AGENTS_STREAM_USAGE", "request")
    openai_server.script = [Reply(text="words one by one")]
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    try:
        await streaming_team(openai_server).run(task="stream")
        telemetry.force_flush()
        tree = one_trace(exporter.get_finished_spans())
    finally:
        telemetry.shutdown()
    assert openai_server.requests[0]["stream_options"] == {"include_usage": True}
    (call,) = tree.named("chat")
    billed = openai_server.billed[0]
    assert call.attributes["gen_ai.usage.input_tokens"] == billed.prompt_tokens
    assert "otel_agents.usage.unknown_calls" not in tree.root.attributes


def test_a_bad_stream_usage_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changed 2026-12-04 (CHANGELOG): refused by the CLI's strict read; at configure(), one warning
    saying the same, and the default (`off`) used (tests/support/config.py)."""
    assert_configure_refuses(
        monkeypatch,
        {"OTEL_AGENTS_STREAM_USAGE": "always"},
        "OTEL_AGENTS_STREAM_USAGE='always'",
        span_exporter=InMemorySpanExporter(),
    )


async def test_the_token_budget_says_once_it_cannot_see_unknown_calls(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.script = [Reply(text="one"), Reply(text="two")]
    telemetry = otel_agents.configure(
        span_exporter=InMemorySpanExporter(), loop_limits=otel_agents.LoopLimits(token_budget=100_000)
    )
    try:
        with caplog.at_level(logging.WARNING, logger="otel_agents"):
            talker = AssistantAgent("talker", model_client=openai_client(openai_server), model_client_stream=True)
            team = RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(3))
            await team.run(task="two turns")
    finally:
        telemetry.shutdown()
    blind = [r for r in caplog.records if "budgets cannot count it" in r.getMessage()]
    assert len(blind) == 1, "said once for the run"


async def test_runs_and_show_print_a_question_mark_for_unknown_cost(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script = [Reply(text="words")]
    telemetry = otel_agents.configure(store=tmp_path)
    try:
        await streaming_team(openai_server).run(task="stream")
    finally:
        telemetry.shutdown()
    store = {"OTEL_AGENTS_STORE": str(tmp_path), "COLUMNS": "200"}
    (run,) = json.loads(cli("runs", "--json", env=store).stdout)
    assert run["unknown_usage_calls"] == 1 and run["cost_usd"] is None
    table = cli("runs", env=store).stdout
    assert "?" in table, table
    shown = cli("show", run["run_id"], env=store).stdout
    assert "cost ?" in shown and "? tokens (no usage reported)" in shown, shown

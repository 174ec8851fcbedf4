"""Exemplars lead only to traces the exporters get (DESIGN section 3, "Keeping the runs that matter":
"exemplars only from kept runs"). The end-to-end chain through the real Collector, Prometheus and
Jaeger is tests/test_from_a_cost_spike_to_its_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.export.ratio import ratio_keeps
from otel_agents._internal.export.store.reader import Store
from tests.support.openai_server import OpenAIServer
from tests.support.teams import openai_client

CALL_METRICS = ("gen_ai.client.operation.duration", "gen_ai.client.token.usage", "otel_agents.cost")
RUN_METRICS = ("otel_agents.run.cost", "gen_ai.workflow.duration", "otel_agents.run.messages", "otel_agents.runs")


def team(server: OpenAIServer) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3), name="writers-room")


def exemplar_traces(reader: InMemoryMetricReader) -> dict[str, set[int]]:
    """One collection: the trace ids its exemplars name, by metric (a collection's exemplars are the
    measurements made since the last one: `force_flush()` collects too)."""
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, set[int]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    found.setdefault(metric.name, set()).update(e.trace_id for e in point.exemplars if e.trace_id)
    return found


async def test_a_run_a_rule_keeps_has_exemplars_on_its_run_points_and_left_out_runs_none(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    reader = InMemoryMetricReader()
    collected: dict[str, set[int]] = {}
    with otel_agents.configure(
        span_exporter=InMemorySpanExporter(),
        metric_readers=[reader],
        store=tmp_path,
        sample_runs=0,  # the ratio keeps nothing: only the rule does
        keep_runs=lambda run: run.user_id == "kept",
    ):
        for user in ("left", "kept", "left"):
            with otel_agents.run_attributes(user_id=user):
                await team(openai_server).run(task="go")
            for name, traces in exemplar_traces(reader).items():
                collected.setdefault(name, set()).update(traces)
    runs = Store(tmp_path).runs(limit=None)
    kept = {int(run.trace_id, 16) for run in runs if run.user_id == "kept"}
    assert len(runs) == 3 and len(kept) == 1
    for name in RUN_METRICS:
        assert collected.get(name) == kept, f"{name}: the kept run's point names its trace, no other does"
    for name in CALL_METRICS:
        assert not collected.get(name), (
            f"{name}: a call ends before its run is decided, and the ratio keeps none of these traces: no exemplar"
        )


async def test_model_call_points_name_the_traces_the_ratio_keeps_and_no_other(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    reader = InMemoryMetricReader()
    collected: dict[str, set[int]] = {}
    with otel_agents.configure(
        span_exporter=InMemorySpanExporter(), metric_readers=[reader], store=tmp_path, sample_runs=0.5, keep_runs=""
    ):
        for _ in range(12):
            await team(openai_server).run(task="go")
            for name, traces in exemplar_traces(reader).items():
                collected.setdefault(name, set()).update(traces)
    every = {int(run.trace_id, 16) for run in Store(tmp_path).runs(limit=None)}
    by_ratio = {trace_id for trace_id in every if ratio_keeps(0.5, trace_id)}
    assert len(every) == 12 and by_ratio and by_ratio != every, "some runs kept, some left out"
    for name in (*CALL_METRICS, *RUN_METRICS):
        assert collected.get(name) == by_ratio, f"{name}: exactly the kept runs' traces"


async def test_an_exemplar_filter_the_application_chose_stands(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXEMPLAR_FILTER", "always_off")
    reader = InMemoryMetricReader()
    with otel_agents.configure(
        span_exporter=InMemorySpanExporter(),
        metric_readers=[reader],
        store=False,
        sample_runs=0,
        keep_runs=lambda run: True,  # kept: with our filter its run points would name its trace
    ):
        await team(openai_server).run(task="go")
        found = exemplar_traces(reader)
    assert found.get("otel_agents.runs") == set(), "always_off: no exemplar, sampled runs or not"

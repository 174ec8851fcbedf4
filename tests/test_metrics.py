"""Metrics: the contract's instruments (names, units, buckets, attributes), and the dashboard's every
panel answered by a real Prometheus scraping a process that runs several teams."""

from __future__ import annotations

import asyncio
import json
import math
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, Metric
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.genai.metrics import (
    DURATION_BUCKETS,
    RUN_COST_BUCKETS,
    RUN_MESSAGES_BUCKETS,
    TOKEN_BUCKETS,
    WORKFLOW_DURATION_BUCKETS,
)
from tests.support.config import assert_configure_refuses
from tests.support.deploy import DEPLOY
from tests.support.metrics import points
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.prometheus import Prometheus, scraped_pipeline
from tests.support.teams import openai_client
from tests.support.waits import wait_until_async

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "autogen-team-runs.json"
GRAFANA_VARIABLES = {
    "$job": ".*",
    "$team": ".*",
    "$label": "",  # no cost label while OTEL_AGENTS_METRIC_ATTRIBUTES is off: `sum by ()`, the total
    "$__rate_interval": "1m",
    "$__range": "5m",
    "$__interval": "15s",
}


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def writers(server: OpenAIServer) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(4), name="writers-room")


def selector(server: OpenAIServer) -> SelectorGroupChat:
    planner = AssistantAgent("planner", model_client=openai_client(server), description="plans")
    doer = AssistantAgent("doer", model_client=openai_client(server), description="does")
    return SelectorGroupChat(
        [planner, doer],
        model_client=openai_client(server),
        termination_condition=TextMentionTermination("DONE") | MaxMessageTermination(4),
        allow_repeated_speaker=True,
        name="planning",
    )


def looping(server: OpenAIServer) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(9), name="loopy")


async def run_teams(server: OpenAIServer, rounds: int = 1) -> None:
    server.script = [Reply(text="Not good enough, try again.")]  # the same text every time: a loop
    for _ in range(rounds):
        for make in (writers, selector, looping):
            await drain(otel_agents.tap(make(server).run_stream(task="write a haiku")))


def metrics_of(reader: InMemoryMetricReader) -> dict[str, Metric]:
    data = reader.get_metrics_data()
    assert data is not None
    return {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def chat_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith("chat")]


EXPECTED = {
    "gen_ai.client.token.usage": (
        "{token}",
        TOKEN_BUCKETS,
        {
            "gen_ai.operation.name",
            "gen_ai.provider.name",
            "gen_ai.request.model",
            "gen_ai.response.model",
            "gen_ai.token.type",
            "gen_ai.agent.name",
        },
    ),
    "gen_ai.client.operation.duration": (
        "s",
        DURATION_BUCKETS,
        {
            "gen_ai.operation.name",
            "gen_ai.provider.name",
            "gen_ai.request.model",
            "gen_ai.response.model",
            "gen_ai.agent.name",
            "error.type",
        },
    ),
    "gen_ai.workflow.duration": ("s", WORKFLOW_DURATION_BUCKETS, {"gen_ai.workflow.name", "otel_agents.stop_kind"}),
    "otel_agents.cost": ("USD", None, {"gen_ai.workflow.name", "gen_ai.agent.name", "gen_ai.request.model"}),
    "otel_agents.run.cost": ("USD", RUN_COST_BUCKETS, {"gen_ai.workflow.name"}),
    "otel_agents.run.messages": ("{message}", RUN_MESSAGES_BUCKETS, {"gen_ai.workflow.name", "otel_agents.stop_kind"}),
    "otel_agents.runs": ("{run}", None, {"gen_ai.workflow.name", "otel_agents.stop_kind"}),
    "otel_agents.loop.detections": ("{detection}", None, {"gen_ai.workflow.name", "otel_agents.loop.rule"}),
    "otel_agents.run.outcomes": (
        "{run}",
        None,
        {"gen_ai.workflow.name", "gen_ai.evaluation.name", "gen_ai.evaluation.score.label"},
    ),
}


def judged(result: Any) -> str:
    """The outcome callable of these teams: the short runs succeed, the loop (9 messages) fails."""
    return "success" if len(result.messages) <= 5 else "failure"


@pytest.fixture
def measured(openai_server: OpenAIServer) -> Iterator[tuple[InMemoryMetricReader, InMemorySpanExporter]]:
    reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader], outcome=judged) as telemetry:
        asyncio.run(run_teams(openai_server))
        telemetry.force_flush()
        yield reader, exporter


def test_instruments_have_the_contracts_names_units_buckets_and_attributes(
    measured: tuple[InMemoryMetricReader, InMemorySpanExporter],
) -> None:
    reader, _ = measured
    metrics = metrics_of(reader)
    for name, (unit, buckets, allowed) in EXPECTED.items():
        metric = metrics[name]
        assert metric.unit == unit, name
        for point in metric.data.data_points:
            assert set(point.attributes) <= allowed, (name, set(point.attributes) - allowed)
            if buckets is not None:
                assert isinstance(point, HistogramDataPoint)
                assert list(point.explicit_bounds) == pytest.approx(list(buckets)), name
    assert TOKEN_BUCKETS[0] == 1 and TOKEN_BUCKETS[-1] == 67108864
    assert DURATION_BUCKETS[0] == 0.01 and DURATION_BUCKETS[-1] == pytest.approx(81.92)
    assert RUN_MESSAGES_BUCKETS[-1] == 1024


def test_model_call_points_carry_the_agent_and_the_models(
    measured: tuple[InMemoryMetricReader, InMemorySpanExporter],
) -> None:
    reader, _ = measured
    metrics = metrics_of(reader)
    for name in ("gen_ai.client.token.usage", "gen_ai.client.operation.duration"):
        data_points = metrics[name].data.data_points
        agents = {p.attributes.get("gen_ai.agent.name") for p in data_points}
        assert {"writer", "critic", "planner", None} <= agents <= {"writer", "critic", "planner", "doer", None}, name
        # None: the selector choosing the next speaker is no agent
        assert {p.attributes["gen_ai.request.model"] for p in data_points} == {"gpt-4o-mini"}, name
        assert {p.attributes["gen_ai.response.model"] for p in data_points} == {"gpt-4o-mini-2024-07-18"}, name


def test_metric_sums_equal_the_spans(measured: tuple[InMemoryMetricReader, InMemorySpanExporter]) -> None:
    reader, exporter = measured
    metrics = metrics_of(reader)
    calls = chat_spans(list(exporter.get_finished_spans()))
    tokens = {
        kind: sum(
            p.sum
            for p in metrics["gen_ai.client.token.usage"].data.data_points
            if p.attributes["gen_ai.token.type"] == kind
        )
        for kind in ("input", "output")
    }
    assert tokens["input"] == sum(c.attributes["gen_ai.usage.input_tokens"] for c in calls)
    assert tokens["output"] == sum(c.attributes["gen_ai.usage.output_tokens"] for c in calls)
    cost = sum(p.value for p in metrics["otel_agents.cost"].data.data_points)
    assert cost == pytest.approx(sum(c.attributes["otel_agents.cost.usd"] for c in calls))
    runs = {tuple(sorted(p.attributes.items())): p.value for p in metrics["otel_agents.runs"].data.data_points}
    assert sum(runs.values()) == 3
    rules = {p.attributes["otel_agents.loop.rule"] for p in metrics["otel_agents.loop.detections"].data.data_points}
    assert "repeat" in rules


def test_no_run_id_or_other_unbounded_value_is_a_metric_attribute(
    measured: tuple[InMemoryMetricReader, InMemorySpanExporter],
) -> None:
    reader, _ = measured
    for metric in metrics_of(reader).values():
        for point in metric.data.data_points:
            for key, value in point.attributes.items():
                assert key != "otel_agents.run.id"
                assert not re.fullmatch(r"[0-9a-f]{32}", str(value)), (metric.name, key)


@pytest.fixture
def prometheus_and_team_process(
    tmp_path: Path, openai_server: OpenAIServer
) -> Iterator[tuple[Prometheus, otel_agents.Telemetry, InMemorySpanExporter]]:
    with scraped_pipeline(tmp_path, outcome=judged) as scraped:
        yield scraped


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"unsubstituted variable in {panel['title']}: {expr}"
            queries.append((panel["title"], expr))
    return queries


async def test_with_no_metrics_destination_no_measurement_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measurements cost more than spans; with nothing to export them to, none is made."""
    from opentelemetry.sdk.metrics._internal.measurement_consumer import SynchronousMeasurementConsumer

    from tests.support.teams import writers_room

    made: list[Any] = []
    consume = SynchronousMeasurementConsumer.consume_measurement
    monkeypatch.setattr(
        SynchronousMeasurementConsumer,
        "consume_measurement",
        lambda self, measurement: (made.append(measurement), consume(self, measurement))[1],
    )
    monkeypatch.delenv("OTEL_METRICS_EXPORTER", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)

    with otel_agents.configure(span_exporter=InMemorySpanExporter()):
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
    assert made == []

    reader = InMemoryMetricReader()
    with otel_agents.configure(span_exporter=InMemorySpanExporter(), metric_readers=[reader]):
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
        names = {
            m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics
        }
    assert len(made) >= 7, "2 calls: tokens in and out, duration, unpriced tokens; the run: 3"
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "otel_agents.runs"} <= names


def test_the_dashboard_has_the_panels_the_issue_lists() -> None:
    titles = {panel["title"] for panel in json.loads(DASHBOARD.read_text())["panels"]}
    assert {
        "Cost per run (median, p95, max)",
        "Cost by team",
        "Cost by agent",
        "Cost by model",
        "Tokens by agent",
        "Runs by stop kind",
        "Run duration (median, p95)",
        "Messages per run (median, p95)",
        "Loop detections",
        "Spend per successful run",
        "Share of successful runs",
    } <= titles
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] == "AutoGen team runs"
    assert {p["datasource"]["uid"] for p in dashboard["panels"]} == {"prometheus"}


@pytest.mark.backend
async def test_every_dashboard_panel_returns_data_from_a_real_prometheus(
    prometheus_and_team_process: tuple[Prometheus, otel_agents.Telemetry, InMemorySpanExporter],
    openai_server: OpenAIServer,
) -> None:
    prometheus, telemetry, exporter = prometheus_and_team_process
    deadline = time.monotonic() + 8  # several scrapes while teams run, so rates are not zero
    while time.monotonic() < deadline:
        await run_teams(openai_server)
        await asyncio.sleep(0.3)

    missing = []
    for title, expr in dashboard_queries():
        finite = []
        for _ in range(40):
            finite = [r for r in prometheus.query(expr) if math.isfinite(float(r["value"][1]))]
            if finite:
                break
            await asyncio.sleep(0.5)
        if not finite:
            missing.append(f"{title}: {expr}")
    assert not missing, "panels without data:\n" + "\n".join(missing)

    # Prometheus's totals equal the spans' (scraped after the last run)
    assert telemetry.force_flush()
    calls = chat_spans(list(exporter.get_finished_spans()))
    last_run_ended = time.time()
    assert await wait_until_async(lambda: prometheus.scraped_since(last_run_ended), 30, every_s=0.2)
    (tokens,) = prometheus.query("sum(gen_ai_client_token_usage_sum)")
    assert float(tokens["value"][1]) == sum(
        c.attributes["gen_ai.usage.input_tokens"] + c.attributes["gen_ai.usage.output_tokens"] for c in calls
    )
    (cost,) = prometheus.query("sum(otel_agents_cost_USD_total)")
    assert float(cost["value"][1]) == pytest.approx(sum(c.attributes["otel_agents.cost.usd"] for c in calls))


@pytest.mark.backend
def test_exposition_names_units_and_promtool(
    prometheus_and_team_process: tuple[Prometheus, otel_agents.Telemetry, InMemorySpanExporter],
    openai_server: OpenAIServer,
) -> None:
    _, telemetry, _ = prometheus_and_team_process
    asyncio.run(run_teams(openai_server))
    assert telemetry.prometheus is not None
    url = f"http://{telemetry.prometheus.host}:{telemetry.prometheus.port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    assert types["gen_ai_client_token_usage"] == "histogram"
    assert types["gen_ai_client_operation_duration_seconds"] == "histogram"
    assert types["gen_ai_workflow_duration_seconds"] == "histogram"
    assert types["otel_agents_cost_USD_total"] == "counter"
    assert types["otel_agents_run_cost_USD"] == "histogram"
    assert types["otel_agents_run_messages"] == "histogram"
    assert types["otel_agents_runs_total"] == "counter"
    assert types["otel_agents_loop_detections_total"] == "counter"
    assert types["otel_agents_spans_dropped_total"] == "counter"
    assert re.search(r'^gen_ai_client_token_usage_bucket\{.*le="67108864(\.0)?"', text, re.MULTILINE)
    assert re.search(r'^gen_ai_client_operation_duration_seconds_bucket\{.*le="81\.92"', text, re.MULTILINE)
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package) is not installed"
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_a_flush_between_scrapes_leaves_each_series_once_with_its_current_value() -> None:
    """A Prometheus endpoint is read by scrapes: `force_flush()` must not queue a stale copy of
    every series for the next scrape to show beside the current one (Prometheus keeps the first)."""
    from tests.support.teams import writers_room

    with otel_agents.configure(
        span_exporter=InMemorySpanExporter(), store=False, prometheus=("127.0.0.1", 0), set_global=False
    ) as telemetry:
        assert telemetry.prometheus is not None
        url = f"http://{telemetry.prometheus.host}:{telemetry.prometheus.port}/metrics"
        for flushed in (False, True, False):
            await writers_room(max_messages=2).run(task="go")
            if flushed:
                assert telemetry.force_flush()
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    runs = [line for line in text.splitlines() if line.startswith("otel_agents_runs_total{")]
    assert len(runs) == 1 and runs[0].endswith(" 3.0"), runs
    assert text.count("# TYPE otel_agents_runs_total counter") == 1


def test_the_prometheus_endpoint_binds_127_0_0_1_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prometheus")
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", "0")
    with otel_agents.configure(store=False, set_global=False) as telemetry:
        assert telemetry.prometheus is not None and telemetry.prometheus.host == "127.0.0.1"
    assert telemetry.settings.prometheus == ("127.0.0.1", 0)


@pytest.mark.parametrize(
    ("env", "kwargs", "message"),
    [
        ({"OTEL_EXPORTER_PROMETHEUS_PORT": "http"}, {}, "OTEL_EXPORTER_PROMETHEUS_PORT='http'"),
        ({"OTEL_EXPORTER_PROMETHEUS_PORT": "70000"}, {}, "OTEL_EXPORTER_PROMETHEUS_PORT='70000'"),
        ({}, {"prometheus": ("127.0.0.1", "9464")}, "prometheus=('127.0.0.1', '9464')"),
        ({}, {"prometheus": "yes"}, "prometheus='yes'"),
    ],
)
def test_bad_prometheus_settings_are_refused(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], kwargs: dict[str, Any], message: str
) -> None:
    assert_configure_refuses(monkeypatch, env, message, set_global=False, store=False, **kwargs)


async def test_histogram_points_carry_the_runs_trace_as_exemplar(openai_server: OpenAIServer) -> None:
    reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader]) as telemetry:
        openai_server.script = [Reply(text="a line")]
        await drain(otel_agents.tap(writers(openai_server).run_stream(task="go")))
        metrics = metrics_of(reader)  # the first collection holds the exemplars
        telemetry.force_flush()
    roots = {s.context.trace_id for s in exporter.get_finished_spans() if s.parent is None}
    calls = {s.context.span_id for s in chat_spans(list(exporter.get_finished_spans()))}
    run_exemplars = [e for p in metrics["gen_ai.workflow.duration"].data.data_points for e in p.exemplars]
    assert run_exemplars and {e.trace_id for e in run_exemplars} == roots
    call_exemplars = [e for p in metrics["gen_ai.client.operation.duration"].data.data_points for e in p.exemplars]
    assert call_exemplars and {e.span_id for e in call_exemplars} <= calls, "a call's point points at its chat span"


class UnhashableMeterProvider(MeterProvider):
    """Compared by value, as a provider made by a dataclass is (Logfire's proxy provider)."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return self is other


@pytest.mark.parametrize("provider_class", [MeterProvider, UnhashableMeterProvider])
def test_span_counters_read_the_pipeline_recording_now_and_keep_no_replaced_one(
    provider_class: type[MeterProvider],
) -> None:
    """A meter provider keeps the callbacks of the first instruments of a name: the span counters
    are made once per meter provider and read, weakly, whichever pipeline records to it now."""
    import gc
    import weakref

    from opentelemetry.sdk.trace import TracerProvider

    from otel_agents._internal.export.health import Health
    from otel_agents._internal.telemetry import latest

    reader = InMemoryMetricReader()
    meter_provider, tracer_provider = provider_class(metric_readers=[reader]), TracerProvider()
    instrumentor = otel_agents.AutoGenInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    first = weakref.ref(latest())
    instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    now = latest()
    assert now is not None
    now._health = Health(failed_export_spans=3)  # what this pipeline lost
    try:
        gc.collect()
        assert first() is None, "the replaced pipeline is not kept alive by the counter's callback"
        data = reader.get_metrics_data()
        assert data is not None
        dropped = {p.attributes["otel_agents.drop.reason"]: p.value for p in points(data, "otel_agents.spans.dropped")}
        assert dropped == {"export_failed": 3, "not_exported": 0}  # by reason since 2026-12-04 (CHANGELOG)
    finally:
        now._health = Health()  # nothing lost after all: no warning at exit

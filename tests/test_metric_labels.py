"""OTEL_AGENTS_METRIC_ATTRIBUTES: run attributes as labels of the run metrics, off by default, checked
at configure(); and the dashboard's Service, Team and Cost label variables and its cost-by-label
panels answered by a real Prometheus scraping runs given a tenant."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry import baggage, context
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.config.parsers import MAX_METRIC_ATTRIBUTES
from tests.support import grafana
from tests.support.config import assert_configure_refuses
from tests.support.metrics import points
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.prometheus import Prometheus, scraped_pipeline
from tests.support.teams import openai_client
from tests.support.waits import wait_until_async
from tests.test_metrics import judged

VARIABLE = "OTEL_AGENTS_METRIC_ATTRIBUTES"
RUN_METRICS = ("gen_ai.workflow.duration", "otel_agents.run.cost", "otel_agents.run.messages", "otel_agents.runs")
CALL_METRICS = ("otel_agents.cost", "gen_ai.client.token.usage", "gen_ai.client.operation.duration")
OWN = {
    name: {"gen_ai.workflow.name"}
    if name == "otel_agents.run.cost"
    else {"gen_ai.workflow.name", "otel_agents.stop_kind"}
    for name in RUN_METRICS
}
"""The run metrics' own attributes."""


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def team(server: OpenAIServer, name: str = "writers-room", messages: int = 3) -> RoundRobinGroupChat:
    """A priced team (the test server answers as gpt-4o-mini): every run has a cost."""
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(messages), name=name)


def run_once(server: OpenAIServer, name: str = "writers-room") -> None:
    asyncio.run(drain(otel_agents.run_stream(team(server, name), task="write a haiku")))


def measured(monkeypatch: pytest.MonkeyPatch, setting: str | None, server: OpenAIServer, **given: Any) -> Any:
    """The metrics of one priced run inside `run_attributes(**given)`, with the variable set to `setting`."""
    if setting is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, setting)
    reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
    server.script = [Reply(text="a line")]
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader]) as telemetry:
        with otel_agents.run_attributes(**given):
            run_once(server)
        data = reader.get_metrics_data()
        telemetry.force_flush()
    (run_span,) = [s for s in exporter.get_finished_spans() if s.parent is None]
    return data, run_span


def test_run_metrics_carry_the_chosen_run_attributes_when_configured(
    monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    data, _ = measured(
        monkeypatch, "tenant,tier", openai_server, attributes={"tenant": "acme", "tier": 2, "region": "eu"}
    )
    for name in RUN_METRICS:
        (point,) = points(data, name)
        assert point.attributes["tenant"] == "acme", name
        assert point.attributes["tier"] == "2", f"{name}: as text: 2 and '2' are one label value in Prometheus"
        assert "region" not in point.attributes, f"{name}: a run attribute not listed is no label"
    for name in CALL_METRICS:
        assert points(data, name), name
        for point in points(data, name):
            assert "tenant" not in point.attributes, f"{name}: model-call metrics get no run attributes"


def test_without_the_setting_no_run_attribute_is_a_metric_attribute(
    monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    data, run_span = measured(monkeypatch, None, openai_server, attributes={"tenant": "acme"})
    assert run_span.attributes["tenant"] == "acme", "the run was given the attribute"
    for name in (*RUN_METRICS, *CALL_METRICS):
        assert points(data, name), name
        for point in points(data, name):
            assert "tenant" not in point.attributes, name


def test_a_run_without_the_chosen_attribute_gets_no_such_label(
    monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    data, _ = measured(monkeypatch, "tenant", openai_server, attributes={"region": "eu"})
    for name in RUN_METRICS:
        (point,) = points(data, name)
        assert set(point.attributes) == OWN[name], name


def test_baggage_and_the_identities_never_become_labels(
    monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    """Listed, but given as baggage or as user_id/session_id/conversation_id: not labels. Listed and
    given through attributes: labels (the user asked for it)."""
    front_end = baggage.set_baggage("tenant", "from-baggage", baggage.set_baggage("user.id", "u-baggage"))
    token = context.attach(front_end)
    try:
        data, run_span = measured(
            monkeypatch,
            "tenant,user.id,session.id",
            openai_server,
            user_id="u1",
            session_id="s1",
            conversation_id="c1",
        )
    finally:
        context.detach(token)
    assert run_span.attributes["user.id"] == "u1" and run_span.attributes["session.id"] == "s1"
    for name in RUN_METRICS:
        (point,) = points(data, name)
        assert set(point.attributes) == OWN[name], name

    data, _ = measured(monkeypatch, "user.id", openai_server, attributes={"user.id": "u-given"})
    for name in RUN_METRICS:
        (point,) = points(data, name)
        assert point.attributes["user.id"] == "u-given", name


def test_the_setting_is_read_at_configure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, " tenant , region ")
    with otel_agents.configure(set_global=False, store=False) as telemetry:
        assert telemetry.settings.metric_attributes == ("tenant", "region")
        assert telemetry.instruments.label_keys == ("tenant", "region")
    monkeypatch.setenv(VARIABLE, ",".join(f"key{i}" for i in range(MAX_METRIC_ATTRIBUTES)))
    with otel_agents.configure(set_global=False, store=False) as telemetry:
        assert len(telemetry.settings.metric_attributes) == MAX_METRIC_ATTRIBUTES == 8
    monkeypatch.setenv(VARIABLE, "  ")
    with otel_agents.configure(set_global=False, store=False) as telemetry:
        assert telemetry.settings.metric_attributes == (), "blank is unset, as for every variable"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("tenant,,region", "entry 2 is empty"),
        ("tenant,", "entry 2 is empty"),
        (",tenant", "entry 1 is empty"),
        ("gen_ai.workflow.name", "'gen_ai.workflow.name' is reserved"),
        ("otel_agents.stop_kind", "'otel_agents.stop_kind' is reserved"),
        ("gen_ai_workflow_name", "'gen_ai_workflow_name' is reserved"),
        ("otel.scope.name", "'otel.scope.name' is reserved"),
        ("le", "'le' is reserved"),
        ("exported.instance", "'exported.instance' is reserved"),
        ("quantile", "'quantile' is reserved"),
        ("job", "'job' is reserved"),
        ("tenant,instance", "'instance' is reserved"),
        ("__tenant", "'__tenant' is reserved"),
        ("_.tenant", "'_.tenant' is reserved"),
        ("tenant id", "'tenant id' is not a key"),
        ("9lives", "'9lives' is not a key"),
        ("tenant/eu", "'tenant/eu' is not a key"),
        ("k" * 129, "at most 128 characters"),
        ("customer.tier,customer_tier", "'customer_tier' and 'customer.tier' are both the label 'customer_tier'"),
        ("tenant,tenant", "'tenant' and 'tenant' are both the label 'tenant'"),
        (",".join(f"key{i}" for i in range(9)), "9 keys, at most 8"),
    ],
)
def test_bad_values_are_refused_at_configure(monkeypatch: pytest.MonkeyPatch, value: str, message: str) -> None:
    assert_configure_refuses(monkeypatch, {VARIABLE: value}, message, set_global=False, store=False)
    assert_configure_refuses(monkeypatch, {VARIABLE: value}, f"{VARIABLE}=", set_global=False, store=False)


# --- a real Prometheus ---------------------------------------------------------------------------

TENANTS = ("acme", "globex")


@pytest.fixture
def labelled_prometheus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Prometheus, otel_agents.Telemetry, InMemorySpanExporter]]:
    monkeypatch.setenv(VARIABLE, "tenant")
    with scraped_pipeline(tmp_path, outcome=judged) as scraped:  # outcomes: the dashboard's outcome panels
        yield scraped


async def run_for_tenants(server: OpenAIServer) -> None:
    server.script = [Reply(text="Not good enough, try again.")]  # the same text every time
    for tenant in TENANTS:
        async with otel_agents.run_attributes(attributes={"tenant": tenant}):
            await drain(otel_agents.run_stream(team(server), task="write a haiku"))
    # no tenant given; a loop, for the loop detections panel
    await drain(otel_agents.run_stream(team(server, "loopy", messages=9), task="write a haiku"))


def finite(prometheus: Prometheus, expr: str) -> list[dict[str, Any]]:
    return [r for r in prometheus.query(expr) if math.isfinite(float(r["value"][1]))]


async def answered(prometheus: Prometheus, expr: str, tries: int = 40) -> list[dict[str, Any]]:
    for _ in range(tries):
        if found := finite(prometheus, expr):
            return found
        await asyncio.sleep(0.5)
    return []


@pytest.mark.backend
async def test_prometheus_shows_the_label_and_the_dashboard_answers_by_it(
    labelled_prometheus: tuple[Prometheus, otel_agents.Telemetry, InMemorySpanExporter],
    openai_server: OpenAIServer,
) -> None:
    prometheus, telemetry, exporter = labelled_prometheus
    deadline = time.monotonic() + 8  # several scrapes while runs go on, so increases are not zero
    while time.monotonic() < deadline:
        await run_for_tenants(openai_server)
        await asyncio.sleep(0.3)

    # the label, on the scraped run metrics only
    for series in ("otel_agents_run_cost_USD_bucket", "otel_agents_run_cost_USD_sum", "otel_agents_runs_total"):
        found = await answered(prometheus, f'{series}{{tenant="acme"}}')
        assert found, series
    assert await answered(prometheus, 'gen_ai_workflow_duration_seconds_count{tenant="globex"}')
    assert await answered(prometheus, 'otel_agents_run_messages_count{tenant="globex"}')
    assert not finite(prometheus, '{__name__=~"otel_agents_cost_USD_total|gen_ai_client_.*", tenant!=""}')

    # the variables, resolved as Grafana resolves them
    board = grafana.dashboard()
    listed, values = grafana.resolve(prometheus, board)
    assert listed["job"] == ["otel-agents"]  # the scrape job; behind the Collector, the service
    assert listed["team"] == ["loopy", "writers-room"]
    assert listed["label"] == ["tenant"], "only run attributes are offered, not the metrics' own labels"
    assert values == {"job": "(otel-agents)", "team": "(loopy|writers-room)", "label": "tenant"}

    # every panel answers with the variables chosen, and none with a service that is not there
    queries = grafana.panel_queries(board, values)
    missing = [f"{title}: {expr}" for title, expr in queries if not await answered(prometheus, expr)]
    assert not missing, "panels without data:\n" + "\n".join(missing)
    _, elsewhere = grafana.resolve(prometheus, board, {"job": ["another-service"], "team": grafana.ALL})
    leaking = [f"{t}: {e}" for t, e in grafana.panel_queries(board, elsewhere) if finite(prometheus, e)]
    assert not leaking, "panels that ignore the Service variable:\n" + "\n".join(leaking)
    _, no_team = grafana.resolve(prometheus, board, {"team": ["no-such-team"]})
    unfiltered = {t for t, e in grafana.panel_queries(board, no_team) if finite(prometheus, e)}
    assert unfiltered == {"Tokens by agent", "Model call duration (median, p95)"}, "model calls have no team"
    _, one_team = grafana.resolve(prometheus, board, {"team": "loopy"})
    by_label = dict(grafana.panel_queries(board, one_team))["Cost by label"]
    assert {r["metric"].get("tenant") for r in await answered(prometheus, by_label)} == {None}, "loopy has none"

    # the cost-by-label panels: one row per tenant, and one for the runs given none
    for title in ("Cost by label", "Cost in range by label"):
        expr = dict(queries)[title]
        rows = await answered(prometheus, expr)
        assert {r["metric"].get("tenant") for r in rows} == {*TENANTS, None}, title
        assert all(set(r["metric"]) <= {"tenant"} for r in rows), title

    # Prometheus's cost per tenant equals the run spans' (scraped after the last run)
    assert telemetry.force_flush()
    last_run_ended = time.time()
    assert await wait_until_async(lambda: prometheus.scraped_since(last_run_ended), 30, every_s=0.2)
    runs = [s for s in exporter.get_finished_spans() if s.parent is None]
    for tenant in TENANTS:
        spans = [s for s in runs if s.attributes.get("tenant") == tenant]
        assert spans and all("otel_agents.cost.usd" in s.attributes for s in spans), tenant
        (total,) = prometheus.query(f'sum(otel_agents_run_cost_USD_sum{{tenant="{tenant}"}})')
        assert float(total["value"][1]) == pytest.approx(sum(s.attributes["otel_agents.cost.usd"] for s in spans))
        (count,) = prometheus.query(f'sum(otel_agents_runs_total{{tenant="{tenant}"}})')
        assert float(count["value"][1]) == len(spans)


def test_label_values_of_one_meaning_are_one_series(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.support.teams import writers_room

    monkeypatch.setenv("OTEL_AGENTS_METRIC_ATTRIBUTES", "tier,beta")
    reader = InMemoryMetricReader()

    async def runs() -> None:
        for tier, beta in ((2, True), ("2", "true"), (2.0, True)):
            with otel_agents.run_attributes(attributes={"tier": tier, "beta": beta}):
                await writers_room(max_messages=2).run(task="go")

    with otel_agents.configure(span_exporter=InMemorySpanExporter(), metric_readers=[reader], store=False):
        asyncio.run(runs())
        (point,) = points(reader.get_metrics_data(), "otel_agents.runs")
    assert (dict(point.attributes)["tier"], dict(point.attributes)["beta"], point.value) == ("2", "true", 3)

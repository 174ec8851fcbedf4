"""From a cost spike to its run, end to end through deploy/'s chain (DESIGN section 4; issue 48 item 3).

Runs of the real `OpenAIChatCompletionClient` against the local OpenAI-compatible server, exported by
OTLP to the Collector built from deploy/collector (deploy/'s config: traces to the built Jaeger,
metrics on its OpenMetrics endpoint), scraped by Debian's Prometheus started with the flags deploy/'s
compose file gives it (exemplar storage on). The exemplars Prometheus returns for the run-cost
histogram name traces Jaeger holds; with runs sampled, only kept runs' traces; a Prometheus started
without exemplar storage returns none, though it has the same series.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat

import otel_agents
from otel_agents._internal.export.store.reader import Store, StoredRun
from tests.support.backends import built_backends
from tests.support.collector import Collector, running_collector
from tests.support.grafana_links import deploy_prometheus_flags, exemplar_trace_label
from tests.support.jaeger import Jaeger, poll, running_jaeger
from tests.support.openai_server import OpenAIServer
from tests.support.prometheus import Prometheus, start_prometheus
from tests.support.teams import openai_client

pytestmark = pytest.mark.backend

RUN_COST = "otel_agents_run_cost_USD_bucket"
CARRYING = {
    RUN_COST,
    "gen_ai_workflow_duration_seconds_bucket",
    "otel_agents_run_messages_bucket",
    "otel_agents_runs_total",
    "gen_ai_client_operation_duration_seconds_bucket",
    "gen_ai_client_token_usage_bucket",
    "otel_agents_cost_USD_total",
}
"""The metrics of docs/metrics.md's Exemplars table, as Prometheus names them."""


@dataclass
class Chain:
    jaeger: Jaeger
    collector: Collector
    prometheus: Prometheus
    """Started with deploy/'s flags: exemplar storage on."""
    without_exemplars: Prometheus
    """The same scrape, without deploy/'s flags."""


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    backends = built_backends()
    if shutil.which("prometheus") is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus missing: scripts/test.sh installs Debian's prometheus package")
        pytest.skip("Debian's prometheus is not installed")
    workdir = tmp_path_factory.mktemp("chain")
    stored, bare = workdir / "prometheus", workdir / "prometheus-without-exemplars"
    stored.mkdir()
    bare.mkdir()
    with (
        running_jaeger(backends.jaeger, workdir) as jaeger,
        running_collector(
            backends.collector, workdir, jaeger_otlp_grpc=f"127.0.0.1:{jaeger.ports.otlp_grpc}"
        ) as collector,
    ):
        prometheus = start_prometheus(stored, [collector.scrape_target], flags=deploy_prometheus_flags())
        try:
            without = start_prometheus(bare, [collector.scrape_target])
            try:
                yield Chain(jaeger, collector, prometheus, without)
            finally:
                without.stop()
        finally:
            prometheus.stop()


def team(server: OpenAIServer, name: str) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3), name=name)


def exemplar_traces(prometheus: Prometheus, promql: str, since: float) -> dict[str, set[str]]:
    """The trace ids of the exemplars Prometheus holds for `promql`, by metric name."""
    found: dict[str, set[str]] = {}
    for series in prometheus.exemplars(promql, since):
        name = series["seriesLabels"]["__name__"]
        for exemplar in series["exemplars"]:
            found.setdefault(name, set()).add(exemplar["labels"].get(exemplar_trace_label(), ""))
    return found


def exemplar_spans(prometheus: Prometheus, promql: str, since: float) -> set[tuple[str, str]]:
    """(trace id, span id) of every exemplar Prometheus holds for `promql`."""
    label = exemplar_trace_label()
    return {
        (exemplar["labels"][label], exemplar["labels"].get("span_id", ""))
        for series in prometheus.exemplars(promql, since)
        for exemplar in series["exemplars"]
    }


def held_by_jaeger(jaeger: Jaeger, trace_id: str) -> bool:
    return bool(jaeger.v3_trace(trace_id))


async def run_through_the_chain(
    chain: Chain,
    server: OpenAIServer,
    store: Path,
    *,
    service: str,
    users: list[str],
    **configure: Any,
) -> list[StoredRun]:
    """One run a user, in turn, each exported and flushed; after each, Prometheus has scraped what
    the Collector exposed: its runs in the order made (the store keeps every run)."""
    with otel_agents.configure(
        service_name=service, endpoint=chain.collector.http_endpoint, store=store, **configure
    ) as telemetry:
        for made, user in enumerate(users, start=1):
            with otel_agents.run_attributes(user_id=user):
                await team(server, service).run(task="write a line")
            assert telemetry.force_flush()
            counted = f'sum(otel_agents_runs_total{{exported_job="{service}"}})'
            for prometheus in (chain.prometheus, chain.without_exemplars):
                scraped = poll(
                    lambda p=prometheus, q=counted: p.query(q),
                    lambda found, n=made: bool(found) and float(found[0]["value"][1]) == n,
                    within_s=90,
                )
                assert scraped and float(scraped[0]["value"][1]) == made, f"run {made} never scraped: {scraped}"
    runs = sorted(Store(store).runs(limit=None), key=lambda run: run.started_ns)
    assert [run.user_id for run in runs] == users
    assert all(run.cost_usd for run in runs), "every call priced: each run has a cost point"
    return runs


async def test_the_run_cost_exemplars_prometheus_keeps_name_runs_jaeger_holds(
    chain: Chain, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    since = time.time() - 5
    service = "cost-spikes"
    runs = await run_through_the_chain(chain, openai_server, tmp_path, service=service, users=["ana", "ben"])
    selector = f'{{exported_job="{service}"}}'

    def every_run_in_cost_exemplars(found: dict[str, set[str]]) -> bool:
        return {run.trace_id for run in runs} <= found.get(RUN_COST, set())

    found = poll(lambda: exemplar_traces(chain.prometheus, selector, since), every_run_in_cost_exemplars, within_s=60)
    assert every_run_in_cost_exemplars(found), f"each run's cost point leads to its trace: {found}"
    assert set(found) == CARRYING, "the metrics docs/metrics.md says carry exemplars, and only those"
    for trace_id in set().union(*found.values()):
        assert poll(lambda t=trace_id: held_by_jaeger(chain.jaeger, t), bool, within_s=60), f"{trace_id} not in Jaeger"
    calls = exemplar_spans(chain.prometheus, f"gen_ai_client_operation_duration_seconds_bucket{selector}", since)
    assert calls, "model-call points carry exemplars too"
    for trace_id, span_id in calls:
        trace = chain.jaeger.wait_for_trace(trace_id, 1)
        (chat,) = [span for span in trace["spans"] if span["spanID"] == span_id]
        assert chat["operationName"].startswith("chat "), "a call's exemplar opens its chat span"


async def test_a_left_out_run_is_named_by_no_exemplar_and_a_kept_one_by_its_cost_point(
    chain: Chain, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    since = time.time() - 5
    service = "cost-spikes-sampled"
    users = ["left-1", "kept-1", "left-2", "kept-2"]
    runs = await run_through_the_chain(
        chain,
        openai_server,
        tmp_path,
        service=service,
        users=users,
        sample_runs=0,  # the ratio keeps no run: a rule keeps the "kept" users' runs
        keep_runs=lambda run: str(run.user_id).startswith("kept"),
    )
    kept = {run.trace_id for run in runs if str(run.user_id).startswith("kept")}
    left_out = {run.trace_id for run in runs} - kept
    selector = f'{{exported_job="{service}"}}'
    found = poll(
        lambda: exemplar_traces(chain.prometheus, selector, since),
        lambda found: kept <= found.get(RUN_COST, set()),
        within_s=60,
    )
    assert kept <= found.get(RUN_COST, set()), f"each kept run's cost point leads to its trace: {found}"
    # every run's points were scraped before the last kept run's: none names a left-out trace
    named = set().union(*found.values())
    assert not named & left_out, f"exemplars name left-out runs: {named & left_out}"
    assert named <= kept
    for trace_id in kept:
        assert poll(lambda t=trace_id: held_by_jaeger(chain.jaeger, t), bool, within_s=60)
    for trace_id in left_out:
        assert not held_by_jaeger(chain.jaeger, trace_id), "a left-out run never reaches Jaeger"


async def test_a_prometheus_without_exemplar_storage_returns_no_exemplars(
    chain: Chain, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    since = time.time() - 5
    service = "cost-spikes-no-storage"
    runs = await run_through_the_chain(chain, openai_server, tmp_path, service=service, users=["ana"])
    selector = f'{RUN_COST}{{exported_job="{service}"}}'
    stored = poll(lambda: exemplar_traces(chain.prometheus, selector, since), bool, within_s=60)
    assert stored == {RUN_COST: {runs[0].trace_id}}, "the same scrape, with storage: the run's exemplar"
    assert chain.without_exemplars.query(f"sum({selector})"), "the series is there"
    assert chain.without_exemplars.exemplars(selector, since) == [], (
        "without --enable-feature=exemplar-storage Prometheus keeps no exemplar: nothing leads to a run"
    )

"""deploy/docker-compose.yml's stack run as binaries on 127.0.0.1, each with its own deploy/ config
rendered with other addresses and paths only (and Prometheus scraping every second, not every 15):
the Collector and Jaeger built from their Go modules, Debian's Prometheus and Alertmanager.
`otel-agents demo`, pointed at the Collector, is seen in Jaeger and in Prometheus, and in Jaeger's
Monitor tab (its metrics API reading the Collector's spanmetrics from Prometheus)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_agents._internal.export.store.reader import Store, StoredRun
from otel_agents.cli._demo import DEMO_MODEL
from tests.support.backends import built_backends
from tests.support.cli import cli
from tests.support.collector import Collector, readdress, running_collector
from tests.support.deploy import DEPLOY
from tests.support.jaeger import Jaeger, poll, running_jaeger
from tests.support.processes import free_port, on_free_ports
from tests.support.prometheus import Prometheus, launch_prometheus, start_alertmanager

pytestmark = [pytest.mark.backend]


@dataclass
class Stack:
    jaeger: Jaeger
    collector: Collector
    prometheus: Prometheus


def debian_servers() -> None:
    if shutil.which("prometheus") is None or shutil.which("prometheus-alertmanager") is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus missing: scripts/test.sh installs Debian's prometheus packages")
        pytest.skip("Debian's prometheus and prometheus-alertmanager are not installed")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    backends = built_backends()
    debian_servers()
    workdir = tmp_path_factory.mktemp("stack")
    webhooks = {
        "http://host.docker.internal:5001/page": f"http://127.0.0.1:{free_port()}/page",
        "http://host.docker.internal:5001/notify": f"http://127.0.0.1:{free_port()}/notify",
    }
    alertmanager = start_alertmanager(
        workdir, readdress(yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text()), webhooks)
    )

    def start(ports: list[int]) -> tuple[contextlib.ExitStack, Stack]:
        """The stack with Prometheus on `ports[0]`: Jaeger, started first, reads its metrics from
        there. The port is free when drawn, not held: if anything (Jaeger's or the Collector's own
        ports included) takes it before Prometheus binds it, the whole stack starts again."""
        (prometheus_port,) = ports
        running = contextlib.ExitStack()
        try:
            jaeger = running.enter_context(
                running_jaeger(backends.jaeger, workdir, prometheus_url=f"http://127.0.0.1:{prometheus_port}")
            )
            collector = running.enter_context(
                running_collector(backends.collector, workdir, jaeger_otlp_grpc=f"127.0.0.1:{jaeger.ports.otlp_grpc}")
            )
            config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
            config = readdress(
                config,
                {
                    "/etc/prometheus/rules.yml": str(DEPLOY / "prometheus" / "rules.yml"),
                    "alertmanager:9093": alertmanager.url.removeprefix("http://"),
                    "otel-collector:8889": collector.scrape_target,
                },
            )
            config["global"] = {**config["global"], "scrape_interval": "1s", "evaluation_interval": "1s"}
            prometheus = launch_prometheus(workdir, config, prometheus_port)
            running.callback(prometheus.stop)
        except BaseException:
            running.close()
            raise
        return running, Stack(jaeger, collector, prometheus)

    try:
        running, started = on_free_ports(1, start)
        with running:
            yield started
    finally:
        alertmanager.stop()


def test_the_demo_pointed_at_the_collector_is_seen_in_jaeger_and_prometheus(stack: Stack, tmp_path: Path) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": stack.collector.http_endpoint,
        "OTEL_SERVICE_NAME": "writers-demo",
        "OTEL_RESOURCE_ATTRIBUTES": "service.namespace=shop",
    }
    done = cli("--store", str(tmp_path), "demo", env=env)
    assert done.returncode == 0, done.stderr

    runs = Store(tmp_path).runs()
    assert {r.user_id for r in runs} == {"ana", "ben"}
    for run in runs:
        shown = json.loads(cli("--store", str(tmp_path), "show", run.run_id, "--json").stdout)["spans"]
        trace = stack.jaeger.wait_for_trace(run.trace_id, len(shown))
        parents = {
            s["spanID"]: next((r["spanID"] for r in s["references"] if r["refType"] == "CHILD_OF"), None)
            for s in trace["spans"]
        }
        assert parents == {s["span_id"]: s["parent_span_id"] for s in shown}, "through the Collector, whole"
        assert {trace["processes"][s["processID"]]["serviceName"] for s in trace["spans"]} == {"writers-demo"}
    assert stack.jaeger.search("writers-demo", tags={"user.id": "ben"}) == {
        r.trace_id for r in runs if r.user_id == "ben"
    }

    def counted() -> list[dict[str, Any]]:
        return stack.prometheus.query(
            'sum by (job, gen_ai_workflow_name) (otel_agents_runs_total{job="shop/writers-demo"})'
        )

    series = poll(counted, lambda found: bool(found) and found[0]["value"][1] == "2", within_s=60)
    assert [(s["metric"], s["value"][1]) for s in series] == [
        ({"job": "shop/writers-demo", "gen_ai_workflow_name": "writers-room"}, "2")
    ], "two runs, scraped from the Collector's prometheus exporter with deploy/'s relabelling"
    (cost,) = stack.prometheus.query('sum(otel_agents_run_cost_USD_sum{job="shop/writers-demo"})')
    assert float(cost["value"][1]) == pytest.approx(sum(r.cost_usd or 0 for r in runs)) and all(
        r.cost_usd for r in runs
    )


def demo_runs(stack: Stack, service: str, store: Path) -> list[StoredRun]:
    """`otel-agents demo` (a process of its own) as `service`, pointed at the Collector: its runs."""
    before = {r.run_id for r in Store(store).runs()}
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": stack.collector.http_endpoint, "OTEL_SERVICE_NAME": service}
    done = cli("--store", str(store), "demo", env=env)
    assert done.returncode == 0, done.stderr
    return [r for r in Store(store).runs() if r.run_id not in before]


def test_jaegers_monitor_tab_shows_the_runs_and_model_calls_of_the_demo(stack: Stack, tmp_path: Path) -> None:
    """Latency, calls and errors per operation for the demo's service, as the Monitor tab asks
    `/api/metrics/*` for them: Jaeger reads from Prometheus the spanmetrics the Collector made of
    the demo's spans. A rate needs a counter that grows between scrapes: a first demo, its counts
    scraped, then a second, in another process, adding to the same series."""
    service = "monitor-demo"
    operations = {"invoke_workflow writers-room", f"chat {DEMO_MODEL}"}
    span_kinds = ("internal", "client")  # the Monitor tab's span kind choice; it starts at server

    def calls_scraped() -> dict[str, list[float]]:
        found = stack.prometheus.query(f'traces_span_metrics_calls_total{{service_name="{service}"}}')
        by_operation: dict[str, list[float]] = {}
        for series in found:
            by_operation.setdefault(series["metric"]["span_name"], []).append(float(series["value"][1]))
        return by_operation

    first = demo_runs(stack, service, tmp_path)
    assert len(first) == 2, "ana's run and ben's"
    scraped = poll(calls_scraped, lambda found: found.get("invoke_workflow writers-room") == [2.0], within_s=60)
    assert operations <= set(scraped), scraped
    second = demo_runs(stack, service, tmp_path)
    assert len(second) == 2
    scraped = poll(calls_scraped, lambda found: found.get("invoke_workflow writers-room") == [4.0], within_s=60)
    assert scraped["invoke_workflow writers-room"] == [4.0], "both processes' runs in one series per operation"

    def growing(found: dict[str, list[float]]) -> bool:
        return all(any(v > 0 for v in found.get(op, [])) for op in operations)

    calls = poll(lambda: stack.jaeger.rates("calls", service, span_kinds), growing, within_s=60)
    assert {op: max(calls.get(op, [0.0])) > 0 for op in operations} == dict.fromkeys(operations, True), calls

    errors = stack.jaeger.rates("errors", service, span_kinds)
    assert operations <= set(errors), f"an error rate series per operation: {errors}"
    assert all(v == 0 for op in operations for v in errors[op] if not math.isnan(v)), "the demo fails no call"

    latencies = stack.jaeger.rates("latencies", service, span_kinds, quantile="0.95")
    for op in operations:
        measured = [v for v in latencies.get(op, []) if not math.isnan(v)]
        assert measured and all(v > 0 for v in measured), f"{op}: p95 latency in ms, {latencies.get(op)}"
    assert stack.jaeger.rates("calls", service, ("server",)) == {}, "no server spans: kinds kept apart"

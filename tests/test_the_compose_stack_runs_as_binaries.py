"""deploy/docker-compose.yml's stack run as binaries on 127.0.0.1, each with its own deploy/ config
rendered with other addresses and paths only: the Collector and Jaeger built from their Go modules,
Debian's Prometheus and Alertmanager. `otel-agents demo`, pointed at the Collector, is seen in
Jaeger and in Prometheus."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_agents._internal.export.store import Store
from tests.support.backends import built_backends
from tests.support.cli import cli
from tests.support.collector import Collector, readdress, running_collector
from tests.support.deploy import DEPLOY
from tests.support.jaeger import Jaeger, poll, running_jaeger
from tests.support.processes import free_port
from tests.support.prometheus import Prometheus, launch_prometheus, start_alertmanager


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
    try:
        with (
            running_jaeger(backends.jaeger, workdir) as jaeger,
            running_collector(
                backends.collector, workdir, jaeger_otlp_grpc=f"127.0.0.1:{jaeger.ports.otlp_grpc}"
            ) as collector,
        ):
            config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
            config = readdress(
                config,
                {
                    "/etc/prometheus/rules.yml": str(DEPLOY / "prometheus" / "rules.yml"),
                    "alertmanager:9093": alertmanager.url.removeprefix("http://"),
                    "otel-collector:8889": collector.scrape_target,
                },
            )
            prometheus = launch_prometheus(workdir, config)
            try:
                yield Stack(jaeger, collector, prometheus)
            finally:
                prometheus.stop()
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

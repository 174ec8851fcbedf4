"""deploy/ follows a cost point to its run: Prometheus keeps the exemplars the Collector's OpenMetrics
endpoint writes, Grafana's Prometheus data source links their trace id to the provisioned Jaeger
data source, and the cost-per-run panel shows them. Grafana does not run here: its provisioning is
checked as files; tests/test_from_a_cost_spike_to_its_run.py runs the rest of the chain."""

from __future__ import annotations

import json

import pytest

from tests.support.deploy import DEPLOY, load
from tests.support.grafana_links import exemplar_link, prometheus_command, provisioned_datasources


@pytest.mark.parametrize("compose", ["docker-compose.yml", "multi-host/docker-compose.yml"])
def test_deploys_prometheus_keeps_exemplars(compose: str) -> None:
    assert "--enable-feature=exemplar-storage" in prometheus_command(DEPLOY / compose)


@pytest.mark.parametrize("config", ["otel-collector/config.yaml", "multi-host/otel-collector-gateway.yaml"])
def test_the_collectors_prometheus_exporter_writes_openmetrics_with_exemplars(config: str) -> None:
    assert load(DEPLOY / config)["exporters"]["prometheus"]["enable_open_metrics"] is True


def test_grafanas_data_sources_are_well_formed_and_the_exemplar_link_opens_the_provisioned_jaeger() -> None:
    sources = provisioned_datasources()
    for source in sources:
        assert {"name", "uid", "type", "access", "url"} <= set(source), source
        assert source["access"] == "proxy" and source["url"].startswith("http://"), source
    assert len({s["uid"] for s in sources}) == len(sources) and len({s["name"] for s in sources}) == len(sources)
    by_uid = {source["uid"]: source for source in sources}
    link = exemplar_link()
    assert link["name"] == "trace_id", "the label the Collector's exemplars carry the trace id in"
    jaeger = by_uid[link["datasourceUid"]]
    assert jaeger["type"] == "jaeger"
    services = load(DEPLOY / "docker-compose.yml")["services"]
    host, port = jaeger["url"].removeprefix("http://").split(":")
    assert host in services and f"{port}:{port}" in [str(p).split(" ")[0] for p in services[host]["ports"]]
    assert port == "16686", "Jaeger's query service (its UI's port), which Grafana's Jaeger data source reads"


def test_the_cost_per_run_panel_shows_exemplars_from_the_linked_data_source() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "autogen-team-runs.json").read_text())
    (panel,) = [p for p in dashboard["panels"] if p["title"].startswith("Cost per run")]
    showing = [t for t in panel["targets"] if t.get("exemplar") is True]
    assert len(showing) == 1, "one target shows the exemplars (each would show the same points)"
    assert "otel_agents_run_cost_USD_bucket" in showing[0]["expr"]
    (prometheus,) = [s for s in provisioned_datasources() if s["type"] == "prometheus"]
    assert showing[0]["datasource"]["uid"] == panel["datasource"]["uid"] == prometheus["uid"]

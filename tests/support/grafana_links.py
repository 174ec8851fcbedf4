"""How deploy/ links a cost point to its trace: the flags its compose files start Prometheus with,
and the Grafana data sources it provisions (the Prometheus one's exemplar link to the Jaeger one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.deploy import DEPLOY, load

DATASOURCES = DEPLOY / "grafana" / "provisioning" / "datasources"


def prometheus_command(compose: Path) -> list[str]:
    """The command line the compose file starts its `prometheus` service with."""
    command = load(compose)["services"]["prometheus"]["command"]
    return [command] if isinstance(command, str) else list(command)


def deploy_prometheus_flags() -> list[str]:
    """The feature flags deploy/docker-compose.yml gives Prometheus (`--enable-feature=...`)."""
    return [arg for arg in prometheus_command(DEPLOY / "docker-compose.yml") if arg.startswith("--enable-feature=")]


def provisioned_datasources() -> list[dict[str, Any]]:
    """Every data source of every provisioning file, in file order."""
    found: list[dict[str, Any]] = []
    for path in sorted(DATASOURCES.glob("*.yml")) + sorted(DATASOURCES.glob("*.yaml")):
        document = load(path)
        assert isinstance(document, dict) and document.get("apiVersion") == 1, f"{path.name}: not a provisioning file"
        assert isinstance(document.get("datasources"), list), f"{path.name}: no datasources list"
        found.extend(document["datasources"])
    return found


def exemplar_link() -> dict[str, Any]:
    """The Prometheus data source's one exemplar link (its `exemplarTraceIdDestinations` entry)."""
    (prometheus,) = [source for source in provisioned_datasources() if source["type"] == "prometheus"]
    (link,) = prometheus["jsonData"]["exemplarTraceIdDestinations"]
    return dict(link)


def exemplar_trace_label() -> str:
    """The exemplar label whose value Grafana opens as a trace."""
    return str(exemplar_link()["name"])

"""Checks of the deploy/ files that need no Docker engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def collector_configs() -> list[Path]:
    """Every OpenTelemetry Collector (or Jaeger v2) config under deploy/: files with service.pipelines."""
    found = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        data = load(path)
        if isinstance(data, dict) and isinstance(data.get("service"), dict) and "pipelines" in data["service"]:
            found.append(path)
    return found


def pipeline_problems(config: dict[str, Any]) -> list[str]:
    """Components a pipeline (or the service) names that the config does not define."""
    problems = []
    service = config.get("service", {})
    for extension in service.get("extensions", []):
        if extension not in (config.get("extensions") or {}):
            problems.append(f"service.extensions: {extension} is not defined")
    for pipeline, parts in (service.get("pipelines") or {}).items():
        for kind in ("receivers", "processors", "exporters"):
            # a connector is one pipeline's exporter and another's receiver
            defined = {**(config.get(kind) or {}), **((config.get("connectors") or {}) if kind != "processors" else {})}
            for name in parts.get(kind, []):
                if name not in defined:
                    problems.append(f"pipeline {pipeline}: {kind[:-1]} {name} is not defined")
        for kind in ("receivers", "exporters"):
            if not parts.get(kind):
                problems.append(f"pipeline {pipeline}: no {kind}")
    pipelines = (service.get("pipelines") or {}).values()
    for connector in config.get("connectors") or {}:
        exported = any(connector in parts.get("exporters", []) for parts in pipelines)
        received = any(connector in parts.get("receivers", []) for parts in pipelines)
        if exported != received:
            problems.append(f"connector {connector}: {'exported to' if exported else 'received from'} only")
    return problems

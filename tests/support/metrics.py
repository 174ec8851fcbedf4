"""Reading metric points back from an in-memory reader's data."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import MetricsData


def points(data: MetricsData | None, name: str) -> list[Any]:
    """Every data point of the metric `name`."""
    return [
        point
        for rm in (data.resource_metrics if data is not None else [])
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]

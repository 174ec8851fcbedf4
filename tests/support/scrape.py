"""Prometheus scraping one target with a scrape job taken from deploy/."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.prometheus import Prometheus, launch_prometheus


def start_prometheus_with_job(workdir: Path, job: Mapping[str, Any], target: str) -> Prometheus:
    """Prometheus scraping `target` every second with `job` (a scrape config of deploy/: its name,
    relabelling and label handling kept, its service discovery replaced by the one target)."""
    scrape = {k: v for k, v in job.items() if not k.endswith("_sd_configs") and k != "static_configs"}
    scrape |= {"scrape_interval": "1s", "static_configs": [{"targets": [target]}]}
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "scrape_configs": [scrape]}
    return launch_prometheus(workdir, config)

"""A fixed Prometheus exposition served on 127.0.0.1 (what a Collector's prometheus exporter writes),
and Prometheus scraping it with a scrape job taken from deploy/."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.support.local_http import serving
from tests.support.prometheus import Prometheus, launch_prometheus


@contextmanager
def exposition(text: str) -> Iterator[str]:
    """Serve `text` at /metrics; yields the target's `host:port`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving(Handler) as server:
        host, port = server.server_address[:2]
        yield f"{host!s}:{port}"


def start_prometheus_with_job(workdir: Path, job: Mapping[str, Any], target: str) -> Prometheus:
    """Prometheus scraping `target` every second with `job` (a scrape config of deploy/: its name,
    relabelling and label handling kept, its service discovery replaced by the one target)."""
    scrape = {k: v for k, v in job.items() if not k.endswith("_sd_configs") and k != "static_configs"}
    scrape |= {"scrape_interval": "1s", "static_configs": [{"targets": [target]}]}
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "scrape_configs": [scrape]}
    return launch_prometheus(workdir, config)

"""The docs' screenshots of `otel-agents ui`, made from the tests' store and browser: fills a store
with the runs the web page's tests use (tests/support/ui_store.py: the real OpenAI client against
the tests' local OpenAI-compatible server), starts `otel-agents ui` over it as a user does, and
screenshots each page in Debian's headless chromium (1280x800 viewport, the full page):

    runs.png     /
    run.png      /runs/RUN          the run stopped by the loop guard
    cost.png     /cost
    compare.png  /compare?a=RUN&b=RUN   the two runs of the resumed conversation

and, with `--at-scale`, the pages at scale (`otel-agents ui --jaeger URL --prometheus URL`): the
same runs made by the same app exported over OTLP through deploy/'s chain (the built Collector, the
built Jaeger, Debian's Prometheus with exemplar storage scraping the Collector), and four runs
more made one at a time, each scraped before the next (tests/test_from_a_cost_spike_to_its_run.py):

    runs-jaeger.png     /                  the runs read from Jaeger
    run-jaeger.png      /runs/RUN          the loop-guard run read from Jaeger
    cost-prometheus.png /cost?since=1h     the cost from Prometheus, its costliest runs from Jaeger

Usage: .venv/bin/python scripts/ui_screenshots.py [--out DIR] [--at-scale]   (default docs/images/ui)
It fails (exit 1) when a page answers other than 200 or logs an error, a CSP violation included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.browser import chromium  # noqa: E402
from tests.support.ui_server import ui_server  # noqa: E402
from tests.support.ui_store import UiRuns, fill_ui_store  # noqa: E402


def pages(runs: UiRuns) -> list[tuple[str, str]]:
    """(file name, path under the server's URL) of each screenshot."""
    first, second = runs.resumed
    compare = urllib.parse.urlencode({"a": first["run_id"], "b": second["run_id"]})
    return [
        ("runs.png", ""),
        ("run.png", f"runs/{runs.id('loop_guard')}"),
        ("cost.png", "cost"),
        ("compare.png", f"compare?{compare}"),
    ]


SCALE_SERVICE = "ui-at-scale"


@contextlib.contextmanager
def _scale_ui(workdir: Path) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """deploy/'s chain with the fixture's runs in it, and `otel-agents ui --jaeger --prometheus` over it."""
    from tests.support.backends import built_backends
    from tests.support.collector import running_collector
    from tests.support.grafana_links import deploy_prometheus_flags
    from tests.support.jaeger import poll, running_jaeger
    from tests.support.prometheus import start_prometheus

    backends = built_backends()
    with (
        running_jaeger(backends.jaeger, workdir) as jaeger,
        running_collector(
            backends.collector, workdir, jaeger_otlp_grpc=f"127.0.0.1:{jaeger.ports.otlp_grpc}"
        ) as collector,
    ):
        (workdir / "prometheus").mkdir()
        prometheus = start_prometheus(
            workdir / "prometheus", [collector.scrape_target], flags=deploy_prometheus_flags()
        )
        try:
            # the web page's fixture runs, made by their app with its store and the OTLP endpoint
            otlp = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.http_endpoint, "OTEL_SERVICE_NAME": SCALE_SERVICE}
            rows = fill_ui_store(workdir / "store", env=otlp, within_s=180).rows
            counted = f'sum(otel_agents_runs_total{{exported_job="{SCALE_SERVICE}"}})'
            scraped = poll(
                lambda: prometheus.query(counted),
                lambda found: bool(found) and float(found[0]["value"][1]) == len(rows),
                within_s=90,
            )
            if not scraped or float(scraped[0]["value"][1]) != len(rows):
                raise SystemExit(f"Prometheus never scraped the {len(rows)} runs: {scraped}")
            # then runs one at a time, each scraped before the next, as a long-running app's are: a
            # series' first sample holds the runs before it, which increase() cannot count
            from tests.support.openai_server import OpenAIServer
            from tests.test_from_a_cost_spike_to_its_run import Chain, run_through_the_chain

            chain = Chain(jaeger, collector, prometheus, prometheus)
            with OpenAIServer() as server:
                asyncio.run(
                    run_through_the_chain(
                        chain, server, workdir / "paced", service="ui-at-scale-paced", users=["ana", "ben", "cy", "dee"]
                    )
                )
            for row in rows:

                def held(trace_id: str = row["trace_id"]) -> bool:
                    return bool(jaeger.v3_trace(trace_id))

                if not poll(held, bool, within_s=60):
                    raise SystemExit(f"trace {row['trace_id']} never reached Jaeger")
            jaeger_url = f"http://127.0.0.1:{jaeger.ports.query_http}"
            with ui_server(None, "--jaeger", jaeger_url, "--prometheus", prometheus.url) as ui:
                yield ui, rows
        finally:
            prometheus.stop()


def screenshots(url: str, shots: list[tuple[str, str]], out: Path) -> bool:
    """Each (file name, path under `url`) of `shots` screenshot into `out` in headless chromium;
    False when a page answered other than 200 or logged an error."""
    with chromium(viewport={"width": 1280, "height": 800}) as browser:
        for name, path in shots:
            browser.open(url + path)
            browser.page.screenshot(path=str(out / name), full_page=True)
            print(out / name)
        if browser.errors:
            print("the pages logged errors:\n" + "\n".join(browser.errors), file=sys.stderr)
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "ui", help="where the PNGs go")
    parser.add_argument(
        "--at-scale", action="store_true", help="also the pages from Jaeger and Prometheus (builds deploy/'s chain)"
    )
    options = parser.parse_args(argv)
    out: Path = options.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="otel-agents-ui-store-") as store:
        runs = fill_ui_store(Path(store))
        with ui_server(runs.store) as ui:
            if not screenshots(ui.url, pages(runs), out):
                return 1
    if not options.at_scale:
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="otel-agents-ui-scale-") as workdir,
        _scale_ui(Path(workdir)) as (ui, rows),
    ):
        loop_guard = next(row["run_id"] for row in rows if row["stop_kind"] == "loop_guard")
        shots = [
            ("runs-jaeger.png", ""),
            ("run-jaeger.png", f"runs/{loop_guard}"),
            ("cost-prometheus.png", "cost?since=1h"),
        ]
        if not screenshots(ui.url, shots, out):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The page's ASGI application: its routes, templates and static files, behind the `Guard`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from otel_agents.ui import pages
from otel_agents.ui.jaeger import JaegerSource
from otel_agents.ui.security import Guard

if TYPE_CHECKING:
    from otel_agents.ui.prometheus import PrometheusCost


def templates() -> Environment:
    environment = Environment(
        loader=PackageLoader("otel_agents.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(pages.FILTERS)
    environment.globals["href"] = pages.href
    return environment


def make_app(
    store: Path, *, hosts: frozenset[str], jaeger: JaegerSource | None = None, prometheus: PrometheusCost | None = None
) -> Any:
    """The application serving the store at `store` (or, given `jaeger`, Jaeger's runs; given
    `prometheus`, Prometheus's cost) to requests whose Host is one of `hosts`."""
    site = pages.Site(Path(store), templates(), jaeger=jaeger, prometheus=prometheus)
    routes = [
        Route("/", site.runs_page),
        Route("/runs/{run}", site.run_page),
        Route("/runs/{run}/spans/{span}", site.span_part),
        Route("/cost", site.cost_page),
        Route("/compare", site.compare_page),
        Route("/api/runs", site.runs_api),
        Route("/api/runs/{run}", site.run_api),
        Route("/api/runs/{run}/otlp.json", site.otlp_download),
        Route("/api/cost", site.cost_api),
        Route("/api/cost/days", site.cost_days_api),
        Route("/api/compare", site.compare_api),
        Mount("/static", StaticFiles(packages=[("otel_agents.ui", "static")]), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={404: site.not_found, 405: site.not_found})
    return Guard(app, hosts)

"""`otel-agents ui`: the web page over the embedded store, or over Jaeger and Prometheus at scale.

    otel-agents ui [--store DIR] [--host 127.0.0.1] [--port 8765] [--allow-host NAME ...] [--open]
    otel-agents ui --jaeger URL [--service NAME ...] [--prometheus URL] [...]

With `--jaeger` the runs and run pages come from Jaeger's query API and the store is not read; with
`--prometheus` the cost page comes from Prometheus's HTTP API. A URL that is not http(s)://HOST[:PORT]
(or holds credentials) exits 2 with one line naming the option, as every bad option does.
`OTEL_AGENTS_UI_TIMEOUT_S` (seconds, more than 0 and at most 5; default 5) bounds what one page may
wait for Jaeger and for each request to Prometheus; a bad value exits 2 with one line naming it.

Its first line on stdout, once it listens, is `otel-agents ui: http://HOST:PORT/`; Ctrl-C or
SIGTERM stops it with exit 0. It needs the optional extra `otel-agents[ui]`; without it, one line
says which `pip install` brings it (exit 2). Cheap to import: the web stack loads when it runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
NEEDS: Final = ("starlette", "uvicorn", "jinja2")
TIMEOUT_VARIABLE: Final = "OTEL_AGENTS_UI_TIMEOUT_S"
MOST_TIMEOUT_S: Final = 5.0
"""The most a page may wait for a server it reads (issue 48: 5 s a request at most)."""


class MissingExtra(Exception):
    """The web extra is not installed."""


def add_parser(commands: Any) -> None:
    ui = commands.add_parser("ui", help="serve a web page over the stored runs (runs, a run, cost, compare)")
    ui.add_argument(
        "--store",
        default=argparse.SUPPRESS,
        help="the embedded store directory (default: OTEL_AGENTS_STORE, else the user data directory)",
    )
    ui.add_argument("--host", default=DEFAULT_HOST, help=f"the address to listen on (default {DEFAULT_HOST})")
    ui.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port (default {DEFAULT_PORT}; 0: a free one)")
    ui.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another name requests may give in their Host header (a proxy's, a machine's); repeatable",
    )
    ui.add_argument("--open", action="store_true", help="open the page in the default browser")
    ui.add_argument(
        "--jaeger",
        metavar="URL",
        help="read the runs from Jaeger's query API at URL (its UI's address) instead of the store",
    )
    ui.add_argument(
        "--service",
        action="append",
        default=[],
        metavar="NAME",
        help="with --jaeger: the service whose runs to list (repeatable; default: every service Jaeger knows)",
    )
    ui.add_argument(
        "--prometheus",
        metavar="URL",
        help="read the cost page from Prometheus's HTTP API at URL (the Prometheus that scrapes the Collector)",
    )


def missing_extra() -> str | None:
    """The line that says how to install the web extra, or None when it is installed."""
    absent = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    pip = f"{shlex.quote(sys.executable)} -m pip install"  # this Python's: the one otel-agents runs in
    missing = ", ".join(absent)
    return f"otel-agents ui needs the extra otel-agents[ui] ({missing} not installed): {pip} {extra_requirement()}"


def extra_requirement(direct_url: str | None = None) -> str:
    """What `pip install` takes to add the web extra to this otel-agents, quoted for a shell: the
    directory it was installed from (a clone; `-e` first where it was installed editable), or the
    wheel file, as pip's `direct_url.json` says; else its name on an index."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    if direct_url is None:
        try:
            direct_url = metadata.distribution("otel-agents").read_text("direct_url.json")
        except metadata.PackageNotFoundError:
            direct_url = None
    try:
        origin = json.loads(direct_url or "{}")
    except ValueError:
        origin = {}
    url = str(origin.get("url", "")) if isinstance(origin, dict) else ""
    if urlparse(url).scheme == "file":
        if "dir_info" in origin:
            editable = isinstance(origin["dir_info"], dict) and origin["dir_info"].get("editable") is True
            return ("-e " if editable else "") + shlex.quote(unquote(urlparse(url).path).rstrip("/") + "[ui]")
        return shlex.quote(f"otel-agents[ui] @ {url}")
    return "'otel-agents[ui]'"


def run(args: argparse.Namespace, store_dir: Callable[[str | None], Path]) -> int:
    """Serve until a signal; the exit status."""
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port {args.port}: expected a port number from 0 to 65535")
    jaeger_url = getattr(args, "jaeger", None)
    prometheus_url = getattr(args, "prometheus", None)
    services = [s for s in getattr(args, "service", []) or []]
    if services and jaeger_url is None:
        raise ValueError("--service names Jaeger's services: give --jaeger URL with it")
    if any(not s.strip() for s in services):
        raise ValueError("--service '': expected a service name")
    from otel_agents._internal.explain.readers import server_url

    if jaeger_url is not None:
        jaeger_url = server_url(jaeger_url, "--jaeger", "Jaeger's UI or query API")
    if prometheus_url is not None:
        prometheus_url = server_url(prometheus_url, "--prometheus", "Prometheus's HTTP API")
    from otel_agents._internal.config.params import environment

    waited_s = timeout_s(environment((TIMEOUT_VARIABLE,)))  # the one reader of the process's variables
    if jaeger_url is not None and getattr(args, "store", None) is not None:
        raise ValueError("--store and --jaeger: the page reads one source; with --jaeger the store is not read")
    absent = missing_extra()
    if absent is not None:
        raise MissingExtra(absent)
    from otel_agents.ui.serve import serve

    jaeger = None
    if jaeger_url is not None:
        from otel_agents.ui.jaeger import JaegerSource

        jaeger = JaegerSource(jaeger_url, services, timeout_s=waited_s)
    prometheus = None
    if prometheus_url is not None:  # built once: a URL it refuses exits 2 here, not 500 on every page
        from otel_agents.ui.prometheus import PrometheusCost

        prometheus = PrometheusCost(prometheus_url, timeout_s=waited_s)
    return serve(
        store_dir(getattr(args, "store", None)),
        host=args.host,
        port=args.port,
        allow_hosts=args.allow_host,
        open_browser=args.open,
        jaeger=jaeger,
        prometheus=prometheus,
    )


def timeout_s(environ: Mapping[str, str]) -> float:
    """`OTEL_AGENTS_UI_TIMEOUT_S`: seconds, more than 0 and at most 5 (unset or empty: 5);
    ValueError naming the variable and its value otherwise."""
    raw = environ.get(TIMEOUT_VARIABLE, "").strip()
    if not raw:
        return MOST_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= MOST_TIMEOUT_S:
        raise ValueError(
            f"{TIMEOUT_VARIABLE}={raw!r}: expected seconds more than 0 and at most {MOST_TIMEOUT_S:g} "
            "(how long a page waits for Jaeger or Prometheus)"
        )
    return value

"""`otel-agents ui`: the web page over the embedded store.

    otel-agents ui [--store DIR] [--host 127.0.0.1] [--port 8765] [--allow-host NAME ...] [--open]

Its first line on stdout, once it listens, is `otel-agents ui: http://HOST:PORT/`; Ctrl-C or
SIGTERM stops it with exit 0. It needs the optional extra `otel-agents[ui]`; without it, one line
says which `pip install` brings it (exit 2). Cheap to import: the web stack loads when it runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
NEEDS: Final = ("starlette", "uvicorn", "jinja2")


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
    absent = missing_extra()
    if absent is not None:
        raise MissingExtra(absent)
    from otel_agents.ui.serve import serve

    return serve(
        store_dir(args.store), host=args.host, port=args.port, allow_hosts=args.allow_host, open_browser=args.open
    )

"""Serving the page: `otel-agents ui` binds its socket (so `--port 0` can name the port it took),
prints `otel-agents ui: http://HOST:PORT/` once it listens, and stops at once with exit 0 on
Ctrl-C or SIGTERM."""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Generator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Final

import uvicorn

from otel_agents.ui.app import make_app
from otel_agents.ui.jaeger import JaegerSource
from otel_agents.ui.security import allowed_hosts, is_loopback

if TYPE_CHECKING:
    from otel_agents.ui.prometheus import PrometheusCost

EVERYONE_READS: Final = (
    "otel-agents ui: warning: listening on {host}, not on this machine's loopback: anyone who reaches "
    "{url} reads every run stored in {store}"
)


def exposure_warning(host: str, url: str, store: Path | str) -> str | None:
    """The one warning printed when the page listens beyond this machine's loopback, else None."""
    return None if is_loopback(host) else EVERYONE_READS.format(host=host, url=url, store=store)


def url_of(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


class _Server(uvicorn.Server):
    """uvicorn's server, printing the first line once it listens, and leaving on a signal without
    raising it again (uvicorn re-raises the signal it caught, which would end the process by it)."""

    def __init__(self, config: uvicorn.Config, first_line: str, open_browser: bool) -> None:
        super().__init__(config)
        self.first_line = first_line
        self.open_browser = open_browser

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(self.first_line, flush=True)
            if self.open_browser:
                import webbrowser

                url = self.first_line.rpartition(" ")[2]
                threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        def leave(signum: int, frame: FrameType | None) -> None:
            self.should_exit = True

        previous = {sig: signal.signal(sig, leave) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(
    store: Path,
    *,
    host: str,
    port: int,
    allow_hosts: Sequence[str] = (),
    open_browser: bool = False,
    jaeger: JaegerSource | None = None,
    prometheus: PrometheusCost | None = None,
) -> int:
    """Serve the page over the store at `store` (or Jaeger's runs, `jaeger`; Prometheus's cost,
    `prometheus`) until a signal; the exit status."""
    try:
        sock = _listen(host, port)
    except OSError as error:
        hint = " (--port 0 takes a free port)" if port else ""
        print(f"otel-agents ui: cannot listen on {host}:{port}: {error.strerror or error}{hint}", file=sys.stderr)
        return 1
    bound_port = sock.getsockname()[1]
    url = url_of(host, bound_port)
    warning = exposure_warning(host, url, str(jaeger) if jaeger is not None else store)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    app = make_app(store, hosts=allowed_hosts(host, allow_hosts), jaeger=jaeger, prometheus=prometheus)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1, server_header=False
    )
    server = _Server(config, f"otel-agents ui: {url}", open_browser)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0

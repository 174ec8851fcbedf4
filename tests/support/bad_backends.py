"""OTLP endpoints that fail, on real sockets on 127.0.0.1: refusing, silent, answering 5xx."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from tests.support.local_http import serving


@contextmanager
def refusing_endpoint() -> Iterator[str]:
    """A port nobody listens on: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


@contextmanager
def silent_endpoint() -> Iterator[str]:
    """Accepts connections, reads, never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        server.close()


@contextmanager
def failing_endpoint(status: int) -> Iterator[str]:
    """Answers every request with `status`."""
    with answering(lambda path: status) as url:
        yield url


@contextmanager
def answering(status_for: Callable[[str], int]) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 for the block: every POST answered with `status_for(path)`
    (empty body); its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(status_for(self.path))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"

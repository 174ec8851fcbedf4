"""An HTTP server on 127.0.0.1, on a free port, serving from a thread until the block ends; and one
whose answers' bodies never end."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def holding_the_body(
    status: int, *, length: int, sent: bytes, dribble: bool = False, released: threading.Event | None = None
) -> Iterator[str]:
    """A server that answers every GET with `status`, its headers (a JSON body of `length` bytes
    announced) and the bytes `sent`, then holds the rest (with `dribble`: sends a space at a time,
    each as it is asked in turn) until `released` is set, which the block's end does, so no server
    thread outlives it. Its base URL."""
    release = released if released is not None else threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(length))
            self.end_headers()
            self.wfile.write(sent)
            self.wfile.flush()
            if dribble:
                while not release.wait(0.05):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            release.wait(30)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as server:
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            release.set()

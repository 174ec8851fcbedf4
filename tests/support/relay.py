"""A TCP relay on 127.0.0.1 that stands for a backend going down and coming back: while down it
closes every connection it accepts (the exporter sees the connection fail, as with a backend that
is down); once `up()` is called it relays each connection to the real backend, byte for byte."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Relay:
    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._up = threading.Event()
        self._stop = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self._threads: list[threading.Thread] = []
        self.refused = 0
        """Connections closed while down."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}"

    def up(self) -> None:
        self._up.set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except (TimeoutError, OSError):
                continue
            if not self._up.is_set():
                self.refused += 1
                connection.close()
                continue
            thread = threading.Thread(target=self._relay, args=(connection,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _relay(self, client: socket.socket) -> None:
        with client, socket.create_connection(self._target, timeout=10) as backend:

            def pipe(source: socket.socket, sink: socket.socket) -> None:
                try:
                    while data := source.recv(65536):
                        sink.sendall(data)
                except OSError:
                    pass
                finally:
                    try:
                        sink.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass

            back = threading.Thread(target=pipe, args=(backend, client), daemon=True)
            back.start()
            pipe(client, backend)
            back.join(timeout=10)

    @contextmanager
    def running(self) -> Iterator[Relay]:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(timeout=5)
            self._server.close()
            for relayed in self._threads:
                relayed.join(timeout=5)

"""The servers the tests start get ports nobody holds: one taken between the look and the bind
(anything on the machine may take it) means a start on other ports, not a failed test."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from tests.support.processes import BIND_ATTEMPTS, launch, on_free_ports, port_taken, stop_process


def http_server(tmp_path: Path, port: int) -> str:
    """A real server process (Python's http.server) on 127.0.0.1:`port`; its URL once it answers."""
    process = launch(
        sys.executable,
        ["-m", "http.server", "--bind", "127.0.0.1", "--directory", str(tmp_path), str(port)],
        tmp_path / f"server-{port}.log",
        f"http://127.0.0.1:{port}/",
    )
    stop_process(process)
    return f"http://127.0.0.1:{port}/"


def test_a_server_whose_port_was_taken_before_it_bound_starts_again_on_others(tmp_path: Path) -> None:
    tried: list[list[int]] = []
    holder = socket.socket()

    def start(ports: list[int]) -> str:
        tried.append(ports)
        if len(tried) == 1:  # someone takes the port between the look and the server's bind
            holder.bind(("127.0.0.1", ports[0]))
            holder.listen()
        return http_server(tmp_path, ports[0])

    try:
        url = on_free_ports(2, start)
    finally:
        holder.close()
    assert len(tried) == 2 and len(set(tried[0])) == 2 and tried[1][0] != tried[0][0]
    assert url == f"http://127.0.0.1:{tried[1][0]}/"


def test_a_server_that_fails_otherwise_or_finds_its_port_taken_every_time_fails_the_test(tmp_path: Path) -> None:
    calls: list[list[int]] = []

    def broken(ports: list[int]) -> str:
        calls.append(ports)
        raise RuntimeError("exited with 1: no such config file")

    with pytest.raises(RuntimeError, match="no such config"):
        on_free_ports(1, broken)
    assert len(calls) == 1, "an error other than a taken port is not tried again"

    def always_taken(ports: list[int]) -> str:
        calls.append(ports)
        raise RuntimeError("exited with 1: listen tcp 127.0.0.1:1: bind: address already in use")

    with pytest.raises(RuntimeError, match="address already in use"):
        on_free_ports(1, always_taken)
    assert len(calls) == 1 + BIND_ATTEMPTS


@pytest.mark.parametrize(
    ("message", "taken"),
    [
        ("listen tcp 127.0.0.1:4317: bind: address already in use", True),  # Go: Jaeger, the Collector, Prometheus
        ("OSError: [Errno 98] Address already in use", True),  # Python
        ("RuntimeError: Failed to bind to address 127.0.0.1:4317; set GRPC_VERBOSITY=debug", True),  # gRPC: Phoenix
        ("exited with 1: error loading config file", False),
    ],
)
def test_a_port_taken_is_told_from_other_failures_by_each_servers_own_words(message: str, taken: bool) -> None:
    assert port_taken(RuntimeError(f"exited with 1: {message}")) is taken

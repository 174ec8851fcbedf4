"""Servers the tests start as processes: free ports, readiness, a bounded stop."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """`count` free ports, all different (each held until all are found: two draws of `free_port`
    may return one port twice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


BIND_ATTEMPTS = 3
"""A server started on ports found free is started again on others, at most this often in all, when
one of them was taken meanwhile (between the test's look and the server's bind, any process on the
machine may get it: an outgoing connection's own port, say)."""


def port_taken(error: Exception) -> bool:
    """Whether a server failed to start because a port it was given was taken meanwhile."""
    message = str(error).lower()  # Go's "bind: address already in use", Python's "Address already in use"
    return "address already in use" in message or "failed to bind to address" in message  # gRPC's (Phoenix)


def on_free_ports(count: int, start: Callable[[list[int]], T]) -> T:
    """`start(ports)` with `count` free ports, all different: started again on others, at most
    `BIND_ATTEMPTS` times in all, when it failed (a RuntimeError) because one was taken meanwhile."""
    for attempt in range(1, BIND_ATTEMPTS + 1):
        try:
            return start(free_ports(count))
        except RuntimeError as error:
            if attempt == BIND_ATTEMPTS or not port_taken(error):
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready within {within_s} s")


def launch(
    binary: str, args: list[str], log: Path, ready_url: str, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a server process logging to `log` (with `env` added to the environment); return it once
    `ready_url` answers (else stop it)."""
    process = subprocess.Popen(
        [binary, *args], stdout=log.open("wb"), stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    try:
        wait_ready(ready_url, process, log)
    except Exception:
        stop_process(process)
        raise
    return process


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def listening(pid: int) -> set[tuple[str, int]]:
    """The TCP (host, port) pairs process `pid` listens on, read from /proc (Linux)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, width, 4))  # each 32-bit word is host order
            found.add((str(ipaddress.ip_address(words)), int(port, 16)))
    return found

"""Servers the tests start as processes: free ports, readiness, a bounded stop."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def launch(binary: str, args: list[str], log: Path, ready_url: str) -> subprocess.Popen[bytes]:
    """Start a server process logging to `log`; return it once `ready_url` answers (else stop it)."""
    process = subprocess.Popen([binary, *args], stdout=log.open("wb"), stderr=subprocess.STDOUT)
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

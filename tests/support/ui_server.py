"""`otel-agents ui`, started as a user starts it: a process of this Python running the installed
command's module, with the repository first on its path (a worktree's check runs its own code).

    with ui_server(store) as ui:          # `otel-agents ui --store STORE --port 0`, listening
        ui.url                            # "http://127.0.0.1:PORT/", from its first stdout line
    # ended by SIGTERM; it must exit 0 within `stop_within_s`

Ready is an event, the first line on stdout (exactly `otel-agents ui: http://HOST:PORT/`), awaited
up to a deadline; its stderr is in every failure's message.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.support.cli import ROOT

FIRST_LINE = re.compile(r"otel-agents ui: (http://(\S+):([1-9][0-9]*)/)")


def _default_sigint() -> None:
    """In the child: SIGINT back to its default (CI runs the tests as a background job, whose
    processes inherit SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class UiServer:
    url: str
    """The first line's URL, ending in "/"."""
    host: str
    port: int
    process: subprocess.Popen[str]
    stdout_lines: list[str] = field(default_factory=list)
    """Every stdout line so far, the first included (read by a thread, so the pipe never fills)."""
    stderr_file: IO[bytes] | None = None

    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        if self.stderr_file is None:
            return ""
        self.stderr_file.flush()
        return Path(self.stderr_file.name).read_text(errors="replace")

    def stop(self, within_s: float = 10) -> int:
        """SIGTERM; wait up to `within_s` for the exit (else kill it) and return its code."""
        return _terminate(self.process, within_s)


def _terminate(process: subprocess.Popen[str], within_s: float) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
            raise AssertionError(f"otel-agents ui did not exit within {within_s} s of SIGTERM (killed)") from None
    return process.returncode


def ui_command(store: Path | str | None, *args: str, port: int = 0, python: Path | str | None = None) -> list[str]:
    """The command line: `python -m otel_agents ui --store STORE --port PORT ARGS` (`store` None: no
    `--store`, as with `--jaeger`; `python`: another environment's interpreter; this one's by default)."""
    stored = [] if store is None else ["--store", str(store)]
    return [str(python or sys.executable), "-m", "otel_agents", "ui", *stored, "--port", str(port), *args]


@contextlib.contextmanager
def ui_server(
    store: Path | str | None,
    *args: str,
    env: Mapping[str, str] | None = None,
    start_within_s: float = 60,
    stop_within_s: float = 10,
    expect_exit: int | None = 0,
    python: Path | str | None = None,
) -> Iterator[UiServer]:
    """`otel-agents ui --store STORE --port 0 ARGS` (with `env` added to the environment; `store`
    None: no `--store`), yielded once its first stdout line names its URL; at the end SIGTERM, and
    (unless the body failed) an exit with code `expect_exit` within `stop_within_s` (None: any
    code). `python`: the interpreter of an environment where otel-agents is installed, run as it is
    (not this checkout's code)."""
    environment = {**os.environ, **(env or {})}
    if python is None:
        environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [environment.get("PYTHONPATH")])])
    else:
        environment = {k: v for k, v in environment.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    stderr_file = tempfile.NamedTemporaryFile(prefix="otel-agents-ui-", suffix=".stderr")
    lines: queue.Queue[str | None] = queue.Queue()
    process = subprocess.Popen(
        ui_command(store, *args, python=python),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr_file,
        text=True,
        cwd=ROOT if python is None or store is None else Path(store).parent,
        env=environment,
        preexec_fn=_default_sigint,
    )
    server = UiServer("", "", 0, process, stderr_file=stderr_file)

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            server.stdout_lines.append(line.rstrip("\n"))
            lines.put(line.rstrip("\n"))
        lines.put(None)  # stdout closed: the process is ending

    reader = threading.Thread(target=read, name="otel-agents-ui-stdout", daemon=True)
    reader.start()
    try:
        try:
            first = lines.get(timeout=start_within_s)
        except queue.Empty:
            raise AssertionError(
                f"otel-agents ui wrote no line within {start_within_s} s; stderr:\n{server.stderr()[-4000:]}"
            ) from None
        if first is None:
            code = process.wait(timeout=10)
            raise AssertionError(
                f"otel-agents ui exited with {code} before listening; stderr:\n{server.stderr()[-4000:]}"
            )
        found = FIRST_LINE.fullmatch(first)
        assert found, (
            f"first stdout line {first!r} is not 'otel-agents ui: http://HOST:PORT/'; stderr:\n"
            + (server.stderr()[-4000:])
        )
        server.url, server.host, server.port = found[1], found[2], int(found[3])
    except BaseException:
        with contextlib.suppress(AssertionError):
            _terminate(process, stop_within_s)
        reader.join(timeout=5)
        stderr_file.close()
        raise
    failed = True
    try:
        yield server
        failed = False
    finally:
        try:
            if failed:  # the body's own error is the one to see: stop the server, whatever its exit
                with contextlib.suppress(AssertionError):
                    _terminate(process, stop_within_s)
            else:
                code = _terminate(process, stop_within_s)
                if expect_exit is not None:
                    assert code == expect_exit, (
                        f"otel-agents ui exited with {code} on SIGTERM, expected {expect_exit}; stderr:\n"
                        f"{server.stderr()[-4000:]}"
                    )
        finally:
            reader.join(timeout=5)
            stderr_file.close()


def request(
    server: UiServer, path: str, *, host: str | None = None, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    """`method` `path` of the page, as a browser on this machine asks it (`host`: another Host
    header): its status, headers (names lower-cased) and body."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        connection.putrequest(method, path, skip_host=True)
        connection.putheader("Host", host if host is not None else f"127.0.0.1:{server.port}")
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def get(server: UiServer, path: str, *, host: str | None = None) -> tuple[int, bytes]:
    """GET `path` of the page, as a browser on this machine asks it: its status and body."""
    status, _, body = request(server, path, host=host)
    return status, body


def get_json(server: UiServer, path: str, status: int = 200) -> Any:
    """The JSON at `path`, whose status must be `status` and content type JSON."""
    code, headers, body = request(server, path)
    assert code == status, (path, code, body[:1000])
    assert headers["content-type"].startswith("application/json"), headers
    return json.loads(body)

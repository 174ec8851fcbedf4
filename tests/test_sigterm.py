"""A service stopped by SIGTERM loses no finished run: a run's spans are exported soon after it
ends (on our thread, without a flush or shutdown by the app), and a SIGTERM exports what is still
held, then hands the signal on, so the process ends as it would have (uvicorn: by the signal it
raises again after its graceful shutdown)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.export.store.reader import Store
from tests.support.phoenix import Phoenix
from tests.support.processes import free_port, stop_process, wait_ready
from tests.support.spans import one_trace
from tests.support.teams import writers_room
from tests.support.waits import wait_until
from tests.test_opentelemetry_instrument import INSTRUMENT, by_trace
from tests.test_zero_code import UnhashableTracerProvider

ROOT = Path(__file__).resolve().parents[1]
UVICORN = Path(sys.executable).parent / "uvicorn"
GUNICORN = Path(sys.executable).parent / "gunicorn"
LONG_SCHEDULE = {"OTEL_BSP_SCHEDULE_DELAY": "60000"}
"""The batch schedule exports nothing within a test: only our flush can deliver."""


@pytest.fixture
def sigterm_as_found() -> Iterator[None]:
    """The test process's SIGTERM handler, put back after the test."""
    found = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, found)


@pytest.fixture
def long_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in LONG_SCHEDULE.items():
        monkeypatch.setenv(name, value)


def roots(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.name == "invoke_workflow writers-room"]


async def test_a_finished_run_is_exported_soon_without_a_flush_or_shutdown(long_schedule: None) -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    try:
        await writers_room(max_messages=3).run(task="go")
        assert wait_until(lambda: len(roots(list(exporter.get_finished_spans()))) == 1), (
            "the run's spans were not exported soon after it ended"
        )
        tree = one_trace(exporter.get_finished_spans())
        assert tree.root.name == "invoke_workflow writers-room"
        assert tree.root.attributes is not None and tree.root.attributes["otel_agents.message_count"] == 3
        assert {s.name for s in tree.spans} >= {"invoke_agent writer", "invoke_agent critic", "message writer"}
    finally:
        telemetry.shutdown()


async def test_a_run_is_exported_soon_by_an_unhashable_provider_given_to_instrument(long_schedule: None) -> None:
    exporter = InMemorySpanExporter()
    provider = UnhashableTracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = otel_agents.AutoGenInstrumentor()
    instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=provider)
    try:
        await writers_room(max_messages=3).run(task="go")
        assert wait_until(lambda: len(roots(list(exporter.get_finished_spans()))) == 1)
    finally:
        provider.shutdown()


async def test_many_runs_ending_are_flushed_by_one_thread(long_schedule: None) -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    try:
        for _ in range(5):
            await writers_room(max_messages=2).run(task="go")
        assert wait_until(lambda: len(roots(list(exporter.get_finished_spans()))) == 5)
        flushers = [t for t in threading.enumerate() if t.name == "otel-agents-flush-soon"]
        assert len(flushers) == 1 and flushers[0].daemon
    finally:
        telemetry.shutdown()


def test_sigterm_exports_then_calls_the_handler_installed_before_ours(
    long_schedule: None, sigterm_as_found: None
) -> None:
    received: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)  # ours goes in front of that handler
    try:
        telemetry.tracer_provider.get_tracer("test").start_span("before the signal").end()  # not a run
        assert exporter.get_finished_spans() == ()
        signal.raise_signal(signal.SIGTERM)
        assert received == [signal.SIGTERM], "the handler installed before ours was not called"
        assert [s.name for s in exporter.get_finished_spans()] == ["before the signal"]
    finally:
        telemetry.shutdown()


def test_an_ignored_sigterm_stays_ignored(sigterm_as_found: None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with otel_agents.configure(span_exporter=InMemorySpanExporter()):
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_uninstrument_puts_back_the_handler_ours_was_installed_over(sigterm_as_found: None) -> None:
    def theirs(signum: int, frame: Any) -> None:
        pass

    signal.signal(signal.SIGTERM, theirs)
    with otel_agents.configure(span_exporter=InMemorySpanExporter()):
        assert signal.getsignal(signal.SIGTERM) is not theirs
        otel_agents.AutoGenInstrumentor().uninstrument()
        assert signal.getsignal(signal.SIGTERM) is theirs


def test_a_handler_installed_after_ours_is_left_alone(sigterm_as_found: None) -> None:
    def later(signum: int, frame: Any) -> None:
        pass

    with otel_agents.configure(span_exporter=InMemorySpanExporter()):
        signal.signal(signal.SIGTERM, later)
        otel_agents.AutoGenInstrumentor().uninstrument()
        assert signal.getsignal(signal.SIGTERM) is later


def _run_script(script: str, tmp_path: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, **LONG_SCHEDULE, XDG_DATA_HOME=str(tmp_path / "data"))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_with_no_handler_before_ours_exports_then_ends_the_process_by_the_signal(tmp_path: Path) -> None:
    store = tmp_path / "store"
    process = _run_script(
        f"""
        import asyncio, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        import otel_agents
        from tests.support.teams import writers_room

        otel_agents.configure(store={str(store)!r})
        loop = asyncio.new_event_loop()
        loop.run_until_complete(writers_room(max_messages=3, name="finished").run(task="go"))
        stream = otel_agents.tap(writers_room(max_messages=5, name="open").run_stream(task="go"))
        loop.run_until_complete(stream.__anext__())  # a run still open when the signal comes
        print("ready", flush=True)
        signal.pause()
        """,
        tmp_path,
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n", process.stderr
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            stop_process(process)  # type: ignore[arg-type]
    assert process.returncode == -signal.SIGTERM, stderr[-2000:]
    runs = {run.team: run.stop_kind for run in Store(store).runs()}
    assert runs == {"finished": "max_messages", "open": "shutdown"}, "a run was lost"


def test_the_flush_thread_serves_a_forked_child(tmp_path: Path) -> None:
    process = _run_script(
        f"""
        import asyncio, os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import otel_agents
        from tests.support.teams import writers_room

        exporter = InMemorySpanExporter()
        otel_agents.configure(span_exporter=exporter)

        def exported_run(name):
            asyncio.run(writers_room(max_messages=2, name=name).run(task="go"))
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if any(s.name == f"invoke_workflow {{name}}" for s in exporter.get_finished_spans()):
                    return True
                time.sleep(0.02)
            return False

        assert exported_run("parent")  # the parent's flush thread is running when it forks
        pid = os.fork()
        if pid == 0:
            os._exit(0 if exported_run("child") else 1)
        _, status = os.waitpid(pid, 0)
        print("child exported" if os.waitstatus_to_exitcode(status) == 0 else "child lost its run", flush=True)
        """,
        tmp_path,
    )
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-2000:]
    assert stdout.strip() == "child exported", stderr[-2000:]


def service_env(project: str, tmp_path: Path, phoenix: Phoenix) -> dict[str, str]:
    """The distro's settings of a service exporting to Phoenix, with a batch schedule that exports
    nothing by itself."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "OTEL_SERVICE_NAME": project,
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "autogen_agentchat",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.http_endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        **LONG_SCHEDULE,
    }


def serve_runs_then_sigterm(command: list[str], env: dict[str, str], port: int, log: Path, runs: int) -> int:
    """Start the service, run the team `runs` times through it, send SIGTERM right after the last
    run; the service's exit status."""
    server = subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        wait_ready(f"http://127.0.0.1:{port}/healthz", server, log)
        for _ in range(runs):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/run", timeout=60) as response:
                assert response.status == 200
        server.send_signal(signal.SIGTERM)
        return server.wait(timeout=60)
    finally:
        if server.poll() is None:
            stop_process(server)


def assert_every_run_arrived(phoenix: Phoenix, project: str, runs: int) -> None:
    spans_per_run = 8  # run, 3 messages, 2 turns, 2 chat calls
    traces = by_trace(phoenix.project_spans(project, count=runs * spans_per_run))
    assert len(traces) == runs, [sorted(s["name"] for s in t) for t in traces.values()]
    for spans in traces.values():
        (root,) = [s for s in spans if s["parent_id"] is None]
        assert root["name"] == "invoke_workflow writers-room"
        assert root["attributes"]["otel_agents.stop_kind"] == "max_messages"
        assert root["attributes"]["otel_agents.message_count"] == 3
        assert sorted(s["name"] for s in spans) == [
            "chat",
            "chat",
            "invoke_agent critic",
            "invoke_agent writer",
            "invoke_workflow writers-room",
            "message critic",
            "message user",
            "message writer",
        ]


@pytest.mark.backend
def test_a_uvicorn_service_stopped_by_sigterm_delivers_every_finished_run_to_phoenix(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    project = "sigterm-uvicorn"
    port = free_port()
    log = tmp_path / "uvicorn.log"
    command = [str(INSTRUMENT), str(UVICORN), "--host", "127.0.0.1", "--port", str(port)]
    command += ["--app-dir", str(ROOT), "tests.support.sigterm_app:app"]
    status = serve_runs_then_sigterm(command, service_env(project, tmp_path, phoenix), port, log, runs=3)
    output = log.read_text()
    assert "Shutting down" in output, output[-3000:]  # uvicorn's graceful shutdown ran
    # uvicorn ends by raising the signal again once its shutdown is done: its usual exit status
    assert status == -signal.SIGTERM, output[-3000:]
    assert_every_run_arrived(phoenix, project, runs=3)


@pytest.mark.backend
def test_a_gunicorn_worker_stopped_by_sigterm_delivers_every_finished_run_to_phoenix(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    """gunicorn's master hands SIGTERM to its worker (uvicorn's worker class), which shuts down
    gracefully and exits; the master then exits 0."""
    project = "sigterm-gunicorn"
    port = free_port()
    log = tmp_path / "gunicorn.log"
    command = [str(INSTRUMENT), str(GUNICORN), "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    command += ["--worker-class", "uvicorn.workers.UvicornWorker", "--chdir", str(ROOT)]
    command += ["tests.support.sigterm_app:app"]
    status = serve_runs_then_sigterm(command, service_env(project, tmp_path, phoenix), port, log, runs=3)
    output = log.read_text()
    assert "Handling signal: term" in output and "Application shutdown complete" in output, output[-3000:]
    assert status == 0, output[-3000:]
    assert_every_run_arrived(phoenix, project, runs=3)

"""A run still open when its pipeline shuts down (or the process exits) is ended as `shutdown` and
exported, not lost; closing its stream afterwards changes nothing and raises nothing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.run.workflow import end_open_runs
from tests.support.spans import one_trace
from tests.support.teams import writers_room

pytestmark = [pytest.mark.every_python]

ROOT = Path(__file__).resolve().parents[1]


async def test_a_run_open_at_shutdown_ends_as_shutdown_and_is_exported() -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    stream = otel_agents.tap(writers_room(max_messages=5).run_stream(task="go"))
    await stream.__anext__()  # the run has started: its task message came through
    telemetry.shutdown()

    tree = one_trace(exporter.get_finished_spans())
    assert tree.root.name == "invoke_workflow writers-room"
    assert tree.root.attributes["otel_agents.stop_kind"] == "shutdown"
    assert tree.root.attributes["otel_agents.stop_reason"] == "shutdown"
    await stream.aclose()  # the consumer leaves later: the run is not ended a second time
    assert [s.name for s in exporter.get_finished_spans()].count("invoke_workflow writers-room") == 1


def test_a_run_open_when_the_process_exits_is_stored_as_shutdown(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path.insert(0, {str(ROOT)!r})
        import otel_agents
        from tests.support.teams import writers_room

        otel_agents.configure(store={str(tmp_path)!r})
        stream = otel_agents.tap(writers_room(max_messages=5).run_stream(task="go"))

        loop = asyncio.new_event_loop()  # a service's loop, still running its run when the process exits
        loop.run_until_complete(stream.__anext__())
        print("started", flush=True)
        sys.exit(0)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "started" in done.stdout, done.stderr[-2000:]
    (run,) = Store(tmp_path).runs()
    assert (run.stop_kind, run.stop_reason) == ("shutdown", "shutdown")
    assert "Failed to detach context" not in done.stderr


def test_an_endpoint_that_is_down_keeps_no_run_from_the_store(tmp_path: Path) -> None:
    """The provider flushes its processors one after the other: the store's goes first, so neither
    a run's end nor the exit waits behind the OTLP exporter's retries to a closed port."""
    from tests.support.processes import free_port

    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path.insert(0, {str(ROOT)!r})
        import otel_agents
        from tests.support.teams import writers_room

        otel_agents.configure(store={str(tmp_path / "store")!r})
        loop = asyncio.new_event_loop()
        loop.run_until_complete(writers_room(max_messages=2).run(task="finished"))
        stream = otel_agents.tap(writers_room(max_messages=5).run_stream(task="open at exit"))
        loop.run_until_complete(stream.__anext__())
        print("started", flush=True)
        sys.exit(0)
        """
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nothing listens there
        "OTEL_AGENTS_EXIT_TIMEOUT_S": "3",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and "started" in done.stdout, done.stderr[-2000:]
    stored = sorted((run.stop_kind, run.messages) for run in Store(tmp_path / "store").runs())
    assert stored == [("max_messages", 2), ("shutdown", 1)], done.stderr[-2000:]
    assert "to StoreSpanExporter" not in done.stderr, done.stderr[-2000:]


def test_an_endpoint_that_is_down_holds_the_exit_only_for_the_exit_timeout_and_says_what_was_dropped() -> None:
    from tests.support.processes import free_port

    port = free_port()  # nothing listens there: every export is refused, and the exporter retries
    env = {
        "PATH": "/usr/bin:/bin",
        "XDG_DATA_HOME": "/nonexistent",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "60",  # retrying for a minute, span and metric exports each
        "OTEL_AGENTS_EXIT_TIMEOUT_S": "0.5",
    }
    # generous: well under the exporters' minute each, far above the half second asked for
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.down_endpoint_app"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=45, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr[-2000:]
    ours = [line for line in done.stderr.splitlines() if line.startswith("otel-agents: exiting")]
    assert len(ours) == 1, done.stderr[-3000:]
    assert ours[0].startswith("otel-agents: exiting with ") and " spans not delivered to OTLPSpanExporter " in ours[0]
    assert int(ours[0].split()[3]) > 0, ours[0]
    assert f"http://127.0.0.1:{port}/v1/traces;" in ours[0] and "OTEL_AGENTS_EXIT_TIMEOUT_S=0.5 s" in ours[0]


def test_configure_starts_the_thread_the_exit_waits_on() -> None:
    # From Python 3.12 on no thread can start at exit: the one the exit's shutdown runs on is started here.
    done = subprocess.run(
        [sys.executable, "-c", "import threading, otel_agents; otel_agents.configure(store=False); "
         "print([t.daemon for t in threading.enumerate() if t.name == 'otel-agents-exit'])"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, "[True]"), done.stderr


async def test_a_pipeline_shutting_down_in_another_thread_while_runs_start_and_end_raises_nothing() -> None:
    telemetry = otel_agents.configure(span_exporter=InMemorySpanExporter(), store=False)
    other = TracerProvider()  # records none of the runs: its shutdown ends none of them
    errors: list[Exception] = []
    stop = threading.Event()

    def shut_down_elsewhere_again_and_again() -> None:
        while not stop.is_set():
            try:
                end_open_runs(other)  # what `Telemetry.shutdown()` of that pipeline does first
            except Exception as error:
                errors.append(error)
                return

    thread = threading.Thread(target=shut_down_elsewhere_again_and_again)
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can: the race shows in a few rounds
    thread.start()
    try:
        for _ in range(40):
            await asyncio.gather(*(writers_room(max_messages=2).run(task="go") for _ in range(10)))
            if errors:
                break
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch_interval)
        telemetry.shutdown()
    assert errors == []

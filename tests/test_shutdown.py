"""A run still open when its pipeline shuts down (or the process exits) is ended as `shutdown` and
exported, not lost; closing its stream afterwards changes nothing and raises nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.export.store import Store
from tests.support.spans import one_trace
from tests.support.teams import writers_room

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

"""Leaving a run early loses nothing (DESIGN section 3: stop kinds, "nothing lost").

- A dropped stream's run ends within a few turns of the event loop once AutoGen's stream has
  closed, with the turns AutoGen ran on (a team with its own runtime runs on to its end as its
  stream closes); inside `contextlib.aclosing(...)` a `force_flush()` right after the block
  exports it; a stream kept in a variable is the documented limit: its run ends when the stream is
  closed or dropped.
- A run left by `SystemExit` (`sys.exit`, `raise SystemExit`, `sys.exit` in a signal handler) is
  stored like one left by `return`, as `consumer_closed`, and the process exits with its code; a
  stream kept in a variable stays the documented limit: its run is still open at the exit, and is
  stored as `shutdown`.
  The fault matrix (tests/test_fault_matrix.py) holds these together with every other way of
  ending; here they run on every Python, with the store alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent

import otel_agents
from otel_agents._internal.export.store.reader import Store
from tests.conftest import Capture
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.processes import free_port
from tests.support.spans import one_trace
from tests.support.teams import replay, text, writers_room

ROOT = Path(__file__).resolve().parents[1]

FEW_LOOP_TURNS = 25
"""How many turns of the event loop a dropped stream's run may take to end once the last turn
AutoGen ran on has ended (11 measured with AutoGen 0.7.5: its stream closes its runtime, then our
closing task ends the run)."""

STREAMS: dict[str, Callable[[], AsyncIterator[Any]]] = {
    "team.run_stream": lambda: writers_room(max_messages=10).run_stream(task="go"),
    "tap": lambda: otel_agents.tap(writers_room(max_messages=10).run_stream(task="go")),
    "otel_agents.run_stream": lambda: otel_agents.run_stream(writers_room(max_messages=10), task="go"),
    "agent.run_stream": lambda: AssistantAgent("solo", model_client=replay(text("one"), text("two"))).run_stream(
        task="hi"
    ),
}


def exported_runs(capture: Capture) -> list[Any]:
    return [s for s in capture.spans() if s.name.startswith("invoke_workflow")]


@pytest.mark.parametrize("how", STREAMS)
async def test_a_dropped_streams_run_ends_within_a_few_loop_turns_once_autogens_stream_has_closed(
    capture: Capture, how: str
) -> None:
    async for _ in STREAMS[how]():
        break
    turns_ended, last_turn_at, loop_turns = 0, 0, 0
    while not exported_runs(capture):
        ended_now = sum(1 for s in capture.exporter.get_finished_spans() if s.name.startswith("invoke_agent"))
        if ended_now != turns_ended:
            turns_ended, last_turn_at = ended_now, loop_turns
        assert loop_turns < 5000, "the run never ended"
        await asyncio.sleep(0)
        loop_turns += 1
    assert loop_turns - last_turn_at <= FEW_LOOP_TURNS, (loop_turns, last_turn_at)
    (run,) = exported_runs(capture)
    assert run.attributes["otel_agents.stop_kind"] == "consumer_closed"
    tree = one_trace(capture.spans())
    assert all(s.end_time <= run.end_time for s in tree.spans), "every turn AutoGen ran on is in the run"
    chats = tree.named("chat")
    assert run.attributes["gen_ai.usage.input_tokens"] == sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats)


@pytest.mark.parametrize("how", STREAMS)
async def test_inside_aclosing_a_flush_right_after_the_block_exports_the_run(capture: Capture, how: str) -> None:
    async with contextlib.aclosing(STREAMS[how]()) as stream:
        async for _ in stream:
            break
    assert capture.telemetry.force_flush()  # no turn of the event loop in between
    (run,) = [s for s in capture.exporter.get_finished_spans() if s.name.startswith("invoke_workflow")]
    assert run.attributes["otel_agents.stop_kind"] == "consumer_closed"


@pytest.mark.parametrize("let_go", ["closed", "dropped"])
async def test_a_stream_kept_in_a_variable_keeps_its_run_open_until_it_is_closed_or_dropped(
    capture: Capture, let_go: str
) -> None:
    stream = writers_room(max_messages=10).run_stream(task="go")
    async for _ in stream:
        break
    for _ in range(500):  # the documented limit: nothing tells the stream its consumer has gone
        await asyncio.sleep(0)
    assert exported_runs(capture) == [], "still open while the stream is kept"
    if let_go == "closed":
        await stream.aclose()
    else:
        del stream
        for _ in range(2000):
            if exported_runs(capture):
                break
            await asyncio.sleep(0)
    (run,) = exported_runs(capture)
    assert run.attributes["otel_agents.stop_kind"] == "consumer_closed"


# --- SystemExit -----------------------------------------------------------------------------------

EXITS = {
    # FAULT_ENDING, FAULT_EXIT, the exit code, the signal the test sends once the slow call is in
    # flight, the stop kind stored
    "sys.exit in the loop body": ("mid_run", "sys_exit", 3, None, "consumer_closed"),
    "raise SystemExit in the loop body": ("mid_run", "raise_system_exit", 3, None, "consumer_closed"),
    "sys.exit in a signal handler while team.run is awaited": (
        "mid_run_awaited", "signal_sys_exit", 4, signal.SIGUSR1, "consumer_closed",
    ),
    "sys.exit in the loop body, the stream kept in a variable": ("mid_run_kept", "sys_exit", 3, None, "shutdown"),
}  # fmt: skip


@pytest.mark.every_python
@pytest.mark.parametrize("way", EXITS)
def test_a_run_left_by_system_exit_is_stored_and_the_exit_code_stands(tmp_path: Path, way: str) -> None:
    ending, exit_, code, signum, stop_kind = EXITS[way]
    script = [Reply("draft"), Reply("notes", delay_s=3), Reply("draft 2"), Reply("notes 2")]
    with OpenAIServer(script=script) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FAULT_"))}
        env.update(
            FAULT_ENDING=ending,
            FAULT_EXIT=exit_,
            FAULT_NOTES=str(tmp_path / "notes"),
            FAULT_OPENAI_URL=server.base_url,
            FAULT_REFUSING_URL=f"http://127.0.0.1:{free_port()}/v1",
            OTEL_AGENTS_STORE=str(tmp_path / "store"),
            OTEL_METRICS_EXPORTER="none",
            PYTHONPATH=str(ROOT),
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.fault_app"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        if signum is not None:
            deadline = time.monotonic() + 60
            while server.request_count < 2 and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            time.sleep(0.3)  # the slow call is in flight
            process.send_signal(signum)
        _, err = process.communicate(timeout=90)
    assert process.returncode == code, err[-3000:]
    runs = Store(tmp_path / "store").runs()
    assert [run.stop_kind for run in runs] == [stop_kind], err[-3000:]
    assert [run.stop_reason for run in runs] == [stop_kind]
    assert not [line for line in err.splitlines() if line.startswith("otel-agents")], err[-3000:]

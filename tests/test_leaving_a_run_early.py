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


IDLE_THREADS_OF_OURS = (("soon.py", "_work"), ("exit_thread.py", "_wait"))
"""Where otel-agents' own threads wait while idle (the flush thread, the exit's thread)."""


def stuck_in_our_code(dump: str) -> list[str]:
    """The frames of otel-agents in a faulthandler dump of every thread, but for the idle waits of
    its own threads: where a deadlock of ours would show."""
    frames = [line.strip() for line in dump.splitlines() if "/otel_agents/" in line]
    return [f for f in frames if not any(file in f and f.endswith(f"in {fn}") for file, fn in IDLE_THREADS_OF_OURS)]


def exit_somewhere(workdir: Path, after_s: float) -> tuple[subprocess.CompletedProcess[str], Path] | None:
    """Run the app until its SIGALRM; None when it is still running 20 s later with nothing of ours
    busy (AutoGen's own runtime does not always finish cancelling its tasks after a SystemExit
    lands in them: the untraced app hangs so too, some 2 times in 30)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        EXIT_AFTER_S=str(after_s),
        OTEL_AGENTS_STORE=str(workdir / "store"),
        OTEL_METRICS_EXPORTER="none",
        PYTHONPATH=str(ROOT),
        PYTHONFAULTHANDLER="1",  # a process still running after the timeout says where each thread is
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.exit_anywhere_app"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        out, err = process.communicate(timeout=15)
        assert not stuck_in_our_code(err), f"stuck in otel-agents' code:\n{err[-6000:]}"
        return None
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), workdir / "store"


@pytest.mark.every_python
def test_a_system_exit_wherever_it_lands_neither_deadlocks_nor_loses_a_finished_run(tmp_path: Path) -> None:
    """SIGALRM's handler raises SystemExit at eight moments of a stream of runs, so it lands in
    AutoGen, in the app, or in otel-agents' own code (a lock held, a message recorded, a run ended):
    each process exits with the handler's code in bounded time, or hangs only where the untraced app
    hangs too (nothing of ours busy), the store is whole, every run that returned is stored, and the
    one under way is stored too, left by the exit."""
    import sqlite3
    from concurrent.futures import ThreadPoolExecutor

    moments = [0.05 + 0.137 * i for i in range(8)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda i: exit_somewhere(tmp_path / str(i), moments[i]), range(len(moments))))
    exited = [outcome for outcome in outcomes if outcome is not None]
    assert len(exited) >= 5, f"{len(moments) - len(exited)} of {len(moments)} hung in AutoGen"
    for done, store in exited:
        said = done.stderr[-3000:]
        assert done.returncode == 7, said
        with sqlite3.connect(store / "spans.sqlite3") as connection:
            assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        runs = Store(store).runs(limit=None)
        returned = done.stdout.split().count("done")
        said_lines = done.stderr.splitlines()
        under_way = "under way" in said_lines and "swallowed" not in said_lines
        if under_way:
            assert len(runs) == returned + 1, f"a run lost: {said}"
        else:  # the exit may have come as a run started, before its first item
            assert returned <= len(runs) <= returned + 1, said
        finished = [run for run in runs if run.stop_kind == "max_messages"]
        assert returned <= len(finished) <= returned + under_way, said  # it may have ended before its print
        left = [run.stop_kind for run in runs if run.stop_kind != "max_messages"]
        # consumer_closed, or cancelled where the exit landed in another task of AutoGen's runtime
        # (the known limit: asyncio cancels the run on its way out, like any other cancellation)
        assert len(left) <= 1 and set(left) <= {"consumer_closed", "cancelled"}, (left, said)
        assert len({run.run_id for run in runs}) == len(runs)


async def test_a_system_exit_while_a_run_is_being_ended_still_ends_its_span(
    capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The storm above once lost a run this way (CI, Python 3.12): the SystemExit landed while
    otel-agents computed the run's figures, after the run was marked ended and before its span ended."""
    from otel_agents._internal.run.workflow import WorkflowSpan

    def interrupted(self: WorkflowSpan) -> None:
        raise SystemExit(7)

    monkeypatch.setattr(WorkflowSpan, "_end", interrupted)
    with pytest.raises(SystemExit):
        await writers_room(max_messages=3).run(task="go")
    monkeypatch.undo()
    runs = [s for s in capture.spans() if s.name.startswith("invoke_workflow")]
    assert len(runs) == 1 and runs[0].end_time is not None, "the run's span ended and was exported"
    assert runs[0].attributes["otel_agents.stop_kind"] == "max_messages", "with how it stopped"
    assert runs[0].attributes["otel_agents.stop_reason"].startswith("Maximum number of messages 3 reached")


async def the_run_a_system_exit_left(capture: Capture, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A run of the writers' room, streamed until the SystemExit that the test's patch raises leaves
    the stream; then the patch undone and the one run exported."""
    with pytest.raises(SystemExit):
        async for _ in writers_room(max_messages=3).run_stream(task="go"):
            pass
    monkeypatch.undo()
    (run,) = exported_runs(capture)
    return run


async def test_a_system_exit_as_a_run_starts_ends_it_as_left(capture: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The storm above once stored a run as `shutdown`: the SystemExit landed in otel-agents as
    the run started, after its span started and before the stream had it, and the run stayed
    open until the exit ended it."""
    from otel_agents._internal.run import outcomes

    def interrupted(workflow: object) -> None:
        raise SystemExit(7)

    monkeypatch.setattr(outcomes, "started", interrupted)
    run = await the_run_a_system_exit_left(capture, monkeypatch)
    assert run.attributes["otel_agents.stop_kind"] == "consumer_closed"


async def test_a_system_exit_in_otel_agents_code_between_items_ends_the_run_as_left(
    capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, where the SystemExit lands in the stream's own step around AutoGen's (here: as it
    begins, once the run has started): the frame it leaves is kept by the exception's traceback,
    so the stream is not dropped before the exit, and the run must end on the way out."""
    from otel_agents._internal.run.follow import RunStream

    begin = RunStream._begin

    def interrupted(self: RunStream[Any]) -> None:
        begin(self)
        raise SystemExit(7)

    monkeypatch.setattr(RunStream, "_begin", interrupted)
    run = await the_run_a_system_exit_left(capture, monkeypatch)
    assert run.attributes["otel_agents.stop_kind"] == "consumer_closed"


def test_a_signal_that_comes_as_a_runs_span_ends_is_handled_once_it_has_ended() -> None:
    """A run's span ends with the Python signal handlers set aside: a SystemExit raised inside
    the SDK's `Span.end()`, after its end time and before the span processors had the span, lost
    the run. The signal comes from another thread, as a timer's or a `kill`'s may be taken."""
    import threading

    from otel_agents._internal.run.uninterrupted import uninterrupted

    steps: list[str] = []

    def leave(signum: int, frame: object) -> None:
        steps.append("handler")
        raise SystemExit(7)

    def end() -> None:
        sender = threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGUSR1))
        sender.start()
        sender.join()
        for _ in range(1000):  # Python looks for a handler to run at each call
            len(steps)
        steps.append("ended")

    previous = signal.signal(signal.SIGUSR1, leave)
    try:
        with pytest.raises(SystemExit):
            uninterrupted(end)
        assert signal.getsignal(signal.SIGUSR1) is leave, "the handler is put back"
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert steps == ["ended", "handler"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_process_forked_while_a_runs_span_ends_gets_the_signal_handlers_back() -> None:
    """A process pool's worker thread may fork while the main thread ends a run's span, its
    handlers set aside: the child gets them back (it kept the note, and a SIGTERM no longer
    stopped it)."""
    import threading
    import warnings

    from otel_agents._internal.run.uninterrupted import uninterrupted

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(7)

    read, write = os.pipe()
    children: list[int] = []

    def fork_from_a_thread() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # (3.12: a fork with threads running)
            pid = os.fork()
        if pid == 0:  # the child: say which handler it has, and leave
            os.write(write, b"ours" if signal.getsignal(signal.SIGTERM) is leave else b"other")
            os._exit(0)
        children.append(pid)

    def end() -> None:
        forker = threading.Thread(target=fork_from_a_thread)
        forker.start()
        forker.join()

    previous = signal.signal(signal.SIGTERM, leave)
    try:
        uninterrupted(end)
        (child,) = children
        said = os.read(read, 16)
        assert os.waitpid(child, 0)[1] == 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        os.close(read)
        os.close(write)
    assert said == b"ours", "the child has the app's handler back"

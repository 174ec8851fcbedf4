"""Early break, aclose(), cancellation and errors: the run span always ends with the right stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import CancellationToken
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

import otel_agents
from tests.conftest import Capture
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import one_trace
from tests.support.teams import openai_client, replay, text, writers_room
from tests.support.waits import only_this_task_left, wait_until_async

pytestmark = [pytest.mark.every_python]


class OpenSpans(SpanProcessor):
    """Counts spans started and not yet ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        self.open.pop(span.context.span_id, None)


@pytest.fixture
def open_spans(capture: Capture) -> OpenSpans:
    processor = OpenSpans()
    capture.telemetry.sdk_tracer_provider.add_span_processor(processor)  # type: ignore[attr-defined]
    return processor


@pytest.fixture
def detach_errors(caplog: pytest.LogCaptureFixture) -> Iterator[list[logging.LogRecord]]:
    caplog.set_level(logging.ERROR)
    records: list[logging.LogRecord] = []
    yield records
    records.extend(r for r in caplog.records if "Failed to detach context" in r.getMessage())
    assert not records, "a context was detached in the wrong place"


async def run_root(capture: Capture) -> ReadableSpan:
    """The ended run span (waits for an asynchronous close, bounded)."""
    for _ in range(100):
        roots = [s for s in capture.spans() if s.name.startswith("invoke_workflow")]
        if roots:
            return roots[0]
        await asyncio.sleep(0.02)
    raise AssertionError("the run span never ended")


async def test_early_break_ends_the_run_as_consumer_closed(
    capture: Capture, open_spans: OpenSpans, detach_errors: list[logging.LogRecord]
) -> None:
    async for _item in otel_agents.tap(writers_room(max_messages=6).run_stream(task="go")):
        break  # the abandoned generator is closed by the event loop

    root = await run_root(capture)
    assert root.attributes["otel_agents.stop_reason"] == "consumer_closed"
    assert root.attributes["otel_agents.stop_kind"] == "consumer_closed"
    assert root.status.status_code is not StatusCode.ERROR
    assert not open_spans.open


async def test_aclose_ends_the_run_as_consumer_closed(
    capture: Capture, open_spans: OpenSpans, detach_errors: list[logging.LogRecord]
) -> None:
    stream = otel_agents.tap(writers_room(max_messages=6).run_stream(task="go"))
    first = await stream.__anext__()
    await stream.aclose()

    root = await run_root(capture)
    assert first.source == "user"
    assert root.attributes["otel_agents.stop_kind"] == "consumer_closed"
    assert root.attributes["otel_agents.message_count"] == 1
    assert not open_spans.open


async def test_cancellation_token_ends_the_run_as_cancelled(
    capture: Capture, open_spans: OpenSpans, detach_errors: list[logging.LogRecord]
) -> None:
    token = CancellationToken()
    stream = otel_agents.tap(writers_room(max_messages=6).run_stream(task="go", cancellation_token=token))
    await stream.__anext__()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        async for _ in stream:
            pass

    root = await run_root(capture)
    assert root.attributes["otel_agents.stop_reason"] == "cancelled"
    assert root.attributes["otel_agents.stop_kind"] == "cancelled"
    assert not open_spans.open


async def test_an_exception_inside_an_agent_reaches_the_caller_and_marks_the_run(
    capture: Capture, open_spans: OpenSpans, detach_errors: list[logging.LogRecord]
) -> None:
    flaky = AssistantAgent("flaky", model_client=replay(text("only one reply")))
    team = RoundRobinGroupChat([flaky], termination_condition=MaxMessageTermination(5), name="flaky-team")
    with pytest.raises(RuntimeError, match="No more mock responses available"):
        await _drain(otel_agents.tap(team.run_stream(task="go")))

    root = one_trace(capture.spans()).root
    assert root.attributes["otel_agents.stop_reason"] == "error: RuntimeError"
    assert root.attributes["otel_agents.stop_kind"] == "error"
    assert root.attributes["error.type"] == "RuntimeError"
    assert root.status.status_code is StatusCode.ERROR
    assert [e.attributes for e in root.events if e.name == "exception"] == [{"exception.type": "RuntimeError"}]
    assert not open_spans.open


async def test_the_caller_gets_the_very_exception_the_stream_raised(capture: Capture) -> None:
    boom = ValueError("boom")

    async def failing() -> AsyncGenerator[str, None]:
        yield "one"
        raise boom

    with pytest.raises(ValueError) as raised:
        await _drain(otel_agents.tap(failing(), team=None))
    assert raised.value is boom
    assert (await run_root(capture)).attributes["otel_agents.stop_reason"] == "error: ValueError"


async def test_the_tap_never_reads_ahead(capture: Capture) -> None:
    produced: list[int] = []

    async def counting() -> AsyncGenerator[int, None]:
        for i in range(10):
            produced.append(i)
            yield i

    stream = otel_agents.tap(counting())
    assert produced == []
    assert await stream.__anext__() == 0
    assert await stream.__anext__() == 1
    assert produced == [0, 1]
    await stream.aclose()
    assert produced == [0, 1]


async def test_items_come_through_unchanged(capture: Capture) -> None:
    untraced = [type(i).__name__ for i in await _drain(writers_room(max_messages=4).run_stream(task="go"))]
    items = await _drain(otel_agents.tap(writers_room(max_messages=4).run_stream(task="go")))
    assert [type(i).__name__ for i in items] == untraced
    sentinel = [object(), object()]

    async def objects() -> AsyncGenerator[object, None]:
        for item in sentinel:
            yield item

    assert [i for i in await _drain(otel_agents.tap(objects()))] == sentinel


async def test_tap_takes_the_team_or_a_name_for_the_run(capture: Capture) -> None:
    async def items() -> AsyncGenerator[int, None]:
        yield 1

    await _drain(otel_agents.tap(items(), team="nightly-report"))
    await _drain(otel_agents.tap(writers_room(max_messages=2).run_stream(task="go"), team="renamed"))
    runs = sorted(s.name for s in capture.spans() if s.name.startswith("invoke_workflow"))
    assert runs == ["invoke_workflow nightly-report", "invoke_workflow renamed"]
    with pytest.raises(ValueError, match="team=' '"):
        otel_agents.tap(items(), team=" ")


def chatty_team(server: OpenAIServer) -> RoundRobinGroupChat:
    server.script = [Reply(text="a draft", delay_s=0.1)]
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(6), name="chatty")


async def test_run_stream_cancels_the_team_when_the_consumer_leaves(
    capture: Capture, openai_server: OpenAIServer, detach_errors: list[logging.LogRecord]
) -> None:
    stream = otel_agents.run_stream(chatty_team(openai_server), task="go")
    async with contextlib.aclosing(stream):
        async for item in stream:
            if item.source == "writer":
                break
    calls_when_left = openai_server.request_count
    # the team's tasks end once it is cancelled; were it going on, once it has made its next calls
    assert await wait_until_async(only_this_task_left)

    assert openai_server.request_count == calls_when_left == 1
    root = await run_root(capture)
    assert root.attributes["otel_agents.stop_kind"] == "consumer_closed"


async def test_a_bare_tap_lets_autogen_finish_the_team(capture: Capture, openai_server: OpenAIServer) -> None:
    """The contrast to the test above: without run_stream's token AutoGen runs the team to its end."""
    stream = otel_agents.tap(chatty_team(openai_server).run_stream(task="go"))
    async with contextlib.aclosing(stream):
        async for item in stream:
            if item.source == "writer":
                break

    assert openai_server.request_count == 5


async def test_run_stream_honours_the_callers_token(capture: Capture) -> None:
    token = CancellationToken()
    stream = otel_agents.run_stream(writers_room(max_messages=6), task="go", cancellation_token=token)
    await stream.__anext__()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await _drain(stream)
    assert (await run_root(capture)).attributes["otel_agents.stop_kind"] == "cancelled"


async def _drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def test_cancelling_the_consumer_while_it_waits_for_an_item_ends_the_run_as_cancelled(
    capture: Capture, open_spans: OpenSpans, detach_errors: list[logging.LogRecord]
) -> None:
    first_item = asyncio.Event()
    waiting = asyncio.Event()

    async def slow() -> AsyncGenerator[str, None]:
        yield "first"
        waiting.set()
        await asyncio.sleep(10)
        yield "never"

    async def consume() -> None:
        async for _item in otel_agents.tap(slow()):
            first_item.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_item.wait(), timeout=5)
    await asyncio.wait_for(waiting.wait(), timeout=5)  # the consumer now waits inside the tap for the next item
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    root = await run_root(capture)
    assert root.attributes["otel_agents.stop_kind"] == "cancelled"
    assert root.attributes["otel_agents.stop_reason"] == "cancelled"
    assert not open_spans.open


async def test_items_that_cannot_be_recorded_still_come_through(
    capture: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    class Odd:
        source = "odd"
        models_usage = "not a usage object"

    odd = Odd()

    async def odd_items() -> AsyncGenerator[object, None]:
        yield odd
        yield "plain"

    assert await _drain(otel_agents.tap(odd_items())) == [odd, "plain"]
    assert any("could not record a Odd" in r.getMessage() for r in caplog.records)
    root = await run_root(capture)
    assert root.attributes["otel_agents.message_count"] == 2


COLLECTED_WHILE_BUSY = """
import asyncio, gc, threading
from autogen_agentchat.messages import TextMessage
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import otel_agents
from otel_agents._internal.tracing.registry import REGISTRY

exporter = InMemorySpanExporter()
telemetry = otel_agents.configure(span_exporter=exporter, store=False)

async def items():
    yield TextMessage(source="user", content="go")
    yield TextMessage(source="writer", content="draft")

async def main():
    stream = otel_agents.tap(items())
    await stream.__anext__()
    cycle = [stream]
    cycle.append(cycle)  # only the collector frees it now
    del stream, cycle

    def collect_while_the_registry_is_busy():
        with REGISTRY._lock:  # as when an allocation under the lock sets off a collection
            gc.collect()

    worker = threading.Thread(target=collect_while_the_registry_is_busy, daemon=True)
    worker.start()
    worker.join(timeout=20)
    print("deadlocked" if worker.is_alive() else "collected")

asyncio.run(main())
telemetry.force_flush()
runs = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow")]
print([s.attributes.get("otel_agents.stop_reason") for s in runs])
"""


def collected(script: str) -> list[str]:
    """The first two lines `script` prints, run in a Python of its own: "collected" and the run's
    stop reasons once the collector ended the run (a script that deadlocks says "deadlocked")."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout, done.stderr[-2000:]
    return done.stdout.splitlines()[:2]


def test_a_run_the_collector_ends_while_the_registry_is_busy_does_not_deadlock() -> None:
    """A stream dropped inside a reference cycle is ended by the garbage collector, which runs at
    whatever allocation sets it off, one the registry makes under its own lock included."""
    assert collected(COLLECTED_WHILE_BUSY) == ["collected", "['consumer_closed']"]


COLLECTED_WHILE_NAMING = COLLECTED_WHILE_BUSY.replace(
    "from otel_agents._internal.tracing.registry import REGISTRY", "from otel_agents._internal.run import outcomes"
).replace("with REGISTRY._lock:", "with outcomes._lock:")


def test_a_run_the_collector_ends_while_outcomes_are_being_recorded_does_not_deadlock() -> None:
    """As above, with the lock of the runs `record_outcome` can name held (it allocates under it):
    the run's end, which comes to that table, still goes through."""
    assert "with outcomes._lock:" in COLLECTED_WHILE_NAMING
    assert collected(COLLECTED_WHILE_NAMING) == ["collected", "['consumer_closed']"]


COLLECTED_WHILE_DELIVERING = """
import gc, threading, types
from opentelemetry.sdk.trace import TracerProvider
from otel_agents._internal.tracing import publish_roots

tracer = TracerProvider().get_tracer("app")
created = publish_roots.created(lambda start: tracer.start_span("autogen create notes", start_time=start))
message = publish_roots.pending(created.get_span_context())

@types.coroutine
def step():
    yield

async def delivering():
    with publish_roots.delivery(message):  # the runtime's publish block: its end forgets the message
        await step()

coroutine = delivering()
coroutine.send(None)  # its delivery under way
cycle = [coroutine]
cycle.append(cycle)  # only the collector frees it (and closes it, ending the block) now
del coroutine, cycle

def collect_while_messages_are_looked_at():
    with publish_roots._lock:  # as when an allocation under the lock sets off a collection
        gc.collect()

worker = threading.Thread(target=collect_while_messages_are_looked_at, daemon=True)
worker.start()
worker.join(timeout=20)
print("deadlocked" if worker.is_alive() else "collected")
print(publish_roots.waiting())
"""


def test_a_delivery_the_collector_ends_while_published_messages_are_looked_at_does_not_deadlock() -> None:
    """A dropped coroutine is closed by the garbage collector, which runs its `publish` block's end
    (the message is forgotten there), at whatever allocation sets it off, one made under the lock of
    the messages waiting for delivery included."""
    assert collected(COLLECTED_WHILE_DELIVERING) == ["collected", "0"]


COLLECTED_WHILE_COUNTING = COLLECTED_WHILE_BUSY.replace(
    "from otel_agents._internal.tracing.registry import REGISTRY",
    "from otel_agents._internal.export.pipeline import BoundedBatchSpanProcessor",
).replace(
    "with REGISTRY._lock:",
    "with next(p for p in telemetry._processors if isinstance(p, BoundedBatchSpanProcessor))._lock:",
)


def test_a_run_the_collector_ends_while_the_export_queue_counts_does_not_deadlock() -> None:
    """As above, with the lock of the export queue's counts held (its shutdown makes a thread under
    it): the spans of the run the collector ends are counted there all the same."""
    assert "BoundedBatchSpanProcessor))._lock:" in COLLECTED_WHILE_COUNTING
    assert collected(COLLECTED_WHILE_COUNTING) == ["collected", "['consumer_closed']"]


COLLECTED_WHILE_ENDING = COLLECTED_WHILE_BUSY.replace(
    "    await stream.__anext__()\n", "    await stream.__anext__()\n    ending = stream.recorder._ending\n"
).replace("with REGISTRY._lock:", "with ending:")


def test_a_run_the_collector_ends_while_an_outcome_is_being_added_to_it_does_not_deadlock() -> None:
    """As above, with the run's own lock held, as `add_outcome` holds it while it adds the event (it
    allocates under it): the collector that frees the run's stream ends that very run all the same."""
    assert "with ending:" in COLLECTED_WHILE_ENDING and "ending = stream" in COLLECTED_WHILE_ENDING
    assert collected(COLLECTED_WHILE_ENDING) == ["collected", "['consumer_closed']"]


COLLECTED_WHILE_THE_TOKEN_IS_BUSY = """
import asyncio, gc
import autogen_core
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import otel_agents
from tests.support.teams import writers_room

tokens = []
made = autogen_core.CancellationToken.__init__

def remembered(self):
    made(self)
    tokens.append(self)

autogen_core.CancellationToken.__init__ = remembered
exporter = InMemorySpanExporter()
telemetry = otel_agents.configure(span_exporter=exporter, store=False)

async def main():
    stream = otel_agents.run_stream(writers_room(max_messages=6), task="go")
    token = tokens[0]  # run_stream's own, made before the team's run starts
    await stream.__anext__()
    cycle = [stream]
    cycle.append(cycle)  # only the collector frees it now
    del stream, cycle
    with token._lock:  # as when the team links a future to its token (AutoGen allocates under that lock)
        gc.collect()
    print("collected")
    for _ in range(1000):  # the loop's next steps: the team is cancelled in one of them
        if token.is_cancelled():
            break
        await asyncio.sleep(0)
    print("cancelled" if token.is_cancelled() else "not cancelled")

asyncio.run(main())
"""


def test_a_run_stream_the_collector_frees_while_the_team_holds_its_token_does_not_deadlock() -> None:
    """`run_stream` cancels the team when its stream is dropped; when the collector drops it, inside an
    allocation the team makes under its token's lock, the team is cancelled at the loop's next step,
    not there (where AutoGen's lock would wait for ever)."""
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", COLLECTED_WHILE_THE_TOKEN_IS_BUSY],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired as stuck:
        pytest.fail(f"deadlocked: {stuck.stdout!r}")
    assert done.stdout.splitlines() == ["collected", "cancelled"], done.stdout + done.stderr[-2000:]


def test_a_stream_collected_in_another_thread_is_closed_on_its_own_event_loop(capture: Capture) -> None:
    """Two threads, each with its event loop. A stream left in a reference cycle in thread A is
    freed by a collection that thread B happens to set off: the stream's cleanup runs on loop A, as
    Python closes a dropped async generator, never on loop B (AutoGen's cleanup there touched loop
    A's futures from thread B)."""
    import gc
    import threading

    cleaned_up_in: list[str] = []
    dropped, collected = threading.Event(), threading.Event()

    async def items() -> AsyncGenerator[int, None]:
        try:
            for i in range(3):
                yield i
        finally:
            cleaned_up_in.append(threading.current_thread().name)

    async def consumer() -> None:
        cycle: dict[str, Any] = {}
        cycle["self"] = cycle
        cycle["stream"] = otel_agents.tap(items())
        async for _ in cycle["stream"]:
            break
        del cycle
        dropped.set()
        collected.wait(timeout=10)  # loop A is held while thread B collects and runs its own loop
        for _ in range(20):
            await asyncio.sleep(0)

    async def collector() -> None:
        dropped.wait(timeout=10)
        gc.collect()
        for _ in range(20):
            await asyncio.sleep(0)
        collected.set()

    gc.disable()
    try:
        threads = [
            threading.Thread(target=asyncio.run, args=(consumer(),), name="A"),
            threading.Thread(target=asyncio.run, args=(collector(),), name="B"),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        gc.enable()
    assert cleaned_up_in == ["A"]
    (run,) = [s for s in capture.spans() if s.name.startswith("invoke_workflow")]
    assert (run.attributes or {})["otel_agents.stop_kind"] == "consumer_closed"


async def test_a_traced_run_stream_is_an_async_generator_as_autogens_is(capture: Capture) -> None:
    import collections.abc

    stream = writers_room(max_messages=3).run_stream(task="go")
    assert isinstance(stream, collections.abc.AsyncGenerator)
    first = await stream.asend(None)
    assert getattr(first, "content", None) == "go"
    with pytest.raises(ValueError, match="enough"):
        await stream.athrow(ValueError("enough"))
    await stream.aclose()
    (run,) = [s for s in capture.spans() if s.name.startswith("invoke_workflow")]
    assert (run.attributes or {})["otel_agents.stop_reason"] == "error: ValueError"


async def test_athrow_into_a_tapped_iterator_without_one_raises_it_and_marks_the_run(capture: Capture) -> None:
    class Items:
        def __init__(self) -> None:
            self.left = [1, 2, 3]

        def __aiter__(self) -> Items:
            return self

        async def __anext__(self) -> int:
            if not self.left:
                raise StopAsyncIteration
            return self.left.pop(0)

    stream = otel_agents.tap(Items())
    assert await stream.asend(None) == 1
    with pytest.raises(TypeError, match="takes no sent values"):
        await stream.asend("a value")
    with pytest.raises(ValueError, match="enough"):
        await stream.athrow(ValueError("enough"))
    (run,) = [s for s in capture.spans() if s.name.startswith("invoke_workflow")]
    assert (run.attributes or {})["otel_agents.stop_kind"] == "error"

"""The span registry stays small: bounded per trace, forgetting ended runs, followed traces and
dropped causes without losing the trace."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.replay import ReplayChatCompletionClient
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext

import otel_agents
from otel_agents._internal.tracing import registry as registry_module
from otel_agents._internal.tracing.registry import ENDED_RUNS_KEPT, NODES_PER_TRAIL, REGISTRY, Node
from tests.conftest import Capture
from tests.support.metrics import points
from tests.support.spans import one_trace
from tests.support.teams import MODEL_INFO, text, writers_room
from tests.support.volleys import play
from tests.support.waits import only_this_task_left, wait_until_async

pytestmark = [pytest.mark.every_python]


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def one_run_remembered(monkeypatch: pytest.MonkeyPatch) -> int:
    """The span ids one 3-message run leaves remembered, measured with every older run forgotten."""
    with monkeypatch.context() as patch:
        patch.setattr(registry_module, "ENDED_KEPT_S", 0.0)
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
        return REGISTRY.remembered_ended_spans


async def test_many_runs_leave_nothing_but_a_few_ended_runs_behind(
    capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_run = await one_run_remembered(monkeypatch)
    assert per_run > 0, "an ended run's span ids are remembered for a while"
    before = len(REGISTRY)
    for _ in range(ENDED_RUNS_KEPT * 3):
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
        assert len(REGISTRY) == before, "a run's entries are released when it ends"
    assert REGISTRY.remembered_ended_spans == per_run * ENDED_RUNS_KEPT, "the last few runs' only"


class Gated(ReplayChatCompletionClient):
    """Replies only once `gate` is open, counting its calls."""

    def __init__(self, gate: asyncio.Event, replies: list[str]) -> None:
        super().__init__([text(r) for r in replies], model_info=MODEL_INFO)
        self.gate = gate
        self.calls = 0

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        await self.gate.wait()
        self.calls += 1
        return await super().create(*args, **kwargs)


async def test_a_team_finishing_after_its_consumer_left_adds_nothing_to_its_trace_while_other_runs_end(
    capture: Capture,
) -> None:
    """AutoGen goes on with a team whose consumer left; what it does then is dropped, however many
    other runs of a busy service end meanwhile."""
    gate = asyncio.Event()
    writer = Gated(gate, ["d1", "d2"])
    critic = Gated(gate, ["n1"])
    team = RoundRobinGroupChat(
        [AssistantAgent("writer", model_client=writer), AssistantAgent("critic", model_client=critic)],
        termination_condition=MaxMessageTermination(4),
        name="left",
    )
    async for _ in team.run_stream(task="go"):
        break  # the run ends here, as consumer_closed; AutoGen carries on in the background
    for _ in range(16):  # other users' runs end meanwhile
        await writers_room(max_messages=2).run(task="x")
    gate.set()
    deadline = time.monotonic() + 30
    while writer.calls + critic.calls < 3:  # the team has finished in the background
        assert time.monotonic() < deadline, "the team never finished"
        await asyncio.sleep(0.01)
    assert await wait_until_async(only_this_task_left)  # and its last call's spans have ended
    spans = capture.spans()
    (run,) = [s for s in spans if s.name == "invoke_workflow left"]
    late = [s.name for s in spans if s.context.trace_id == run.context.trace_id and s.start_time > run.end_time]
    assert late == [], "nothing started after the run ended is recorded in its trace"
    assert not [s for s in spans if s.name.startswith("invoke_agent ") and s.parent is None], "nor as traces of its own"


async def test_the_ended_runs_remembered_are_bounded_by_their_span_ids_too(
    capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_run = await one_run_remembered(monkeypatch)
    monkeypatch.setattr(registry_module, "ENDED_SPANS_KEPT", per_run * 3 + 1)
    for _ in range(6):
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
    assert REGISTRY.remembered_ended_spans == per_run * 3, "the newest runs whose ids fit"


async def test_ended_runs_are_forgotten_after_a_while(capture: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
    await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="again")))
    assert REGISTRY.remembered_ended_spans >= 2 * await one_run_remembered(monkeypatch) > 0
    # one_run_remembered ran a third run after the time was up: only that one is remembered now
    assert REGISTRY.remembered_ended_spans == await one_run_remembered(monkeypatch)


async def test_a_long_core_only_conversation_keeps_a_bounded_number_of_entries(nested_capture: Capture) -> None:
    volleys = NODES_PER_TRAIL * 2
    await play(volleys)

    spans = nested_capture.spans()
    tree = one_trace(spans)
    assert tree.root.name == "match"
    processed = [s for s in spans if s.name.startswith("autogen process ")]
    assert len(processed) >= volleys, "every message was traced"
    assert REGISTRY.entries(tree.root.context.trace_id) <= NODES_PER_TRAIL
    assert len(REGISTRY) <= NODES_PER_TRAIL + 10, "nothing else of the conversation is kept"


async def test_a_span_whose_cause_was_dropped_stays_in_the_trace_under_its_sender(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry_module, "NODES_PER_TRAIL", 0)  # every cause is dropped at once
    unplaced_before = REGISTRY.unplaced
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader], runtime_spans="nested") as telemetry:
        await drain(otel_agents.tap(writers_room(max_messages=6).run_stream(task="go")))
        telemetry.force_flush()
        counted = [point.value for point in points(reader.get_metrics_data(), "otel_agents.spans.unplaced")]

    spans = exporter.get_finished_spans()
    tree = one_trace(spans)
    assert tree.root.name == "invoke_workflow writers-room"
    under_sender = [s for s in spans if s.parent and s.links and s.parent.span_id == s.links[0].context.span_id]
    assert counted == [REGISTRY.unplaced] and REGISTRY.unplaced > unplaced_before, "counted in a metric"
    assert len(tree.named("invoke_agent ")) == 5, "every turn still in the trace"
    assert len(under_sender) >= counted[0], "each under the sender it is linked to"


def test_traces_followed_from_elsewhere_are_kept_while_used_and_forgotten_when_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [time.monotonic() + 10_000.0]  # later than anything followed so far: they go first
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(registry_module, "FOLLOWED_IDLE_S", 60.0)
    provider = trace.NoOpTracerProvider()
    first = REGISTRY.followed(0xA1, provider, "nested")
    span = SpanContext(0xA1, 0xB1, is_remote=False)
    REGISTRY.add(span, Node(first, span, span, is_runtime=False))
    assert REGISTRY.followed(0xA1, provider, "nested") is first, "followed while active"

    clock[0] += 59.0
    REGISTRY.add(SpanContext(0xA1, 0xB2, is_remote=False), Node(first, span, span, is_runtime=False))
    clock[0] += 59.0  # 118 s after it started, 59 s after its last span
    REGISTRY.followed(0xA2, provider, "nested")
    assert REGISTRY.lookup(span) is not None, "a span placed in it keeps it followed"

    clock[0] += 2.0  # 61 s after its last span
    REGISTRY.followed(0xA3, provider, "nested")
    assert REGISTRY.lookup(span) is None and REGISTRY.entries(0xA1) == 0, "idle: forgotten, its entries too"
    assert REGISTRY.followed_traces == 2

    clock[0] += 61.0
    REGISTRY.followed(0xA4, provider, "nested")
    assert REGISTRY.followed_traces == 1, "every idle trace forgotten"

    kept = len(REGISTRY)  # a span placed from an entry of a forgotten trace, looked up before it went
    REGISTRY.add(SpanContext(0xA1, 0xB3, is_remote=False), Node(first, span, span, is_runtime=False))
    assert len(REGISTRY) == kept and REGISTRY.entries(0xA1) == 0, "a forgotten trace takes no entry"


def test_followed_traces_forgotten_again_in_a_collection_while_forgetting_are_forgotten_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A collection inside the loop that forgets idle followed traces can end a stream's run, which
    forgets them too (under the re-entrant lock): here reading the first forgotten trace's span ids
    re-enters, as such a collection would."""
    clock = [time.monotonic() + 20_000.0]  # later than anything followed so far: they go first
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(registry_module, "FOLLOWED_IDLE_S", 60.0)
    provider = trace.NoOpTracerProvider()
    for trace_id in (0xC1, 0xC2, 0xC3):
        REGISTRY.followed(trace_id, provider, "nested")
    span_ids = registry_module.Trail.span_ids
    reentered_from: list[int] = []

    def span_ids_in_a_collection(trail: registry_module.Trail) -> list[int]:
        if not reentered_from:
            reentered_from.append(trail.trace_id)
            REGISTRY.followed(0xC5, provider, "nested")
        return span_ids(trail)

    monkeypatch.setattr(registry_module.Trail, "span_ids", span_ids_in_a_collection)
    clock[0] += 61.0  # C1 to C3 idle
    REGISTRY.followed(0xC4, provider, "nested")
    assert reentered_from == [0xC1]
    assert REGISTRY.followed_traces == 2, "C4 and C5 followed, the idle ones forgotten once each"
    assert REGISTRY.followed(0xC4, provider, "nested") is REGISTRY.followed(0xC4, provider, "nested")


async def test_a_tap_never_iterated_starts_no_run_and_keeps_nothing(capture: Capture) -> None:
    before = len(REGISTRY)
    streams = [otel_agents.tap(writers_room().run_stream(task="go")) for _ in range(20)]
    assert len(REGISTRY) == before, "nothing is registered before the first item is asked for"
    for stream in streams:
        await stream.aclose()
    assert not capture.spans(), "no run span was started"


async def test_a_pipeline_replaced_by_configure_is_not_kept_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import weakref

    gone = []
    for _ in range(3):
        telemetry = otel_agents.configure(span_exporter=InMemorySpanExporter())
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))  # model calls too
        assert telemetry.genai_handler is not None
        gone.append(weakref.ref(telemetry))
        del telemetry
    otel_agents.configure(span_exporter=InMemorySpanExporter()).shutdown()
    gc.collect()
    assert [ref() for ref in gone] == [None, None, None], "shut-down pipelines are released"


def test_a_placing_provider_keeps_a_bounded_number_of_tracers() -> None:
    """One tracer per name is reused (AutoGen asks for one on every span); names made up as a
    library goes do not pile up."""
    from otel_agents._internal.autogen.tracer_hook import AUTOGEN_TRACERS
    from otel_agents._internal.tracing.placement import TRACERS_KEPT

    assert AUTOGEN_TRACERS.get_tracer("autogen core") is AUTOGEN_TRACERS.get_tracer("autogen core")
    for i in range(3 * TRACERS_KEPT):
        AUTOGEN_TRACERS.get_tracer(f"made-up-{i}")
    assert 0 < len(AUTOGEN_TRACERS._tracers) <= TRACERS_KEPT
    AUTOGEN_TRACERS._tracers.clear()  # the made-up names go; the real ones come back when asked for


def test_what_is_kept_per_provider_goes_with_the_provider_and_needs_no_hash() -> None:
    import gc

    from opentelemetry.sdk.trace import TracerProvider

    from otel_agents._internal.per_provider import PerProvider

    class Unhashable(TracerProvider):
        """Compared by value, as a provider made by a dataclass is (Logfire's proxy provider)."""

        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other: object) -> bool:
            return self is other

    kept: PerProvider[str] = PerProvider()
    # without the exit hook, which would keep them for good
    first, second = TracerProvider(shutdown_on_exit=False), Unhashable(shutdown_on_exit=False)
    assert kept.setdefault(first, lambda: "a") == "a" and kept.setdefault(first, lambda: "b") == "a"
    assert kept.setdefault(second, lambda: "c") == "c" and kept.get(second) == "c"
    assert kept.get(TracerProvider(shutdown_on_exit=False)) is None
    del first, second
    gc.collect()
    assert len(kept) == 0, "released with its provider"

    class Unreferenceable:
        __slots__ = ()

    held = Unreferenceable()
    assert kept.setdefault(held, lambda: "d") == "d" and kept.get(held) == "d", "held when it cannot be weakly"


def test_a_provider_collected_while_another_ones_value_is_made_does_not_deadlock() -> None:
    """Making a value may collect garbage, and so forget a dead provider's entry, in this thread."""
    import gc
    import threading

    from otel_agents._internal.per_provider import PerProvider

    class Provider:
        pass

    kept: PerProvider[str] = PerProvider()
    dying = Provider()
    dying.cycle = dying  # type: ignore[attr-defined]  # collected only by the collector
    kept.setdefault(dying, lambda: "a")
    del dying
    living = Provider()

    def collecting() -> str:
        gc.collect()  # the dying provider's entry is forgotten now
        return "b"

    done = threading.Thread(target=lambda: kept.setdefault(living, collecting), daemon=True)
    done.start()
    done.join(timeout=10)
    assert not done.is_alive(), "setdefault deadlocked"
    assert kept.get(living) == "b" and len(kept) == 1

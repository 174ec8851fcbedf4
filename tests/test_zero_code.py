"""Zero code: after `configure()` alone, every AutoGen run is one trace with its run span; the
consumer leaving early loses nothing; `uninstrument()` gives AutoGen back as it was."""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib
import logging
import os
import pickle
import warnings
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import wrapt
from autogen_agentchat.agents import AssistantAgent, BaseChatAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.teams import BaseGroupChat
from autogen_agentchat.ui import Console
from autogen_core.logging import LLMCallEvent, LLMStreamEndEvent
from autogen_core.models import ChatCompletionClient
from autogen_core.tools import BaseTool
from autogen_ext.models.replay import ReplayChatCompletionClient
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime
from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen import patches, wrapping
from tests.conftest import Capture
from tests.support.spans import Tree, one_trace
from tests.support.teams import graph_flow, publishing, replay, selector_room, swarm, text, writers_room
from tests.support.waits import only_this_task_left, wait_until_async

OTEL_INSTRUMENTOR_LOGGER = "opentelemetry.instrumentation.instrumentor"
"""Where OpenTelemetry's instrumentors say they changed nothing (named: the CLI, run in this process
by other tests, quiets the `opentelemetry` loggers)."""

pytestmark = [pytest.mark.lowest_versions, pytest.mark.every_autogen, pytest.mark.every_python]

TEAMS: dict[str, tuple[Callable[[], Any], str]] = {
    "round-robin": (lambda: writers_room(max_messages=4), "max_messages"),
    "selector": (selector_room, "text_mention"),
    "swarm": (swarm, "handoff"),
    "graph-flow": (graph_flow, "other"),
    "nested": (publishing, "max_messages"),
}


def run_span_of(tree: Tree) -> ReadableSpan:
    assert tree.root.name.startswith("invoke_workflow "), tree.root.name
    return tree.root


def chat_input_tokens(tree: Tree) -> int:
    return sum(int(c.attributes.get("gen_ai.usage.input_tokens", 0)) for c in tree.named("chat"))


def assert_the_run_is_recorded(
    tree: Tree, result: TaskResult, name: str, stop_kind: str, stop_reason: str | None = None
) -> None:
    """`stop_reason`: what the run says when AutoGen gives none (a single agent's response)."""
    root = run_span_of(tree)
    attributes = root.attributes or {}
    assert root.name == f"invoke_workflow {name}"
    assert len(str(attributes["otel_agents.run.id"])) == 32
    assert attributes["otel_agents.stop_kind"] == stop_kind
    assert attributes.get("otel_agents.stop_reason") == (result.stop_reason or stop_reason)
    assert attributes["otel_agents.message_count"] == len(result.messages)
    assert len(tree.named("message ")) == len(result.messages)
    assert attributes["gen_ai.usage.input_tokens"] == chat_input_tokens(tree) > 0
    assert tree.named("invoke_agent "), "the agents' turns are in the run"


@pytest.mark.parametrize("team_name", TEAMS)
async def test_a_plain_team_run_is_one_trace_with_its_run_span(capture: Capture, team_name: str) -> None:
    build, stop_kind = TEAMS[team_name]
    team = build()
    result = await team.run(task="write")

    assert_the_run_is_recorded(one_trace(capture.spans()), result, team.name, stop_kind)


async def test_console_over_run_stream_is_one_trace(capture: Capture, capsys: pytest.CaptureFixture[str]) -> None:
    team = selector_room()
    result = await Console(team.run_stream(task="write"))

    assert_the_run_is_recorded(one_trace(capture.spans()), result, "selector-room", "text_mention")
    assert "APPROVE" in capsys.readouterr().out, "Console printed the run as it does untraced"


async def test_a_nested_team_gets_its_own_workflow_span_under_the_outer_run(capture: Capture) -> None:
    await publishing().run(task="a story")

    tree = one_trace(capture.spans())
    inner_runs = tree.named("invoke_workflow drafting")
    assert tree.root.name == "invoke_workflow publishing" and inner_runs
    for inner in inner_runs:
        assert tree.parent(inner) is tree.root
        assert "otel_agents.run.id" not in (inner.attributes or {}), "one run, one run id"
    assert (tree.root.attributes or {})["gen_ai.usage.input_tokens"] == chat_input_tokens(tree)


async def test_an_agents_run_is_one_trace_with_message_spans_from_its_result(capture: Capture) -> None:
    agent = AssistantAgent("solo", model_client=replay(text("hello there", 12, 3)))
    result = await agent.run(task="hi")

    tree = one_trace(capture.spans())
    assert_the_run_is_recorded(tree, result, "solo", "completed", "completed: TextMessage")
    assert [tree.parent(t) for t in tree.named("invoke_agent ")] == [tree.root]
    messages = tree.named("message ")
    assert [m.attributes["otel_agents.message.index"] for m in messages] == [0, 1]  # type: ignore[index]
    assert all("otel_agents.message.latency_ms" not in (m.attributes or {}) for m in messages), "documented"


async def test_an_agents_run_stream_is_one_trace(capture: Capture) -> None:
    agent = AssistantAgent("solo", model_client=replay(text("hello there", 12, 3)))
    items = [item async for item in agent.run_stream(task="hi")]

    tree = one_trace(capture.spans())
    assert_the_run_is_recorded(tree, items[-1], "solo", "completed", "completed: TextMessage")
    assert all("otel_agents.message.latency_ms" in (m.attributes or {}) for m in tree.named("message "))


async def test_loop_detection_works_on_a_plain_team_run(clean_loop_env: None) -> None:
    exporter = InMemorySpanExporter()
    limits = otel_agents.LoopLimits(max_repeats=2)
    with otel_agents.configure(span_exporter=exporter, loop_limits=limits, store=False) as telemetry:
        writer = AssistantAgent("writer", model_client=replay(*[text("same words")] * 6))
        critic = AssistantAgent("critic", model_client=replay(*[text("same notes")] * 6))
        from autogen_agentchat.conditions import MaxMessageTermination
        from autogen_agentchat.teams import RoundRobinGroupChat

        await RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(7)).run(task="go")
        telemetry.force_flush()
    tree = one_trace(exporter.get_finished_spans())
    assert [e.attributes["otel_agents.loop.rule"] for e in tree.root.events] == ["repeat"]  # type: ignore[index]


@pytest.fixture
def clean_loop_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_AGENTS_MAX_MESSAGES", "OTEL_AGENTS_MAX_REPEATS", "OTEL_AGENTS_TOKEN_BUDGET"):
        monkeypatch.delenv(name, raising=False)


# --- tap and run_stream on top never make a second run span ----------------------------------


async def test_tap_over_an_instrumented_stream_makes_one_run_span(capture: Capture) -> None:
    items = [item async for item in otel_agents.tap(writers_room(max_messages=3).run_stream(task="go"))]

    tree = one_trace(capture.spans())
    assert [s.name for s in tree.named("invoke_workflow ")] == ["invoke_workflow writers-room"]
    assert (tree.root.attributes or {})["otel_agents.message_count"] == len(items) - 1


async def test_run_stream_over_an_instrumented_team_makes_one_run_span_and_cancels_on_break(
    capture: Capture,
) -> None:
    team = writers_room(max_messages=10)
    clients = [agent._model_client for agent in team._participants]  # type: ignore[attr-defined]
    async for _ in otel_agents.run_stream(team, task="go"):
        break
    used = [c.total_usage().prompt_tokens for c in clients]
    # the team's tasks end once it is cancelled; were it going on, once it has made its next calls
    assert await wait_until_async(only_this_task_left)

    tree = one_trace(capture.spans())
    assert [s.name for s in tree.named("invoke_workflow ")] == ["invoke_workflow writers-room"]
    assert (tree.root.attributes or {})["otel_agents.stop_kind"] == "consumer_closed"
    assert [c.total_usage().prompt_tokens for c in clients] == used, "the team was cancelled: no call since"


async def test_with_instrument_false_only_tapped_runs_are_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=False, instrument=False) as telemetry:
        assert not otel_agents.AutoGenInstrumentor().is_instrumented_by_opentelemetry
        await writers_room(max_messages=3, name="untapped").run(task="go")
        [_ async for _ in otel_agents.tap(writers_room(max_messages=3, name="tapped").run_stream(task="go"))]
        telemetry.force_flush()
    runs = [s.name for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow")]
    assert runs == ["invoke_workflow tapped"]


# --- nothing lost when the consumer leaves ----------------------------------------------------


def ended_run(capture: Capture) -> ReadableSpan:
    """The run span, exported by a flush made right now (it must have ended already)."""
    (run,) = [s for s in capture.spans() if s.name.startswith("invoke_workflow")]
    return run


async def run_once_closed(capture: Capture, timeout_s: float = 20.0) -> ReadableSpan:
    """The run span of a stream its consumer left: it ends once AutoGen's stream has closed (a
    team with its own runtime runs to its end first), in a task of its own."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        if runs := [s for s in capture.spans() if s.name.startswith("invoke_workflow")]:
            (run,) = runs
            return run
        await asyncio.sleep(0.01)
    raise AssertionError("the run span never ended")


@pytest.fixture
def detach_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.ERROR)
    yield
    assert not [r for r in caplog.records if "Failed to detach context" in r.getMessage()]


STREAMS: dict[str, Callable[[Any], Any]] = {
    "team.run_stream": lambda team: team.run_stream(task="go"),
    "tap": lambda team: otel_agents.tap(team.run_stream(task="go")),
    "run_stream": lambda team: otel_agents.run_stream(team, task="go"),
}


@pytest.mark.parametrize("how", STREAMS)
async def test_a_break_ends_the_run_once_autogens_stream_has_closed(
    capture: Capture, detach_errors: None, how: str
) -> None:
    async for _ in STREAMS[how](writers_room(max_messages=10)):
        break
    run = await run_once_closed(capture)
    assert (run.attributes or {})["otel_agents.stop_kind"] == "consumer_closed"
    tree = one_trace(capture.spans())
    assert all(s.end_time <= run.end_time for s in tree.spans), "every turn it ran on is in the run"
    assert run.attributes["gen_ai.usage.input_tokens"] == chat_input_tokens(tree), "totals: what it recorded"


@pytest.mark.parametrize("how", ["agent.run_stream", "tap"])
async def test_break_out_of_a_single_agents_stream_detaches_cleanly(
    capture: Capture, detach_errors: None, how: str
) -> None:
    agent = AssistantAgent("solo", model_client=replay(text("one"), text("two")))
    stream = agent.run_stream(task="hi")
    async for _ in otel_agents.tap(stream) if how == "tap" else stream:
        break
    del stream
    run = await run_once_closed(capture)
    assert (run.attributes or {})["otel_agents.stop_kind"] == "consumer_closed"
    for _ in range(100):  # the stream itself closes in a task of its own, in its own context
        if turns := [s for s in capture.spans() if s.name == "invoke_agent solo"]:
            break
        await asyncio.sleep(0.01)
    (turn,) = turns
    assert turn.parent is not None and turn.parent.span_id == run.context.span_id


async def test_raising_out_of_the_loop_body_is_consumer_closed(capture: Capture, detach_errors: None) -> None:
    with pytest.raises(LookupError):
        async for _ in writers_room(max_messages=10).run_stream(task="go"):
            raise LookupError("the consumer's own error")
    assert ((await run_once_closed(capture)).attributes or {})["otel_agents.stop_kind"] == "consumer_closed"


def test_returning_from_main_inside_the_loop_is_consumer_closed(capture: Capture, detach_errors: None) -> None:
    async def main() -> object:
        async for item in writers_room(max_messages=10).run_stream(task="go"):
            return item
        return None

    assert asyncio.run(main()) is not None
    assert (ended_run(capture).attributes or {})["otel_agents.stop_kind"] == "consumer_closed"


async def test_aclosing_a_kept_stream_ends_the_run(capture: Capture, detach_errors: None) -> None:
    from contextlib import aclosing

    async with aclosing(writers_room(max_messages=10).run_stream(task="go")) as stream:
        async for _ in stream:
            break
    assert (ended_run(capture).attributes or {})["otel_agents.stop_kind"] == "consumer_closed"


# --- the instrumentor -------------------------------------------------------------------------


def patched_places() -> dict[tuple[Any, str], object]:
    """Every place otel-agents changes in AutoGen, and what is there now."""
    tracing = importlib.import_module(ag.RUNTIME_TRACING_MODULE)
    genai = importlib.import_module(ag.GENAI_TRACER_MODULE)
    places = [
        (BaseGroupChat, "run_stream"),
        (BaseChatAgent, "run_stream"),
        (BaseChatAgent, "run"),
        (ReplayChatCompletionClient, "create"),
        (ReplayChatCompletionClient, "create_stream"),
        (tracing, ag.RUNTIME_DEFAULT_PROVIDER),
        (tracing, ag.TELEMETRY_LINKS_FUNCTION),
        (genai, ag.GENAI_TRACE_MODULE_NAME),
    ]
    places += [(cls, "run") for cls in BaseTool.__subclasses__() if "run" in vars(cls)]
    places += [(LLMCallEvent, "__init__"), (LLMStreamEndEvent, "__init__")]
    places += [(BaseGroupChat, name) for name in ("save_state", "load_state", "reset")]
    places += [(cls, "save_state") for cls in (BaseChatAgent, AssistantAgent)]
    places += [(AssistantAgent, name) for name in ("on_reset", "on_messages", "on_messages_stream")]
    places += [(BaseChatAgent, "on_messages_stream"), (BaseTool, "save_state_json")]
    places += [(base, "__init_subclass__") for base in (ChatCompletionClient, BaseTool, BaseGroupChat, BaseChatAgent)]
    places += [(GrpcWorkerAgentRuntime, ag.GRPC_SEND_MESSAGE), (warnings, "warn")]
    return {(owner, name): vars(owner).get(name) for owner, name in places}


async def test_uninstrument_gives_autogen_back_its_original_functions(capture: Capture) -> None:
    instrumentor = otel_agents.AutoGenInstrumentor()
    instrumentor.uninstrument()
    before = patched_places()
    instrumentor.instrument()
    during = patched_places()
    assert all(during[place] is not before[place] for place in before), "each place is patched"

    instrumentor.uninstrument()
    after = patched_places()
    assert all(after[place] is before[place] for place in before), "the very same objects, not wrappers"
    await writers_room(max_messages=3).run(task="go")
    agent = AssistantAgent("solo", model_client=replay(text("hi")))
    await agent.run(task="hi")
    assert not [s for s in capture.spans() if s.name.startswith(("invoke_workflow", "chat"))], "no run spans after"


async def test_a_wrapper_added_after_ours_keeps_working_after_uninstrument(capture: Capture) -> None:
    ours = BaseGroupChat.run_stream
    in_place = vars(BaseGroupChat)["run_stream"]  # `ours` is bound to the class by wrapt: not what to put back
    calls: list[str] = []

    @functools.wraps(ours)
    def theirs(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(self.name)
        return ours(self, *args, **kwargs)

    BaseGroupChat.run_stream = theirs  # type: ignore[method-assign]
    try:
        otel_agents.AutoGenInstrumentor().uninstrument()
        assert BaseGroupChat.run_stream is theirs, "theirs stays"
        result = await writers_room(max_messages=3, name="after").run(task="go")
        assert calls == ["after"] and len(result.messages) == 3
        assert not [s for s in capture.spans() if s.name.startswith(("invoke_workflow", "chat"))], "ours pass through"

        otel_agents.AutoGenInstrumentor().instrument()  # ours, still inside theirs, wakes up: not a second one
        assert BaseGroupChat.run_stream is theirs
        await writers_room(max_messages=3, name="again").run(task="go")
        runs = [s for s in capture.spans() if s.name.startswith("invoke_workflow")]
        assert [s.name for s in runs] == ["invoke_workflow again"], "one run span, from one wrapper"
    finally:
        BaseGroupChat.run_stream = in_place  # type: ignore[method-assign]  # theirs removed: uninstrument restores AutoGen's


class UnhashableTracerProvider(TracerProvider):
    """Compared by value, as a provider made by a dataclass is (Logfire's proxy provider)."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return self is other


@pytest.mark.parametrize("provider_class", [TracerProvider, UnhashableTracerProvider])
async def test_instrument_with_a_tracer_provider_records_there(provider_class: type[TracerProvider]) -> None:
    exporter = InMemorySpanExporter()
    provider = provider_class()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = otel_agents.AutoGenInstrumentor()
    instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=provider)
    await writers_room(max_messages=3).run(task="go")

    tree = one_trace(exporter.get_finished_spans())
    assert tree.root.name == "invoke_workflow writers-room"
    assert {s.name for s in tree.named("invoke_agent ")} == {"invoke_agent writer", "invoke_agent critic"}


def test_it_is_registered_for_opentelemetry_instrument() -> None:
    (entry,) = [e for e in entry_points(group="opentelemetry_instrumentor") if e.value.startswith("otel_agents")]
    assert entry.name == "otel_agents", "a name of its own: OpenInference registers autogen_agentchat"
    assert entry.load() is otel_agents.AutoGenInstrumentor
    assert entry.dist is not None and get_dist_dependency_conflicts(entry.dist) is None
    assert otel_agents.AutoGenInstrumentor().instrumentation_dependencies() == ag.INSTRUMENTED_PACKAGES


def test_model_clients_defined_after_instrumenting_are_traced_too(capture: Capture) -> None:
    class HouseClient(ReplayChatCompletionClient):
        async def create(self, *args: Any, **kwargs: Any) -> Any:
            return await super().create(*args, **kwargs)

    async def main() -> None:
        agent = AssistantAgent("solo", model_client=HouseClient([text("hi")], model_info=replay().model_info))
        await agent.run(task="hi")

    asyncio.run(main())
    assert issubclass(HouseClient, ChatCompletionClient)
    (call,) = [s for s in capture.spans() if s.name.startswith("chat")]
    assert call.parent is not None


def test_model_clients_defined_or_changed_after_a_traced_run_are_traced_from_the_next(capture: Capture) -> None:
    async def one_call(client: ChatCompletionClient) -> None:
        await AssistantAgent("solo", model_client=client).run(task="hi")

    asyncio.run(one_call(replay(text("before"))))

    class LaterClient(ReplayChatCompletionClient):
        async def create(self, *args: Any, **kwargs: Any) -> Any:
            return text("after")  # not through the wrapped parent's create

    asyncio.run(one_call(LaterClient([], model_info=replay().model_info)))

    async def create_assigned_later(self: Any, *args: Any, **kwargs: Any) -> Any:
        return text("assigned")  # as `mock.patch.object(LaterClient, "create")` would

    LaterClient.create = create_assigned_later  # type: ignore[method-assign]
    asyncio.run(one_call(LaterClient([], model_info=replay().model_info)))

    calls = [s for s in capture.spans() if s.name.startswith("chat")]
    assert len(calls) == 3, "the class defined, then the method assigned, between runs: wrapped at the next start"
    assert len({s.context.trace_id for s in calls}) == 3


def test_a_method_assigned_to_a_subclass_that_inherited_it_is_traced_from_the_next_run(capture: Capture) -> None:
    """The subclass had no `create` of its own (none in the ledger): assigned after a traced run,
    it is found at the next run's start all the same."""

    class Inheriting(ReplayChatCompletionClient):
        pass

    async def one_call(client: ChatCompletionClient) -> None:
        await AssistantAgent("solo", model_client=client).run(task="hi")

    asyncio.run(one_call(Inheriting([text("inherited")], model_info=replay().model_info)))

    async def create_assigned_later(self: Any, *args: Any, **kwargs: Any) -> Any:
        return text("assigned")

    Inheriting.create = create_assigned_later  # type: ignore[method-assign]
    asyncio.run(one_call(Inheriting([], model_info=replay().model_info)))

    calls = [s for s in capture.spans() if s.name.startswith("chat")]
    assert len(calls) == 2, "the method assigned to the subclass: wrapped at the next start"


def test_uninstrument_lets_go_of_a_client_class_defined_in_a_function(capture: Capture) -> None:
    """What a run's start remembers of the wrapped methods goes with `uninstrument()`: a class
    defined in a function (its `create` holds it through `super()`) is collected once dropped."""
    import gc
    import weakref

    def a_client_class() -> type[ReplayChatCompletionClient]:
        class Local(ReplayChatCompletionClient):
            async def create(self, *args: Any, **kwargs: Any) -> Any:
                return await super().create(*args, **kwargs)

        return Local

    async def one_call(client: ChatCompletionClient) -> None:
        await AssistantAgent("solo", model_client=client).run(task="hi")

    local = a_client_class()
    asyncio.run(one_call(local([text("hi")], model_info=replay().model_info)))
    asyncio.run(one_call(replay(text("again"))))  # a run's start that remembers what it read
    gone = weakref.ref(local)
    otel_agents.AutoGenInstrumentor().uninstrument()
    try:
        del local
        gc.collect()
        assert gone() is None, "nothing of otel-agents holds the class"
    finally:
        otel_agents.AutoGenInstrumentor().instrument()


async def test_a_run_puts_back_a_wrapper_someone_else_replaced(capture: Capture) -> None:
    await writers_room(max_messages=2).run(task="go")
    before = patched_places()
    tracing = importlib.import_module(ag.RUNTIME_TRACING_MODULE)
    original = getattr(tracing, ag.RUNTIME_DEFAULT_PROVIDER).__wrapped__
    setattr(tracing, ag.RUNTIME_DEFAULT_PROVIDER, original)  # as a reload, or a library restoring it, would
    await writers_room(max_messages=2).run(task="go")
    assert vars(tracing)[ag.RUNTIME_DEFAULT_PROVIDER] is not original, "wrapped again at the run's start"
    after = patched_places()
    assert all(after[place] is before[place] for place in before if place != (tracing, ag.RUNTIME_DEFAULT_PROVIDER))


async def test_a_hand_written_patch_over_ours_stays_and_each_call_through_it_is_one_chat_span(capture: Capture) -> None:
    await writers_room(max_messages=2).run(task="go")  # AutoGen instrumented, our wrappers in place
    ours = vars(ReplayChatCompletionClient)["create"]

    @functools.wraps(ours)
    async def theirs(self: Any, *args: Any, **kwargs: Any) -> Any:  # calls what it found in the class's dict
        return await ours(self, *args, **kwargs)

    ReplayChatCompletionClient.create = theirs  # type: ignore[method-assign]
    try:
        capture.spans()  # the first run's, out of the way
        capture.exporter.clear()
        await writers_room(max_messages=3).run(task="go")
        assert vars(ReplayChatCompletionClient)["create"] is theirs, "not wrapped again at the run's start"
    finally:
        ReplayChatCompletionClient.create = ours  # type: ignore[method-assign]
    tree = one_trace(capture.spans())
    assert [
        (getattr(tree.parent(s), "name", None), (s.attributes or {}).get("gen_ai.provider.name"))
        for s in tree.named("chat")
    ] == [
        ("invoke_agent writer", "autogen.replay"),  # the client, read off the instance the patch passed first
        ("invoke_agent critic", "autogen.replay"),
    ]


def test_a_wrapped_method_copies_deep_copies_and_pickles_as_a_method_does(capture: Capture) -> None:
    client = ReplayChatCompletionClient(["hi"])
    assert wrapping.is_ours(vars(ReplayChatCompletionClient)["create"]), "instrumented"
    assert copy.copy(client.create).__self__ is client
    call = copy.deepcopy(functools.partial(client.create, []))
    assert isinstance(call.func.__self__, ReplayChatCompletionClient) and call.func.__self__ is not client
    assert pickle.loads(pickle.dumps(client.create)).__self__ is not client
    assert wrapping.is_ours(pickle.loads(pickle.dumps(ReplayChatCompletionClient.create)))


async def test_instrumenting_again_wakes_ours_inside_a_wrapper_put_over_it_and_uninstrument_sends_it_back(
    capture: Capture,
) -> None:
    await writers_room(max_messages=2).run(task="go")  # ours in place
    ours = vars(ReplayChatCompletionClient)["create"]
    wrapt.wrap_function_wrapper(ReplayChatCompletionClient, "create", lambda wrapped, _, a, k: wrapped(*a, **k))
    theirs = vars(ReplayChatCompletionClient)["create"]
    instrumentor = otel_agents.AutoGenInstrumentor()
    try:
        instrumentor.uninstrument()  # theirs stays, ours inside it passes through
        instrumentor.instrument()
        assert (ReplayChatCompletionClient, "create") in wrapping.replaced(), "woken, in the ledger again"
        instrumentor.uninstrument()
        assert vars(ReplayChatCompletionClient)["create"] is theirs
        assert (ReplayChatCompletionClient, "create") not in wrapping.replaced()
    finally:
        ReplayChatCompletionClient.create = ours.__wrapped__  # type: ignore[method-assign]  # the original


async def test_a_tap_after_uninstrument_puts_every_wrapper_back_even_after_another_patch(capture: Capture) -> None:
    otel_agents.AutoGenInstrumentor().uninstrument()
    otel_agents.create_runtime(host_address="127.0.0.1:9")  # puts the gRPC runtime's one patch back alone
    [_ async for _ in otel_agents.tap(AssistantAgent("solo", model_client=replay(text("hi"))).run_stream(task="hi"))]
    assert [s.name for s in capture.spans() if s.name.startswith("chat")] == ["chat"]


# --- lifecycle: which pipeline records --------------------------------------------------------


async def test_the_latest_of_instrument_with_a_provider_and_configure_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    given = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(given))
    otel_agents.AutoGenInstrumentor().instrument(tracer_provider=provider)
    configured = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=configured, store=False) as telemetry:
        await writers_room(max_messages=3).run(task="go")
        telemetry.force_flush()
    assert not given.get_finished_spans(), "configure() came later: its pipeline records"
    assert one_trace(configured.get_finished_spans()).root.name == "invoke_workflow writers-room"
    provider.get_tracer("app").start_span("still mine").end()
    assert [s.name for s in given.get_finished_spans()] == ["still mine"], "the given provider was not shut down"


async def test_a_nested_team_counts_as_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from tests.support.metrics import points

    reader = InMemoryMetricReader()
    with otel_agents.configure(span_exporter=InMemorySpanExporter(), metric_readers=[reader], store=False):
        await publishing().run(task="a story")
        runs = points(reader.get_metrics_data(), "otel_agents.runs")
    assert [(p.attributes["gen_ai.workflow.name"], p.value) for p in runs] == [("publishing", 1)]


CONFIGURE_UNDER_AN_APP_PROVIDER = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.teams import writers_room

apps = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(apps))
trace.set_tracer_provider(provider)  # the app set OpenTelemetry up first

import otel_agents

ours = InMemorySpanExporter()
telemetry = otel_agents.configure(span_exporter=ours, store=False)
asyncio.run(writers_room(max_messages=3).run(task="go"))
telemetry.shutdown()
trace.get_tracer("app").start_span("after our shutdown").end()
print(json.dumps({{
    "same_provider": telemetry.sdk_tracer_provider is provider,
    "ours": sorted({{s.context.trace_id for s in ours.get_finished_spans()}}),
    "apps": sorted({{s.context.trace_id for s in apps.get_finished_spans() if s.name != "after our shutdown"}}),
    "our_names": sorted({{s.name for s in ours.get_finished_spans()}}),
    "app_after": [s.name for s in apps.get_finished_spans() if s.name == "after our shutdown"],
}}))
"""


def run_app(tmp_path: Path, source: str) -> tuple[dict[str, Any], str]:
    """Run `source` (formatted with the project root) as an app of its own; (the JSON it printed
    last, its standard error)."""
    import json
    import subprocess
    import sys

    script = tmp_path / "app.py"
    script.write_text(source.format(root=str(Path(__file__).resolve().parents[1])))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def test_configure_under_an_apps_global_provider_adds_to_it(tmp_path: Path) -> None:
    seen, stderr = run_app(tmp_path, CONFIGURE_UNDER_AN_APP_PROVIDER)
    assert seen["same_provider"], "one pipeline, not two"
    assert len(seen["ours"]) == 1 and seen["ours"] == seen["apps"], "the run is one trace, in both exporters"
    assert {"invoke_workflow writers-room", "invoke_agent writer", "message writer"} <= set(seen["our_names"])
    assert seen["app_after"] == ["after our shutdown"], "our shutdown left the app's provider working"
    (line,) = [line for line in stderr.splitlines() if "TracerProvider" in line]
    assert "adds its exporters to it" in line


UNINSTRUMENT_UNDER_AN_APP_PROVIDER = """
import asyncio, collections, json, sys
sys.path.insert(0, {root!r})
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.teams import writers_room

apps = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(apps))
trace.set_tracer_provider(provider)  # the app (or the distro) owns the global provider

import otel_agents

async def names(team):
    apps.clear()
    await team.run(task="go")
    return collections.Counter(" ".join(s.name.split()[:2]) for s in apps.get_finished_spans())

async def main():
    never = await names(writers_room(max_messages=3))
    instrumentor = otel_agents.AutoGenInstrumentor()
    instrumentor.instrument()
    built_while_instrumented = writers_room(max_messages=3)
    instrumentor.uninstrument()
    return {{"never": never, "built_before": await names(built_while_instrumented),
             "built_after": await names(writers_room(max_messages=3))}}

print(json.dumps(asyncio.run(main())))
"""


def test_after_uninstrument_a_team_built_while_instrumented_records_as_autogen_does(tmp_path: Path) -> None:
    """AutoGen's runtime keeps the tracer it took when it was built: after `uninstrument()` that
    tracer starts AutoGen's own spans as the global provider would, dropping none."""
    seen, _ = run_app(tmp_path, UNINSTRUMENT_UNDER_AN_APP_PROVIDER)
    assert seen["never"].get("autogen process", 0) > 0, "AutoGen records its runtime spans to the app's provider"
    assert seen["built_before"] == seen["built_after"] == seen["never"]


# --- review: the corners --------------------------------------------------------------------


async def test_breaking_after_the_result_keeps_autogens_stop_reason(capture: Capture) -> None:
    async for item in writers_room(max_messages=3).run_stream(task="go"):
        if isinstance(item, TaskResult):
            break
    attributes = (await run_once_closed(capture)).attributes or {}
    assert attributes["otel_agents.stop_kind"] == "max_messages"
    assert str(attributes["otel_agents.stop_reason"]).startswith("Maximum number of messages 3 reached")


async def test_tap_over_a_filter_of_an_instrumented_stream_is_one_run(capture: Capture) -> None:
    async def only_messages(stream: Any) -> Any:
        async for item in stream:
            if not isinstance(item, TaskResult):
                yield item

    team = writers_room(max_messages=3)
    items = [i async for i in otel_agents.tap(only_messages(team.run_stream(task="go")), team=team)]
    tree = one_trace(capture.spans())
    assert len(items) == 3 and tree.root.name == "invoke_workflow writers-room"
    run_ids = {s.attributes["otel_agents.run.id"] for s in tree.spans if "otel_agents.run.id" in (s.attributes or {})}
    assert len(run_ids) == 1, "one run: the instrumented stream nests under the tap's"


def tool_call(name: str) -> Any:
    import json

    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage

    return CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="c1", name=name, arguments=json.dumps({"task": "do it"}))],
        usage=RequestUsage(prompt_tokens=5, completion_tokens=1),
        cached=False,
    )


def agent_tool_run() -> Any:
    from autogen_agentchat.tools import AgentTool

    helper = AssistantAgent("helper", model_client=replay(text("helped", 7, 2)), description="helps")
    boss = AssistantAgent("boss", model_client=replay(tool_call("helper"), text("done")), tools=[AgentTool(helper)])
    return boss.run(task="go"), "boss", "helper"


def team_tool_run() -> Any:
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_agentchat.tools import TeamTool

    tool = TeamTool(writers_room(max_messages=3, name="drafting"), name="drafting", description="drafts")
    boss = AssistantAgent("boss", model_client=replay(tool_call("drafting"), text("done")), tools=[tool])
    team = RoundRobinGroupChat([boss], termination_condition=MaxMessageTermination(3), name="outer")
    return team.run(task="go"), "outer", "drafting"


def society_of_mind_run() -> Any:
    from autogen_agentchat.agents import SocietyOfMindAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    mind = SocietyOfMindAgent(
        "mind", team=writers_room(max_messages=3, name="drafting"), model_client=replay(text("summary", 9, 2))
    )
    team = RoundRobinGroupChat([mind], termination_condition=MaxMessageTermination(2), name="outer")
    return team.run(task="go"), "outer", "drafting"


@pytest.mark.parametrize("make", [agent_tool_run, team_tool_run, society_of_mind_run], ids=lambda f: f.__name__)
async def test_a_run_started_inside_a_run_is_nested_and_counted_once(make: Callable[[], Any]) -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from tests.support.metrics import points

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader], store=False) as telemetry:
        running, outer, inner = make()
        await running
        telemetry.force_flush()
        runs = [
            (p.attributes["gen_ai.workflow.name"], p.value)
            for p in points(reader.get_metrics_data(), "otel_agents.runs")
        ]
    tree = one_trace(exporter.get_finished_spans())
    assert tree.root.name == f"invoke_workflow {outer}"
    assert [tree.root] == [s for s in tree.spans if "otel_agents.run.id" in (s.attributes or {})], "one run id"
    assert tree.named(f"invoke_workflow {inner}"), "the inner run is a workflow span in the outer trace"
    assert (tree.root.attributes or {})["gen_ai.usage.input_tokens"] == chat_input_tokens(tree), "counted once"
    assert runs == [(outer, 1)]


async def test_instrument_on_an_instrumented_autogen_changes_nothing_and_uninstrument_first_retargets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    configured, given = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(given))
    instrumentor = otel_agents.AutoGenInstrumentor()
    with otel_agents.configure(span_exporter=configured, store=False) as telemetry:
        with caplog.at_level(logging.WARNING, logger=OTEL_INSTRUMENTOR_LOGGER):
            instrumentor.instrument(tracer_provider=provider)  # as every OpenTelemetry instrumentor: ignored
        assert "Attempting to instrument while already instrumented" in caplog.text
        await writers_room(max_messages=3).run(task="go")
        assert telemetry.force_flush()
        assert one_trace(configured.get_finished_spans()).root.name == "invoke_workflow writers-room"
        assert given.get_finished_spans() == ()
        instrumentor.uninstrument()
        instrumentor.instrument(tracer_provider=provider)
        await writers_room(max_messages=3).run(task="go")
    assert one_trace(given.get_finished_spans()).root.name == "invoke_workflow writers-room"


async def test_instrument_with_a_telemetrys_own_provider_keeps_that_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, store=False, instrument=False)
    try:
        otel_agents.AutoGenInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
        await writers_room(max_messages=3).run(task="go")
        assert telemetry.force_flush(), "not shut down"
        assert one_trace(exporter.get_finished_spans()).root.name == "invoke_workflow writers-room"
    finally:
        telemetry.shutdown()


async def test_uninstrument_gives_everything_back_whoever_patched(capture: Capture) -> None:
    instrumentor = otel_agents.AutoGenInstrumentor()
    instrumentor.uninstrument()
    before = patched_places()
    [_ async for _ in otel_agents.tap(writers_room(max_messages=3).run_stream(task="go"))]
    assert BaseGroupChat.run_stream is not before[(BaseGroupChat, "run_stream")], "the tap puts its wrappers in"
    instrumentor.instrument()
    instrumentor.uninstrument()  # also takes out what the tap put in
    after = patched_places()
    assert all(after[place] is before[place] for place in before)


async def test_uninstrument_of_an_autogen_only_tapped_changes_nothing_and_says_so(
    capture: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    instrumentor = otel_agents.AutoGenInstrumentor()
    instrumentor.uninstrument()
    [_ async for _ in otel_agents.tap(writers_room(max_messages=3).run_stream(task="go"))]  # installs what it needs
    tapped = patched_places()
    with caplog.at_level(logging.WARNING, logger=OTEL_INSTRUMENTOR_LOGGER):
        instrumentor.uninstrument()  # as every OpenTelemetry instrumentor: it did not instrument
    assert "Attempting to uninstrument while already uninstrumented" in caplog.text
    assert patched_places() == tapped


def test_a_stream_dropped_after_its_loop_closed_ends_the_run_quietly(
    capture: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    kept: list[Any] = []

    async def first_item() -> None:
        stream = writers_room(max_messages=10).run_stream(task="go")
        kept.append(stream)
        await stream.__anext__()

    asyncio.run(first_item())
    kept.clear()  # dropped with no event loop running
    assert (ended_run(capture).attributes or {})["otel_agents.stop_kind"] == "consumer_closed"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and "otel" in r.name]


async def test_a_streams_own_cleanup_never_touches_the_consumers_task(capture: Capture) -> None:
    cleaned_up = asyncio.Event()

    async def stream() -> Any:
        try:
            for i in range(5):
                yield i
        finally:
            try:
                async with asyncio.timeout(0.05):  # a cleanup with a deadline, which it misses
                    await asyncio.sleep(1)
            finally:
                cleaned_up.set()

    async for _ in otel_agents.tap(stream()):
        break
    # the deadline has passed, its cancellation delivered: it must not have been this task's
    await asyncio.wait_for(cleaned_up.wait(), timeout=10)
    assert (ended_run(capture).attributes or {})["otel_agents.stop_kind"] == "consumer_closed"


@pytest.mark.parametrize("instrument", [True, False])
async def test_an_autogen_outside_the_supported_range_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, instrument: bool
) -> None:
    from importlib.metadata import version

    otel_agents.AutoGenInstrumentor().uninstrument()
    before = patched_places()
    monkeypatch.setattr(ag, "INSTRUMENTED_PACKAGES", ("autogen-agentchat >= 0.8, < 0.9",))
    monkeypatch.setattr(patches, "_support", None)  # the check is made once a process
    with caplog.at_level(logging.WARNING, logger="otel_agents"):
        with otel_agents.configure(span_exporter=InMemorySpanExporter(), store=False, instrument=instrument):
            [_ async for _ in otel_agents.tap(writers_room(max_messages=2).run_stream(task="go"))]
            await writers_room(max_messages=2).run(task="go")
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("otel_agents")]
    assert len(warnings) == 1 and version("autogen-agentchat") in warnings[0], warnings
    assert not otel_agents.AutoGenInstrumentor().is_instrumented_by_opentelemetry
    assert patched_places() == before, "nothing patched, a tap included: the app runs as without otel-agents"


def test_the_grpc_patch_waits_for_the_app_to_import_the_grpc_runtime(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = """
import sys
import otel_agents
from otel_agents._internal.autogen import wrapping
otel_agents.configure(store=False)
print("grpc imported by configure:", "grpc" in sys.modules)
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime
print("patched on import:", wrapping.is_ours(vars(GrpcWorkerAgentRuntime)["_send_message"]))
"""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["grpc imported by configure: False", "patched on import: True"]

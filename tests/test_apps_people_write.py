"""What the apps people write get with no change: model clients defined after instrumenting, an
agent's `on_messages` called by a service, clients that wrap clients, saved state as AutoGen
makes it, and runs that start their own trace."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import Response
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_agentchat.tools import AgentTool
from autogen_core import CancellationToken, MessageContext, RoutedAgent, TopicId, message_handler
from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage, RequestUsage, UserMessage
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.tracing import publish_roots
from tests.conftest import Capture
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import one_trace
from tests.support.teams import MODEL_INFO, openai_client, replay, text


def asked(content: str = "hello") -> list[TextMessage]:
    return [TextMessage(content=content, source="user")]


def a_client_class_defined_now() -> type[ChatCompletionClient]:
    """A model client class created after `configure()` (as every class is under the distro)."""

    class HouseClient(ChatCompletionClient):
        def __init__(self, reply: str) -> None:
            self.reply = reply

        async def create(self, messages: Sequence[LLMMessage], **kwargs: Any) -> CreateResult:
            usage = RequestUsage(prompt_tokens=7, completion_tokens=2)
            return CreateResult(finish_reason="stop", content=self.reply, usage=usage, cached=False)

        def create_stream(self, messages: Sequence[LLMMessage], **kwargs: Any) -> AsyncGenerator[Any, None]:
            raise NotImplementedError

        async def close(self) -> None:
            pass

        def actual_usage(self) -> RequestUsage:
            return RequestUsage(0, 0)

        def total_usage(self) -> RequestUsage:
            return RequestUsage(0, 0)

        def count_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
            return 0

        def remaining_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
            return 1000

        @property
        def capabilities(self) -> Any:
            return MODEL_INFO

        @property
        def model_info(self) -> Any:
            return MODEL_INFO

    return HouseClient


async def test_a_client_class_defined_after_configure_gets_a_chat_span_outside_any_run(capture: Capture) -> None:
    client = a_client_class_defined_now()("hi")
    await client.create([UserMessage(content="hi", source="user")])
    (call,) = [s for s in capture.spans() if s.name.startswith("chat")]
    assert call.parent is None, "a trace of its own"
    assert call.attributes["gen_ai.usage.input_tokens"] == 7


async def test_a_call_outside_any_run_is_a_child_of_the_span_current_there(capture: Capture) -> None:
    client = a_client_class_defined_now()("hi")
    with capture.telemetry.tracer_provider.get_tracer("app").start_as_current_span("request") as request:
        await client.create([UserMessage(content="hi", source="user")])
    (call,) = [s for s in capture.spans() if s.name.startswith("chat")]
    assert call.parent is not None and call.parent.span_id == request.get_span_context().span_id


async def test_uninstrument_unwraps_a_client_class_defined_while_instrumented(capture: Capture) -> None:
    cls = a_client_class_defined_now()
    wrapped = vars(cls)["create"]
    otel_agents.AutoGenInstrumentor().uninstrument()
    try:
        assert vars(cls)["create"] is not wrapped and not hasattr(vars(cls)["create"], "__wrapped__")
        assert "__init_subclass__" not in vars(ChatCompletionClient), "the class-creation hook is gone"
        await cls("hi").create([UserMessage(content="hi", source="user")])
        assert not [s for s in capture.spans() if s.name.startswith("chat")]
    finally:
        otel_agents.AutoGenInstrumentor().instrument()


async def test_an_agents_on_messages_called_by_the_app_is_a_run_of_that_agent(capture: Capture) -> None:
    agent = AssistantAgent("support", model_client=replay(text("answer", 11, 4)))
    with otel_agents.run_attributes(user_id="u-7"):
        response = await agent.on_messages(asked(), CancellationToken())
    assert isinstance(response, Response)

    tree = one_trace(capture.spans())
    root = tree.root
    assert root.name == "invoke_agent support"
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "support"
    assert len(str(root.attributes["otel_agents.run.id"])) == 32
    assert root.attributes["user.id"] == "u-7"
    assert root.attributes["gen_ai.usage.input_tokens"] == 11
    assert root.attributes["gen_ai.usage.output_tokens"] == 4
    assert root.attributes["otel_agents.stop_kind"] == "completed"
    assert root.attributes["otel_agents.stop_reason"] == "completed: TextMessage"
    (chat,) = tree.named("chat")
    assert chat.parent is not None and chat.parent.span_id == root.context.span_id
    assert [m.name for m in tree.named("message ")] == ["message support"]
    assert not tree.named("invoke_workflow"), "one run, one root: on_messages_stream inside it adds nothing"


async def test_an_agents_on_messages_stream_is_a_run_whose_messages_stream(capture: Capture) -> None:
    agent = AssistantAgent("support", model_client=replay(text("answer")))
    items = [item async for item in agent.on_messages_stream(asked(), CancellationToken())]
    assert isinstance(items[-1], Response)
    tree = one_trace(capture.spans())
    assert tree.root.name == "invoke_agent support"
    assert tree.root.attributes["otel_agents.stop_kind"] == "completed"
    assert tree.root.attributes["otel_agents.message_count"] == 1


async def test_on_messages_runs_are_listed_and_counted_like_team_runs(tmp_path: Any) -> None:
    telemetry = otel_agents.configure(store=tmp_path)
    try:
        agent = AssistantAgent("support", model_client=replay(text("one", 3, 1), text("two", 5, 2)))
        await agent.on_messages(asked(), CancellationToken())
        await agent.on_messages(asked("again"), CancellationToken())
    finally:
        telemetry.shutdown()
    from otel_agents._internal.export.store.reader import Store

    runs = Store(tmp_path).runs()
    assert [(r.team, r.input_tokens, r.output_tokens) for r in runs] == [("support", 5, 2), ("support", 3, 1)]


async def test_inside_a_team_an_agents_turn_stays_autogens_own(capture: Capture) -> None:
    writer = AssistantAgent("writer", model_client=replay(text("draft"), text("draft 2")))
    critic = AssistantAgent("critic", model_client=replay(text("notes"), text("notes 2")))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3), name="room")
    await team.run(task="go")
    tree = one_trace(capture.spans())
    assert tree.root.name == "invoke_workflow room"
    assert len(tree.named("invoke_agent ")) == 2, "one turn span per turn, none of ours beside it"
    assert all("otel_agents.run.id" not in s.attributes for s in tree.named("invoke_agent "))


async def test_agent_tool_nests_in_the_run_that_calls_it(capture: Capture) -> None:
    inner = AssistantAgent("researcher", model_client=replay(text("found it")))
    tool = AgentTool(inner)
    await tool.run_json({"task": "look"}, CancellationToken())
    tree = one_trace(capture.spans())
    assert tree.root.name == "execute_tool researcher", "AutoGen's tool span, called outside any run"
    runs = [s for s in tree.spans if "otel_agents.run.id" in s.attributes]
    assert [r.name for r in runs] == ["invoke_workflow researcher"], "the agent's run inside: one, no second"


class Wrapping(ChatCompletionClient):
    """A user's wrapper: hands every call to the client it holds."""

    def __init__(self, inner: ChatCompletionClient) -> None:
        self.inner = inner

    async def create(self, messages: Sequence[LLMMessage], **kwargs: Any) -> CreateResult:
        return await self.inner.create(messages, **kwargs)

    def create_stream(self, messages: Sequence[LLMMessage], **kwargs: Any) -> AsyncGenerator[Any, None]:
        return self.inner.create_stream(messages, **kwargs)

    async def close(self) -> None:
        await self.inner.close()

    def actual_usage(self) -> RequestUsage:
        return self.inner.actual_usage()

    def total_usage(self) -> RequestUsage:
        return self.inner.total_usage()

    def count_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
        return self.inner.count_tokens(messages, **kwargs)

    def remaining_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
        return self.inner.remaining_tokens(messages, **kwargs)

    @property
    def capabilities(self) -> Any:
        return self.inner.capabilities

    @property
    def model_info(self) -> Any:
        return self.inner.model_info


async def test_a_client_that_hands_its_call_to_another_adds_no_span(capture: Capture) -> None:
    client = Wrapping(replay(text("hi", 9, 2)))
    agent = AssistantAgent("support", model_client=client)
    await agent.run(task="go")
    tree = one_trace(capture.spans())
    (chat,) = tree.named("chat")
    assert chat.attributes["gen_ai.provider.name"] == "autogen.replay", "the span of the call that leaves"
    assert tree.root.attributes["gen_ai.usage.input_tokens"] == 9


async def test_the_chat_completion_cache_answers_a_repeat_with_no_span(capture: Capture) -> None:
    from autogen_core import CacheStore
    from autogen_ext.models.cache import ChatCompletionCache

    class MemoryStore(CacheStore[Any]):
        def __init__(self) -> None:
            self.kept: dict[str, Any] = {}

        def get(self, key: str, default: Any = None) -> Any:
            return self.kept.get(key, default)

        def set(self, key: str, value: Any) -> None:
            self.kept[key] = value

    cache = ChatCompletionCache(replay(text("hi", 9, 2), text("other", 9, 2)), MemoryStore())
    question = [UserMessage(content="same question", source="user")]
    await cache.create(question)
    again = await cache.create(question)
    assert again.cached and again.content == "hi", "answered from the cache: the inner client was not asked"
    (chat,) = [s for s in capture.spans() if s.name.startswith("chat")]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 9, "the miss, once; the hit: no span"


async def test_an_agents_and_a_tools_saved_state_are_autogens_own(capture: Capture) -> None:
    agent = AssistantAgent("support", model_client=replay(text("hi"), text("again")))
    await agent.run(task="go")
    state = await agent.save_state()
    otel_agents.AutoGenInstrumentor().uninstrument()
    try:
        assert await agent.save_state() == state, "the same as AutoGen's with otel-agents off"
    finally:
        otel_agents.AutoGenInstrumentor().instrument()
    assert "otel_agents" not in state
    tool = AgentTool(AssistantAgent("inner", model_client=replay(text("hi"))))
    await tool.run_json({"task": "go"}, CancellationToken())
    tool_state = await tool.save_state_json()
    otel_agents.AutoGenInstrumentor().uninstrument()
    try:
        assert await tool.save_state_json() == tool_state, "a tool's state: AutoGen's, as AgentTool's tests pin it"
    finally:
        otel_agents.AutoGenInstrumentor().instrument()


async def test_a_teams_saved_state_carries_its_conversation(capture: Capture) -> None:
    team = RoundRobinGroupChat(
        [AssistantAgent("a", model_client=replay(text("x")))], termination_condition=MaxMessageTermination(2)
    )
    await team.run(task="go")
    state: Mapping[str, Any] = await team.save_state()
    assert "otel_agents" in state


async def test_with_run_parent_link_each_run_is_the_root_of_its_own_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_AGENTS_RUN_PARENT", "link")
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    try:
        app = TracerProvider()
        app.add_span_processor(SimpleSpanProcessor(exporter))
        with app.get_tracer("app").start_as_current_span("websocket session") as session:
            with otel_agents.run_attributes(user_id="u-1"):
                for _ in range(2):
                    agent = AssistantAgent("support", model_client=replay(text("hi")))
                    await agent.run(task="go")
        telemetry.force_flush()
        runs = [s for s in exporter.get_finished_spans() if s.name == "invoke_workflow support"]
        assert len(runs) == 2
        for run in runs:
            assert run.parent is None, "the root of its own trace"
            assert run.context.trace_id != session.get_span_context().trace_id
            assert [link.context.span_id for link in run.links] == [session.get_span_context().span_id]
            assert run.attributes["user.id"] == "u-1"
    finally:
        telemetry.shutdown()


async def test_autogens_warnings_inside_a_model_call_point_at_the_apps_call(
    capture: Capture, openai_server: OpenAIServer
) -> None:
    openai_server.model = "warned-model-v1"  # the client resolves gpt-4o-mini to a dated name: AutoGen warns
    openai_server.script = [Reply(text="one")]
    client = openai_client(openai_server)
    with pytest.warns(UserWarning, match="Resolved model mismatch") as caught:
        await client.create([UserMessage(content="hi", source="user")])  # the line the warning names
    (warning,) = [w for w in caught if "Resolved model mismatch" in str(w.message)]
    assert warning.filename == __file__, warning.filename
    assert [s.name for s in capture.spans()] == ["chat gpt-4o-mini"], "traced, and blamed on the app"


async def test_a_consumer_failing_at_the_first_item_leaves_a_run_with_every_billed_call(
    capture: Capture, openai_server: OpenAIServer
) -> None:
    """A websocket handler whose send fails: AutoGen runs the team on to its end as the stream
    closes, and those turns are the run's: in its trace and in its totals."""
    openai_server.script = [Reply(text="draft"), Reply(text="notes"), Reply(text="draft 2")]
    writer = AssistantAgent("writer", model_client=openai_client(openai_server))
    critic = AssistantAgent("critic", model_client=openai_client(openai_server))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(4), name="socket")
    with pytest.raises(ConnectionError):
        async for _ in team.run_stream(task="go"):
            raise ConnectionError("the websocket closed")
    for _ in range(2000):  # the run ends once AutoGen's stream has closed, in a task of its own
        if runs := [s for s in capture.spans() if s.name == "invoke_workflow socket"]:
            break
        await asyncio.sleep(0.01)
    (run,) = runs
    tree = one_trace(capture.spans())
    chats = tree.named("chat")
    assert len(chats) == openai_server.request_count == 3, "every billed call is in the run's trace"
    assert run.attributes["otel_agents.stop_kind"] == "consumer_closed"
    assert run.attributes["gen_ai.usage.input_tokens"] == sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats)
    assert run.attributes["gen_ai.usage.input_tokens"] == sum(b.prompt_tokens for b in openai_server.billed)


async def test_a_team_on_a_runtime_started_before_its_run_makes_no_run_per_turn(capture: Capture) -> None:
    """Its agents are called from the runtime's own task, outside the run's context: still turns."""
    from autogen_core import SingleThreadedAgentRuntime

    runtime = SingleThreadedAgentRuntime()
    runtime.start()
    try:
        writer = AssistantAgent("writer", model_client=replay(text("draft")))
        critic = AssistantAgent("critic", model_client=replay(text("notes")))
        team = RoundRobinGroupChat(
            [writer, critic], termination_condition=MaxMessageTermination(3), name="shared", runtime=runtime
        )
        await team.run(task="go")
    finally:
        await runtime.stop_when_idle()
    roots = [s.name for s in capture.spans() if s.parent is None]
    assert roots == ["invoke_workflow shared"], roots


@dataclass
class Note:
    text: str


class Listener(RoutedAgent):
    """An autogen-core agent that asks a model about every note published to its topic."""

    def __init__(self, client: ChatCompletionClient) -> None:
        super().__init__("listens")
        self._client = client

    @message_handler
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        await self._client.create([UserMessage(content=message.text, source="user")])


async def test_a_publish_no_one_receives_makes_no_span_and_a_received_one_roots_its_processing(
    capture: Capture,
) -> None:
    """On the single-threaded runtime with default settings, outside any run and any span."""
    from autogen_core import SingleThreadedAgentRuntime, TopicId, TypeSubscription

    runtime = SingleThreadedAgentRuntime()
    await Listener.register(runtime, "listener", lambda: Listener(replay(text("noted"), text("noted"))))
    await runtime.add_subscription(TypeSubscription("notes", "listener"))
    runtime.start()
    await runtime.publish_message(Note("to nobody"), TopicId("nobody-listens", "default"))
    await runtime.publish_message(Note("to the listener"), TopicId("notes", "default"))
    await runtime.stop_when_idle()

    spans = capture.spans()
    assert not [s for s in spans if "nobody-listens" in s.name], [s.name for s in spans]
    tree = one_trace(spans)
    assert tree.root.name == "autogen create notes" and tree.root.parent is None
    (process,) = tree.named("autogen process listener")
    assert process.parent is not None and process.parent.span_id == tree.root.context.span_id
    assert [link.context for link in process.links] == [tree.root.context], "linked to the root, not its stand-in"
    (call,) = tree.named("chat")
    assert call.parent is not None and call.parent.span_id == process.context.span_id
    assert tree.root.end_time is not None and tree.root.start_time is not None
    assert tree.root.start_time <= process.start_time, "timed as the create block was"
    assert publish_roots.waiting() == 0, "each message is forgotten once delivered"


async def test_published_messages_waiting_for_delivery_are_bounded_and_forgotten_once_delivered(
    capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autogen_core import SingleThreadedAgentRuntime, TopicId

    monkeypatch.setattr(publish_roots, "PENDING_KEPT", 3)
    runtime = SingleThreadedAgentRuntime()
    for n in range(5):  # queued: the runtime has not started delivering
        await runtime.publish_message(Note(f"note {n}"), TopicId("nobody-listens", "default"))
    assert publish_roots.waiting() == 3
    runtime.start()
    await runtime.stop_when_idle()
    assert publish_roots.waiting() == 0
    # the two published while three waited got their root at once, as the runtime makes it
    assert [s.name for s in capture.spans()] == ["autogen create nobody-listens"] * 2


@dataclass
class Ripple:
    depth: int


class Relay(RoutedAgent):
    """Publishes one ripple deeper to the pond for each ripple it hears, down to `DEPTH` (AutoGen
    delivers a publish to every subscriber but its sender)."""

    DEPTH = 5

    def __init__(self) -> None:
        super().__init__("relays")

    @message_handler
    async def on_ripple(self, message: Ripple, ctx: MessageContext) -> None:
        if message.depth < self.DEPTH:
            await self.publish_message(Ripple(message.depth + 1), TopicId("pond", "default"))


async def test_a_burst_of_core_messages_larger_than_the_span_queue_loses_none_with_default_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Five relays hearing each other's every publish (5 + 20 + 80 + 320 + 1,280 handlers a ripple),
    two ripples back to back: more spans than the SDK's default queue (2,048) holds, ended faster
    than the export thread is sure to run: otel-agents' default queue (8,192) holds them all."""
    from autogen_core import SingleThreadedAgentRuntime, TypeSubscription

    for name in ("OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"):
        monkeypatch.delenv(name, raising=False)
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, store=False)
    try:
        runtime = SingleThreadedAgentRuntime()
        for n in range(5):
            await Relay.register(runtime, f"relay{n}", Relay)
            await runtime.add_subscription(TypeSubscription("pond", f"relay{n}"))
        runtime.start()
        for _ in range(2):
            await runtime.publish_message(Ripple(1), TopicId("pond", "default"))
        await runtime.stop_when_idle()
        assert telemetry.force_flush()
        processed = [s for s in exporter.get_finished_spans() if s.name.startswith("autogen process relay")]
        assert telemetry.dropped_spans == 0
        assert len(processed) == 2 * (5 + 20 + 80 + 320 + 1280) > 2048, len(processed)
    finally:
        telemetry.shutdown()


async def test_a_span_started_while_a_publish_is_delivered_goes_under_its_root(capture: Capture) -> None:
    """AutoGen builds a subscriber by its factory inside the delivery: what the factory records is
    in the message's trace."""
    from autogen_core import SingleThreadedAgentRuntime, TypeSubscription
    from opentelemetry import trace

    def build() -> Listener:
        with trace.get_tracer("app").start_as_current_span("build listener"):
            return Listener(replay(text("noted")))

    runtime = SingleThreadedAgentRuntime()
    await Listener.register(runtime, "listener", build)
    await runtime.add_subscription(TypeSubscription("notes", "listener"))
    runtime.start()
    await runtime.publish_message(Note("to the listener"), TopicId("notes", "default"))
    await runtime.stop_when_idle()
    tree = one_trace(capture.spans())
    built = tree.one("build listener")
    assert built.parent is not None and built.parent.span_id == tree.root.context.span_id

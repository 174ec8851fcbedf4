"""Every AutoGen convention otel-agents relies on (otel_agents/_internal/autogen/conventions.py),
checked against the installed AutoGen: a release that changes one fails here, not in users' traces."""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import HandoffMessage, TextMessage
from autogen_core import CancellationToken, SingleThreadedAgentRuntime
from autogen_core.models import RequestUsage
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.run.stop import stop_kind_of
from tests.support.teams import replay, text, writers_room

pytestmark = [pytest.mark.lowest_versions, pytest.mark.every_autogen, pytest.mark.every_python]

CHECKS: dict[str, Callable[..., Any]] = {}


def pins(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a test as the one that pins these conventions."""

    def register(test: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            CHECKS[name] = test
        return test

    return register


async def builtin_spans() -> tuple[list[str], list[ReadableSpan]]:
    """A run with AutoGen's own tracing on a plain SDK provider: tracer names asked for, spans made."""
    exporter = InMemorySpanExporter()

    names: list[str] = []

    class Recording(TracerProvider):
        def get_tracer(self, name: str, *args: Any, **kwargs: Any) -> Any:
            names.append(name)
            return super().get_tracer(name, *args, **kwargs)

    provider = Recording()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = SingleThreadedAgentRuntime(tracer_provider=provider)
    runtime.start()
    await writers_room(max_messages=3, runtime=runtime).run(task="go")
    await runtime.stop_when_idle()
    return names, list(exporter.get_finished_spans())


@pins(
    "RUNTIME_TRACER_PREFIX",
    "RUNTIME_SPAN_NAME",
    "RUNTIME_OPERATIONS_DROPPED_WHEN_NESTED",
    "RUNTIME_OPERATION_ACK",
    "RUNTIME_SPAN_UUID",
    "RUNTIME_SPAN_DESTINATION_KEY",
    "RUNTIME_CONTENT_ATTRIBUTES",
)
async def test_the_runtimes_own_spans() -> None:
    names, spans = await builtin_spans()
    assert any(n.startswith(ag.RUNTIME_TRACER_PREFIX) for n in names)
    runtime_spans = [s for s in spans if s.instrumentation_scope and s.instrumentation_scope.name in names]
    assert runtime_spans
    operations = set()
    for span in runtime_spans:
        match = ag.RUNTIME_SPAN_NAME.match(span.name)
        assert match, span.name
        operations.add(match.group(1))
    assert {"send", "publish", "process"} <= operations
    assert ag.RUNTIME_OPERATIONS_DROPPED_WHEN_NESTED <= operations, "names AutoGen really uses"
    assert ag.RUNTIME_OPERATION_ACK in operations
    with_uuid = [s.name for s in runtime_spans if ag.RUNTIME_SPAN_UUID.search(s.name)]
    assert with_uuid, "team-scoped destinations carry a UUID"
    assert any(ag.RUNTIME_SPAN_DESTINATION_KEY.search(s.name) for s in runtime_spans)
    process = [s for s in runtime_spans if s.name.startswith("autogen process ")]
    assert all(ag.RUNTIME_CONTENT_ATTRIBUTES <= set(s.attributes or {}) for s in process)


@pins(
    "RUNTIME_OPERATION_CREATE",
    "RUNTIME_OPERATION_PUBLISH",
    "RUNTIME_TOPIC_DESTINATION_SUFFIX",
    "SINGLE_THREADED_RUNTIME_TRACER",
)
async def test_a_publish_on_the_single_threaded_runtime_is_delivered_inside_its_publish_block() -> None:
    """`create ...-T` at `publish_message`, then, in the runtime's loop, `publish ...-T` around the
    `process` span of every recipient (which `tracing.publish_roots` starts the root in)."""
    names, spans = await builtin_spans()
    assert ag.SINGLE_THREADED_RUNTIME_TRACER in names
    mine = [
        s
        for s in spans
        if s.instrumentation_scope and s.instrumentation_scope.name == ag.SINGLE_THREADED_RUNTIME_TRACER
    ]
    creates = [s for s in mine if s.name.startswith(f"autogen {ag.RUNTIME_OPERATION_CREATE} ")]
    assert any(s.name.endswith(ag.RUNTIME_TOPIC_DESTINATION_SUFFIX) for s in creates), [s.name for s in creates]
    publishes = [s for s in mine if s.name.startswith(f"autogen {ag.RUNTIME_OPERATION_PUBLISH} ")]
    assert publishes and all(s.name.endswith(ag.RUNTIME_TOPIC_DESTINATION_SUFFIX) for s in publishes)
    published_by = {p.links[0].context.span_id: p for p in publishes if p.links}  # its create span
    delivered = [
        (published_by[s.links[0].context.span_id], s)
        for s in mine
        if s.name.startswith("autogen process ") and s.links and s.links[0].context.span_id in published_by
    ]
    assert delivered, "published messages reach their recipients through a publish block"
    for publish, process in delivered:
        assert publish.start_time <= process.start_time and process.end_time <= publish.end_time  # type: ignore[operator]


@pins(
    "OPERATION_INVOKE_AGENT",
    "OPERATION_CREATE_AGENT",
    "OPERATION_EXECUTE_TOOL",
    "EXECUTE_TOOL_SPAN_PREFIX",
    "GENAI_TRACER_MODULE",
)
def test_agentchats_genai_spans() -> None:
    genai = importlib.import_module(ag.GENAI_TRACER_MODULE)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with genai.trace_invoke_agent_span("writer", tracer=tracer), genai.trace_tool_span("search", tracer=tracer):
        pass
    with genai.trace_create_agent_span("writer", tracer=tracer):
        pass
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    assert by_name["invoke_agent writer"].attributes["gen_ai.operation.name"] == ag.OPERATION_INVOKE_AGENT
    assert by_name["execute_tool search"].attributes["gen_ai.operation.name"] == ag.OPERATION_EXECUTE_TOOL
    assert by_name["create_agent writer"].attributes["gen_ai.operation.name"] == ag.OPERATION_CREATE_AGENT
    assert f"{ag.EXECUTE_TOOL_SPAN_PREFIX} search" in by_name
    assert "trace.get_tracer(" in inspect.getsource(genai), "without a tracer given: the global provider's"


@pins("TELEMETRY_LINKS_MODULE", "TELEMETRY_LINKS_FUNCTION")
def test_the_envelope_links_function() -> None:
    module = importlib.import_module(ag.TELEMETRY_LINKS_MODULE)
    assert callable(getattr(module, ag.TELEMETRY_LINKS_FUNCTION))
    assert f"{ag.TELEMETRY_LINKS_FUNCTION}(parent)" in inspect.getsource(module), "looked up at each span"


@pins("RUNTIME_TRACING_MODULE", "RUNTIME_DEFAULT_PROVIDER", "GENAI_TRACE_MODULE_NAME")
def test_where_autogen_takes_the_global_provider() -> None:
    from opentelemetry import trace

    tracing = importlib.import_module(ag.RUNTIME_TRACING_MODULE)
    genai = importlib.import_module(ag.GENAI_TRACER_MODULE)
    helper_source = inspect.getsource(tracing.TraceHelper.__init__)
    assert f"tracer_provider or {ag.RUNTIME_DEFAULT_PROVIDER}()" in helper_source
    assert f"import NoOpTracerProvider, Span, SpanKind, TracerProvider, {ag.RUNTIME_DEFAULT_PROVIDER}" in (
        inspect.getsource(tracing)
    ), "a name of the module, looked up when a runtime is built"
    assert inspect.getsource(genai).count(f"{ag.GENAI_TRACE_MODULE_NAME}.get_tracer(") == 3  # tool, create, invoke
    assert "from opentelemetry import trace" in inspect.getsource(genai)
    # what the hooks replace is OpenTelemetry's own until otel-agents installs them
    assert getattr(tracing, ag.RUNTIME_DEFAULT_PROVIDER).__name__ == trace.get_tracer_provider.__name__
    assert getattr(genai, ag.GENAI_TRACE_MODULE_NAME).__name__ == trace.__name__


@pins("RUNTIME_TRACING_OFF")
def test_autogens_own_switch_turns_a_runtimes_tracing_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import NoOpTracerProvider

    tracing = importlib.import_module(ag.RUNTIME_TRACING_MODULE)
    from autogen_core._telemetry._tracing_config import MessageRuntimeTracingConfig

    name, value = ag.RUNTIME_TRACING_OFF
    monkeypatch.setenv(name, value)
    helper = tracing.TraceHelper(TracerProvider(), MessageRuntimeTracingConfig("SingleThreadedAgentRuntime"))
    assert isinstance(helper.tracer_provider, NoOpTracerProvider), "even with a provider given"
    monkeypatch.delenv(name)
    helper = tracing.TraceHelper(TracerProvider(), MessageRuntimeTracingConfig("SingleThreadedAgentRuntime"))
    assert not isinstance(helper.tracer_provider, NoOpTracerProvider)


@pins("TEAM_CLASS", "AGENT_CLASS", "INSTRUMENTED_PACKAGES")
def test_where_runs_start() -> None:
    from importlib.metadata import version

    from packaging.requirements import Requirement

    team = getattr(importlib.import_module(ag.TEAM_CLASS[0]), ag.TEAM_CLASS[1])
    agent = getattr(importlib.import_module(ag.AGENT_CLASS[0]), ag.AGENT_CLASS[1])
    assert "self.run_stream(" in inspect.getsource(team.run), "a team's run goes through run_stream"
    assert "self.run_stream(" not in inspect.getsource(agent.run), "an agent's run does not"
    for cls in (team, agent):
        assert inspect.isasyncgenfunction(inspect.unwrap(cls.run_stream))
    from autogen_agentchat.teams import GraphFlow, MagenticOneGroupChat, RoundRobinGroupChat, SelectorGroupChat, Swarm

    for subclass in (RoundRobinGroupChat, SelectorGroupChat, Swarm, MagenticOneGroupChat, GraphFlow):
        assert "run_stream" not in vars(subclass) and "run" not in vars(subclass), subclass
    (requirement,) = ag.INSTRUMENTED_PACKAGES
    parsed = Requirement(requirement)
    assert parsed.specifier.contains(version(parsed.name)), "the installed AutoGen is one we support"


@pins("SAVED_STATE_MODELS")
async def test_a_saved_state_with_our_key_loads_without_otel_agents() -> None:
    import autogen_agentchat.state as states

    from otel_agents._internal.run.attribution import STATE_KEY

    ours = {STATE_KEY: {"conversation_id": "c-1", "last_run": {"trace_id": "1" * 32, "span_id": "2" * 16}}}
    for name in ag.SAVED_STATE_MODELS:
        model = getattr(states, name)
        assert STATE_KEY not in model.model_validate({**model().model_dump(), **ours}).model_dump()
    team = writers_room(max_messages=3)  # AutoGen as it is here: no otel-agents patch in this test
    await team.run(task="go")
    state = {**(await team.save_state()), **ours}
    other = writers_room(max_messages=3)
    await other.load_state(state)
    assert (await other.save_state())["agent_states"].keys() == state["agent_states"].keys()


@pins("GRPC_RUNTIME_MODULE", "GRPC_SEND_MESSAGE", "GRPC_PUBLISH_SEND_TYPE", "GRPC_EVENT_ATTRIBUTES")
def test_the_grpc_runtimes_send_message() -> None:
    grpc = pytest.importorskip(ag.GRPC_RUNTIME_MODULE)
    from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

    method = grpc.GrpcWorkerAgentRuntime.__dict__[ag.GRPC_SEND_MESSAGE]
    assert list(inspect.signature(method).parameters) == [
        "self",
        "runtime_message",
        "send_type",
        "recipient",
        "telemetry_metadata",
    ]
    send_types = typing.get_args(typing.get_type_hints(method)["send_type"])
    assert ag.GRPC_PUBLISH_SEND_TYPE in send_types, send_types
    # a published event's CloudEvent attributes: where we write the trace context, where the
    # receiving worker reads its telemetry metadata from
    message = agent_worker_pb2.Message(cloudEvent=cloudevent_pb2.CloudEvent(id="1"))
    event, attributes, value = ag.GRPC_EVENT_ATTRIBUTES
    setattr(getattr(getattr(message, event), attributes)["traceparent"], value, "00-x")
    assert message.cloudEvent.attributes["traceparent"].ce_string == "00-x"
    assert "parent=stringify_attributes(event.attributes)" in inspect.getsource(grpc.GrpcWorkerAgentRuntime)


@pins("TRACE_CONTEXT_KEYS")
def test_the_trace_context_keys() -> None:
    import dataclasses

    from autogen_core._telemetry import EnvelopeMetadata

    get_telemetry_links = getattr(importlib.import_module(ag.TELEMETRY_LINKS_MODULE), ag.TELEMETRY_LINKS_FUNCTION)

    assert set(ag.TRACE_CONTEXT_KEYS) <= {f.name for f in dataclasses.fields(EnvelopeMetadata)}
    traceparent = f"00-{'1' * 32}-{'2' * 16}-01"
    for metadata in (EnvelopeMetadata(traceparent=traceparent), dict([(ag.TRACE_CONTEXT_KEYS[0], traceparent)])):
        (link,) = get_telemetry_links(metadata) or ()
        assert link.context.span_id == int("2" * 16, 16), metadata


@pins(
    "RUN_STREAM_METHOD",
    "AGENT_RUN_METHOD",
    "STATE_METHODS",
    "LOAD_STATE_ARGUMENT",
    "TEAM_RESET_METHOD",
    "AGENT_RESET_METHOD",
)
def test_the_team_and_agent_methods_wrapped() -> None:
    team = getattr(importlib.import_module(ag.TEAM_CLASS[0]), ag.TEAM_CLASS[1])
    agent = getattr(importlib.import_module(ag.AGENT_CLASS[0]), ag.AGENT_CLASS[1])
    for cls in (team, agent):
        assert inspect.isasyncgenfunction(inspect.unwrap(getattr(cls, ag.RUN_STREAM_METHOD)))
        for name in ag.STATE_METHODS:
            assert inspect.iscoroutinefunction(inspect.unwrap(getattr(cls, name))), (cls, name)
        load_state = inspect.unwrap(getattr(cls, ag.STATE_METHODS[1]))
        assert list(inspect.signature(load_state).parameters) == ["self", ag.LOAD_STATE_ARGUMENT]
    assert inspect.iscoroutinefunction(inspect.unwrap(getattr(agent, ag.AGENT_RUN_METHOD)))
    assert inspect.iscoroutinefunction(inspect.unwrap(getattr(team, ag.TEAM_RESET_METHOD)))
    assert inspect.iscoroutinefunction(inspect.unwrap(getattr(agent, ag.AGENT_RESET_METHOD)))
    # subclasses define their own: they are wrapped class by class
    assert {*ag.STATE_METHODS, ag.AGENT_RESET_METHOD} <= set(vars(AssistantAgent))


@pins("AGENT_MESSAGE_METHODS", "RESPONSE_MESSAGE")
async def test_an_agent_answers_messages_through_these_methods() -> None:
    from autogen_agentchat.base import Response

    agent = getattr(importlib.import_module(ag.AGENT_CLASS[0]), ag.AGENT_CLASS[1])
    on_messages, on_messages_stream = ag.AGENT_MESSAGE_METHODS
    assert inspect.iscoroutinefunction(inspect.unwrap(getattr(agent, on_messages)))
    assert inspect.isasyncgenfunction(inspect.unwrap(getattr(agent, on_messages_stream)))
    assert set(ag.AGENT_MESSAGE_METHODS) <= set(vars(AssistantAgent))
    solo = AssistantAgent("solo", model_client=replay(text("hi"), text("hi")))
    asked = [TextMessage(content="go", source="user")]
    response = await getattr(solo, on_messages)(asked, CancellationToken())
    assert isinstance(response, Response) and getattr(response, ag.RESPONSE_MESSAGE).to_text() == "hi"
    await solo.on_reset(CancellationToken())
    items = [item async for item in getattr(solo, on_messages_stream)(asked, CancellationToken())]
    assert isinstance(items[-1], Response), "the stream ends with the Response"


@pins("TOOL_SAVE_STATE_METHOD")
async def test_a_tool_saves_the_state_of_the_agent_inside_it() -> None:
    from autogen_agentchat.tools import AgentTool
    from autogen_core.tools import BaseTool

    assert inspect.iscoroutinefunction(inspect.unwrap(getattr(BaseTool, ag.TOOL_SAVE_STATE_METHOD)))
    tool = AgentTool(AssistantAgent("solo", model_client=replay(text("hi"))))
    assert ag.TOOL_SAVE_STATE_METHOD in vars(type(tool).__mro__[1]) or ag.TOOL_SAVE_STATE_METHOD in vars(type(tool))
    state = await getattr(tool, ag.TOOL_SAVE_STATE_METHOD)()
    assert isinstance(state, Mapping) and state, "the agent's state, inside the tool's"


@pins("MODEL_CLIENT_METHODS", "CREATE_ARGUMENTS", "LLM_EVENT_CLASSES", "TOOL_RUN_METHOD", "TOOL_RUN_ARGUMENTS")
def test_the_model_call_and_tool_methods_wrapped() -> None:
    import autogen_core.logging as events
    from autogen_core.models import ChatCompletionClient
    from autogen_core.tools import BaseTool

    create, create_stream = (getattr(ChatCompletionClient, name) for name in ag.MODEL_CLIENT_METHODS)
    for method in (create, create_stream):
        parameters = list(inspect.signature(method).parameters)
        assert parameters[1] == ag.CREATE_ARGUMENTS[0], "the messages: first, positional"
        assert set(ag.CREATE_ARGUMENTS) <= set(parameters)
    assert inspect.iscoroutinefunction(inspect.unwrap(create))
    for name in ag.LLM_EVENT_CLASSES:
        assert "__init__" in vars(getattr(events, name)), name
    run = getattr(BaseTool, ag.TOOL_RUN_METHOD)
    assert list(inspect.signature(run).parameters) == ["self", ag.TOOL_RUN_ARGUMENTS, "cancellation_token"]
    assert inspect.iscoroutinefunction(inspect.unwrap(run))


@pins("TASK_MESSAGE_SOURCE")
async def test_a_run_streams_its_task_first_from_this_source() -> None:
    result = await writers_room(max_messages=2).run(task="go")
    assert result.messages[0].source == ag.TASK_MESSAGE_SOURCE
    assert all(m.source != ag.TASK_MESSAGE_SOURCE for m in result.messages[1:])


@pins("REPLAY_TOKEN_COUNT_WARNING")
def test_the_replay_clients_token_count_warning() -> None:
    from autogen_core import EVENT_LOGGER_NAME
    from autogen_ext.models.replay import ReplayChatCompletionClient

    assert f'logger.warning("{ag.REPLAY_TOKEN_COUNT_WARNING}")' in inspect.getsource(ReplayChatCompletionClient)
    module = inspect.getmodule(ReplayChatCompletionClient)
    assert module is not None and module.logger.name == EVENT_LOGGER_NAME


@pins("STOP_REASONS", "StopKindOfReason")
async def test_every_stop_message_maps_to_its_kind() -> None:
    from autogen_agentchat.conditions import (
        ExternalTermination,
        HandoffTermination,
        MaxMessageTermination,
        TextMentionTermination,
        TimeoutTermination,
        TokenUsageTermination,
    )

    said = TextMessage(
        source="critic", content="APPROVE", models_usage=RequestUsage(prompt_tokens=5, completion_tokens=5)
    )
    external = ExternalTermination()
    external.set()
    timeout = TimeoutTermination(0.0)
    cases = [
        (MaxMessageTermination(1), [said], "max_messages"),
        (TextMentionTermination("APPROVE"), [said], "text_mention"),
        (HandoffTermination("user"), [HandoffMessage(source="critic", target="user", content="over")], "handoff"),
        (timeout, [said], "timeout"),
        (TokenUsageTermination(max_total_token=1), [said], "token_budget"),
        (external, [said], "external"),
    ]
    for condition, messages, kind in cases:
        stop = await condition(messages)
        assert stop is not None, type(condition).__name__
        assert stop_kind_of(stop.content) == kind, stop.content
    result = await writers_room(max_messages=9, max_turns=2).run(task="go")
    assert stop_kind_of(result.stop_reason) == "max_messages", result.stop_reason


@pins(
    "CREATE_RESULT_CLASS",
    "FUNCTION_CALL_CLASS",
    "FUNCTION_EXECUTION_RESULT_CLASS",
    "LLM_MESSAGE_ROLES",
    "STREAM_CHUNK_CLASS",
    "TASK_RESULT_CLASS",
    "TOOL_CALL_REQUEST_CLASS",
    "TOOL_CALL_SUMMARY_CLASS",
)
def test_classes_read_by_name() -> None:
    import autogen_agentchat.base as base
    import autogen_agentchat.messages as messages
    import autogen_core
    import autogen_core.models as models

    assert models.CreateResult.__name__ == ag.CREATE_RESULT_CLASS
    assert autogen_core.FunctionCall.__name__ == ag.FUNCTION_CALL_CLASS
    assert models.FunctionExecutionResult.__name__ == ag.FUNCTION_EXECUTION_RESULT_CLASS
    union = typing.get_args(models.LLMMessage)[0]  # Annotated[Union[...], Field(...)]
    assert {t.__name__ for t in typing.get_args(union)} == set(ag.LLM_MESSAGE_ROLES)
    assert messages.ModelClientStreamingChunkEvent.__name__ == ag.STREAM_CHUNK_CLASS
    assert base.TaskResult.__name__ == ag.TASK_RESULT_CLASS
    assert messages.ToolCallRequestEvent.__name__ == ag.TOOL_CALL_REQUEST_CLASS
    assert messages.ToolCallSummaryMessage.__name__ == ag.TOOL_CALL_SUMMARY_CLASS
    assert issubclass(messages.ToolCallSummaryMessage, messages.BaseChatMessage)


@pins("CHAT_MESSAGE_CLASSES", "AGENT_EVENT_CLASSES", "AGENT_EVENT_SUFFIX")
def test_chat_messages_and_events_are_told_apart_by_their_class_names() -> None:
    import autogen_agentchat.messages as messages
    from pydantic import BaseModel

    defined = [c for _, c in inspect.getmembers(messages, inspect.isclass) if c.__module__ == messages.__name__]
    concrete = [c for c in defined if not inspect.isabstract(c)]
    chat = {c.__name__ for c in concrete if issubclass(c, messages.BaseChatMessage)}
    events = {c.__name__ for c in concrete if issubclass(c, messages.BaseAgentEvent)}
    assert chat - {"BaseTextChatMessage"} == ag.CHAT_MESSAGE_CLASSES  # a base class, never streamed as is
    assert events == ag.AGENT_EVENT_CLASSES
    assert all(name.endswith(ag.AGENT_EVENT_SUFFIX) for name in events)
    assert not any(name.endswith(ag.AGENT_EVENT_SUFFIX) for name in chat)

    class Verdict(BaseModel):
        approved: bool

    structured = messages.StructuredMessage[Verdict](content=Verdict(approved=True), source="critic")
    name = type(structured).__name__  # what otel_agents.message.type says: the model in brackets
    assert name.endswith("Verdict]") and name.split("[", 1)[0] in ag.CHAT_MESSAGE_CLASSES


@pins("MODEL_CLIENT_PROVIDERS")
def test_model_client_classes() -> None:
    from autogen_core.models import ChatCompletionClient

    found = {}
    for module in (
        "autogen_ext.models.openai",
        "autogen_ext.models.replay",
        "autogen_ext.models.azure",
        "autogen_ext.models.anthropic",
        "autogen_ext.models.ollama",
        "autogen_ext.models.llama_cpp",
    ):
        try:
            imported = importlib.import_module(module)
        except ImportError:  # an extra this environment does not have
            continue
        for name in ag.MODEL_CLIENT_PROVIDERS:
            cls = getattr(imported, name, None)
            if cls is not None:
                assert issubclass(cls, ChatCompletionClient), name
                found[name] = cls
    for name in ("OpenAIChatCompletionClient", "AzureOpenAIChatCompletionClient", "ReplayChatCompletionClient"):
        assert name in found, f"{name} is where it was"
    assert "BaseOpenAIChatCompletionClient" in {c.__name__ for c in found["OpenAIChatCompletionClient"].__mro__}


@pins("OPENAI_CLIENT_BASE", "OPENAI_STREAM_USAGE_ARGUMENT")
def test_the_openai_clients_take_a_flag_asking_for_usage_in_a_stream() -> None:
    from autogen_ext.models.openai import AzureOpenAIChatCompletionClient, OpenAIChatCompletionClient

    for cls in (OpenAIChatCompletionClient, AzureOpenAIChatCompletionClient):
        assert ag.OPENAI_CLIENT_BASE in {c.__name__ for c in cls.__mro__}, cls
        parameters = inspect.signature(inspect.unwrap(cls.create_stream)).parameters
        assert ag.OPENAI_STREAM_USAGE_ARGUMENT in parameters, cls


@pins("CLIENT_CREATE_ARGS", "CLIENT_RAW_CONFIG")
def test_the_openai_clients_configuration() -> None:
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(model="gpt-4o-mini", api_key="k", base_url="http://127.0.0.1:9")
    assert getattr(client, ag.CLIENT_CREATE_ARGS)["model"] == "gpt-4o-mini"
    assert getattr(client, ag.CLIENT_RAW_CONFIG)["model"] == "gpt-4o-mini"


@pins("CLIENT_SDK", "SDK_BASE_URL")
def test_the_openai_clients_know_the_url_they_call() -> None:
    from autogen_ext.models.openai import AzureOpenAIChatCompletionClient, OpenAIChatCompletionClient

    local = OpenAIChatCompletionClient(model="gpt-4o-mini", api_key="k", base_url="http://127.0.0.1:9/v1")
    assert str(getattr(getattr(local, ag.CLIENT_SDK), ag.SDK_BASE_URL)).startswith("http://127.0.0.1:9/v1")
    openai = OpenAIChatCompletionClient(model="gpt-4o-mini", api_key="k")
    assert str(getattr(getattr(openai, ag.CLIENT_SDK), ag.SDK_BASE_URL)).startswith("https://api.openai.com/")
    gemini = OpenAIChatCompletionClient(model="gemini-2.0-flash", api_key="k")
    assert "generativelanguage.googleapis.com" in str(getattr(getattr(gemini, ag.CLIENT_SDK), ag.SDK_BASE_URL))
    azure = AzureOpenAIChatCompletionClient(
        model="gpt-4o",
        azure_endpoint="https://x.openai.azure.com",
        azure_deployment="d",
        api_version="2024-06-01",
        api_key="k",
    )
    assert ".openai.azure.com" in str(getattr(getattr(azure, ag.CLIENT_SDK), ag.SDK_BASE_URL))


@pins("LLM_EVENT_KWARGS")
def test_llm_events_keep_their_fields() -> None:
    from autogen_core.logging import LLMCallEvent, LLMStreamEndEvent

    call = LLMCallEvent(messages=[], response={"model": "m"}, prompt_tokens=1, completion_tokens=2)
    end = LLMStreamEndEvent(response={"model": "m"}, prompt_tokens=1, completion_tokens=2)
    assert getattr(call, ag.LLM_EVENT_KWARGS)["response"] == {"model": "m"}
    assert getattr(end, ag.LLM_EVENT_KWARGS)["response"] == {"model": "m"}


@pins("STREAM_FRAME_SELF")
async def test_an_unstarted_run_stream_knows_its_team() -> None:
    team = writers_room()
    stream = team.run_stream(task="go")
    assert stream.ag_frame.f_locals[ag.STREAM_FRAME_SELF] is team  # type: ignore[attr-defined]
    await stream.aclose()
    agent = AssistantAgent("solo", model_client=replay(text("hi")))
    single = agent.run_stream(task="go", cancellation_token=CancellationToken())
    assert single.ag_frame.f_locals[ag.STREAM_FRAME_SELF] is agent  # type: ignore[attr-defined]
    await single.aclose()


def test_every_convention_is_pinned() -> None:
    listed = {name for name in vars(ag) if name[0].isupper() and not name.startswith("Final")}
    listed -= {"Final", "Literal", "Mapping"}
    assert listed == set(CHECKS), f"not pinned: {sorted(listed - set(CHECKS))}; gone: {sorted(set(CHECKS) - listed)}"

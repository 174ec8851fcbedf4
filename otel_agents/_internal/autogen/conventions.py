"""Every AutoGen convention otel-agents relies on, in one place.

AutoGen (autogen-core, autogen-agentchat, autogen-ext 0.7.x) does not promise these: they are
names, patterns and private members read off its source. Each is pinned by a test against the
installed AutoGen (tests/test_autogen_conventions.py), so that an AutoGen release that changes one
fails CI rather than quietly breaking traces.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from typing import Final, Literal

# --- autogen_core._telemetry: the runtime's spans ------------------------------------------------

RUNTIME_TRACER_PREFIX: Final = "autogen "
"""`TraceHelper` names its tracer f"autogen {runtime name}" (`autogen core`, `autogen grpc`...)."""
RUNTIME_SPAN_NAME: Final = re.compile(r"^autogen (create|send|publish|process|ack)(?: (.*))?$")
"""`autogen {operation} {destination}`; the destination holds per-team UUIDs."""
RUNTIME_OPERATION_ACK: Final = "ack"
RUNTIME_OPERATION_CREATE: Final = "create"
RUNTIME_OPERATION_PUBLISH: Final = "publish"
RUNTIME_OPERATIONS_DROPPED_WHEN_NESTED: Final = frozenset(
    {RUNTIME_OPERATION_CREATE, RUNTIME_OPERATION_ACK, RUNTIME_OPERATION_PUBLISH}
)
"""Runtime spans that say nothing a reader needs, not recorded even with runtime spans `nested`:
creating a message to send or publish (`create`, on the sender's side: `send_message` and
`publish_message` inject the trace context into the envelope inside it), acknowledging a message
(`ack`), and putting a message on a topic (`publish`: each `process` span it causes names its
sender and recipient)."""
RUNTIME_SPAN_UUID: Final = re.compile(r"_?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RUNTIME_SPAN_DESTINATION_KEY: Final = re.compile(r"\.\([^)]*\)-[AT]$")
"""The agent-key suffix of a destination: `.(key)-A` (an agent) or `-T` (a topic)."""
RUNTIME_TOPIC_DESTINATION_SUFFIX: Final = "-T"
"""How a runtime span's destination ends when it is a topic (`{type}.({source})-T`): a `create` span
with it is a `publish_message`, one with `-A` a `send_message`."""
SINGLE_THREADED_RUNTIME_TRACER: Final = "autogen SingleThreadedAgentRuntime"
"""The tracer name of `SingleThreadedAgentRuntime`'s spans. That runtime delivers a published message
in-process: the `process` spans a publish causes all start inside its own `publish` block (the gRPC
worker's tracer, `autogen Worker Runtime`, hands the message to a host that delivers it elsewhere)."""
RUNTIME_CONTENT_ATTRIBUTES: Final = frozenset({"message"})
"""The runtime's `process` spans carry the whole message JSON (user content) in `message`."""
TELEMETRY_LINKS_MODULE: Final = "autogen_core._telemetry._tracing"
TELEMETRY_LINKS_FUNCTION: Final = "get_telemetry_links"
"""Private: parses an envelope's `traceparent` into the links of every runtime span."""
GENAI_TRACER_MODULE: Final = "autogen_core._telemetry._genai"
"""Private: AgentChat's `create_agent`/`invoke_agent`/`execute_tool` spans come from here, through
the *global* tracer provider."""
GENAI_TRACE_MODULE_NAME: Final = "trace"
"""`_genai` calls `trace.get_tracer("autogen-core")` on its module-level `trace` (`opentelemetry.trace`)
when no tracer is given: the placement hook puts a view of that module there whose `get_tracer`
places spans in their run."""
RUNTIME_TRACING_OFF: Final = ("AUTOGEN_DISABLE_RUNTIME_TRACING", "true")
"""AutoGen's own switch: `TraceHelper` (every runtime's tracer) records nothing when this variable
says `true` as the runtime is made. Set where otel-agents could not start, so that AutoGen's
runtime spans, which carry each message's JSON, do not go out through the global provider."""
RUNTIME_TRACING_MODULE: Final = "autogen_core._telemetry._tracing"
RUNTIME_DEFAULT_PROVIDER: Final = "get_tracer_provider"
"""`TraceHelper.__init__` (every runtime, SingleThreaded and gRPC) takes `tracer_provider or
get_tracer_provider()`, a name imported into `_tracing`: the placement hook answers it with a
placing view of the global provider, so a runtime built without a provider places its spans."""

# --- autogen_agentchat: where runs start ----------------------------------------------------------

INSTRUMENTED_PACKAGES: Final = ("autogen-agentchat >= 0.7.0, < 0.8",)
"""The AutoGen versions `AutoGenInstrumentor` supports (its `instrumentation_dependencies()`)."""
TEAM_CLASS: Final = ("autogen_agentchat.teams", "BaseGroupChat")
AGENT_CLASS: Final = ("autogen_agentchat.agents", "BaseChatAgent")
"""Public classes whose `run_stream` (teams: `run` goes through it) and `run` (agents: it does
not) start a run; Selector, Swarm, RoundRobin, MagenticOne and GraphFlow teams inherit them."""

RUN_STREAM_METHOD: Final = "run_stream"
"""A team's and an agent's stream of a run (an async generator); a team's `run` goes through it."""
AGENT_RUN_METHOD: Final = "run"
"""An agent's `run`, which does not go through `run_stream`."""
AGENT_MESSAGE_METHODS: Final = ("on_messages", "on_messages_stream")
"""The agent protocol a service (and a team's runtime) calls: `on_messages(messages, token) -> Response`
and `on_messages_stream(messages, token)`, an async generator of events ending with the `Response`.
Wrapped on every `BaseChatAgent` subclass defining them; `AssistantAgent.on_messages` calls
`on_messages_stream`, `BaseChatAgent.run` calls `on_messages` and `run_stream` `on_messages_stream`."""
RESPONSE_MESSAGE: Final = "chat_message"
"""A `Response`'s message: what a team's `ChatAgentContainer` publishes to the run's stream (the same
object, not a copy; the other items of `on_messages_stream` go as they are yielded)."""
STATE_METHODS: Final = ("save_state", "load_state")
"""A team's and an agent's state, as a service saves it after a turn and loads it for the next."""
LOAD_STATE_ARGUMENT: Final = "state"
"""`load_state(state)`'s one parameter (positional, or by this name)."""
TEAM_RESET_METHOD: Final = "reset"
AGENT_RESET_METHOD: Final = "on_reset"
"""What ends a team's (an agent's) conversation."""
TASK_MESSAGE_SOURCE: Final = "user"
"""The `source` of the task message a run streams first (the loop rules do not count it as a
repetition)."""

SAVED_STATE_MODELS: Final = ("TeamState", "AssistantAgentState")
"""The pydantic models (`autogen_agentchat.state`) a team's and an assistant's `load_state` validate a
saved state with: they ignore keys they do not know, so the conversation we add to a saved state
(`run.attribution.STATE_KEY`) loads in any AutoGen, with or without otel-agents."""

# --- autogen_core: model calls and tools --------------------------------------------------------

MODEL_CLIENT_METHODS: Final = ("create", "create_stream")
"""`ChatCompletionClient`'s model calls, wrapped on every subclass that defines them."""
CREATE_ARGUMENTS: Final = ("messages", "extra_create_args")
"""`create(messages, *, ..., extra_create_args=...)`: the messages sent, and per-call arguments
that may name the model."""
LLM_EVENT_CLASSES: Final = ("LLMCallEvent", "LLMStreamEndEvent")
"""`autogen_core.logging` events a model client builds during a call (their `__init__` is wrapped)."""
TOOL_RUN_METHOD: Final = "run"
"""`BaseTool.run(args, cancellation_token)`: one tool call, wrapped on every subclass defining it."""
TOOL_RUN_ARGUMENTS: Final = "args"
"""`run`'s first parameter: the tool call's arguments (positional, or by this name)."""
TOOL_SAVE_STATE_METHOD: Final = "save_state_json"
"""A tool's saved state (`AgentTool`, `TeamTool`: the agent's or team's `save_state` inside)."""

# --- autogen_agentchat: GenAI spans --------------------------------------------------------------

OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_CREATE_AGENT: Final = "create_agent"
EXECUTE_TOOL_SPAN_PREFIX: Final = "execute_tool"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
"""`gen_ai.operation.name` of AutoGen's tool-call spans (`BaseTool.run_json`)."""

# --- autogen_agentchat: stop reasons -------------------------------------------------------------

StopKindOfReason = Literal[
    "loop_guard", "max_messages", "text_mention", "handoff", "timeout", "token_budget", "external"
]
STOP_REASONS: Final[tuple[tuple[re.Pattern[str], StopKindOfReason], ...]] = (
    (re.compile(r"loop guard:"), "loop_guard"),  # ours: LoopGuard's StopMessage
    (re.compile(r"Maximum number of (messages|turns) \d+ reached"), "max_messages"),
    (re.compile(r"Text '.*?' mentioned"), "text_mention"),
    (re.compile(r"Handoff to \S+ from \S+ detected"), "handoff"),
    (re.compile(r"Timeout of [\d.]+ seconds reached"), "timeout"),
    (re.compile(r"Token usage limit reached"), "token_budget"),
    (re.compile(r"External termination requested"), "external"),
)
"""The stop messages of `autogen_agentchat.conditions` and the group chat managers."""

# --- autogen_agentchat / autogen_core: classes read by name --------------------------------------

CREATE_RESULT_CLASS: Final = "CreateResult"
FUNCTION_CALL_CLASS: Final = "FunctionCall"
FUNCTION_EXECUTION_RESULT_CLASS: Final = "FunctionExecutionResult"
LLM_MESSAGE_ROLES: Final[Mapping[str, str]] = types.MappingProxyType(
    {
        "SystemMessage": "system",
        "UserMessage": "user",
        "AssistantMessage": "assistant",
        "FunctionExecutionResultMessage": "tool",
    }
)
"""`autogen_core.models` message classes and the GenAI role each stands for."""
STREAM_CHUNK_CLASS: Final = "ModelClientStreamingChunkEvent"
TASK_RESULT_CLASS: Final = "TaskResult"
TOOL_CALL_REQUEST_CLASS: Final = "ToolCallRequestEvent"
TOOL_CALL_SUMMARY_CLASS: Final = "ToolCallSummaryMessage"
"""The chat message an agent answers a tool call with (its results, as text): a repeat of it is
its tool call's repeat, counted once, as the tool call."""
CHAT_MESSAGE_CLASSES: Final = frozenset(
    {"HandoffMessage", "MultiModalMessage", "StopMessage", "StructuredMessage", "TextMessage", "ToolCallSummaryMessage"}
)
"""`autogen_agentchat.messages`' chat messages (concrete `BaseChatMessage` subclasses: what an agent
says to the team), as a message span's `otel_agents.message.type` names them; a
`StructuredMessage[Model]` is named with its model in brackets."""
AGENT_EVENT_CLASSES: Final = frozenset(
    {
        "CodeExecutionEvent",
        "CodeGenerationEvent",
        "MemoryQueryEvent",
        "ModelClientStreamingChunkEvent",
        "SelectSpeakerEvent",
        "SelectorEvent",
        "ThoughtEvent",
        "ToolCallExecutionEvent",
        "ToolCallRequestEvent",
        "UserInputRequestedEvent",
    }
)
"""`autogen_agentchat.messages`' events (concrete `BaseAgentEvent` subclasses: what happened on the
way, a tool call's request and result, a thought, a memory query)."""
AGENT_EVENT_SUFFIX: Final = "Event"
"""AutoGen names every event class `...Event` and no chat message so: an app's own message class,
outside the two sets above, is read as an event when its name ends so, else as a chat message."""

MODEL_CLIENT_PROVIDERS: Final[Mapping[str, str]] = types.MappingProxyType(
    {
        "AzureOpenAIChatCompletionClient": "azure.ai.openai",
        "AzureAIChatCompletionClient": "azure.ai.inference",
        "OpenAIChatCompletionClient": "openai",
        "BaseOpenAIChatCompletionClient": "openai",
        "AnthropicChatCompletionClient": "anthropic",
        "AnthropicBedrockChatCompletionClient": "aws.bedrock",
        "OllamaChatCompletionClient": "ollama",
        "ReplayChatCompletionClient": "autogen.replay",
        "LlamaCppChatCompletionClient": "llama_cpp",
    }
)
"""autogen-ext's model client classes, by name, and their `gen_ai.provider.name`."""

OPENAI_CLIENT_BASE: Final = "BaseOpenAIChatCompletionClient"
"""autogen-ext's OpenAI and Azure OpenAI clients' base class, by name."""
OPENAI_STREAM_USAGE_ARGUMENT: Final = "include_usage"
"""`create_stream(..., include_usage=True)`: the OpenAI clients then ask for usage in the stream's last
chunk (`stream_options.include_usage`); without it a streamed call reports `RequestUsage(0, 0)`."""

# --- private members read ------------------------------------------------------------------------

CLIENT_CREATE_ARGS: Final = "_create_args"
CLIENT_RAW_CONFIG: Final = "_raw_config"
"""The OpenAI clients' configuration (private): where the requested model is."""
CLIENT_SDK: Final = "_client"
"""The OpenAI, Azure OpenAI and Anthropic clients' SDK client (private: `openai.AsyncOpenAI`,
`openai.AsyncAzureOpenAI`, `anthropic.AsyncAnthropic`), whose base URL says which provider a call
goes to (the OpenAI client sets Gemini's, Anthropic's or Llama's for those models by itself)."""
SDK_BASE_URL: Final = "base_url"
"""The SDK client's base URL (public in the `openai` and `anthropic` SDKs), after AutoGen filled it in."""
LLM_EVENT_KWARGS: Final = "kwargs"
"""`LLMCallEvent`/`LLMStreamEndEvent` keep their fields in `.kwargs` (response, usage, agent id)."""
GRPC_RUNTIME_MODULE: Final = "autogen_ext.runtimes.grpc"
"""Where `GrpcWorkerAgentRuntime` lives (imported only when the app does: `grpc` is heavy)."""
GRPC_SEND_MESSAGE: Final = "_send_message"
"""`GrpcWorkerAgentRuntime._send_message(runtime_message, send_type, recipient, telemetry_metadata)`."""
GRPC_PUBLISH_SEND_TYPE: Final = "publish"
"""`_send_message`'s `send_type` for a published event."""
GRPC_EVENT_ATTRIBUTES: Final = ("cloudEvent", "attributes", "ce_string")
"""A published event's CloudEvent attributes (`runtime_message.cloudEvent.attributes[key].ce_string`),
which the receiving worker reads as the event's telemetry metadata."""
TRACE_CONTEXT_KEYS: Final = ("traceparent", "tracestate")
"""The trace context's keys: `EnvelopeMetadata`'s fields, and the keys of gRPC metadata and of the
CloudEvent attributes that `get_telemetry_links` reads."""
REPLAY_TOKEN_COUNT_WARNING: Final = "Token count has been done only on string content"
"""What `ReplayChatCompletionClient` logs on `autogen_core.EVENT_LOGGER_NAME` when it counts tokens
of a message that is not a string (the demo leaves it out of its output)."""
STREAM_FRAME_SELF: Final = "self"
"""An un-started `run_stream(...)` async generator knows its team as `ag_frame.f_locals["self"]`."""

"""Attribute keys and values of the otel-agents contract (DESIGN section 3).

The `gen_ai.*` keys are the OpenTelemetry GenAI semantic conventions; `otel_agents.*` keys are ours,
used only where no convention exists. Dashboards, alert rules and users' saved queries depend on
these strings: change them only together with docs/traces.md, CHANGELOG.md, `deploy/` and the tests.
"""

from typing import Final

# OpenInference (what Phoenix and other OpenInference readers show): a kind on every span, and a
# run's input and output with content capture on
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
KIND_CHAIN: Final = "CHAIN"
KIND_AGENT: Final = "AGENT"
KIND_LLM: Final = "LLM"
KIND_TOOL: Final = "TOOL"
INPUT_VALUE: Final = "input.value"
OUTPUT_VALUE: Final = "output.value"

# General semantic conventions (who a run is for)
USER_ID: Final = "user.id"
SESSION_ID: Final = "session.id"

# GenAI semantic conventions
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
ERROR_TYPE: Final = "error.type"
GEN_AI_INFERENCE_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
"""The event a `chat` span's content goes in, for the event modes of content capture."""

OPERATION_INVOKE_WORKFLOW: Final = "invoke_workflow"
OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_CREATE_AGENT: Final = "create_agent"
OPERATION_CHAT: Final = "chat"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"

# otel-agents: the run
RUN_ID: Final = "otel_agents.run.id"
STOP_REASON: Final = "otel_agents.stop_reason"
STOP_KIND: Final = "otel_agents.stop_kind"
MESSAGE_COUNT: Final = "otel_agents.message_count"
COST_USD: Final = "otel_agents.cost.usd"
MESSAGE_INPUT_TOKENS: Final = "otel_agents.message.input_tokens"
MESSAGE_OUTPUT_TOKENS: Final = "otel_agents.message.output_tokens"
"""A message's `models_usage`: not `gen_ai.usage.*`, which the `chat` spans hold (a backend summing
`gen_ai.usage.*` over a trace counts each token once)."""
USAGE_UNKNOWN_CALLS: Final = "otel_agents.usage.unknown_calls"
"""Model calls of a run whose client reported no usage (a stream without usage): absent when 0."""
RUN_TURNS: Final = "otel_agents.turns"
"""Agent turns (`invoke_agent` spans) of the run, a nested team's included."""
CONTEXT_GROWTH: Final = "otel_agents.context.growth_tokens_per_turn"
"""Least-squares slope of the input tokens of each turn's first model call, over the turns in
order; absent under 3 such turns."""
REPEATS: Final = "otel_agents.repeats"
"""Repeats in the run, each beyond the first: chat messages (equal text from the same agent) plus
tool calls (the same tool with the same arguments)."""

# GenAI semantic conventions: evaluations (a run's outcome)
GEN_AI_EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
"""User content: written only with content capture on (through the content policy)."""

# otel-agents: runs sampled in the process (OTEL_AGENTS_SAMPLE_RUNS), on a kept run's span
SAMPLE_KEPT_BECAUSE: Final = "otel_agents.sample.kept_because"
"""Why the run was kept: the first keep rule it matched (`error`, `loop`, `cancelled`,
`unknown_usage`, `cost`, `duration`, `tokens`, `rule` for a callable), else `trace` (its trace was
kept), `ratio`, `bound`, `exit`."""
SAMPLE_RATIO: Final = "otel_agents.sample.ratio"
"""The ratio of ordinary runs exported when the run was kept."""

# otel-agents: spans not delivered (a label of `otel_agents.spans.dropped`)
DROP_REASON: Final = "otel_agents.drop.reason"
DROP_EXPORT_FAILED: Final = "export_failed"
"""The exporter failed or refused the batch."""
DROP_NOT_EXPORTED: Final = "not_exported"
"""Never handed to the exporter: a full queue, or cut at shutdown or exit."""

# otel-agents: runaway loops
LOOP_DETECTED_EVENT: Final = "otel_agents.loop_detected"
LOOP_RULE: Final = "otel_agents.loop.rule"
LOOP_COUNT: Final = "otel_agents.loop.count"
LOOP_LIMIT: Final = "otel_agents.loop.limit"
LOOP_DETAIL: Final = "otel_agents.loop.detail"

# otel-agents: one streamed item
MESSAGE_INDEX: Final = "otel_agents.message.index"
MESSAGE_TYPE: Final = "otel_agents.message.type"
MESSAGE_LATENCY_MS: Final = "otel_agents.message.latency_ms"
MESSAGE_CONTENT: Final = "otel_agents.message.content"
MESSAGE_FINGERPRINT: Final = "otel_agents.message.fingerprint"
"""16 hex: a keyed BLAKE2b of the item's text (`genai/fingerprints.py`), equal for equal texts."""

# otel-agents: one tool call
TOOL_FINGERPRINT: Final = "otel_agents.tool.fingerprint"
"""16 hex: a keyed BLAKE2b of the tool's name and its arguments as canonical JSON."""

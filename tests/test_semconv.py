"""Our attribute constants agree with OpenTelemetry's semantic conventions package."""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes

from otel_agents._internal import keys as sc


def test_gen_ai_keys_match_the_semantic_conventions() -> None:
    assert sc.GEN_AI_OPERATION_NAME == gen_ai.GEN_AI_OPERATION_NAME
    assert sc.GEN_AI_AGENT_NAME == gen_ai.GEN_AI_AGENT_NAME
    assert sc.GEN_AI_USAGE_INPUT_TOKENS == gen_ai.GEN_AI_USAGE_INPUT_TOKENS
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS == gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
    assert sc.ERROR_TYPE == error_attributes.ERROR_TYPE


def test_operation_names_match_the_semantic_conventions() -> None:
    operations = gen_ai.GenAiOperationNameValues
    assert sc.OPERATION_INVOKE_WORKFLOW == operations.INVOKE_WORKFLOW.value
    assert sc.OPERATION_INVOKE_AGENT == operations.INVOKE_AGENT.value
    assert sc.OPERATION_CREATE_AGENT == operations.CREATE_AGENT.value


def test_our_own_keys_live_in_our_namespace() -> None:
    ours = [v for k, v in vars(sc).items() if k.isupper() and isinstance(v, str) and "." in v]
    assert ours
    assert all(key.startswith(("gen_ai.", "otel_agents.", "error.")) for key in ours)

"""What AutoGen's `execute_tool` spans carry of ours: the call's fingerprint, and, when content
capture is on, the tool's arguments and result.

AutoGen's `BaseTool.run_json` opens the `execute_tool` span and calls the tool's `run` inside it.
`run` is wrapped on every `BaseTool` subclass that defines it (once per class): the fingerprint
(the tool's name and its parsed arguments, `genai/fingerprints.py`) and the arguments are recorded
before the tool runs, the result after, content through the content policy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from otel_agents._internal import keys as sc
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen import wrapping
from otel_agents._internal.autogen.wrapping import on_subclass, wrap_subclasses
from otel_agents._internal.genai.content import ContentPolicy
from otel_agents._internal.genai.fingerprints import tool_fingerprint
from otel_agents._internal.tracing.globals import current
from otel_agents._internal.tracing.registry import REGISTRY

logger = logging.getLogger(__name__)


def _tool_span() -> Span | None:
    """AutoGen's `execute_tool` span, when it is the current span and recording."""
    span = trace.get_current_span()
    name = getattr(span, "name", "")
    is_tool_span = isinstance(name, str) and name.startswith(ag.EXECUTE_TOOL_SPAN_PREFIX)
    return span if is_tool_span and span.is_recording() else None


def _policy() -> ContentPolicy | None:
    telemetry = current(None)
    return None if telemetry.disabled or not telemetry.settings.content.enabled else telemetry.settings.content


def _record(span: Span, policy: ContentPolicy, key: str, value: Callable[[], str]) -> None:
    try:
        policy.record(span, {key: value()}, "gen_ai.execute_tool.details")
    except Exception:
        logger.debug("otel-agents could not record tool content", exc_info=True)


def _fingerprint(span: Span, name: str, arguments: Any) -> None:
    """The call's fingerprint on its span, and counted by its run (a repeat when made before)."""
    try:
        fingerprint = tool_fingerprint(name, arguments)
        span.set_attribute(sc.TOOL_FINGERPRINT, fingerprint)
        node = REGISTRY.lookup(span.get_span_context())
        if node is not None:
            node.run.add_said("", fingerprint)
    except Exception:
        logger.debug("otel-agents could not fingerprint a tool call", exc_info=True)


@wrapping.method_wrapper
async def _wrap_run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    span, policy = (_tool_span() if wrapping.active() else None), None
    if span is not None:
        policy = _policy()
        arguments = args[0] if args else kwargs.get(ag.TOOL_RUN_ARGUMENTS)
        dump = getattr(arguments, "model_dump", None)
        parsed = dump() if dump else arguments
        _fingerprint(span, str(getattr(instance, "name", type(instance).__name__)), parsed)
    if span is not None and policy is not None:
        _record(span, policy, sc.GEN_AI_TOOL_CALL_ARGUMENTS, lambda: policy.json(parsed))
    result = await wrapped(*args, **kwargs)
    if span is not None and policy is not None:
        as_string = getattr(instance, "return_value_as_string", str)
        _record(span, policy, sc.GEN_AI_TOOL_CALL_RESULT, lambda: policy.text(as_string(result)))
    return result


def wrapped_in_subclasses() -> tuple[tuple[type, tuple[str, ...]], ...]:
    """The class whose subclasses `install()` wraps, with the name it wraps there."""
    from autogen_core.tools import BaseTool

    return ((BaseTool, (ag.TOOL_RUN_METHOD, ag.TOOL_SAVE_STATE_METHOD)),)


def install(*, save_state: Callable[[Any], Any]) -> None:
    """Wrap `run` (and `save_state_json` with `save_state`) on every BaseTool subclass defined so
    far and, through the class-creation hook, every one defined from now on (idempotent)."""
    ((tool, _),) = wrapped_in_subclasses()
    wrappers = {ag.TOOL_RUN_METHOD: _wrap_run, ag.TOOL_SAVE_STATE_METHOD: save_state}
    wrap_subclasses(tool, wrappers)
    on_subclass(tool, wrappers)

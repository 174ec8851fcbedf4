"""Tool arguments and results on AutoGen's `execute_tool` spans, when content capture is on.

AutoGen's `BaseTool.run_json` opens the `execute_tool` span and calls the tool's `run` inside it.
`run` is wrapped on every `BaseTool` subclass that defines it (once per class): arguments are
recorded before the tool runs, the result after, both through the content policy.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Final

from opentelemetry import trace

from . import _semconv as sc

logger = logging.getLogger(__name__)

_MARK: Final = "__otel_agents_wrapped__"
_lock = threading.Lock()


def _tool_span() -> Any:
    span = trace.get_current_span()
    name = getattr(span, "name", "")
    return span if span.is_recording() and isinstance(name, str) and name.startswith("execute_tool") else None


def _policy() -> Any:
    from ._telemetry import current

    telemetry = current(None)
    return None if telemetry.disabled or not telemetry.settings.content.enabled else telemetry.settings.content


def _record(span: Any, policy: Any, key: str, value: Callable[[], str]) -> None:
    try:
        policy.record(span, {key: value()}, "gen_ai.execute_tool.details")
    except Exception:
        logger.debug("otel-agents could not record tool content", exc_info=True)


def _wrap_run(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(original)
    async def run(self: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        span, policy = _tool_span(), None
        if span is not None:
            policy = _policy()
        if policy is not None:
            dump = getattr(args, "model_dump", None)
            _record(span, policy, sc.GEN_AI_TOOL_CALL_ARGUMENTS, lambda: policy.json(dump() if dump else args))
        result = await original(self, args, *rest, **kwargs)
        if policy is not None:
            as_string = getattr(self, "return_value_as_string", str)
            _record(span, policy, sc.GEN_AI_TOOL_CALL_RESULT, lambda: policy.text(as_string(result)))
        return result

    setattr(run, _MARK, True)
    return run


def install() -> None:
    """Wrap `run` on every BaseTool subclass defined so far (idempotent)."""
    from autogen_core.tools import BaseTool

    with _lock:
        pending: list[type] = [BaseTool]
        while pending:
            cls = pending.pop()
            pending.extend(cls.__subclasses__())
            method = cls.__dict__.get("run")
            if method is None or getattr(method, _MARK, False) or getattr(method, "__isabstractmethod__", False):
                continue
            setattr(cls, "run", _wrap_run(method))  # noqa: B010  (the class is only known at run time)

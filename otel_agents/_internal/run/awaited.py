"""An awaited call recorded as a run: an agent's `run` or `on_messages`, whose result is recorded
when it returns (its messages with no latency of their own), the run ended whatever happens."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import context as otel_context

from otel_agents._internal.run.stop import CANCELLED, CONSUMER_CLOSED, left_by_exit
from otel_agents._internal.run.workflow import WorkflowSpan

logger = logging.getLogger(__name__)


def record_task_result(recorder: WorkflowSpan, result: Any) -> None:
    for message in getattr(result, "messages", ()):
        recorder.on_item(message, timed=False)
    recorder.on_item(result)


def record_response(recorder: WorkflowSpan, response: Any) -> None:
    for message in getattr(response, "inner_messages", None) or ():
        recorder.on_item(message, timed=False)
    recorder.on_item(response, timed=False)


async def recorded(recorder: WorkflowSpan, call: Awaitable[Any], record: Callable[[WorkflowSpan, Any], None]) -> Any:
    """Await `call` (an agent's `run` or `on_messages`) with the run's span current, then record
    what it returned; the run ends whatever happens."""
    token = otel_context.attach(recorder.context)
    try:
        result = await call
    except BaseException as exc:
        if left_by_exit(exc):  # the process exits by SystemExit: its caller left the run
            recorder.stopped(CONSUMER_CLOSED)
        elif isinstance(exc, asyncio.CancelledError):
            recorder.stopped(CANCELLED)
        else:
            recorder.failed(exc)
        raise
    else:
        try:
            record(recorder, result)
            if recorder.before_end is not None:  # what it returned is judged before it ends
                await recorder.before_end()
        except Exception:  # recording never breaks the run
            logger.warning("otel-agents could not record the result of %r", recorder.run.workflow, exc_info=True)
        return result
    finally:
        otel_context.detach(token)
        try:
            recorder.end()
        except Exception:
            logger.warning("otel-agents could not end a span", exc_info=True)

"""A workflow span (a tapped run, or a team nested in one) and the stream follower that feeds it."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import _semconv as sc
from ._parenting import REGISTRY, Run
from ._stop import CANCELLED, CONSUMER_CLOSED, StopKind, error_reason, stop_kind_of

T = TypeVar("T")

logger = logging.getLogger(__name__)

_TRACER_NAME = "otel_agents"


def _autogen_types() -> tuple[type[Any], type[Any]]:
    # Imported when a run starts, not when otel_agents is imported: AutoGen is loaded by then.
    from autogen_agentchat.base import TaskResult
    from autogen_agentchat.messages import ModelClientStreamingChunkEvent

    return TaskResult, ModelClientStreamingChunkEvent


class WorkflowSpan:
    """`invoke_workflow {name}`: the span of a run (root) or of a nested team, and its figures."""

    def __init__(
        self,
        run: Run,
        name: str,
        parent: otel_context.Context,
        *,
        is_root: bool,
    ) -> None:
        from ._version import __version__

        self.run = run
        self.is_root = is_root
        self._task_result_type, self._chunk_type = _autogen_types()
        self._tracer = run.provider.get_tracer(_TRACER_NAME, __version__)
        self._last_ns = time.time_ns()
        attributes: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: sc.OPERATION_INVOKE_WORKFLOW,
            sc.GEN_AI_WORKFLOW_NAME: name,
        }
        if is_root:
            attributes[sc.RUN_ID] = uuid.uuid4().hex
        self.span = self._tracer.start_span(
            f"{sc.OPERATION_INVOKE_WORKFLOW} {name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=self._last_ns,
        )
        REGISTRY.add_workflow(run, self.span.get_span_context())
        self.context = trace.set_span_in_context(self.span, parent)
        self.message_count = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.stop_reason: str | None = None
        self.stop_kind: StopKind | None = None
        self._error: BaseException | None = None

    def on_item(self, item: object) -> None:
        """Record one streamed item: a message span (root only), usage, and the final result."""
        now = time.time_ns()
        if isinstance(item, self._task_result_type):
            self.stop_reason = item.stop_reason
            self.stop_kind = stop_kind_of(item.stop_reason)
            return
        if isinstance(item, self._chunk_type):
            return
        index = self.message_count
        self.message_count += 1
        usage = getattr(item, "models_usage", None)
        if usage is not None:
            self.input_tokens += usage.prompt_tokens
            self.output_tokens += usage.completion_tokens
        if self.is_root:
            source = str(getattr(item, "source", "unknown"))
            attributes: dict[str, Any] = {
                sc.GEN_AI_AGENT_NAME: source,
                sc.MESSAGE_INDEX: index,
                sc.MESSAGE_TYPE: type(item).__name__,
                sc.MESSAGE_LATENCY_MS: (now - self._last_ns) / 1e6,
            }
            if usage is not None:
                attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = usage.prompt_tokens
                attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.completion_tokens
            message_span = self._tracer.start_span(
                f"message {source}", context=self.context, attributes=attributes, start_time=self._last_ns
            )
            message_span.end(end_time=now)
        self._last_ns = now

    def record(self, item: object) -> None:
        """`on_item`, never raising: a failure to record is logged, the item still goes through."""
        try:
            self.on_item(item)
        except Exception:
            logger.warning("otel-agents could not record a %s", type(item).__name__, exc_info=True)

    def stopped(self, reason: str) -> None:
        """The run ended early: `cancelled` or `consumer_closed`."""
        self.stop_reason = reason
        self.stop_kind = CANCELLED if reason == CANCELLED else CONSUMER_CLOSED

    def failed(self, exc: BaseException) -> None:
        self._error = exc
        self.stop_reason = error_reason(exc)
        self.stop_kind = "error"

    def end(self) -> None:
        span = self.span
        attributes: dict[str, Any] = {
            sc.STOP_KIND: self.stop_kind or "other",
            sc.MESSAGE_COUNT: self.message_count,
            sc.GEN_AI_USAGE_INPUT_TOKENS: self.input_tokens,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: self.output_tokens,
        }
        if self.stop_reason is not None:
            attributes[sc.STOP_REASON] = self.stop_reason
        span.set_attributes(attributes)
        if self._error is not None:
            error_type = type(self._error).__name__
            span.set_attribute(sc.ERROR_TYPE, error_type)
            # The type only: an exception's message may carry user content.
            span.add_event("exception", {"exception.type": error_type})
            span.set_status(Status(StatusCode.ERROR, error_type))
        span.end()


async def follow(
    stream: AsyncIterator[T],
    workflow: WorkflowSpan | None,
    *,
    cancel: Callable[[], None] | None = None,
) -> AsyncGenerator[T, None]:
    """Yield `stream`'s items unchanged, recording them on `workflow` (None: record nothing).

    The stream advances only when the consumer asks, under the workflow's context; whatever context
    the stream leaves behind at a yield is restored when it resumes, and nothing stays attached across
    our own yield. `cancel` is called when the consumer leaves early or is cancelled.
    """
    inner_context = workflow.context if workflow is not None else otel_context.get_current()
    cancelled_by_us = False
    try:
        while True:
            token = otel_context.attach(inner_context)
            try:
                item = await stream.__anext__()
            except StopAsyncIteration:
                break
            finally:
                inner_context = otel_context.get_current()
                otel_context.detach(token)
            if workflow is not None:
                workflow.record(item)
            yield item
    except GeneratorExit:
        if workflow is not None:
            workflow.stopped(CONSUMER_CLOSED)
        if cancel is not None:
            cancel()
            cancelled_by_us = True
        raise
    except asyncio.CancelledError:
        if workflow is not None:
            workflow.stopped(CANCELLED)
        if cancel is not None:
            cancel()
        raise
    except BaseException as exc:
        if workflow is not None:
            workflow.failed(exc)
        raise
    finally:
        try:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                token = otel_context.attach(inner_context)
                try:
                    await aclose()
                except asyncio.CancelledError:
                    # The team's own shutdown reports the cancellation we caused when the consumer
                    # left; the consumer asked for nothing to be cancelled, so it does not see it.
                    if not (cancelled_by_us and not _current_task_cancelling()):
                        raise
                finally:
                    otel_context.detach(token)
        finally:
            if workflow is not None:
                try:
                    workflow.end()
                except Exception:
                    logger.warning("otel-agents could not end a run span", exc_info=True)
                if workflow.is_root:
                    REGISTRY.end(workflow.run)


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling()) if cancelling is not None else False

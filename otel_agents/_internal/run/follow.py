"""Following an async stream on behalf of a recorder: items unchanged, contexts kept straight."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Protocol, TypeVar

from opentelemetry import context as otel_context

from otel_agents._internal.run.stop import CANCELLED, CONSUMER_CLOSED

T = TypeVar("T")

logger = logging.getLogger(__name__)


class Recorder(Protocol):
    """What `follow` reports to: the context to run the stream in, its items, how it ended."""

    context: otel_context.Context

    def on_item(self, item: object) -> None: ...

    def stopped(self, reason: str) -> None: ...

    def failed(self, exc: BaseException) -> None: ...

    def end(self) -> None: ...


def _safely(what: str, action: Callable[[], None]) -> None:
    try:
        action()
    except Exception:  # recording never breaks the stream it records
        logger.warning("otel-agents could not %s", what, exc_info=True)


async def follow(
    stream: AsyncIterator[T],
    recorder: Recorder | Callable[[], Recorder | None] | None,
    *,
    cancel: Callable[[], None] | None = None,
) -> AsyncGenerator[T, None]:
    """Yield `stream`'s items unchanged, reporting them to `recorder` (None: record nothing).

    `recorder` may be a function that makes it: it is called when the first item is asked for, so
    a stream that is never iterated records nothing and holds nothing. The stream advances only
    when the consumer asks, under the recorder's context; whatever context the stream leaves
    behind at a yield is restored when it resumes, and nothing stays attached across our own
    yield. `cancel` is called when the consumer leaves early or is cancelled.
    """
    if callable(recorder):
        recorder = recorder()
    inner_context = recorder.context if recorder is not None else otel_context.get_current()
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
            if recorder is not None:
                _safely(f"record a {type(item).__name__}", functools.partial(recorder.on_item, item))
            yield item
    except GeneratorExit:
        if recorder is not None:
            recorder.stopped(CONSUMER_CLOSED)
        if cancel is not None:
            cancel()
            cancelled_by_us = True
        raise
    except asyncio.CancelledError:
        if recorder is not None:
            recorder.stopped(CANCELLED)
        if cancel is not None:
            cancel()
        raise
    except BaseException as exc:
        if recorder is not None:
            recorder.failed(exc)
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
            if recorder is not None:
                _safely("end a span", recorder.end)


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling()) if cancelling is not None else False

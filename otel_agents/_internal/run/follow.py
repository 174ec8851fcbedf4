"""Following an async stream on behalf of a recorder: items unchanged, contexts kept straight, and
nothing lost when the consumer leaves.

`RunStream` is an async iterator, not an async generator, on purpose. When a consumer `break`s out
of `async for item in team.run_stream(...)`, Python drops the iterator at once; an async generator
would be finalised later by the event loop (in another task, or cancelled at `asyncio.run`'s end),
so the run span would end late, as `cancelled`, and AutoGen's own spans suspended inside the
stream would fail to detach their context. `RunStream` ends the run (`consumer_closed`) when it is
dropped, before the statement after the loop runs, and starts closing the inner stream right there,
in the consumer's context; whatever that closing still has to wait for goes on in a task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any, Generic, Literal, Protocol, TypeVar

from opentelemetry import context as otel_context

from otel_agents._internal.run.stop import CANCELLED, CONSUMER_CLOSED

T = TypeVar("T")

logger = logging.getLogger(__name__)

Kind = Literal["run", "nested", "untraced"]


class Recorder(Protocol):
    """What a `RunStream` reports to: the context to run the stream in, its items, how it ended."""

    context: otel_context.Context

    def on_item(self, item: object) -> None: ...

    def stopped(self, reason: str) -> None: ...

    def failed(self, exc: BaseException) -> None: ...

    def end(self) -> None: ...


def _safely(what: str, action: Callable[[], object]) -> None:
    try:
        action()
    except Exception:  # recording never breaks the stream it records
        logger.warning("otel-agents could not %s", what, exc_info=True)


_closing: set[asyncio.Task[None]] = set()
"""Closings of dropped streams still waiting for something (the loop keeps only weak references)."""


class RunStream(Generic[T]):
    """`stream`'s items, unchanged, reported to the recorder that `start` makes at the first item.

    The stream advances only when the consumer asks, under the recorder's context; whatever
    context the stream leaves behind at an item is restored when it resumes, and nothing stays
    attached while the consumer holds an item. `cancel` is called when the consumer leaves early or
    is cancelled. `kind` says what the recorder is (a run, a team nested in one, or nothing).
    """

    __slots__ = ("_cancel", "_context", "_done", "_recorder", "_start", "_started", "_stream", "kind", "name")

    def __init__(
        self,
        stream: AsyncIterator[T],
        start: Callable[[], Recorder | None] | None,
        *,
        cancel: Callable[[], None] | None = None,
        kind: Kind = "run",
        name: str = "",
    ) -> None:
        self.name = name
        """The workflow's name (the team's or agent's)."""
        self._stream = stream
        self._start = start
        self._cancel = cancel
        self.kind: Kind = kind if start is not None else "untraced"
        self._recorder: Recorder | None = None
        self._context: otel_context.Context | None = None
        self._started = False
        self._done = False

    # --- set up before the first item --------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._started

    @property
    def recorder(self) -> Recorder | None:
        """What the stream reports to, once its first item was asked for (None: untraced)."""
        return self._recorder

    def record_with(self, start: Callable[[], Recorder | None], kind: Kind = "run") -> None:
        """Report to what `start` makes instead (before the first item only)."""
        if not self._started:
            self._start, self.kind = start, kind

    def also_cancel(self, cancel: Callable[[], None]) -> None:
        """Call `cancel` too when the consumer leaves early."""
        previous = self._cancel

        def both() -> None:
            if previous is not None:
                previous()
            cancel()

        self._cancel = both

    # --- the async iterator ------------------------------------------------------------------

    def __aiter__(self) -> RunStream[T]:
        return self

    async def __anext__(self) -> T:
        if self._done:
            raise StopAsyncIteration
        if not self._started:
            self._begin()
        recorder = self._recorder
        token = otel_context.attach(self._context)  # type: ignore[arg-type]
        outcome: BaseException | None = None
        try:
            item = await self._stream.__anext__()
        except BaseException as exc:  # reported below, then raised again
            outcome = exc
        finally:
            self._context = otel_context.get_current()
            otel_context.detach(token)
        if outcome is not None:
            self._done = True
            if isinstance(outcome, StopAsyncIteration):
                pass
            elif isinstance(outcome, asyncio.CancelledError):
                if recorder is not None:
                    recorder.stopped(CANCELLED)
                if self._cancel is not None:
                    _safely("cancel the team", self._cancel)
            elif recorder is not None:
                recorder.failed(outcome)
            if recorder is not None:
                _safely("end a span", recorder.end)
            raise outcome
        if recorder is not None:
            _safely(f"record a {type(item).__name__}", lambda: recorder.on_item(item))
        return item

    def _begin(self) -> None:
        self._started = True
        start, self._start = self._start, None
        if start is not None:
            try:
                self._recorder = start()
            except Exception:
                logger.warning("otel-agents could not start tracing a run; it runs untraced", exc_info=True)
        self._context = self._recorder.context if self._recorder is not None else otel_context.get_current()

    async def aclose(self) -> None:
        """Leave early: the run ends as `consumer_closed` once the inner stream has closed."""
        if self._done:
            return
        self._done = True
        recorder = self._recorder
        cancelled_by_us = self._leave()
        try:
            aclose = getattr(self._stream, "aclose", None)
            if aclose is not None:
                token = otel_context.attach(self._context or otel_context.get_current())
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

    def _leave(self) -> bool:
        """The consumer left: say so, and cancel the team when we hold its token."""
        if self._recorder is not None:
            self._recorder.stopped(CONSUMER_CLOSED)
        if self._cancel is not None:
            _safely("cancel the team", self._cancel)
            return True
        return False

    def __del__(self) -> None:
        # Dropped without being closed: a `break`, a `return` or an exception out of the loop body.
        if self._done or not self._started:
            return  # a stream never iterated: Python finalises the inner stream as it would anyway
        self._done = True
        try:
            self._leave()
            _close_now(self._stream, self._context)
        except Exception:
            logger.debug("otel-agents could not close a stream its consumer dropped", exc_info=True)
        finally:
            if self._recorder is not None:
                _safely("end a span", self._recorder.end)


def _close_now(stream: object, context: otel_context.Context | None) -> None:
    """Start closing `stream` here, in the consumer's context (so that contexts attached inside it
    detach cleanly); if closing has to wait for something, it goes on in a task."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    closing = aclose()
    token = otel_context.attach(context or otel_context.get_current())
    try:
        waiting = closing.send(None)
    except StopIteration:
        return  # closed at once (a single agent's stream)
    except BaseException:  # the stream's own error on the way out: not the consumer's
        logger.debug("otel-agents: a dropped stream raised while closing", exc_info=True)
        return
    finally:
        otel_context.detach(token)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no loop (garbage collected late): nothing to wait with
        closing.close()
        return
    task = loop.create_task(_go_on_closing(closing, waiting, context))
    _closing.add(task)
    task.add_done_callback(_closing.discard)


async def _go_on_closing(closing: Any, waiting: object, context: otel_context.Context | None) -> None:
    token = otel_context.attach(context or otel_context.get_current())
    try:
        await _Resumed(closing, waiting)
    except Exception:
        logger.debug("otel-agents: a dropped stream raised while closing", exc_info=True)
    finally:
        otel_context.detach(token)


class _Resumed:
    """An awaitable that goes on with an awaitable already started by hand (`closing`, which
    yielded `waiting`): the rest of it runs in the task that awaits this, as `await` would."""

    def __init__(self, step: Any, waiting: object) -> None:
        self._step = step
        self._waiting = waiting

    def __await__(self) -> Generator[Any, None, None]:
        waiting = self._waiting
        while True:
            try:
                yield waiting
            except BaseException as exc:  # thrown into the task: passed on
                try:
                    waiting = self._step.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    waiting = self._step.send(None)
                except StopIteration:
                    return


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling()) if cancelling is not None else False

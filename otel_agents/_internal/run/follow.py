"""Following an async stream on behalf of a recorder: items unchanged, contexts kept straight, and
nothing lost when the consumer leaves.

`RunStream` is an object with the async generator protocol (`asend`, `athrow`, `aclose`), not a
native async generator, on purpose. When a consumer `break`s out of `async for item in
team.run_stream(...)`, Python drops the iterator at once; a native async generator would be
finalised later by the event loop (in another task, or cancelled at `asyncio.run`'s end), so the
run span would end late, as `cancelled`. `RunStream` ends the run (`consumer_closed`) when it is
dropped, before the statement after the loop runs, and closes the inner stream in a task (of the
loop it was iterated in, whichever thread drops it).

The inner stream runs in a `contextvars.Context` of its own (a copy of the consumer's at the first
item, with the run's span current), stepped in it each time the consumer asks for an item. So
whatever the stream attaches (AutoGen's `invoke_agent` span stays attached across a single agent's
yields) never reaches the consumer, and it detaches cleanly whichever task closes the stream.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Generic, Literal, Protocol, TypeVar

from opentelemetry import context as otel_context

from otel_agents._internal import process_state
from otel_agents._internal.run.stop import CANCELLED, CONSUMER_CLOSED, left_by_exit

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
"""Closings of dropped streams under way (the loop keeps only weak references to tasks)."""


def _forget_closing() -> None:
    """Let go of closings that will never finish (their loop is closed) or have; one still running
    on a live loop is kept, or the loop's weak reference would let it be collected mid-way."""
    for task in list(_closing):
        if task.done() or task.get_loop().is_closed():
            _closing.discard(task)


process_state.hold(
    __name__,
    "_closing",
    bound="each until its closing task is done (or its loop closed)",
    size=lambda: len(_closing),
    forget=_forget_closing,
)


class _Collection:
    """Whether the garbage collector is collecting now (told by its callbacks, `gc.callbacks`)."""

    __slots__ = ("running",)

    def __init__(self) -> None:
        self.running = False

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        self.running = phase == "start"


_collection = _Collection()
gc.callbacks.append(_collection)
process_state.hold(
    __name__,
    "_collection",
    bound="one flag, set while a collection runs",
    size=lambda: int(_collection.running),
    forget=None,  # the collector's callbacks set it: it is never stale
)


class RunStream(Generic[T]):
    """`stream`'s items, unchanged, reported to the recorder that `start` makes at the first item.

    The stream advances only when the consumer asks, in a context of its own where the recorder's
    span is current; nothing it attaches reaches the consumer. `cancel` is called when the consumer leaves early or
    is cancelled. `kind` says what the recorder is (a run, a team nested in one, or nothing).
    """

    __slots__ = (
        "_cancel",
        "_done",
        "_loop",
        "_own",
        "_recorder",
        "_start",
        "_started",
        "_stream",
        "kind",
        "name",
        "runner",
    )

    def __init__(
        self,
        stream: AsyncIterator[T],
        start: Callable[[], Recorder | None] | None,
        *,
        cancel: Callable[[], None] | None = None,
        kind: Kind = "run",
        name: str = "",
        runner: object | None = None,
    ) -> None:
        self.name = name
        """The workflow's name (the team's or agent's)."""
        self.runner = runner
        """The team or agent whose run this is, when known."""
        self._stream = stream
        self._start = start
        self._cancel = cancel
        self.kind: Kind = kind if start is not None else "untraced"
        self._recorder: Recorder | None = None
        self._own: contextvars.Context | None = None
        """The context the inner stream runs in (made at the first item)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop the stream is iterated in (known at the first item)."""
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

    # --- the async generator protocol -------------------------------------------------------

    def __aiter__(self) -> RunStream[T]:
        return self

    def _begin(self) -> None:
        self._started = True
        self._loop = asyncio.get_running_loop()
        start, self._start = self._start, None
        if start is not None:
            try:
                self._recorder = start()  # under the consumer's context: where the run starts
            except Exception:
                logger.warning("otel-agents could not start tracing a run; it runs untraced", exc_info=True)
        own = contextvars.copy_context()
        if self._recorder is not None:
            own.run(otel_context.attach, self._recorder.context)  # the run's span, current in there only
        self._own = own

    def __anext__(self) -> Awaitable[T]:
        return self._advance(self._stream.__anext__)

    def asend(self, value: Any) -> Awaitable[T]:
        """As an async generator's: `asend(None)` is the next item; a value goes to the inner
        stream's own `asend` (an async generator's)."""
        if value is None:
            return self._advance(self._stream.__anext__)
        asend = getattr(self._stream, "asend", None)
        if asend is None:
            raise TypeError(f"{type(self._stream).__name__} takes no sent values")
        return self._advance(lambda: asend(value))

    def athrow(self, typ: Any, val: Any = None, tb: Any = None) -> Awaitable[T]:
        """As an async generator's: the exception is thrown into the inner stream (raised where it
        waits), and what comes of it is recorded as any item or end."""
        args = (typ,) if val is None and tb is None else (typ, val, tb)
        athrow = getattr(self._stream, "athrow", None)
        if athrow is not None:
            return self._advance(lambda: athrow(*args))

        async def raise_it() -> T:  # an async iterator with no athrow: as if it raised it
            error = typ if isinstance(typ, BaseException) else typ(*(() if val is None else (val,)))
            raise error.with_traceback(tb) if tb is not None else error

        return self._advance(raise_it)

    async def _advance(self, step: Callable[[], Awaitable[T]]) -> T:
        """The next item from `step` (run in the stream's own context), recorded; or its end."""
        if self._done:
            raise StopAsyncIteration
        ended = False
        try:
            if not self._started:
                self._begin()
            recorder = self._recorder
            try:
                item: T = await _InContext(self._own, step)
            except BaseException as exc:  # reported, then raised unchanged
                self._done = True
                leaving = left_by_exit(exc)
                if recorder is not None:
                    if leaving:
                        recorder.stopped(CONSUMER_CLOSED)
                    elif isinstance(exc, asyncio.CancelledError):
                        recorder.stopped(CANCELLED)
                    elif not isinstance(exc, StopAsyncIteration):
                        recorder.failed(exc)
                if (leaving or isinstance(exc, asyncio.CancelledError)) and self._cancel is not None:
                    _safely("cancel the team", self._cancel)
                if recorder is not None:
                    try:
                        if isinstance(exc, StopAsyncIteration):  # its end: what it returned is judged first
                            await _before_end(recorder)
                    finally:  # even when the judging is cancelled: the run ends
                        _safely("end a span", recorder.end)
                ended = True
                raise
            if recorder is not None:
                try:  # inline, not `_safely`: no closure nor message made for each item
                    recorder.on_item(item)
                except Exception:  # recording never breaks the stream it records
                    logger.warning("otel-agents could not record a %s", type(item).__name__, exc_info=True)
            return item
        except BaseException:
            if not ended and self._recorder is not None:
                # A SystemExit (a signal handler's) landed in our own code, not in the stream's
                # step: starting the run, recording an item, or ending the run above. The consumer
                # leaves: the run ends now, not at the exit (this frame, held by the exception's
                # traceback, keeps the stream from being dropped until then).
                self._done = True
                self._leave_now(self._recorder)
            raise

    def _leave_now(self, recorder: Recorder) -> None:
        """The consumer leaves while otel-agents records for it: end the run as `consumer_closed`."""
        recorder.stopped(CONSUMER_CLOSED)
        if self._cancel is not None:
            _safely("cancel the team", self._cancel)
        _safely("end a span", recorder.end)

    async def aclose(self) -> None:
        """Leave early: the run ends as `consumer_closed` once the inner stream has closed."""
        if self._done:
            return
        self._done = True
        recorder = self._recorder
        cancelled_by_us = _leave(recorder, self._cancel)
        try:
            aclose = getattr(self._stream, "aclose", None)
            if aclose is not None:
                try:
                    await (_InContext(self._own, aclose) if self._own is not None else aclose())
                except asyncio.CancelledError:
                    # The team's own shutdown reports the cancellation we caused when the consumer
                    # left; the consumer asked for nothing to be cancelled, so it does not see it.
                    if not (cancelled_by_us and not _current_task_cancelling()):
                        raise
        finally:
            if recorder is not None:
                try:
                    if getattr(recorder, "result", None) is not None:  # left after its result: judged
                        await _before_end(recorder)
                finally:
                    _safely("end a span", recorder.end)

    def __del__(self) -> None:
        # Dropped without being closed: a `break`, a `return` or an exception out of the loop body.
        if self._done or not self._started:
            return  # a stream never iterated: Python finalises the inner stream as it would anyway
        self._done = True
        loop = self._loop
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread
            here = None
        if loop is None or loop is here:
            # The run ends once AutoGen's stream has closed: a team with its own runtime runs on to
            # its end in there, and those turns are the run's too (recorded and counted).
            cancel = self._cancel
            if cancel is not None and here is not None and _collection.running:
                # Freed by the collector, which may run inside an allocation the team makes under its
                # token's (non-reentrant) lock: cancelling here could wait on it for ever. The loop
                # cancels the team at its next step instead (a `break` drops the stream outside any
                # collection: cancelled at once).
                here.call_soon(_safely, "cancel the team", cancel)
                cancel = None
            _leave(self._recorder, cancel)
            if not _close_in_task(self._stream, self._own, here, then=self._recorder):
                _end(self._recorder)
            return
        # Collected elsewhere: in another thread (the garbage collector runs wherever it is set
        # off), or after the stream's loop stopped. The run ends here and now (ending a span is
        # thread-safe); the team's token and the stream belong to the stream's own loop, which
        # cancels and closes them, as Python's own finaliser of an async generator does.
        _leave(self._recorder, None)
        _end(self._recorder)
        try:
            loop.call_soon_threadsafe(_leave_on_loop, self._cancel, self._stream, self._own, loop)
        except RuntimeError:  # that loop is closed: Python finalises the stream
            pass


async def _before_end(recorder: Recorder) -> None:
    """What the recorder awaits before it ends (a run's outcome callable, bounded in time)."""
    before_end = getattr(recorder, "before_end", None)
    if before_end is None:
        return
    try:
        await before_end()
    except Exception:  # recording never breaks the stream it records
        logger.warning("otel-agents could not finish recording a run", exc_info=True)


def _leave(recorder: Recorder | None, cancel: Callable[[], None] | None) -> bool:
    """The consumer left: say so, and cancel the team when we hold its token (True then)."""
    if recorder is not None:
        recorder.stopped(CONSUMER_CLOSED)
    if cancel is not None:
        _safely("cancel the team", cancel)
        return True
    return False


def _end(recorder: Recorder | None) -> None:
    if recorder is not None:
        _safely("end a span", recorder.end)


def _leave_on_loop(
    cancel: Callable[[], None] | None,
    stream: AsyncIterator[Any],
    own: contextvars.Context | None,
    loop: asyncio.AbstractEventLoop,
) -> None:
    _leave(None, cancel)
    _close_in_task(stream, own, loop)


def _close_in_task(
    stream: AsyncIterator[Any],
    own: contextvars.Context | None,
    loop: asyncio.AbstractEventLoop | None,
    *,
    then: Recorder | None = None,
) -> bool:
    """Close a dropped stream in a task of `loop`, then end `then`; False when there is nothing to
    close it with (None: no loop runs here, the stream was dropped late; Python finalises it)."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None or own is None or loop is None:
        return False
    task = loop.create_task(_close(own, aclose, then))
    _closing.add(task)
    task.add_done_callback(_closing.discard)
    if then is not None:
        # Also a done callback: a task cancelled before its first step (a `sys.exit` in the loop
        # body: `asyncio.run` cancels every task on its way out) never runs its body, but its
        # callbacks run all the same. Ending twice is a no-op.
        task.add_done_callback(lambda _: _end(then))
    return True


async def _close(
    own: contextvars.Context, aclose: Callable[[], Awaitable[object]], then: Recorder | None = None
) -> None:
    """Close a dropped stream in its own context, in a task of its own, then end `then` at once
    (in this step: whoever waited for the stream's cleanup sees its run ended)."""
    try:
        await _InContext(own, aclose)
    except Exception:  # the stream's own error on the way out: nobody is there to take it
        logger.debug("otel-agents: a dropped stream raised while closing", exc_info=True)
    finally:
        _end(then)


class _InContext:
    """Await what `make()` returns with every step of it run in `context` (`Context.run`), in the
    task that awaits this, as a plain `await` would run it (cancellation passed in the same way)."""

    __slots__ = ("_context", "_make")

    def __init__(self, context: contextvars.Context | None, make: Callable[[], Awaitable[Any]]) -> None:
        self._context = context if context is not None else contextvars.copy_context()
        self._make = make

    def __await__(self) -> Generator[Any, None, Any]:
        run = self._context.run
        steps = run(_awaiting, self._make)
        send = steps.send
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                waiting = run(send, value) if error is None else run(steps.throw, error)
            except StopIteration as done:
                return done.value
            value, error = None, None
            try:
                value = yield waiting
            except GeneratorExit:
                run(steps.close)
                raise
            except BaseException as exc:  # thrown into the awaiting task (a cancellation): passed on
                error = exc


def _awaiting(make: Callable[[], Awaitable[Any]]) -> Generator[Any, None, Any]:
    return make().__await__()


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling()) if cancelling is not None else False

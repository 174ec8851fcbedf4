"""The root of a message published with no span open, on AutoGen's single-threaded runtime: started
at delivery, so a publish that reaches no subscriber makes no span.

Such a publish's `create` span would be the root of the trace its processing joins, but at `create`
the runtime cannot yet say who will receive the message; at delivery it can. So the `create` block
gets a stand-in: a span context of its own, made current and copied by AutoGen into the envelope,
recording nothing. The first `process` span the message causes starts the root (named and timed as
the `create` span would have been) and goes under it, as do the other recipients' `process` spans.
Any other span started in the `publish` block (an agent built by its factory for the delivery, a
database call there) goes under the root too. The stand-in is forgotten when the message's
`publish` block (its delivery) ends, delivered to anyone or not; at most `PENDING_KEPT` wait at
once (see there). Log records written inside the `create` and `publish` blocks carry the
stand-in's trace id, which no exported span has.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, TraceFlags

from otel_agents._internal import process_state

PENDING_KEPT: Final = 4096
"""Published messages waiting for delivery, at most; a message published while that many wait gets
its root at once (as without this module), so a burst of publishes queued before any delivery
(`asyncio.Queue.put` does not yield) loses nothing."""
STALE_S: Final = 300.0
"""A message waiting this long is forgotten when the table is full: a runtime stopped before
delivering it, or an intervention handler dropped it (its `intercept` span started its root)."""

_ids: list[Any] = []
"""The SDK's `RandomIdGenerator`, made at the first publish (`import otel_agents` loads no SDK)."""


class _Created(NonRecordingSpan):
    """The `create` block's stand-in: records only when the block ended (the root's end)."""

    def __init__(self, context: SpanContext) -> None:
        super().__init__(context)
        self.ended_at: int | None = None

    def end(self, end_time: int | None = None) -> None:
        self.ended_at = end_time if end_time is not None else time.time_ns()


class Pending:
    """A message published with no span open, not yet delivered."""

    __slots__ = ("_created", "_root", "_start_root", "started_at")

    def __init__(self, created: _Created, start_root: Callable[[int], Span]) -> None:
        self._created = created
        self._start_root = start_root
        self._root: SpanContext | None = None
        self.started_at = time.time_ns()

    @property
    def stand_in(self) -> SpanContext:
        return self._created.get_span_context()

    def root(self) -> SpanContext:
        """The root's span context, the root started (and ended) the first time it is asked for."""
        if self._root is None:
            root = self._start_root(self.started_at)
            root.end(self._created.ended_at)
            self._root = root.get_span_context()
        return self._root

    def links_to_root(self, links: Sequence[Link] | None) -> list[Link] | None:
        """`links` with the stand-in replaced by the root (AutoGen links each `process` span to it)."""
        if not links:
            return None
        stand_in, root = self.stand_in.span_id, self.root()
        return [Link(root, link.attributes) if link.context.span_id == stand_in else link for link in links]


class _Delivery(NonRecordingSpan):
    """The `publish` block's stand-in: when it ends, the message has been delivered to everyone."""

    def __init__(self, pending: Pending) -> None:
        super().__init__(pending.stand_in)
        self._pending = pending

    def end(self, end_time: int | None = None) -> None:
        _forget(self._pending)


_pending: OrderedDict[int, Pending] = OrderedDict()
# re-entrant: a collection inside an allocation made under it may close a dropped coroutine whose
# `publish` block then ends here (`_Delivery.end`)
_lock = threading.RLock()
process_state.new_locks_in_forked_child(__name__, "_lock")


def _forget_all() -> None:
    with _lock:
        _pending.clear()
        _ids.clear()


process_state.hold(
    __name__,
    "_pending",
    "_ids",
    bound=f"{PENDING_KEPT} messages waiting for delivery, stale after {STALE_S:.0f} s; one id generator",
    size=lambda: len(_pending) + len(_ids),
    forget=_forget_all,
)


def created(start_root: Callable[[int], Span]) -> Span | None:
    """The stand-in of a `create` block; `start_root(start_time)` starts the root when it is
    delivered. None when `PENDING_KEPT` messages wait already, none of them for longer than
    `STALE_S`: then the caller records the root at once, as the runtime would."""
    if len(_pending) >= PENDING_KEPT and not _forget_stale():
        return None
    if not _ids:
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        _ids.append(RandomIdGenerator())
    ids = _ids[0]
    context = SpanContext(
        ids.generate_trace_id(), ids.generate_span_id(), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )
    span = _Created(context)
    waiting = Pending(span, start_root)
    with _lock:
        _pending[context.span_id] = waiting
    return span


def _forget_stale() -> bool:
    """Forget the messages waiting longer than `STALE_S` (a runtime stopped before delivering them,
    a message an intervention handler dropped); whether any was."""
    before = time.time_ns() - int(STALE_S * 1e9)
    with _lock:
        # over a copy (made with no allocation the collector counts but its own): a delivery ending
        # in a collection while this looks takes its message out of `_pending`
        stale = [key for key, waiting in dict(_pending).items() if waiting.started_at < before]
        for key in stale:
            _pending.pop(key, None)
    return bool(stale)


def pending(context: SpanContext | None) -> Pending | None:
    """The message waiting for delivery whose stand-in `context` is, if any (AutoGen carries it in the
    envelope: it comes back remote)."""
    if context is None or not _pending:
        return None
    found = _pending.get(context.span_id)
    return found if found is not None and found.stand_in.trace_id == context.trace_id else None


def delivery(of: Pending) -> Span:
    """The stand-in of the `publish` block that delivers `of`."""
    return _Delivery(of)


def _forget(of: Pending) -> None:
    with _lock:
        if _pending.get(of.stand_in.span_id) is of:
            del _pending[of.stand_in.span_id]


def waiting() -> int:
    """How many published messages wait for delivery (for tests)."""
    return len(_pending)

"""How a run ended: the contract's stop reasons and stop kinds."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

from otel_agents._internal.autogen import conventions as ag

StopKind = Literal[
    "max_messages",
    "text_mention",
    "handoff",
    "timeout",
    "token_budget",
    "external",
    "loop_guard",
    "completed",
    "cancelled",
    "consumer_closed",
    "shutdown",
    "error",
    "other",
]

COMPLETED: Final = "completed"
"""A single agent's run that ended with its response (its stop reason: `completed: TextMessage`)."""
CANCELLED: Final = "cancelled"
CONSUMER_CLOSED: Final = "consumer_closed"
SHUTDOWN: Final = "shutdown"
"""A run still open when its pipeline shut down (`Telemetry.shutdown()`, or the process exiting)."""
EARLY_STOPS: Final[Mapping[str, StopKind]] = MappingProxyType(
    {
        CANCELLED: "cancelled",
        CONSUMER_CLOSED: "consumer_closed",
        SHUTDOWN: "shutdown",
    }
)


def stop_kind_of(stop_reason: str | None) -> StopKind:
    """The stop kind of a stop reason AutoGen gave.

    A composite condition (`a | b`) joins its reasons with ", "; the reason that comes first wins.
    """
    if not stop_reason:
        return "other"
    best: tuple[int, StopKind] | None = None
    for pattern, kind in ag.STOP_REASONS:
        match = pattern.search(stop_reason)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), kind)
    return best[1] if best else "other"


def error_reason(exc: BaseException) -> str:
    return f"error: {type(exc).__name__}"


def left_by_exit(exc: BaseException) -> bool:
    """Whether `exc` leaves a run because the process exits by `SystemExit` (`sys.exit`, `exit()`,
    in the app's code or in a signal handler): the `SystemExit` itself, or a cancellation raised
    while one is being handled (`asyncio.run` cancels every task on its way out, and Python makes
    the exception being handled the cancellation's `__context__`). Such a run was left by its
    consumer: `consumer_closed`, as a `return` out of the loop would make it."""
    if isinstance(exc, SystemExit):
        return True
    if not isinstance(exc, asyncio.CancelledError):
        return False
    context, depth = exc.__context__, 0
    while context is not None and depth < 8:  # a cancellation of a cancellation, at most a few deep
        if isinstance(context, SystemExit):
            return True
        context, depth = context.__context__, depth + 1
    return False

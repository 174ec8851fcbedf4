"""How a run ended: the contract's stop reasons and stop kinds."""

from __future__ import annotations

import re
from typing import Final, Literal

StopKind = Literal[
    "max_messages",
    "text_mention",
    "handoff",
    "timeout",
    "token_budget",
    "external",
    "loop_guard",
    "cancelled",
    "consumer_closed",
    "error",
    "other",
]

CANCELLED: Final = "cancelled"
CONSUMER_CLOSED: Final = "consumer_closed"

# AutoGen 0.7.5's own stop messages (autogen_agentchat.conditions and the group chat managers).
_AUTOGEN_REASONS: Final[tuple[tuple[re.Pattern[str], StopKind], ...]] = (
    (re.compile(r"loop guard:"), "loop_guard"),
    (re.compile(r"Maximum number of (messages|turns) \d+ reached"), "max_messages"),
    (re.compile(r"Text '.*?' mentioned"), "text_mention"),
    (re.compile(r"Handoff to \S+ from \S+ detected"), "handoff"),
    (re.compile(r"Timeout of [\d.]+ seconds reached"), "timeout"),
    (re.compile(r"Token usage limit reached"), "token_budget"),
    (re.compile(r"External termination requested"), "external"),
)


def stop_kind_of(stop_reason: str | None) -> StopKind:
    """The stop kind of a stop reason AutoGen gave.

    A composite condition (`a | b`) joins its reasons with ", "; the reason that comes first wins.
    """
    if not stop_reason:
        return "other"
    best: tuple[int, StopKind] | None = None
    for pattern, kind in _AUTOGEN_REASONS:
        match = pattern.search(stop_reason)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), kind)
    return best[1] if best else "other"


def error_reason(exc: BaseException) -> str:
    return f"error: {type(exc).__name__}"

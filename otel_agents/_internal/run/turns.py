"""An agent's turn in a run: the items its `on_messages_stream` yields are remembered as the turn's,
so that their message spans go under it."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry import trace

from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.tracing.registry import REGISTRY, Node

logger = logging.getLogger(__name__)


def turn_here() -> Node | None:
    """The agent turn (AutoGen's `invoke_agent` span, in a run) current here, if any."""
    here = trace.get_current_span().get_span_context()
    node = REGISTRY.lookup(here)
    if node is None or node.is_runtime or node.agent is None or node.anchor != here or node.run.ended:
        return None
    return node


async def marked(stream: AsyncIterator[Any], turn: Node) -> AsyncIterator[Any]:
    """The turn's stream, each item remembered as this turn's (its message span goes under it)."""
    run, anchor = turn.run, turn.anchor
    try:
        async for item in stream:
            try:  # a Response's message is what the team streams
                run.mark_produced(getattr(item, ag.RESPONSE_MESSAGE, item), anchor, time.time_ns())
            except Exception:  # recording never breaks the turn
                logger.debug("otel-agents could not remember a turn's item", exc_info=True)
            yield item
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()

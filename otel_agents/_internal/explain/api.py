"""`otel_agents.explain`: a run explained from the SDK's spans, in process."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from otel_agents._internal.explain.analysis import explain_spans
from otel_agents._internal.explain.findings import Thresholds
from otel_agents._internal.explain.model import Explanation
from otel_agents._internal.explain.readers import readable_spans

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


def explain(
    spans: Iterable[ReadableSpan],
    run_id: str | None = None,
    *,
    context_growth: float = 500,
    context_growth_turns: int = 6,
    repeated_messages: int = 3,
    repeated_tool_calls: int = 3,
    tool_errors: int = 1,
    dominant_share: float = 0.7,
    dominant_agents: int = 3,
) -> Explanation:
    """Explain one run from its finished spans (an `InMemorySpanExporter`'s, a span processor's):
    where its tokens and cost went per agent and per turn, how its context grew, what repeated,
    why it stopped, and findings with suggestions. `.to_dict()` is the JSON `otel-agents explain
    --json` prints.

    Args:
        spans: the run's spans, or more (other runs, other traces).
        run_id: the run to explain (its id, a unique prefix of one, or its trace id); None: the
            only run in `spans`. A trace with no run span but model calls (an autogen-core app) is
            explained from its `chat` spans, per handler.
        context_growth: `context_growth` is found above this many tokens a turn (default 500)...
        context_growth_turns: ...measured over at least this many turns (default 6).
        repeated_messages: `repeated_messages` at this many times one agent says one chat message (3).
        repeated_tool_calls: `repeated_tool_calls` at this many calls of a tool with the same arguments (3).
        tool_errors: `tool_errors` at this many failed tool calls (1).
        dominant_share: `dominant_agent` above this share of the run's tokens (0.7)...
        dominant_agents: ...for one agent of at least this many (3).

    Raises:
        ValueError: the spans hold no run and no model call, several runs and none was named (the
            message lists them), no run answers to `run_id`, or a threshold is out of range.
    """
    thresholds = Thresholds(
        context_growth=context_growth,
        context_growth_turns=context_growth_turns,
        repeated_messages=repeated_messages,
        repeated_tool_calls=repeated_tool_calls,
        tool_errors=tool_errors,
        dominant_share=dominant_share,
        dominant_agents=dominant_agents,
    )
    return explain_spans(readable_spans(spans), run_id, thresholds)

"""What an explanation finds: each finding a plain sentence and a suggestion naming the AutoGen (or
otel-agents) means that addresses it. The thresholds are settings (`Thresholds`: keyword arguments
of `otel_agents.explain`, options of `otel-agents explain`); their defaults are documented in
docs/cli.md.

| kind | severity | when (default) |
|---|---|---|
| `stopped_by_limit` | warning | the stop kind is `max_messages`, `token_budget`, `timeout` or `loop_guard` |
| `context_growth` | warning | the context grew by more than 500 tokens a turn, over at least 6 turns |
| `repeated_messages` | warning | an agent said the same chat message 3 times or more |
| `repeated_tool_calls` | warning | a tool was called with the same arguments 3 times or more |
| `tool_errors` | warning | 1 tool call or more failed |
| `dominant_agent` | info | one agent of 3 or more used over 70% of the tokens |
| `unknown_usage` | info | a model call reported no usage (a stream without usage) |
| `unpriced` | info | a model call's model has no price |
| `consumer_left` | info | the run never finished: its consumer left (`consumer_closed`), or it was shut down |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from otel_agents._internal.explain.model import NO_AGENT, UNNAMED_MODEL, Explanation, Finding, Repeat

FINDING_KINDS: Final = (
    "stopped_by_limit",
    "context_growth",
    "repeated_messages",
    "repeated_tool_calls",
    "tool_errors",
    "dominant_agent",
    "unknown_usage",
    "unpriced",
    "consumer_left",
)
"""Every kind of finding, in the table's order (what `runs --finding` takes)."""
LIMIT_STOP_KINDS: Final = frozenset({"max_messages", "token_budget", "timeout", "loop_guard"})
"""Stop kinds that mean the run hit a limit rather than reaching its goal."""
UNFINISHED_STOP_KINDS: Final = frozenset({"consumer_closed", "shutdown"})

_TURNS_SHOWN: Final = 8
"""At most this many turn numbers in a finding's sentence."""


@dataclass(frozen=True)
class Thresholds:
    """When each finding is made; every field is a keyword argument of `otel_agents.explain` and an
    option of `otel-agents explain`."""

    context_growth: float = 500
    """`context_growth`: tokens a turn the context must grow by (more than this)."""
    context_growth_turns: int = 6
    """`context_growth`: turns with a model call it must be measured over (at least)."""
    repeated_messages: int = 3
    """`repeated_messages`: times one agent says one chat message (at least)."""
    repeated_tool_calls: int = 3
    """`repeated_tool_calls`: times one tool is called with the same arguments (at least)."""
    tool_errors: int = 1
    """`tool_errors`: failed tool calls (at least)."""
    dominant_share: float = 0.7
    """`dominant_agent`: the share of the run's tokens one agent must have (more than this)."""
    dominant_agents: int = 3
    """`dominant_agent`: agents the run must have (at least; `(team)` not counted)."""

    def __post_init__(self) -> None:
        for name in ("context_growth_turns", "repeated_messages", "repeated_tool_calls", "tool_errors"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: expected a whole number of at least 1")
        if isinstance(self.dominant_agents, bool) or not isinstance(self.dominant_agents, int):
            raise ValueError(f"dominant_agents={self.dominant_agents!r}: expected a whole number of at least 1")
        if self.dominant_agents < 1:
            raise ValueError(f"dominant_agents={self.dominant_agents!r}: expected a whole number of at least 1")
        if not _number(self.context_growth) or self.context_growth < 0:
            raise ValueError(f"context_growth={self.context_growth!r}: expected a number of tokens, 0 or more")
        if not _number(self.dominant_share) or not 0 < self.dominant_share < 1:
            raise ValueError(f"dominant_share={self.dominant_share!r}: expected a share between 0 and 1")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # NaN is not


def _turns(turns: tuple[int, ...]) -> str:
    if not turns:
        return ""
    shown = ", ".join(str(t) for t in turns[:_TURNS_SHOWN])
    more = ", ..." if len(turns) > _TURNS_SHOWN else ""
    return f" (turn{'s' if len(turns) > 1 else ''} {shown}{more})"


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n:,} times"


def find(explanation: Explanation, thresholds: Thresholds) -> tuple[Finding, ...]:
    """The findings of `explanation` (its own `findings` not read): warnings first, each kind in
    the order of the table above."""
    found = [
        *_stopped_by_limit(explanation),
        *_context_growth(explanation, thresholds),
        *_repeated(explanation, "message", thresholds.repeated_messages),
        *_repeated(explanation, "tool_call", thresholds.repeated_tool_calls),
        *_tool_errors(explanation, thresholds),
        *_dominant_agent(explanation, thresholds),
        *_unknown_usage(explanation),
        *_unpriced(explanation),
        *_consumer_left(explanation),
    ]
    return tuple(sorted(found, key=lambda f: f.severity != "warning"))  # stable: the kinds keep their order


def _stopped_by_limit(e: Explanation) -> list[Finding]:
    kind = e.run.stop_kind
    if kind not in LIMIT_STOP_KINDS:
        return []
    reason = f": {e.run.stop_reason}" if e.run.stop_reason and e.run.stop_reason != kind else ""
    if kind == "loop_guard":
        return [
            Finding(
                "stopped_by_limit",
                "warning",
                f"otel_agents.LoopGuard stopped the run: it was looping (loop_guard{reason}).",
                "Find what the agents kept doing (the repeats below, the turns): give the agent that should "
                "end the exchange a clear goal, and end the run on it with a goal-based termination condition "
                'such as TextMentionTermination("APPROVE"), keeping LoopGuard as the backstop.',
            )
        ]
    return [
        Finding(
            "stopped_by_limit",
            "warning",
            f"The run stopped at a limit ({kind}{reason}), not on its goal: "
            f"the {e.run.turns:,} turns before it may have produced nothing final.",
            "End the run when its goal is reached with a goal-based termination condition such as "
            'TextMentionTermination("APPROVE") (or HandoffTermination), composed with the limit '
            '(TextMentionTermination("APPROVE") | MaxMessageTermination(20)), and check why the goal '
            "was never reached (a critic that never approves); otel_agents.LoopGuard stops a run that loops.",
        )
    ]


def _context_growth(e: Explanation, thresholds: Thresholds) -> list[Finding]:
    context = e.context
    growth = context.growth_tokens_per_turn
    if growth is None or context.turns_measured < thresholds.context_growth_turns:
        return []
    if growth <= thresholds.context_growth:
        return []
    return [
        Finding(
            "context_growth",
            "warning",
            f"Each turn started from {growth:,.0f} more input tokens than the one before, over "
            f"{context.turns_measured:,} turns ({context.first_input_tokens or 0:,} at the first, "
            f"{context.last_input_tokens or 0:,} at the last): every model call resends the whole "
            "conversation so far.",
            "Bound what each agent sends to its model: give it a bounded model context such as "
            "BufferedChatCompletionContext(buffer_size=10) (AssistantAgent(model_context=...), from "
            "autogen_core.model_context), or end the run sooner with a goal-based termination condition.",
        )
    ]


def _repeat_sentence(repeat: Repeat) -> str:
    who = repeat.agent or "several agents"
    if repeat.kind == "message":
        return f"{who} said the same message {_times(repeat.count)}{_turns(repeat.turns)}"
    tool = repeat.tool or "a tool"
    return f"{who} called {tool} with the same arguments {_times(repeat.count)}{_turns(repeat.turns)}"


def _repeated(e: Explanation, kind: str, at_least: int) -> list[Finding]:
    over = [r for r in e.repeats if r.kind == kind and r.count >= at_least]
    if not over:
        return []
    most = max(over, key=lambda r: r.count)  # the first of the most repeated: repeats are ordered
    others = len(over) - 1
    more = f"; {others} more {'repeat' if others == 1 else 'repeats'} of {at_least} or more" if others else ""
    text = _repeat_sentence(most) + more + "."  # an agent's name as it is, never capitalised
    if kind == "message":
        return [
            Finding(
                "repeated_messages",
                "warning",
                text,
                "The exchange goes round without moving on: stop it when it repeats by composing "
                "otel_agents.LoopGuard() with the team's termination condition (termination_condition="
                "... | otel_agents.LoopGuard()), and end the run on its goal with a goal-based termination "
                'condition such as TextMentionTermination("APPROVE").',
            )
        ]
    return [
        Finding(
            "repeated_tool_calls",
            "warning",
            text,
            "The tool's answer did not move the agent on: check what the tool returns (an error or an "
            "empty result the model asks again for) and the agent's instructions; compose "
            "otel_agents.LoopGuard() with the team's termination condition to stop a run that repeats.",
        )
    ]


def _tool_errors(e: Explanation, thresholds: Thresholds) -> list[Finding]:
    failed = sum(n for _, n, _ in e.failed_tools)  # every failed execute_tool span, in a turn or not
    if failed < thresholds.tool_errors:
        return []
    tools = ", ".join(f"{name} {n}" + (f" ({', '.join(types)})" if types else "") for name, n, types in e.failed_tools)
    calls = f"{failed:,} tool call{'s' if failed != 1 else ''}"
    return [
        Finding(
            "tool_errors",
            "warning",
            f"{calls} failed: {tools}. AutoGen hands the error to the model as the tool's result, and "
            "the agent often calls again or answers without it.",
            "Fix the failing tool (its exception is on its execute_tool span: error.type and the "
            "exception event), or make it return a useful message instead of raising.",
        )
    ]


def _dominant_agent(e: Explanation, thresholds: Thresholds) -> list[Finding]:
    agents = [a for a in e.agents if a.agent != NO_AGENT]
    if len(agents) < thresholds.dominant_agents or e.run.tokens <= 0:
        return []
    top = max(agents, key=lambda a: a.tokens)
    total = sum(a.tokens for a in e.agents)
    if total <= 0 or top.tokens / total <= thresholds.dominant_share:
        return []
    return [
        Finding(
            "dominant_agent",
            "info",
            f"{top.agent} used {top.tokens / total:.0%} of the run's tokens ({top.tokens:,} of {total:,}), "
            f"the other {len(agents) - 1} agents the rest.",
            f"Look at what {top.agent} sends each turn (its system message, its tools' results, the whole "
            "conversation): a bounded model context such as BufferedChatCompletionContext keeps its input "
            "small; a smaller model_client for it lowers the cost.",
        )
    ]


def _unknown_usage(e: Explanation) -> list[Finding]:
    n = e.run.unknown_usage_calls
    if not n:
        return []
    return [
        Finding(
            "unknown_usage",
            "info",
            f"{n:,} model call{'s' if n != 1 else ''} reported no usage (streamed without usage): the run's "
            "tokens are a lower bound and its cost is unknown.",
            "Set OTEL_AGENTS_STREAM_USAGE=request, so AutoGen's OpenAI clients ask for usage on streamed "
            "calls (stream_options include_usage).",
        )
    ]


def _unpriced(e: Explanation) -> list[Finding]:
    if not e.unpriced_models:
        return []
    if e.unpriced_models == (UNNAMED_MODEL,):
        return [
            Finding(
                "unpriced",
                "info",
                "The model client names no model, so its calls have no price: the run has no cost, its "
                "tokens are counted.",
                "Give the client its model's name (OpenAIChatCompletionClient(model=...)), and its price in "
                "a price file named by OTEL_AGENTS_PRICES if the built-in table has none.",
            )
        ]
    models = ", ".join(e.unpriced_models)
    return [
        Finding(
            "unpriced",
            "info",
            f"No price for {models}: the run has no cost, and its calls of "
            f"{'that model' if len(e.unpriced_models) == 1 else 'those models'} count tokens only.",
            f"Add a price for {models} to a price file named by OTEL_AGENTS_PRICES (JSON or TOML), or "
            "pass configure(prices=...).",
        )
    ]


def _consumer_left(e: Explanation) -> list[Finding]:
    kind = e.run.stop_kind
    if kind not in UNFINISHED_STOP_KINDS:
        return []
    if kind == "consumer_closed":
        return [
            Finding(
                "consumer_left",
                "info",
                "The run never finished: its consumer stopped reading the stream (consumer_closed), so "
                "what the team would have done next, and why it would have stopped, is not known.",
                "Read the stream to its end, or stop the team on purpose: otel_agents.run_stream(team, "
                "task=...) cancels the team when its consumer leaves early, and a termination condition "
                "ends it gracefully.",
            )
        ]
    return [
        Finding(
            "consumer_left",
            "info",
            "The run never finished: it was still open when the process shut down (shutdown), so its "
            "last turn may be cut short, and what it would have done next is not known.",
            "Let runs finish (await team.run(...) to its end) before Telemetry.shutdown() or the "
            "process exits, or end them sooner with a termination condition.",
        )
    ]

"""What an explanation reads and what it says.

`Span` is a span as every reader gives it (the store's rows, Jaeger's and a file's OTLP JSON, the
SDK's `ReadableSpan`): ids in lowercase hex, times in nanoseconds since the epoch, attributes as
plain values. `Explanation` is the answer; `to_dict()` is the JSON `otel-agents explain --json`
prints (a contract: keys are only added, never renamed). Money is held in integer micro-dollars
and durations in nanoseconds, rounded (to the micro-dollar, to the millisecond) only in the JSON,
so every reader of one run gives the same JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

NO_AGENT: Final = "(team)"
"""The agent of model calls made in no agent's turn (a `SelectorGroupChat` choosing the next speaker)."""

UNNAMED_MODEL: Final = "(no model name)"
"""The model of a call whose client named none."""

Shape = Literal["team", "agent", "on_messages", "core", "open"]
"""What was explained: a team's run, a single agent's `run`, an agent's `on_messages` (its run
span an `invoke_agent` root, no turns), a trace with no run span (an autogen-core app, or model
calls outside any run), explained from its model calls, or an open run (its run span not ended
yet), explained from its turns and model calls so far."""


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """One span, whichever reader read it."""

    name: str
    trace_id: str
    """32 lowercase hex digits."""
    span_id: str
    """16 lowercase hex digits."""
    parent_id: str | None
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    events: tuple[SpanEvent, ...] = ()
    status: str = "UNSET"
    """`UNSET`, `OK` or `ERROR`."""


def usd(micro_usd: int | None) -> float | None:
    """Integer micro-dollars as dollars (None stays None)."""
    return None if micro_usd is None else micro_usd / 1_000_000


def seconds(ns: int) -> float:
    """Nanoseconds as seconds, to the millisecond."""
    return round(ns / 1e9, 3)


def iso_utc(ns: int) -> str:
    """As `otel-agents runs --json` writes `started_at`: ISO 8601 UTC to the millisecond."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class RunFacts:
    """The run in one object, with the names of `otel-agents runs --json`, plus `turns` and `calls`."""

    run_id: str | None
    trace_id: str
    team: str | None
    user_id: str | None
    session_id: str | None
    conversation_id: str | None
    started_ns: int
    duration_ns: int
    messages: int | None
    turns: int
    calls: int
    input_tokens: int
    output_tokens: int
    micro_usd: int | None
    """None: a model call reported no usage, or a model has no price."""
    stop_reason: str | None
    stop_kind: str | None
    unknown_usage_calls: int
    outcomes: tuple[tuple[str, str, float | None], ...] = ()
    """(name, label, score) of each outcome, by name: the run span's events (the store's too)."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "trace_id": self.trace_id,
            "team": self.team,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "conversation_id": self.conversation_id,
            "started_at": iso_utc(self.started_ns),
            "duration_s": seconds(self.duration_ns),
            "messages": self.messages,
            "turns": self.turns,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": usd(self.micro_usd),
            "stop_reason": self.stop_reason,
            "stop_kind": self.stop_kind,
            "unknown_usage_calls": self.unknown_usage_calls,
            "outcomes": [{"name": name, "label": label, "score": score} for name, label, score in self.outcomes],
        }


@dataclass(frozen=True)
class AgentShare:
    """What one agent's turns (or `(team)`: calls in no turn) used."""

    agent: str
    turns: int
    calls: int
    input_tokens: int
    output_tokens: int
    micro_usd: int | None
    token_share: float
    """0..1 of the run's input and output tokens, to four places."""
    unknown_usage_calls: int = 0
    """Its calls that reported no usage (the text view marks its cost `?`, not `-`)."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "turns": self.turns,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": usd(self.micro_usd),
            "token_share": self.token_share,
        }


@dataclass(frozen=True)
class Turn:
    """One agent turn (an `invoke_agent` span under the run; in a trace without a run, one handler's
    `autogen process` span that made model calls)."""

    index: int
    agent: str
    team: str | None
    """The team the turn ran in: the run's, or a nested team's."""
    start_ns: int
    """From the run's start."""
    duration_ns: int
    calls: int
    input_tokens: int
    output_tokens: int
    micro_usd: int | None
    """None when one of its calls reported no usage or has no price."""
    tool_calls: int
    tool_errors: int
    first_input_tokens: int | None = None
    """The input tokens of its first model call that reported usage (the context it started from)."""
    unknown_usage_calls: int = 0
    """Its calls that reported no usage (the text view marks its cost `?`, not `-`)."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "agent": self.agent,
            "team": self.team,
            "start_s": seconds(self.start_ns),
            "duration_s": seconds(self.duration_ns),
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": usd(self.micro_usd),
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "first_input_tokens": self.first_input_tokens,
        }


@dataclass(frozen=True)
class Context:
    """How the context grew: the input tokens of each turn's first model call, in turn order."""

    growth_tokens_per_turn: float | None
    """Least-squares slope (`genai/growth.py`, as the run span's attribute); None under 3 turns."""
    first_input_tokens: int | None
    last_input_tokens: int | None
    turns_measured: int
    """Turns with a model call that reported usage (what the slope is over)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "growth_tokens_per_turn": self.growth_tokens_per_turn,
            "first_input_tokens": self.first_input_tokens,
            "last_input_tokens": self.last_input_tokens,
        }


@dataclass(frozen=True)
class CostliestTurn:
    index: int
    agent: str
    micro_usd: int | None
    input_tokens: int
    output_tokens: int
    by: Literal["cost", "tokens"]
    """By cost when every turn is priced, else by tokens."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "agent": self.agent,
            "cost_usd": usd(self.micro_usd),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


REPEAT_TURNS_LISTED: Final = 50


@dataclass(frozen=True)
class Repeat:
    """A chat message said again by the same agent, or a tool called again with the same arguments:
    found by their fingerprints (`otel_agents.message.fingerprint`, `otel_agents.tool.fingerprint`)."""

    kind: Literal["message", "tool_call"]
    agent: str | None
    """Who said it; for a tool call, the agent whose turns made it (None when several did)."""
    fingerprint: str
    count: int
    turns: tuple[int, ...]
    """The turns it happened in, in order, each once, at most `REPEAT_TURNS_LISTED`."""
    tool: str | None = None
    """The tool's name (a tool call), for the text view."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "agent": self.agent,
            "fingerprint": self.fingerprint,
            "count": self.count,
            "turns": list(self.turns),
        }


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: Literal["info", "warning"]
    text: str
    suggestion: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "text": self.text, "suggestion": self.suggestion}


@dataclass(frozen=True)
class Explanation:
    """One run explained: `otel_agents.explain(spans)` and `otel-agents explain` make it;
    `to_dict()` is the JSON `otel-agents explain --json` prints."""

    run: RunFacts
    agents: tuple[AgentShare, ...]
    turns: tuple[Turn, ...]
    context: Context
    costliest_turn: CostliestTurn | None
    repeats: tuple[Repeat, ...]
    findings: tuple[Finding, ...]
    shape: Shape = "team"
    unpriced_models: tuple[str, ...] = ()
    """Models of the run's calls that had no price."""
    failed_tools: tuple[tuple[str, int, tuple[str, ...]], ...] = ()
    """(tool, failed calls, error types) of the tools that failed, most failures first."""

    @property
    def finding_kinds(self) -> list[str]:
        """The kinds of its findings, each once, in order (`runs --json`'s `findings`)."""
        return list(dict.fromkeys(finding.kind for finding in self.findings))

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `otel-agents explain --json`: `run`, `agents`, `turns`, `context`,
        `costliest_turn` (null without turns), `repeats`, `findings`."""
        return {
            "run": {**self.run.to_dict(), "findings": self.finding_kinds},
            "agents": [agent.to_dict() for agent in self.agents],
            "turns": [turn.to_dict() for turn in self.turns],
            "context": self.context.to_dict(),
            "costliest_turn": self.costliest_turn.to_dict() if self.costliest_turn is not None else None,
            "repeats": [repeat.to_dict() for repeat in self.repeats],
            "findings": [finding.to_dict() for finding in self.findings],
        }

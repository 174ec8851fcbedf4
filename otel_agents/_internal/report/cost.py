"""`otel-agents cost`: stored runs and model calls totalled by team, model, agent, user, conversation
or day.

Every row keeps its key whatever its pricing: a row's cost is the part of it that is priced, and the
row counts what is not. A model call is priced (its `otel_agents.cost.usd`), unpriced (its model has
no price: its tokens are counted, its cost is not), of unknown usage (its client reported no usage,
a stream without usage: neither its tokens nor its cost are known), or failed before any usage (no
tokens: it costs nothing). A row's `unpriced_calls` and `unknown_usage_calls` count its calls of
those kinds (by team, user, conversation and day: the calls of its runs; a run's unknown-usage
calls are the ones the run itself counted), `unpriced_tokens` their tokens (for a run without a
total cost: its tokens that no priced call used). The priced part is `null` in JSON only when
nothing in the row is priced, never a made-up 0.

Costs are summed in integer micro-dollars, so the rows add up exactly to the total. A run's priced
calls are rounded to the micro-dollar once (the exact sum of their `otel_agents.cost.usd`; a fully
priced run with no traced call: its own cost), and shared among them by largest remainder, so a
run's calls add up to the run's priced part exactly and every report of the same runs has the same
total. `(none)` is the row of runs or calls with no value for the key: a run without a user (or
team, or conversation); by agent, a call made by no agent (a `SelectorGroupChat` choosing the next
speaker).

Where the runs have outcomes of one name (`record_outcome`, `configure(outcome=...)`: `outcome`
unless `--outcome NAME=LABEL` names another), each row also counts its runs of each label of that
name, and its spend per run of one label (`success` unless `--outcome LABEL` or `NAME=LABEL`): the
row's whole priced cost over its runs of that label.

By model and agent the rows are the runs' model calls (`chat` spans); by team, user, conversation
and day they are the runs themselves (days in UTC, by when the run started). `--since` keeps the
runs started since then, and the calls of those runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from otel_agents._internal.export.store.reader import StoredCall, StoredRun

DIMENSIONS: Final = ("team", "model", "agent", "user", "conversation", "day")
OUTCOME_NAME: Final = "outcome"
"""The outcomes `cost` counts unless `--outcome NAME=LABEL` names another: those of the default name
(what the outcome callable records)."""
DEFAULT_OUTCOME: Final = "success"
BY_CALL: Final = frozenset({"model", "agent"})
NONE: Final = "(none)"

_UNITS: Final = MappingProxyType({"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400})
_SINCE: Final = re.compile(r"(\d+)([mhdw])")


_SINCE_MAX_S: Final = 100 * 366 * 86_400
"""The longest `--since` taken: a century, already before any span (nanoseconds since 1970 stay
within SQLite's integers)."""


def parse_since(text: str) -> int:
    """`30m`, `24h`, `7d`, `2w` as seconds, at most a century; ValueError otherwise."""
    match = _SINCE.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"--since {text!r}: expected a positive number and a unit (m, h, d or w), e.g. 30m, 24h, 7d")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds > _SINCE_MAX_S:
        raise ValueError(f"--since {text!r}: at most a century (for everything, leave --since out)")
    return seconds


def parse_outcome(text: str | None) -> tuple[str, str]:
    """`--outcome`: `LABEL` (of the default name) or `NAME=LABEL`, as (name, label); None: the
    default, `success`. ValueError when the name or the label is empty."""
    if text is None:
        return OUTCOME_NAME, DEFAULT_OUTCOME
    name, equals, label = text.partition("=")
    if not equals:
        name, label = OUTCOME_NAME, name
    name, label = name.strip(), label.strip()
    if not name or not label:
        raise ValueError(f"--outcome {text!r}: expected LABEL or NAME=LABEL, e.g. success or quality=good")
    return name, label


def micro(cost_usd: float) -> int:
    """A cost in whole micro-dollars, rounded once (genai/prices.micro_usd)."""
    from otel_agents._internal.genai.prices import micro_usd

    return micro_usd(cost_usd)


def utc_day(ns: int) -> str:
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class Usage:
    """What one run or one model call puts into a row."""

    run_id: str
    input_tokens: int
    output_tokens: int
    micro_usd: int | None
    """The priced part in integer micro-dollars; None when nothing of it is priced."""
    unpriced_calls: int = 0
    unpriced_tokens: int = 0
    unknown_usage_calls: int = 0


@dataclass
class CostRow:
    key: str
    run_ids: set[str] = field(default_factory=set)
    input_tokens: int = 0
    output_tokens: int = 0
    micro_usd: int | None = None
    """The priced part in integer micro-dollars; None when nothing in the row is priced."""
    unpriced_calls: int = 0
    unpriced_tokens: int = 0
    unknown_usage_calls: int = 0
    outcomes: dict[str, int] | None = None
    """Runs of each outcome label; None when no run of the report has an outcome."""
    outcome: str = DEFAULT_OUTCOME
    """The label `cost_per_outcome_usd` divides by."""
    outcome_name: str = OUTCOME_NAME
    """The name of the outcomes counted."""

    @property
    def runs(self) -> int:
        return len(self.run_ids)

    @property
    def micro_usd_per_outcome(self) -> int | None:
        """The row's priced cost over its runs of `outcome`, in micro-dollars (None: none such, or unpriced)."""
        runs = (self.outcomes or {}).get(self.outcome, 0)
        if not runs or self.micro_usd is None:
            return None
        return round(self.micro_usd / runs)

    @property
    def cost_usd(self) -> float | None:
        return None if self.micro_usd is None else self.micro_usd / 1_000_000

    def add(self, usage: Usage) -> None:
        self.run_ids.add(usage.run_id)
        self._sum(usage.input_tokens, usage.output_tokens, usage.micro_usd)
        self.unpriced_calls += usage.unpriced_calls
        self.unpriced_tokens += usage.unpriced_tokens
        self.unknown_usage_calls += usage.unknown_usage_calls

    def merge(self, row: CostRow) -> None:
        self.run_ids |= row.run_ids
        self._sum(row.input_tokens, row.output_tokens, row.micro_usd)
        self.unpriced_calls += row.unpriced_calls
        self.unpriced_tokens += row.unpriced_tokens
        self.unknown_usage_calls += row.unknown_usage_calls

    def _sum(self, input_tokens: int, output_tokens: int, micro_usd: int | None) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if micro_usd is not None:
            self.micro_usd = (self.micro_usd or 0) + micro_usd

    def json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "runs": self.runs,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "unpriced_calls": self.unpriced_calls,
            "unpriced_tokens": self.unpriced_tokens,
            "unknown_usage_calls": self.unknown_usage_calls,
            **(
                {
                    "outcomes": dict(sorted(self.outcomes.items())),
                    "cost_per_outcome_usd": None
                    if self.micro_usd_per_outcome is None
                    else self.micro_usd_per_outcome / 1_000_000,
                }
                if self.outcomes is not None
                else {}
            ),
        }


def _run_key(run: StoredRun, by: str) -> str | None:
    if by == "day":
        return utc_day(run.started_ns)
    value = {"team": run.team, "user": run.user_id, "conversation": run.conversation_id}[by]
    return value or None


def _call_key(call: StoredCall, by: str) -> str | None:
    return call.model if by == "model" else call.agent


def exact_cost(cost_usd: float | None, input_tokens: float, output_tokens: float, usage_known: bool) -> float | None:
    """A call's cost in dollars: its own; 0 for a call that failed before any usage (usage known, no
    tokens); None when its model has no price or its usage is unknown."""
    if cost_usd is not None:
        return cost_usd
    if usage_known and not input_tokens and not output_tokens:
        return 0.0
    return None


def _exact_cost(call: StoredCall) -> float | None:
    return exact_cost(call.cost_usd, call.input_tokens, call.output_tokens, call.usage_known)


def run_micro(run_cost_usd: float | None, call_micros: Sequence[int | None]) -> int | None:
    """A run's cost in micro-dollars, as every command shows it: the sum of its calls' shares when it
    has traced calls, all priced (the exact sum of their costs rounded once); else its own cost
    rounded once; None when it has none (a model without a price, a call of unknown usage)."""
    if run_cost_usd is None:
        return None
    if call_micros and all(m is not None for m in call_micros):
        return sum(m or 0 for m in call_micros)
    return micro(run_cost_usd)


def call_costs(calls: Sequence[StoredCall]) -> list[int | None]:
    """Each call's micro-dollars (None: no price, or usage unknown). Per run, the priced calls share
    the exact sum of their costs rounded once: each gets its cost rounded down, and the micro-dollars
    left over go to the calls with the largest remainders (so 72.6 + 119.7 + 119.85 + 148.8 is 461,
    not 462)."""
    from otel_agents._internal.genai.prices import micro_shares

    out: list[int | None] = [None] * len(calls)
    priced: dict[str, list[tuple[int, float]]] = {}
    for index, call in enumerate(calls):
        cost = _exact_cost(call)
        if cost is not None:
            priced.setdefault(call.run_id, []).append((index, cost))
    for shares in priced.values():
        for (index, _), micro_usd in zip(shares, micro_shares([cost for _, cost in shares]), strict=True):
            out[index] = micro_usd
    return out


def _call_usage(call: StoredCall, cost: int | None) -> Usage:
    tokens = call.input_tokens, call.output_tokens
    if not call.usage_known:
        return Usage(call.run_id, *tokens, None, unknown_usage_calls=1)
    if cost is None:
        return Usage(call.run_id, *tokens, None, unpriced_calls=1, unpriced_tokens=sum(tokens))
    return Usage(call.run_id, *tokens, cost)


def call_usages(calls: Sequence[StoredCall]) -> list[Usage]:
    """What each model call puts into a row (by model and agent)."""
    return [_call_usage(call, cost) for call, cost in zip(calls, call_costs(calls), strict=True)]


def run_usages(runs: Iterable[StoredRun], calls: Sequence[StoredCall]) -> list[Usage]:
    """What each run puts into a row (by team, user, conversation and day): its tokens; its cost when
    it has one (its calls' when it has traced calls, all priced, else its own rounded); else the
    priced part of its calls, and what has no price or no known usage."""
    of_run: dict[str, list[Usage]] = {}
    for usage in call_usages(calls):
        of_run.setdefault(usage.run_id, []).append(usage)
    out: list[Usage] = []
    for run in runs:
        own = of_run.get(run.run_id, [])
        tokens = run.input_tokens or 0, run.output_tokens or 0
        cost = run_micro(run.cost_usd, [u.micro_usd for u in own])
        if cost is not None:
            out.append(Usage(run.run_id, *tokens, cost))
            continue
        priced = [u for u in own if u.micro_usd is not None]
        priced_tokens = sum(u.input_tokens + u.output_tokens for u in priced)
        out.append(
            Usage(
                run.run_id,
                *tokens,
                sum(u.micro_usd or 0 for u in priced) if priced else None,
                unpriced_calls=sum(u.unpriced_calls for u in own),
                unpriced_tokens=max(0, sum(tokens) - priced_tokens),
                unknown_usage_calls=run.unknown_calls or 0,
            )
        )
    return out


def cost_rows(by: str, runs: Iterable[StoredRun], calls: Sequence[StoredCall]) -> list[CostRow]:
    """The rows of `cost --by`: keyed rows by priced cost, then tokens (days by date), then `(none)`."""
    rows: dict[str, CostRow] = {}
    if by in BY_CALL:
        keyed = [(_call_key(call, by), usage) for call, usage in zip(calls, call_usages(calls), strict=True)]
    else:
        runs = list(runs)
        keyed = [(_run_key(run, by), usage) for run, usage in zip(runs, run_usages(runs, calls), strict=True)]
    for key, usage in keyed:
        name = key or NONE
        rows.setdefault(name, CostRow(name)).add(usage)

    def order(row: CostRow) -> tuple[Any, ...]:
        special = 1 if row.key == NONE else 0
        if by == "day":
            return (special, row.key)
        return (special, -(row.micro_usd or 0), -(row.input_tokens + row.output_tokens), row.key)

    return sorted(rows.values(), key=order)


def total(
    rows: Sequence[CostRow],
    labels: Mapping[str, str] | None = None,
    outcome: str = DEFAULT_OUTCOME,
    name: str = OUTCOME_NAME,
) -> CostRow:
    """All rows together: distinct runs, summed tokens and counts, the exact sum of the rows' priced
    micro-dollars (and, with `labels`, the runs of each label)."""
    out = CostRow("total")
    for row in rows:
        out.merge(row)
    if labels:
        with_outcomes([out], labels, outcome, name)
    return out


def with_outcomes(
    rows: Sequence[CostRow], labels: Mapping[str, str], outcome: str = DEFAULT_OUTCOME, name: str = OUTCOME_NAME
) -> None:
    """Count each row's runs of each label (`labels`: run id -> the label of its outcome named `name`)."""
    for row in rows:
        counted: dict[str, int] = {}
        for run_id in row.run_ids:
            label = labels.get(run_id)
            if label is not None:
                counted[label] = counted.get(label, 0) + 1
        row.outcomes, row.outcome, row.outcome_name = counted, outcome, name

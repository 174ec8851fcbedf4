"""What one stored run or model call puts into `otel-agents cost`'s rows: its tokens, its priced
part in integer micro-dollars, and what has no price or no known usage. The store's writer keeps
these per run (its summary) as the run arrives; `cost` reads them (`report/cost.py` tells how a
row counts them). One formula: the writer, the readers' fallback and `explain` share it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from otel_agents._internal.export.store.rows import StoredCall, StoredRun


def micro(cost_usd: float) -> int:
    """A cost in whole micro-dollars, rounded once (genai/prices.micro_usd)."""
    from otel_agents._internal.genai.prices import micro_usd

    return micro_usd(cost_usd)


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

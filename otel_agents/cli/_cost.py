"""`otel-agents cost`: stored runs and model calls totalled by team, model, agent, user, conversation
or day.

Costs are summed in integer micro-dollars, so the rows add up exactly to the total. A run's cost is
rounded to the micro-dollar once (the exact sum of its priced calls' `otel_agents.cost.usd`; a run
with no traced call: its own cost), and shared among its calls by largest remainder, so a run's
calls add up to the run exactly and every report of the same runs has the same total when all
their calls are priced. Two rows are explicit:

- `(unpriced)`: what has no cost, whatever its key: a run with no total cost (one of its calls had
  no price), or, by model and agent, a call with no cost. Its runs and tokens are counted; its cost
  is unknown (JSON `null`), never a made-up 0.
- `(none)`: priced, but with no value for the key: a run without a user (or team, or conversation);
  by agent, a call made by no agent (a `SelectorGroupChat` choosing the next speaker).

By model and agent the rows are the runs' model calls (`chat` spans); by team, user, conversation
and day they are the runs themselves (days in UTC, by when the run started). `--since` keeps the
runs started since then, and the calls of those runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from otel_agents._internal.export.store import StoredCall, StoredRun

DIMENSIONS: Final = ("team", "model", "agent", "user", "conversation", "day")
BY_CALL: Final = frozenset({"model", "agent"})
UNPRICED: Final = "(unpriced)"
NONE: Final = "(none)"

_UNITS: Final = {"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
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


def micro(cost_usd: float) -> int:
    return round(cost_usd * 1_000_000)


def utc_day(ns: int) -> str:
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).strftime("%Y-%m-%d")


@dataclass
class CostRow:
    key: str
    run_ids: set[str] = field(default_factory=set)
    input_tokens: int = 0
    output_tokens: int = 0
    micro_usd: int | None = None
    """Integer micro-dollars; None for the `(unpriced)` row."""

    @property
    def runs(self) -> int:
        return len(self.run_ids)

    @property
    def cost_usd(self) -> float | None:
        return None if self.micro_usd is None else self.micro_usd / 1_000_000

    def add(self, run_id: str, input_tokens: int, output_tokens: int, micro_usd: int | None) -> None:
        self.run_ids.add(run_id)
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
        }


def _run_key(run: StoredRun, by: str) -> str | None:
    if by == "day":
        return utc_day(run.started_ns)
    value = {"team": run.team, "user": run.user_id, "conversation": run.conversation_id}[by]
    return value or None


def _call_key(call: StoredCall, by: str) -> str | None:
    return call.model if by == "model" else call.agent


def call_costs(calls: Sequence[StoredCall]) -> list[int | None]:
    """Each call's micro-dollars (None: no price). Per run, the priced calls share the exact sum of
    their costs rounded once: each gets its cost rounded down, and the micro-dollars left over go to
    the calls with the largest remainders (so 72.6 + 119.7 + 119.85 + 148.8 is 461, not 462)."""
    out: list[int | None] = [None] * len(calls)
    priced: dict[str, list[int]] = {}
    for index, call in enumerate(calls):
        if call.cost_usd is not None:
            priced.setdefault(call.run_id, []).append(index)
    for indices in priced.values():
        exact = [(calls[i].cost_usd or 0.0) * 1_000_000 for i in indices]
        floors = [math.floor(x) for x in exact]
        left = round(math.fsum(exact)) - sum(floors)
        largest_first = sorted(range(len(indices)), key=lambda k: (floors[k] - exact[k], k))
        for rank, k in enumerate(largest_first):
            out[indices[k]] = floors[k] + (1 if rank < left else 0)
    return out


def run_costs(runs: Iterable[StoredRun], calls: Sequence[StoredCall]) -> dict[str, int | None]:
    """Each run's micro-dollars: its calls' (see `call_costs`) when it has traced calls, all priced,
    else its own cost rounded; None when the run has no cost (a call of it had no price)."""
    by_run: dict[str, list[int | None]] = {}
    for call, cost in zip(calls, call_costs(calls), strict=True):
        by_run.setdefault(call.run_id, []).append(cost)
    out: dict[str, int | None] = {}
    for run in runs:
        own = by_run.get(run.run_id)
        if run.cost_usd is None:
            out[run.run_id] = None
        elif own and all(cost is not None for cost in own):
            out[run.run_id] = sum(cost for cost in own if cost is not None)
        else:
            out[run.run_id] = micro(run.cost_usd)
    return out


def cost_rows(by: str, runs: Iterable[StoredRun], calls: Sequence[StoredCall]) -> list[CostRow]:
    """The rows of `cost --by`: keyed rows by cost (days by date), then `(none)`, then `(unpriced)`."""
    rows: dict[str, CostRow] = {}

    def add(key: str | None, run_id: str, input_tokens: int, output_tokens: int, cost: int | None) -> None:
        key = UNPRICED if cost is None else (key or NONE)
        row = rows.setdefault(key, CostRow(key))
        row.add(run_id, input_tokens, output_tokens, cost)

    if by in BY_CALL:
        for call, cost in zip(calls, call_costs(calls), strict=True):
            add(_call_key(call, by), call.run_id, call.input_tokens, call.output_tokens, cost)
    else:
        costs = run_costs(runs, calls)
        for run in runs:
            add(_run_key(run, by), run.run_id, run.input_tokens or 0, run.output_tokens or 0, costs[run.run_id])

    def order(row: CostRow) -> tuple[Any, ...]:
        special = {NONE: 1, UNPRICED: 2}.get(row.key, 0)
        if by == "day":
            return (special, row.key)
        return (special, -(row.micro_usd or 0), -(row.input_tokens + row.output_tokens), row.key)

    return sorted(rows.values(), key=order)


def total(rows: Sequence[CostRow]) -> CostRow:
    """All rows together: distinct runs, summed tokens, the exact sum of the priced rows' micro-dollars."""
    out = CostRow("total")
    for row in rows:
        out.run_ids |= row.run_ids
        out.input_tokens += row.input_tokens
        out.output_tokens += row.output_tokens
        if row.micro_usd is not None:
            out.micro_usd = (out.micro_usd or 0) + row.micro_usd
    return out

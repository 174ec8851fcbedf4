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

from otel_agents._internal.export.store.usage import (
    Usage,
    call_costs,
    call_usages,
    exact_cost,
    micro,
    run_micro,
    run_usages,
)

if TYPE_CHECKING:
    from otel_agents._internal.export.store.reader import Store, StoredCall, StoredRun

__all__ = [  # the usage math lives below the store's writer, which keeps it per run
    "Usage",
    "call_costs",
    "call_usages",
    "exact_cost",
    "micro",
    "run_micro",
    "run_usages",
]

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


def parse_since(text: str, option: str = "--since") -> int:
    """`30m`, `24h`, `7d`, `2w` as seconds, at most a century; ValueError naming `option` otherwise."""
    match = _SINCE.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"{option} {text!r}: expected a positive number and a unit (m, h, d or w), e.g. 30m, 24h, 7d")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds > _SINCE_MAX_S:
        raise ValueError(f"{option} {text!r}: at most a century (for everything, leave {option} out)")
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


def utc_day(ns: int) -> str:
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).strftime("%Y-%m-%d")


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


def cost_rows(by: str, runs: Iterable[StoredRun], calls: Sequence[StoredCall]) -> list[CostRow]:
    """The rows of `cost --by` from runs and their model calls (see `keyed_rows`)."""
    if by in BY_CALL:
        return keyed_rows(by, [(_call_key(c, by), u) for c, u in zip(calls, call_usages(calls), strict=True)])
    runs = list(runs)
    return keyed_rows(by, [(_run_key(r, by), u) for r, u in zip(runs, run_usages(runs, calls), strict=True)])


def keyed_rows(by: str, keyed: Iterable[tuple[str | None, Usage]]) -> list[CostRow]:
    """The rows of `cost --by`, each key's usages added up: keyed rows by priced cost, then tokens
    (days by date), then `(none)`."""
    rows: dict[str, CostRow] = {}
    for key, usage in keyed:
        name = key or NONE
        rows.setdefault(name, CostRow(name)).add(usage)
    return ordered_rows(by, rows.values())


def ordered_rows(by: str, rows: Iterable[CostRow]) -> list[CostRow]:
    """Keyed rows by priced cost, then tokens (days by date), then `(none)`."""

    def order(row: CostRow) -> tuple[Any, ...]:
        special = 1 if row.key == NONE else 0
        if by == "day":
            return (special, row.key)
        return (special, -(row.micro_usd or 0), -(row.input_tokens + row.output_tokens), row.key)

    return sorted(rows, key=order)


@dataclass
class CostReport:
    """`cost`'s report of a store: its rows, the runs they are over, and the outcomes counted."""

    rows: list[CostRow]
    runs: int
    """Runs started in the range (by model and agent: the rows are their model calls)."""
    labels: dict[str, str]
    """Run id -> the label of its outcome named `name` (the runs in the range that have one)."""
    name: str
    outcome: str
    elsewhere: dict[str, int]
    """Where no run has the label `outcome` under `name`: other names it is found under -> runs."""
    run_micros: dict[str, list[int]]
    """Row key -> the priced part (micro-dollars) of each of its runs that has one, in that row."""


def percentile(values: Sequence[int], percent: int) -> int:
    """The nearest-rank percentile of `values` (not empty): the smallest value that at least
    `percent`% of them are at or below (the value at rank ceil(percent/100 * n), ascending)."""
    ordered = sorted(values)
    rank = max(1, -(-percent * len(ordered) // 100))
    return ordered[rank - 1]


def run_cost_stats(micros: Sequence[int]) -> dict[str, float | None]:
    """`run_cost_usd` of a `cost --json` row: the median, the 95th percentile (both nearest-rank:
    the value at rank ceil(p/100 * n) of the runs' costs in ascending order) and the largest cost of
    its runs, each run's priced part in the row as `cost` counts it; null where none is priced."""
    if not micros:
        return {"median": None, "p95": None, "max": None}
    return {
        "median": percentile(micros, 50) / 1_000_000,
        "p95": percentile(micros, 95) / 1_000_000,
        "max": max(micros) / 1_000_000,
    }


UTC_DAY_SQL: Final = "strftime('%Y-%m-%d', r.started_ns / 1000000000, 'unixepoch')"  # utc_day, in SQL


def store_cost(
    store: Store, by: str, *, since_ns: int | None = None, until_ns: int | None = None, outcome: str | None = None
) -> CostReport:
    """`cost`'s report over the runs started in [`since_ns`, `until_ns`), from the store's run
    summaries (no span is read); `outcome` as `--outcome`. ValueError for a bad `by` or `outcome`."""
    reports = _store_costs(store, by, since_ns, until_ns, outcome, per_day=False)
    return reports.get("") or _report(by, [], 0, [], outcome)


def store_cost_per_day(
    store: Store, by: str, *, since_ns: int | None = None, until_ns: int | None = None, outcome: str | None = None
) -> dict[str, CostReport]:
    """`store_cost` for each UTC day (`YYYY-MM-DD`) of the range that has runs, read at once: each
    day's report is `store_cost` over the runs of the range started that day."""
    return _store_costs(store, by, since_ns, until_ns, outcome, per_day=True)


def _store_costs(
    store: Store, by: str, since_ns: int | None, until_ns: int | None, outcome: str | None, *, per_day: bool
) -> dict[str, CostReport]:
    if by not in DIMENSIONS:
        raise ValueError(f"--by {by!r}: expected one of {', '.join(DIMENSIONS)}")
    parse_outcome(outcome)
    clauses, parameters = [], []
    if since_ns is not None:
        clauses.append("r.started_ns >= ?")
        parameters.append(since_ns)
    if until_ns is not None:
        clauses.append("r.started_ns < ?")
        parameters.append(until_ns)
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    day = UTC_DAY_SQL if per_day else "''"
    totals = "count(*), sum(i), sum(o), sum(m), sum(uc), sum(ut), sum(uu), group_concat(run_id), group_concat(m)"
    if by in BY_CALL:
        column = "c.model" if by == "model" else "c.agent"
        per_run = (
            f"SELECT {day} AS d, {column} AS k, c.run_id AS run_id, sum(c.input_tokens) AS i, "
            "sum(c.output_tokens) AS o, sum(c.micro_usd) AS m, sum(c.unpriced_calls) AS uc, "
            "sum(c.unpriced_tokens) AS ut, sum(c.unknown_usage_calls) AS uu "
            f"FROM run_calls c JOIN runs r ON r.run_id = c.run_id{where} GROUP BY {column}, c.run_id"
        )
    else:
        column = {"team": "r.team", "user": "r.user_id", "conversation": "r.conversation_id", "day": UTC_DAY_SQL}[by]
        per_run = (
            f"SELECT {day} AS d, {column} AS k, r.run_id AS run_id, IFNULL(r.input_tokens, 0) AS i, "
            "IFNULL(r.output_tokens, 0) AS o, s.micro_usd AS m, s.unpriced_calls AS uc, s.unpriced_tokens AS ut, "
            f"s.unknown_usage_calls AS uu FROM runs r JOIN run_summaries s ON s.run_id = r.run_id{where}"
        )
    found, counted, outcomes = store.query(
        (f"SELECT d, k, {totals} FROM ({per_run}) GROUP BY d, k", parameters),
        (f"SELECT {day}, count(*) FROM runs r{where} GROUP BY 1", parameters),
        (
            f"SELECT {day}, o.run_id, o.name, o.label FROM outcomes o JOIN runs r ON r.run_id = o.run_id{where}",
            parameters,
        ),
        summaries=True,
    )
    days: dict[str, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = {}
    for d, *rest in found:
        days.setdefault(d, ([], []))[0].append(tuple(rest))
    for d, *rest in outcomes:
        days.setdefault(d, ([], []))[1].append(tuple(rest))
    runs = {d: int(n) for d, n in counted}
    return {d: _report(by, rows, runs.get(d, 0), of_day, outcome) for d, (rows, of_day) in days.items()}


def _report(
    by: str, found: Sequence[tuple[Any, ...]], runs: int, outcomes: Sequence[tuple[Any, ...]], outcome: str | None
) -> CostReport:
    """The report from its rows read (key, totals...), the runs counted and the outcomes (run id,
    name, label) of its runs."""
    name, label = parse_outcome(outcome)
    by_key: dict[str, CostRow] = {}
    per_row: dict[str, list[int]] = {}
    for key, _, tokens_in, tokens_out, micro_usd, unpriced_calls, unpriced_tokens, unknown, run_ids, micros in found:
        row_key = key or NONE  # NULL and '' alike, as `cost_rows` keys them
        row = CostRow(
            row_key,
            set(run_ids.split(",")),
            tokens_in,
            tokens_out,
            micro_usd,
            unpriced_calls,
            unpriced_tokens,
            unknown,
        )
        if row_key in by_key:
            by_key[row_key].merge(row)
        else:
            by_key[row_key] = row
        if micros is not None:
            per_row.setdefault(row_key, []).extend(int(m) for m in str(micros).split(","))
    rows = ordered_rows(by, by_key.values())
    labels = {run_id: text for run_id, of, text in outcomes if of == name}
    if labels:
        with_outcomes(rows, labels, label, name)
    elsewhere: dict[str, int] = {}
    if label not in labels.values():
        for _, of, text in outcomes:
            if text == label and of != name:
                elsewhere[of] = elsewhere.get(of, 0) + 1
    return CostReport(rows, runs, labels, name, label, elsewhere, per_row)


def cost_report(
    store: Store, by: str, *, since_ns: int | None = None, until_ns: int | None = None, outcome: str | None = None
) -> list[dict[str, Any]]:
    """The rows of `cost --json` (`store_cost`), each with `run_cost_usd` (`run_cost_stats`)."""
    return report_json(store_cost(store, by, since_ns=since_ns, until_ns=until_ns, outcome=outcome))


def cost_report_per_day(
    store: Store, by: str, *, since_ns: int | None = None, until_ns: int | None = None, outcome: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """`cost_report` for each UTC day of the range that has runs (`store_cost_per_day`)."""
    reports = store_cost_per_day(store, by, since_ns=since_ns, until_ns=until_ns, outcome=outcome)
    return {day: report_json(report) for day, report in sorted(reports.items())}


def report_json(report: CostReport) -> list[dict[str, Any]]:
    """The rows of `cost --json` of a report: each row's JSON with its `run_cost_usd`."""
    return [{**row.json(), "run_cost_usd": run_cost_stats(report.run_micros.get(row.key, []))} for row in report.rows]


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

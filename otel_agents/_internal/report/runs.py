"""The runs list `otel-agents runs` prints and the web page's runs page shows: the stored runs that
match a filter, sorted and paged in SQL over the `runs` table and each run's summary (its turns and
finding kinds, written by the store's writer), so no span is read.

A filter's values are checked here, each error naming the `runs` option it comes from, so the CLI
and the page say the same. Times: `since` and `until` are a while ago (`30m`, `24h`, `7d`, `2w`,
as `cost --since`) or an ISO 8601 date or time (UTC when it names no offset); a run is in the range
when it started at or after `since` and before `until`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, get_args

from otel_agents._internal.explain.findings import FINDING_KINDS
from otel_agents._internal.explain.model import iso_utc
from otel_agents._internal.export.store.schema import RUN_COLUMNS
from otel_agents._internal.export.store.usage import micro
from otel_agents._internal.report.cost import UTC_DAY_SQL, parse_outcome, parse_since
from otel_agents._internal.run.stop import StopKind

if TYPE_CHECKING:
    from otel_agents._internal.export.store.reader import Store, StoredOutcome, StoredRun

SORTS: Final = ("time", "cost", "duration", "tokens")
"""`time`: newest first; the others highest first (`tokens`: input + output), ties newest first."""
STOP_KINDS: Final = get_args(StopKind)
_AGO: Final = re.compile(r"\d+[mhdw]")
_ORDER: Final = MappingProxyType(
    {
        "time": "r.started_ns DESC",
        "cost": "r.cost_usd IS NULL, r.cost_usd DESC, r.started_ns DESC",
        "duration": "(r.ended_ns - r.started_ns) DESC, r.started_ns DESC",
        "tokens": "(IFNULL(r.input_tokens, 0) + IFNULL(r.output_tokens, 0)) DESC, r.started_ns DESC",
    }
)


@dataclass(frozen=True)
class RunFilter:
    """Which runs to list; each value given must match (`run_filter` checks them)."""

    team: str | None = None
    user_id: str | None = None
    stop_kind: str | None = None
    outcome: str | None = None
    """`LABEL` (of the outcome name `outcome`) or `NAME=LABEL`, as `cost --outcome`."""
    finding: str | None = None
    """One of explain's finding kinds (`FINDING_KINDS`)."""
    since_ns: int | None = None
    """Runs started at or after this time."""
    until_ns: int | None = None
    """Runs started before this time."""
    conversation: str | None = None
    """A conversation id, or a prefix of one."""


def _when(text: str, option: str, now_ns: int) -> int:
    """A while ago (`7d`) or an ISO 8601 date or time (UTC when it names no offset), in ns."""
    cleaned = text.strip()
    if _AGO.fullmatch(cleaned):
        return now_ns - parse_since(cleaned, option) * 1_000_000_000
    try:
        when = datetime.fromisoformat(cleaned)
    except ValueError:
        raise ValueError(
            f"{option} {text!r}: expected a while ago (30m, 24h, 7d, 2w) or an ISO 8601 date or time "
            "(2026-05-01, 2026-05-01T12:00, 2026-05-01T12:00+02:00; UTC unless it says)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


def _given(value: str | None) -> str | None:
    return value if value is not None and value.strip() else None


def run_filter(
    *,
    team: str | None = None,
    user_id: str | None = None,
    stop_kind: str | None = None,
    outcome: str | None = None,
    finding: str | None = None,
    since: str | None = None,
    until: str | None = None,
    conversation: str | None = None,
    now_ns: int | None = None,
) -> RunFilter:
    """A `RunFilter` from the values a user gave (empty ones ignored); ValueError naming the `runs`
    option of a bad one: an unknown stop kind or finding kind, a bad outcome or time, `since` after
    `until`."""
    now = time.time_ns() if now_ns is None else now_ns
    stop_kind, finding, outcome = _given(stop_kind), _given(finding), _given(outcome)
    if stop_kind is not None and stop_kind not in STOP_KINDS:
        raise ValueError(f"--stop-kind {stop_kind!r}: expected one of {', '.join(STOP_KINDS)}")
    if finding is not None and finding not in FINDING_KINDS:
        raise ValueError(f"--finding {finding!r}: expected one of {', '.join(FINDING_KINDS)}")
    if outcome is not None:
        parse_outcome(outcome)
    since_ns = _when(since, "--since", now) if _given(since) is not None and since is not None else None
    until_ns = _when(until, "--until", now) if _given(until) is not None and until is not None else None
    if since_ns is not None and until_ns is not None and since_ns > until_ns:
        raise ValueError(f"--since {since!r} is after --until {until!r}: nothing can match")
    return RunFilter(
        team=_given(team),
        user_id=_given(user_id),
        stop_kind=stop_kind,
        outcome=outcome,
        finding=finding,
        since_ns=since_ns,
        until_ns=until_ns,
        conversation=_given(conversation),
    )


@dataclass(frozen=True)
class RunsPage:
    rows: list[dict[str, Any]]
    """Exactly `runs --json`'s rows."""
    total: int
    """How many runs match the filter (for paging)."""


@dataclass(frozen=True)
class Listed:
    """What a run's summary adds to its row: its turns (None: it could not be explained) and the
    kinds of explain's findings for it (with the default thresholds)."""

    turns: int | None
    findings: tuple[str, ...]


def where_sql(where: RunFilter) -> tuple[str, list[Any]]:
    """The filter as a WHERE clause over `runs r` and `run_summaries s`, and its parameters."""
    clauses: list[str] = []
    parameters: list[Any] = []
    for column, value in (("r.team", where.team), ("r.user_id", where.user_id), ("r.stop_kind", where.stop_kind)):
        if value is not None:
            clauses.append(f"{column} = ?")
            parameters.append(value)
    if where.conversation is not None:
        clauses.append("substr(r.conversation_id, 1, ?) = ?")
        parameters += [len(where.conversation), where.conversation]
    if where.outcome is not None:
        name, label = parse_outcome(where.outcome)
        clauses.append("EXISTS (SELECT 1 FROM outcomes o WHERE o.run_id = r.run_id AND o.name = ? AND o.label = ?)")
        parameters += [name, label]
    if where.finding is not None:
        clauses.append("instr(s.findings, ?) > 0")  # a JSON array of kinds: the quoted kind is exact
        parameters.append(json.dumps(where.finding))
    if where.since_ns is not None:
        clauses.append("r.started_ns >= ?")
        parameters.append(where.since_ns)
    if where.until_ns is not None:
        clauses.append("r.started_ns < ?")
        parameters.append(where.until_ns)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), parameters


@dataclass(frozen=True)
class FoundRuns:
    """The runs of one page of a list, with what their rows show beside them."""

    runs: list[StoredRun]
    summaries: dict[str, Listed]
    outcomes: dict[str, list[StoredOutcome]]
    total: int


def find_runs(
    store: Store, where: RunFilter = RunFilter(), *, sort: str = "time", limit: int = 20, offset: int = 0
) -> FoundRuns:
    """The runs `where` matches, sorted by `sort` (`SORTS`), `limit` of them from `offset`, their
    summaries and outcomes, and how many match in all: `list_runs` as the runs themselves."""
    from otel_agents._internal.export.store.reader import StoredRun

    if sort not in SORTS:
        raise ValueError(f"--sort {sort!r}: expected one of {', '.join(SORTS)}")
    if limit < 0 or offset < 0:
        raise ValueError(f"--limit {limit}, offset {offset}: expected numbers of at least 0")
    clause, parameters = where_sql(where)
    joined = "FROM runs r LEFT JOIN run_summaries s ON s.run_id = r.run_id" + clause
    columns = ", ".join(f"r.{column.strip()}" for column in RUN_COLUMNS.split(","))
    page, counted = store.query(
        (
            f"SELECT {columns}, s.turns, s.findings {joined} ORDER BY {_ORDER[sort]}, r.rowid DESC LIMIT ? OFFSET ?",
            [*parameters, limit, offset],
        ),
        (f"SELECT count(*) {joined}", parameters),
        summaries=True,
    )
    runs = [StoredRun(*row[:-2]) for row in page]
    summaries = {row[0]: Listed(row[-2], tuple(json.loads(row[-1] or "[]"))) for row in page}
    outcomes = store.outcomes([run.run_id for run in runs]) if runs else {}
    return FoundRuns(runs, summaries, outcomes, int(counted[0][0]) if counted else 0)


def runs_per_day(store: Store, where: RunFilter = RunFilter()) -> dict[str, int]:
    """How many runs `where` matches (the runs `list_runs` lists) started each UTC day
    (`YYYY-MM-DD`), for the days that have any."""
    clause, parameters = where_sql(where)
    (counted,) = store.query(
        (
            f"SELECT {UTC_DAY_SQL}, count(*) "
            f"FROM runs r LEFT JOIN run_summaries s ON s.run_id = r.run_id{clause} GROUP BY 1",
            parameters,
        ),
        summaries=True,
    )
    return {day: int(count) for day, count in counted}


def summaries_of(store: Store, run_ids: Sequence[str]) -> dict[str, Listed]:
    """The summaries (turns, finding kinds) of `run_ids`, by run id."""
    wanted = list(dict.fromkeys(run_ids))
    statements = [
        (
            f"SELECT run_id, turns, findings FROM run_summaries WHERE run_id IN ({', '.join('?' * len(part))})",
            part,
        )
        for part in (wanted[at : at + 500] for at in range(0, len(wanted), 500))
    ]
    found = store.query(*statements, summaries=True) if statements else []
    return {row[0]: Listed(row[1], tuple(json.loads(row[2] or "[]"))) for rows in found for row in rows}


def list_runs(
    store: Store, where: RunFilter = RunFilter(), *, sort: str = "time", limit: int = 20, offset: int = 0
) -> RunsPage:
    """The rows of `runs --json` for the runs `where` matches, sorted by `sort` (`SORTS`): newest
    first for `time`, highest first for the others (ties newest first); `limit` of them from
    `offset`; and how many match in all. In SQL over the runs and their summaries."""
    found = find_runs(store, where, sort=sort, limit=limit, offset=offset)
    rows = [
        run_json(run, found.outcomes.get(run.run_id, ()), summary=found.summaries.get(run.run_id)) for run in found.runs
    ]
    return RunsPage(rows, found.total)


def run_json(
    run: StoredRun,
    outcomes: Sequence[StoredOutcome] = (),
    micro_usd: int | None = None,
    summary: Listed | None = None,
) -> dict[str, Any]:
    """A run as `runs --json` gives it; `micro_usd`: its cost as its calls add up (default: its own,
    rounded once); `summary`: its turns and finding kinds (`turns`, `findings`), in `runs --json`."""
    if micro_usd is None and run.cost_usd is not None:
        micro_usd = micro(run.cost_usd)
    row: dict[str, Any] = {
        "run_id": run.run_id,
        "trace_id": run.trace_id,
        "team": run.team,
        "user_id": run.user_id,
        "session_id": run.session_id,
        "conversation_id": run.conversation_id,
        "started_at": iso_utc(run.started_ns),
        "duration_s": round((run.ended_ns - run.started_ns) / 1e9, 6),
        "messages": run.messages,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "cost_usd": None if micro_usd is None else micro_usd / 1_000_000,  # as `cost` counts it
        "stop_reason": run.stop_reason,
        "stop_kind": run.stop_kind,
        "unknown_usage_calls": run.unknown_calls or 0,
        "outcomes": [outcome.to_dict() for outcome in outcomes],
    }
    if summary is not None:
        row["turns"] = summary.turns
        row["findings"] = list(summary.findings)
    return row

"""Terminal rendering of stored runs with rich: the runs table, a run's trace tree with a waterfall,
the cost report with a bar per row. Imported by the CLI's commands only (rich stays out of
`import otel_agents`).

Piped output (not a terminal) has no colour and a width of 160 columns, so `grep` and scripts see
whole rows; the head lines of `show` are never wrapped.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, TextIO

from rich import box
from rich.bar import Bar
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from otel_agents._internal import keys as sc
from otel_agents._internal.explain.model import iso_utc
from otel_agents._internal.export.store.reader import StoredOutcome, StoredRun, StoredSpan
from otel_agents._internal.report.cost import OUTCOME_NAME, CostRow, micro
from otel_agents._internal.report.runs import Listed, run_json
from otel_agents._internal.report.trace import failed, shown_costs, span_json, tree_order

__all__ = ["iso_utc", "run_json"]  # `runs --json`'s rows are the report's

_BAR: Final = 24
_GUIDE: Final = 4
"""The width rich's tree guides take per level ("├── ")."""
_PIPED_WIDTH: Final = 160
_NAME_WIDTH: Final = 60
_MAX_OTHERS: Final = 20
"""`show` lists at most this many other runs of the conversation (the first ones), then how many more."""
_STYLES: Final = MappingProxyType(
    {
        sc.OPERATION_INVOKE_WORKFLOW: "bold blue",
        sc.OPERATION_INVOKE_AGENT: "green",
        sc.OPERATION_CHAT: "cyan",
        sc.OPERATION_EXECUTE_TOOL: "magenta",
    }
)


def console(file: TextIO | None = None) -> Console:
    stream = file if file is not None else sys.stdout
    width = None if stream.isatty() else _PIPED_WIDTH  # a terminal: rich reads its width (and COLUMNS)
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def _started(ns: int) -> str:
    return iso_utc(ns)[:19].replace("T", " ")


UNKNOWN: Final = "?"
"""A cost (or token count) not known: a model call reported no usage (a stream without usage)."""


def run_money(run: StoredRun, micro_usd: int | None = None) -> str:
    """A run's cost (`micro_usd`, else its own rounded once), to the micro-dollar as every command
    shows it: "?" when a call reported no usage, "-" when a model had no price."""
    if run.unknown_calls:
        return UNKNOWN
    if micro_usd is None and run.cost_usd is not None:
        micro_usd = micro(run.cost_usd)
    return micro_money(micro_usd)


def _short(value: str | None, width: int = 12) -> str:
    if not value:
        return ""
    return value if len(value) <= width else value[: width - 1] + "…"


def _plain_table(**kwargs: Any) -> Table:
    return Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1), **kwargs)


def outcomes_text(outcomes: Sequence[StoredOutcome]) -> str:
    """`success`, `quality=good (0.8)`: as `explain` writes them."""
    from otel_agents._internal.explain.text import outcome_text

    return ", ".join(outcome_text(o.name, o.label, o.score) for o in outcomes)


def runs_table(
    runs: Sequence[StoredRun],
    outcomes: Mapping[str, Sequence[StoredOutcome]] | None = None,
    findings: Mapping[str, Sequence[str]] | None = None,
) -> Table:
    """One line per run under a one-line header (no borders: `split()` finds the run id first);
    an OUTCOME column where any run has one, a FINDINGS column (explain's kinds) where any run has one."""
    findings = {run_id: kinds for run_id, kinds in (findings or {}).items() if kinds}
    table = _plain_table()
    table.add_column("RUN", no_wrap=True, min_width=12)
    table.add_column("STARTED (UTC)", no_wrap=True, min_width=19)
    table.add_column("TEAM", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("USER", no_wrap=True, overflow="ellipsis", max_width=20)
    table.add_column("CONVERSATION", no_wrap=True)
    table.add_column("DUR", justify="right", no_wrap=True)
    table.add_column("MSGS", justify="right", no_wrap=True)
    table.add_column("TOKENS", justify="right", no_wrap=True)
    table.add_column("COST", justify="right", no_wrap=True)
    table.add_column("STOP", no_wrap=True)
    if outcomes:
        table.add_column("OUTCOME", no_wrap=True, overflow="ellipsis", max_width=32)
    if findings:
        table.add_column("FINDINGS", no_wrap=True, overflow="ellipsis", max_width=48)
    for run in runs:
        tokens = (run.input_tokens or 0) + (run.output_tokens or 0)
        table.add_row(
            run.run_id[:12],
            _started(run.started_ns),
            run.team or "",
            run.user_id or "",
            _short(run.conversation_id),
            f"{(run.ended_ns - run.started_ns) / 1e9:.2f}s",
            str(run.messages or 0),
            f"{tokens:,}+{UNKNOWN}" if run.unknown_calls else f"{tokens:,}",
            run_money(run),
            run.stop_kind or "",
            *([outcomes_text(outcomes.get(run.run_id, ()))] if outcomes else []),
            *([",".join(findings.get(run.run_id, ()))] if findings else []),
        )
    return table


def _details(span: StoredSpan, costs: Mapping[str, int | None]) -> str:
    """The span's agent, tokens and cost (`costs`: the micro-dollars shown for the span ids that
    carry a cost), and its error."""
    attributes = span.attributes
    parts: list[str] = []
    agent = attributes.get(sc.GEN_AI_AGENT_NAME)
    if agent:
        parts.append(str(agent))
    tokens_in, tokens_out = (
        attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS),
        attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    )
    if tokens_in is not None or tokens_out is not None:
        parts.append(f"{tokens_in or 0:,} in / {tokens_out or 0:,} out")
    elif attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OPERATION_CHAT and sc.ERROR_TYPE not in attributes:
        parts.append(f"{UNKNOWN} tokens (no usage reported)")
    cost = costs.get(span.span_id) if sc.COST_USD in attributes else None
    if cost is not None:
        parts.append(micro_money(cost))
    if failed(span):
        parts.append(f"ERROR {attributes.get(sc.ERROR_TYPE, '')}".rstrip())
    return "  ".join(parts)


def _style(span: StoredSpan) -> str:
    if failed(span):
        return "bold red"
    return _STYLES.get(str(span.attributes.get(sc.GEN_AI_OPERATION_NAME, "")), "")


def _waterfall(span: StoredSpan, start: int, total: int) -> Bar:
    """The span's place in the run: at least one cell wide, so every span shows."""
    if total <= 0:
        return Bar(1, 0, 1, width=_BAR)
    cell = total / _BAR
    begin = float(span.start_ns - start)
    end = max(float(span.end_ns - start), begin + cell)
    if end > total:
        begin, end = max(0.0, total - cell), float(total)
    return Bar(total, begin, end, width=_BAR, color=_style(span).replace("bold ", "") or "default")


def _span_line(
    span: StoredSpan, depth: int, name_width: int, start: int, total: int, costs: Mapping[str, int | None]
) -> Table:
    line = Table.grid(padding=(0, 2))
    line.add_column(width=max(8, name_width - _GUIDE * depth), no_wrap=True, overflow="ellipsis")
    line.add_column(width=_BAR, no_wrap=True)
    line.add_column(width=9, justify="right", no_wrap=True)
    line.add_column(no_wrap=True)
    duration = (span.end_ns - span.start_ns) / 1e9
    line.add_row(
        Text(span.name, style=_style(span)), _waterfall(span, start, total), f"{duration:.3f}s", _details(span, costs)
    )
    return line


def _line(text: str) -> Text:
    """A line printed whole, never wrapped or cut (the terminal wraps it if it must)."""
    return Text(text, no_wrap=True, overflow="ignore")


def _who(run: StoredRun) -> str:
    parts = [f"{label} {value}" for label, value in (("user", run.user_id), ("session", run.session_id)) if value]
    parts.append(f"conversation {run.conversation_id}" if run.conversation_id else "no conversation recorded")
    return "  ·  ".join(parts)


def trace_tree(run: StoredRun, spans: Sequence[StoredSpan], others: Sequence[StoredRun] = ()) -> RenderableType:
    """The run's head lines (ids; team, totals, stop; who and which conversation), its trace as a tree
    (name, waterfall bar, duration, then agent, tokens and cost per span: each call its share of the
    run's cost, so the calls add up to it), and the conversation's other runs."""
    total, costs = shown_costs(run, spans)
    start = min((s.start_ns for s in spans), default=run.started_ns)
    end = max((s.end_ns for s in spans), default=run.ended_ns)
    rows = tree_order(spans)
    name_width = max(
        min(_NAME_WIDTH, max((len(s.name) + _GUIDE * depth for depth, s in rows), default=10)),
        max((_GUIDE * depth + 12 for depth, _ in rows), default=12),
    )
    head = [
        _line(f"run {run.run_id}  trace {run.trace_id}"),
        _line(
            f"{run.team or ''}: {run.messages or 0} messages, "
            f"{run.input_tokens or 0:,} in / {run.output_tokens or 0:,} out, "
            f"cost {run_money(run, total)}, stopped: {run.stop_reason or run.stop_kind or '-'}"
        ),
        _line(_who(run)),
        _line(""),
    ]
    trees: list[RenderableType] = []
    nodes: dict[str, Tree] = {}
    for depth, span in rows:
        line = _span_line(span, depth, name_width, start, end - start, costs)
        parent = nodes.get(span.parent_span_id or "") if depth else None
        node = parent.add(line) if parent is not None else Tree(line, guide_style="dim")
        if parent is None:
            trees.append(node)
        nodes[span.span_id] = node
    return Group(*head, *trees, *conversation_runs(run, others))


def conversation_runs(run: StoredRun, others: Sequence[StoredRun]) -> list[RenderableType]:
    if not run.conversation_id:
        return []
    if not others:
        return [_line(""), _line(f"no other runs of conversation {run.conversation_id} in the store")]
    table = _plain_table()
    table.add_column("RUN", no_wrap=True)
    table.add_column("STARTED (UTC)", no_wrap=True)
    table.add_column("TEAM", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("MSGS", justify="right", no_wrap=True)
    table.add_column("COST", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for other in others[:_MAX_OTHERS]:
        when = "before" if other.started_ns < run.started_ns else "after"
        table.add_row(
            other.run_id,
            _started(other.started_ns),
            other.team or "",
            str(other.messages or 0),
            run_money(other),
            when,
        )
    title = f"{len(others)} other run{'s' if len(others) != 1 else ''} of conversation {run.conversation_id}:"
    more = len(others) - _MAX_OTHERS
    rest = [_line(f"and {more} more: otel-agents runs --conversation {run.conversation_id}")] if more > 0 else []
    return [_line(""), _line(title), table, *rest]


def trace_json(
    run: StoredRun,
    spans: Sequence[StoredSpan],
    others: Sequence[StoredRun] = (),
    outcomes: Mapping[str, Sequence[StoredOutcome]] | None = None,
    summaries: Mapping[str, Listed] | None = None,
) -> dict[str, Any]:
    outcomes = outcomes or {}
    summaries = summaries or {}
    total, _ = shown_costs(run, spans)
    return {
        "run": run_json(run, outcomes.get(run.run_id, ()), total, summaries.get(run.run_id)),
        "conversation_runs": [
            run_json(other, outcomes.get(other.run_id, ()), summary=summaries.get(other.run_id)) for other in others
        ],
        "spans": [span_json(s) for _, s in tree_order(spans)],
    }


def micro_money(micro_usd: int | None) -> str:
    """Exact: integer micro-dollars as dollars with six decimals."""
    if micro_usd is None:
        return "-"
    return f"${micro_usd // 1_000_000:,}.{micro_usd % 1_000_000:06d}"


UNPRICED: Final = "-"
"""A cost not known because a model has no price (its tokens are counted)."""


def cost_marks(row: CostRow) -> str:
    """What a cost row's priced part leaves out: "-" unpriced tokens, "?" calls of unknown usage."""
    unpriced = UNPRICED if row.unpriced_calls or row.unpriced_tokens else ""
    return unpriced + (UNKNOWN if row.unknown_usage_calls else "")


def _cost_cell(row: CostRow, widths: tuple[int, int]) -> str:
    """The priced part, then its marks; the marks alone when nothing in the row is priced. With
    `widths` (of the money, of the marks) the digits of every row stay in line."""
    marks = cost_marks(row)
    money = micro_money(row.micro_usd) if row.micro_usd is not None or not marks else ""
    money_width, marks_width = widths
    if not marks_width:
        return money
    return f"{money.rjust(money_width)} {marks}"


def cost_table(by: str, rows: Sequence[CostRow], total: CostRow, title: str) -> Table:
    """A row per key with a bar of its priced cost, then the total (the exact sum of the rows' costs)."""
    everything = [*rows, total]
    widths = (max(len(micro_money(row.micro_usd)) for row in everything), len(cost_marks(total)))
    marked = widths[1] > 0  # the cells left-justified (rich drops a cell's trailing spaces)
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE, show_edge=False, show_footer=True, header_style="bold"
    )
    table.add_column(by.upper(), "total", no_wrap=True, overflow="ellipsis", max_width=40)
    table.add_column("RUNS", str(total.runs), justify="right", no_wrap=True)
    table.add_column("INPUT TOKENS", f"{total.input_tokens:,}", justify="right", no_wrap=True)
    table.add_column("OUTPUT TOKENS", f"{total.output_tokens:,}", justify="right", no_wrap=True)
    cost = _cost_cell(total, widths)
    table.add_column("COST (USD)", cost, justify="left" if marked else "right", no_wrap=True)
    table.add_column("SHARE", "", justify="right", no_wrap=True)
    table.add_column("", "", width=_BAR, no_wrap=True)
    outcomes = total.outcomes is not None
    if outcomes:
        from otel_agents._internal.explain.text import outcome_text

        label = outcome_text(total.outcome_name, total.outcome, None).upper()
        counted = str((total.outcomes or {}).get(total.outcome, 0))
        table.add_column(Text(label), counted, justify="right", no_wrap=True)  # a label is text, not markup
        table.add_column(Text(f"PER {label}"), micro_money(total.micro_usd_per_outcome), justify="right", no_wrap=True)
    largest = max((row.micro_usd or 0 for row in rows), default=0)
    for row in rows:
        priced = row.micro_usd is not None
        share = f"{100 * (row.micro_usd or 0) / total.micro_usd:.1f}%" if priced and total.micro_usd else ""
        bar = Bar(largest, 0, row.micro_usd or 0, width=_BAR, color="cyan") if priced and largest else Text("")
        table.add_row(
            Text(row.key, style="italic dim" if row.key.startswith("(") else ""),
            str(row.runs),
            f"{row.input_tokens:,}",
            f"{row.output_tokens:,}",
            _cost_cell(row, widths),
            share,
            bar,
            *(
                [str((row.outcomes or {}).get(row.outcome, 0)), micro_money(row.micro_usd_per_outcome)]
                if outcomes
                else []
            ),
        )
    return table


def _calls(n: int) -> str:
    return f"{n:,} model call{'s' if n != 1 else ''}"


def cost_notes(total: CostRow) -> list[str]:
    """The lines under the cost table: what its costs leave out."""
    notes: list[str] = []
    if total.unpriced_calls or total.unpriced_tokens:
        tokens = f"{total.unpriced_tokens:,} token{'s' if total.unpriced_tokens != 1 else ''}"
        calls = f" ({_calls(total.unpriced_calls)})" if total.unpriced_calls else ""
        notes.append(f"{UNPRICED} {tokens}{calls} had no price: they are not in the cost")
    if total.unknown_usage_calls:
        n = total.unknown_usage_calls
        notes.append(
            f"{UNKNOWN} {_calls(n)} reported no usage: {'its' if n == 1 else 'their'} tokens and cost are unknown"
        )
    return notes


def outcome_notes(name: str, label: str, elsewhere: Mapping[str, int]) -> list[str]:
    """The line under the cost table when no run has the outcome `--outcome` asked for, but runs have
    that label under other names (`elsewhere`: name -> runs): which, and the flag that counts them."""
    from otel_agents._internal.explain.text import outcome_text

    if not elsewhere:
        return []
    asked = (
        f"{label!r} (of the default name {OUTCOME_NAME!r})" if name == OUTCOME_NAME else outcome_text(name, label, None)
    )
    found = ", ".join(
        f"{runs:,} run{'s' if runs != 1 else ''} {'has' if runs == 1 else 'have'} it as {other!r}: "
        f"--outcome {outcome_text(other, label, None)}"
        for other, runs in sorted(elsewhere.items())
    )
    return [f"no run has the outcome {asked}; {found}"]

"""The text view of an explanation: one screen, read in 20 seconds. The run in one line; where the
tokens and the cost went per agent; the turns in order, each with a bar of its share of the run's
tokens (a long run folded: its first and last turns and the costliest); the context's growth; the
costliest turn; what repeated; the findings with their suggestions. Plain text, no colour: the
same in a terminal, a pipe and a file."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Final

from otel_agents._internal.explain.model import NO_AGENT, Explanation, Turn, iso_utc, seconds

FOLD_KEEP: Final = 10
"""A folded run shows its first and its last this many turns, and the costliest."""
_BAR: Final = 20
_EIGHTHS: Final = " ▏▎▍▌▋▊▉"
_WIDTH: Final = 100
_REPEATS_SHOWN: Final = 10
_TURNS_SHOWN: Final = 12


def money(micro_usd: int | None, unknown: bool = False) -> str:
    """Exact: `$0.000461`; `?` when a call reported no usage, `-` when a model had no price."""
    if micro_usd is None:
        return "?" if unknown else "-"
    return f"${micro_usd // 1_000_000:,}.{micro_usd % 1_000_000:06d}"


def bar(share: float) -> str:
    """A bar of `share` (0..1) of `_BAR` cells, in eighths; at least a sliver when above 0."""
    eighths = round(max(0.0, min(1.0, share)) * _BAR * 8)
    if share > 0 and eighths == 0:
        eighths = 1
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _table(rows: Sequence[Sequence[str]], right: Sequence[bool], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(row, widths, right, strict=True)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def outcome_text(name: str, label: str, score: float | None) -> str:
    """`success`, `quality=good (0.8)`: the default name left out."""
    shown = label if name == "outcome" else f"{name}={label}"
    return shown if score is None else f"{shown} ({score:g})"


def summary_line(e: Explanation) -> str:
    """The first line `explain` prints: team, duration, turns, calls, tokens, cost, how it stopped
    (the web page's run summary too)."""
    return _head(e)[0]


def _head(e: Explanation) -> list[str]:
    run = e.run
    unknown = run.unknown_usage_calls > 0
    tokens = f"{run.input_tokens:,} in / {run.output_tokens:,} out tokens" + ("+?" if unknown else "")
    parts = [
        run.team or {"core": "(no run span)", "open": "(open run)"}.get(e.shape, "(no team)"),
        f"{seconds(run.duration_ns):.3f}s",
        _plural(run.turns, "turn"),
        _plural(run.calls, "model call"),
        tokens,
        money(run.micro_usd, unknown),
    ]
    if e.shape == "core":
        stopped = "no stop reason (no run span)"
    elif e.shape == "open":
        stopped = "still open: no stop reason yet"
    else:
        reason = f" ({run.stop_reason})" if run.stop_reason and run.stop_reason != run.stop_kind else ""
        stopped = f"stopped: {run.stop_kind or 'unknown'}{reason}"
    ids = f"run {run.run_id}  trace {run.trace_id}" if run.run_id else f"trace {run.trace_id}"
    lines = [" · ".join([*parts, stopped]), f"{ids}  started {iso_utc(run.started_ns)}"]
    if run.outcomes:
        lines.append("outcome: " + ", ".join(outcome_text(*outcome) for outcome in run.outcomes))
    if e.shape == "on_messages":
        lines.append(
            "an agent's on_messages call: one agent answering, no team and no turns; its model calls are its own"
        )
    elif e.shape == "core":
        lines.append(
            f"no run span (an autogen-core app, or model calls outside any run): explained from its "
            f"{_plural(run.calls, 'model call')}, each handler's call of the runtime a turn; messages, "
            "stop reason and repeated messages are not known"
        )
    elif e.shape == "open":
        lines.append(
            f"an open run: its run span has not ended (the run is still going, or its process stopped "
            f"before it ended): explained from its {_plural(run.turns, 'turn')} and "
            f"{_plural(run.calls, 'model call')} so far; its team, messages and stop reason are not known yet"
        )
    return lines


def _agents(e: Explanation) -> list[str]:
    if not e.agents:
        return []
    rows: list[list[str]] = [["AGENT", "TURNS", "CALLS", "INPUT", "OUTPUT", "COST", "SHARE", ""]]
    for agent in e.agents:
        rows.append(
            [
                agent.agent,
                f"{agent.turns:,}",
                f"{agent.calls:,}",
                f"{agent.input_tokens:,}",
                f"{agent.output_tokens:,}",
                money(agent.micro_usd, agent.unknown_usage_calls > 0),
                f"{agent.token_share:.1%}",
                bar(agent.token_share),
            ]
        )
    title = "where the tokens went" + (
        " (speaker selection and other calls of no agent: (team))" if any(a.agent == NO_AGENT for a in e.agents) else ""
    )
    return ["", title, *_table(rows, [False, True, True, True, True, True, True, False])]


def _folded(turns: Sequence[Turn], costliest: int | None, every: bool) -> list[Turn | int]:
    """The turns shown, and in place of each run of turns left out, how many."""
    if every or len(turns) <= 2 * FOLD_KEEP + 1:
        return list(turns)
    shown = {t.index for t in turns[:FOLD_KEEP]} | {t.index for t in turns[-FOLD_KEEP:]}
    if costliest is not None:
        shown.add(costliest)
    out: list[Turn | int] = []
    left_out = 0
    for turn in turns:
        if turn.index in shown:
            if left_out:
                out.append(left_out)
                left_out = 0
            out.append(turn)
        else:
            left_out += 1
    return out


def _turns(e: Explanation, every: bool) -> list[str]:
    if not e.turns:
        return []
    total = sum(t.tokens for t in e.turns) + sum(a.tokens for a in e.agents if a.agent == NO_AGENT)
    costliest = e.costliest_turn.index if e.costliest_turn is not None else None
    nested = any(t.team != e.run.team for t in e.turns)
    header = ["#", "AGENT", *(["TEAM"] if nested else []), "START", "DUR", "CALLS", "INPUT", "OUTPUT", "COST"]
    rows: list[list[str]] = [[*header, "TOOLS", ""]]
    folds: dict[int, str] = {}
    """Where a run of left-out turns goes (its line in the table), and what it says."""
    for item in _folded(e.turns, costliest, every):
        if isinstance(item, int):
            folds[len(rows) + len(folds)] = f"  … {_plural(item, 'turn')} (--all shows every turn)"
            continue
        tools = ""
        if item.tool_calls:
            tools = f"{item.tool_calls}" + (f" ({item.tool_errors} failed)" if item.tool_errors else "")
        rows.append(
            [
                str(item.index),
                item.agent,
                *([item.team or ""] if nested else []),
                f"{seconds(item.start_ns):.3f}s",
                f"{seconds(item.duration_ns):.3f}s",
                f"{item.calls:,}",
                f"{item.input_tokens:,}",
                f"{item.output_tokens:,}",
                money(item.micro_usd, item.unknown_usage_calls > 0),
                tools,
                bar(item.tokens / total) if total else "",
            ]
        )
    right = [True, False, *([False] if nested else []), True, True, True, True, True, True, False, False]
    lines = _table(rows, right)
    for position, fold in sorted(folds.items()):  # a fold's line spans the columns: put in after
        lines.insert(position, fold)
    return ["", "turns, in order (bar: the turn's share of the run's tokens)", *lines]


def _context(e: Explanation) -> list[str]:
    context = e.context
    if context.first_input_tokens is None:
        return ["", "context: no turn's model call reported its input tokens"]
    if context.growth_tokens_per_turn is None:
        return [
            "",
            f"context: {context.first_input_tokens:,} input tokens at the first turn, "
            f"{context.last_input_tokens or 0:,} at the last (growth needs 3 turns with a model call)",
        ]
    return [
        "",
        f"context: {context.first_input_tokens:,} input tokens at the first turn's first call, "
        f"{context.last_input_tokens or 0:,} at the last; growth {context.growth_tokens_per_turn:+,.1f} "
        f"tokens a turn over {_plural(context.turns_measured, 'turn')}",
    ]


def _costliest(e: Explanation) -> list[str]:
    top = e.costliest_turn
    if top is None:
        return []
    what = money(top.micro_usd) if top.by == "cost" else f"{top.input_tokens + top.output_tokens:,} tokens"
    by = "" if top.by == "cost" else " (by tokens: not every turn is priced)"
    return [
        f"costliest turn: #{top.index} {top.agent}, {what} ({top.input_tokens:,} in / {top.output_tokens:,} out){by}"
    ]


def _repeats(e: Explanation) -> list[str]:
    if not e.repeats:
        nothing = "nothing repeated" if e.shape != "core" else "no tool call repeated"
        return ["", f"{nothing} (same text from the same agent, same tool with the same arguments)"]
    lines = ["", "what repeated"]
    for repeat in e.repeats[:_REPEATS_SHOWN]:
        who = repeat.agent or "several agents"
        shown = ", ".join(str(t) for t in repeat.turns[:_TURNS_SHOWN])
        more = ", …" if len(repeat.turns) > _TURNS_SHOWN else ""
        turns = f"  turns {shown}{more}" if repeat.turns else ""
        if repeat.kind == "message":
            lines.append(f"  {who} said the same message {repeat.count:,} times{turns}")
        else:
            tool = repeat.tool or "a tool"
            lines.append(f"  {who} called {tool} with the same arguments {repeat.count:,} times{turns}")
    if len(e.repeats) > _REPEATS_SHOWN:
        lines.append(f"  and {_plural(len(e.repeats) - _REPEATS_SHOWN, 'more repeat')} (--json lists them all)")
    return lines


def _findings(e: Explanation) -> list[str]:
    if not e.findings:
        return ["", "findings: none"]
    lines = ["", "findings"]
    for finding in e.findings:
        head = f"  {finding.severity} {finding.kind}: "
        lines.append(textwrap.fill(finding.text, _WIDTH, initial_indent=head, subsequent_indent="    "))
        lines.append(textwrap.fill(finding.suggestion, _WIDTH, initial_indent="    → ", subsequent_indent="      "))
    return lines


def render(e: Explanation, *, every_turn: bool = False) -> str:
    """The text view; `every_turn`: no folding."""
    lines = [
        *_head(e),
        *_agents(e),
        *_turns(e, every_turn),
        *_context(e),
        *_costliest(e),
        *_repeats(e),
        *_findings(e),
    ]
    return "\n".join(lines)

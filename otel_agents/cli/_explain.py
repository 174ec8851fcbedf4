"""`otel-agents explain`: where a run's tokens and cost went, what repeated, why it stopped.

    otel-agents explain RUN [--json] [--all]           # from the store: a run id, a prefix, or a trace id
    otel-agents explain TRACE_ID --jaeger URL [--json] # from Jaeger's query API (/api/v3)
    otel-agents explain --file FILE [RUN] [--json]     # from OTLP JSON: Jaeger's answer, or OTLP/JSON lines

Cheap to import (the parser is built with every command's): what it reads and draws with is
imported when it runs. Errors are `ExplainError` (bad input, an unknown id: exit 2) and
`Unreachable` (exit 1), which `_main` turns into its own.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_agents._internal.explain.findings import Thresholds
    from otel_agents._internal.explain.model import Explanation
    from otel_agents._internal.export.store.reader import Store

_THRESHOLD_OPTIONS = (
    ("--context-growth", float, "TOKENS", "context_growth above this many tokens a turn (default 500)"),
    ("--context-growth-turns", int, "N", "... over at least this many turns (default 6)"),
    ("--repeated-messages", int, "N", "repeated_messages at this many times one agent says one message (default 3)"),
    ("--repeated-tool-calls", int, "N", "repeated_tool_calls at this many same calls of a tool (default 3)"),
    ("--tool-errors", int, "N", "tool_errors at this many failed tool calls (default 1)"),
    ("--dominant-share", float, "SHARE", "dominant_agent above this share of the tokens, 0 to 1 (default 0.7)"),
    ("--dominant-agents", int, "N", "... for one agent of at least this many (default 3)"),
)


def add_parser(commands: Any) -> None:
    """`explain` and its options, on the CLI's subcommands."""
    explain = commands.add_parser(
        "explain", help="where a run's tokens and cost went, what repeated, why it stopped, and what to change"
    )
    explain.add_argument(
        "run",
        nargs="?",
        help="a run id (or a unique prefix) or a trace id in the store; with --jaeger the trace id; "
        "with --file the run (needed when the file holds several)",
    )
    source = explain.add_mutually_exclusive_group()
    source.add_argument("--jaeger", metavar="URL", help="read the trace from Jaeger's query API at this base URL")
    source.add_argument("--file", metavar="FILE", help="read OTLP JSON: Jaeger's /api/v3 answer, or OTLP/JSON lines")
    explain.add_argument("--run", dest="run_in_trace", metavar="RUN", help="the run, when the trace holds several")
    explain.add_argument("--json", action="store_true", help="the explanation as JSON")
    explain.add_argument("--all", action="store_true", help="every turn (default: a long run folded)")
    for option, kind, metavar, text in _THRESHOLD_OPTIONS:
        explain.add_argument(option, type=kind, metavar=metavar, help=text)


def _thresholds(args: argparse.Namespace) -> Thresholds:
    from otel_agents._internal.explain.errors import ExplainError
    from otel_agents._internal.explain.findings import Thresholds

    given = {f.name: getattr(args, f.name) for f in fields(Thresholds) if getattr(args, f.name, None) is not None}
    try:
        return Thresholds(**given)
    except ValueError as error:  # named as the option is
        option, _, rest = str(error).partition("=")
        raise ExplainError(f"--{option.replace('_', '-')} {rest}") from None


def run(args: argparse.Namespace, existing_store: Callable[[str | None], Store]) -> int:
    """Read the trace, explain the run, print it (text, or `--json`)."""
    from otel_agents._internal.explain import readers
    from otel_agents._internal.explain.analysis import explain_spans
    from otel_agents._internal.explain.errors import ExplainError
    from otel_agents._internal.explain.text import render
    from otel_agents._internal.report.explained import explain_stored

    thresholds = _thresholds(args)
    chosen = args.run_in_trace
    explanation: Explanation | None = None
    if args.jaeger is not None:
        if args.run is None:
            raise ExplainError("--jaeger URL needs the trace id: otel-agents explain TRACE_ID --jaeger URL")
        read = readers.read_jaeger(args.jaeger, args.run, chosen)
    elif args.file is not None:
        if args.run is not None and chosen is not None and args.run != chosen:
            raise ExplainError(f"two runs named: {args.run} and --run {chosen}; name one")
        read = readers.read_file(Path(args.file), chosen or args.run)
    else:
        if args.run is None:
            raise ExplainError(
                "name a run: otel-agents explain RUN (a run id from `otel-agents runs`, or a trace id), "
                "or read a trace with --jaeger URL or --file FILE"
            )
        explanation = explain_stored(existing_store(args.store), args.run, thresholds, run=chosen)
    if explanation is None:
        explanation = explain_spans(read.spans, read.run, thresholds, where=read.where)
    if args.json:
        print(json.dumps(explanation.to_dict(), indent=2))
    else:
        print(render(explanation, every_turn=args.all))
    return 0

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from otel_agents._internal.config.params import environment
from otel_agents._internal.config.settings import ConfigError, store_dir
from otel_agents._internal.report.cost import DIMENSIONS
from otel_agents._internal.report.runs import SORTS
from otel_agents._version import __version__

from ._explain import add_parser as add_explain_parser
from ._prices import add_parser as add_prices_parser
from ._prices import run as prices
from ._serve_demo_model import add_parser as add_serve_demo_model_parser
from ._serve_demo_model import run as serve_demo_model
from ._ui import MissingExtra
from ._ui import add_parser as add_ui_parser

if TYPE_CHECKING:
    from otel_agents._internal.export.store.reader import Store

EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad usage or an unknown run: exit 2."""


class RunTimeFailure(Exception):
    """A failure while doing what was asked (an unreachable endpoint): exit 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="otel-agents", description="Traces of AutoGen team runs, in the terminal.")
    parser.add_argument("--version", action="version", version=f"otel-agents {__version__}")
    parser.add_argument(
        "--store",
        help="the embedded store directory (default: OTEL_AGENTS_STORE, else the user data directory)",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    commands.add_parser("demo", help="run an offline demo team, then show its trace")
    runs = commands.add_parser("runs", help="list stored runs, newest first")
    runs.add_argument("--limit", type=int, default=20, help="at most this many runs (default 20)")
    runs.add_argument("--team", help="only the runs of this team")
    runs.add_argument("--user", help="only the runs of this user id")
    runs.add_argument("--conversation", help="only the runs of this conversation (an id, or a prefix of one)")
    runs.add_argument("--stop-kind", metavar="KIND", help="only the runs that stopped so (max_messages, error, ...)")
    runs.add_argument(
        "--outcome", metavar="[NAME=]LABEL", help="only the runs with this outcome: LABEL (of outcome), or NAME=LABEL"
    )
    runs.add_argument(
        "--finding", metavar="KIND", help="only the runs explain finds this of (context_growth, tool_errors, ...)"
    )
    runs.add_argument("--since", help="only runs started since: 30m, 24h, 7d, 2w ago, or an ISO 8601 date or time")
    runs.add_argument("--until", help="only runs started before: 30m, 24h, 7d, 2w ago, or an ISO 8601 date or time")
    runs.add_argument("--sort", default="time", choices=SORTS, help="newest first (time), else highest first")
    runs.add_argument("--json", action="store_true", help="a JSON array instead of a table")
    cost = commands.add_parser("cost", help="tokens and cost of the stored runs, totalled per team, model, ...")
    cost.add_argument("--by", default="team", choices=DIMENSIONS, help="what a row is (default: team)")
    cost.add_argument("--since", help="only runs started in this last while: 30m, 24h, 7d, 2w")
    cost.add_argument("--until", help="only runs started before this while ago: 30m, 24h, 7d, 2w")
    cost.add_argument("--json", action="store_true", help="a JSON array of rows instead of a table")
    cost.add_argument(
        "--outcome",
        metavar="[NAME=]LABEL",
        help="where runs have outcomes: the one the spend per run is of, LABEL of the default name "
        "(outcome) or NAME=LABEL (default: success)",
    )
    show = commands.add_parser("show", help="show one run's trace as a tree with a waterfall")
    show.add_argument("run", help="a run id, or a unique prefix of one")
    show.add_argument("--json", action="store_true")
    export = commands.add_parser("export", help="replay stored runs to an OTLP endpoint, ids and times kept")
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("run", nargs="?", help="a run id, or a unique prefix of one")
    which.add_argument("--all", action="store_true", help="every stored span")
    export.add_argument("--endpoint", help="OTLP base URL (default: the OTEL_EXPORTER_OTLP_* variables)")
    export.add_argument("--protocol", choices=("grpc", "http/protobuf"))
    add_explain_parser(commands)
    add_serve_demo_model_parser(commands)
    add_prices_parser(commands)
    add_ui_parser(commands)
    return parser


def _store_dir(argument: str | None) -> Path:
    """`--store`, else OTEL_AGENTS_STORE, else the user data directory's store."""
    return store_dir(argument, environment(strict=True))  # the CLI refuses a bad variable (exit 2)


def _existing_store(argument: str | None) -> Store:
    """The store to read: its directory must exist (a mistyped --store is not "no runs yet")."""
    from otel_agents._internal.export.store.reader import Store

    directory = _store_dir(argument)
    if not directory.exists():
        raise UsageError(f"no store at {directory}: the directory does not exist")
    if not directory.is_dir():
        raise UsageError(f"no store at {directory}: not a directory")
    return Store(directory, notice=lambda text: print(f"otel-agents: note: {text}", file=sys.stderr))


def _runs(args: argparse.Namespace) -> int:
    from otel_agents._internal.report.runs import find_runs, run_filter, run_json

    from ._render import console, runs_table

    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: expected a number of at least 1")
    given = {
        "team": args.team,
        "user_id": args.user,
        "conversation": args.conversation,
        "stop_kind": args.stop_kind,
        "outcome": args.outcome,
        "finding": args.finding,
        "since": args.since,
        "until": args.until,
    }
    try:
        where = run_filter(**given)
    except ValueError as error:
        raise UsageError(str(error)) from None
    found = find_runs(_existing_store(args.store), where, sort=args.sort, limit=args.limit)
    filtered = any(value is not None for value in given.values())
    if args.json:
        rows = [
            run_json(r, found.outcomes.get(r.run_id, ()), summary=found.summaries.get(r.run_id)) for r in found.runs
        ]
        print(json.dumps(rows, indent=2))
    elif not found.runs:
        print("no runs match" if filtered else "no runs yet")
    else:
        findings = {run_id: listed.findings for run_id, listed in found.summaries.items()}
        console().print(runs_table(found.runs, found.outcomes, findings))
    return 0


def _show(args: argparse.Namespace) -> int:
    from otel_agents._internal.export.store.reader import RunNotFound, run_subtree

    from ._render import console, trace_json, trace_tree

    store = _existing_store(args.store)
    try:
        run = store.find_run(args.run)
    except RunNotFound as error:  # a store that cannot be read is a failure at run time
        raise UsageError(str(error)) from None
    spans = run_subtree(run.run_id, store.spans(run.trace_id))
    others = (
        [r for r in store.conversation_runs(run.conversation_id) if r.run_id != run.run_id]
        if run.conversation_id
        else []
    )
    if args.json:
        from otel_agents._internal.report.runs import summaries_of

        ids = [run.run_id, *(other.run_id for other in others)]
        print(json.dumps(trace_json(run, spans, others, store.outcomes(ids), summaries_of(store, ids)), indent=2))
    else:
        console().print(trace_tree(run, spans, others))
    return 0


def _cost(args: argparse.Namespace) -> int:
    import time

    from otel_agents._internal.report.cost import BY_CALL, parse_since, run_cost_stats, store_cost, total

    from ._render import console, cost_notes, cost_table, iso_utc, outcome_notes

    now = time.time_ns()
    try:
        since_ns = None if args.since is None else now - parse_since(args.since) * 1_000_000_000
        until_ns = None if args.until is None else now - parse_since(args.until, "--until") * 1_000_000_000
        if since_ns is not None and until_ns is not None and since_ns > until_ns:
            raise ValueError(f"--since {args.since!r} is after --until {args.until!r}: nothing can match")
        report = store_cost(
            _existing_store(args.store), args.by, since_ns=since_ns, until_ns=until_ns, outcome=args.outcome
        )
    except ValueError as error:
        raise UsageError(str(error)) from None
    rows = report.rows
    if args.json:
        print(
            json.dumps(
                [{**row.json(), "run_cost_usd": run_cost_stats(report.run_micros.get(row.key, []))} for row in rows],
                indent=2,
            )
        )
        return 0
    if not report.runs:
        print("no runs match" if since_ns is not None or until_ns is not None else "no runs yet")
        return 0
    whole = total(rows, report.labels, report.outcome, report.name)
    what = "model calls of " if args.by in BY_CALL else ""
    when = f" started since {iso_utc(since_ns)[:16].replace('T', ' ')} UTC ({args.since})" if since_ns else ""
    if until_ns is not None:
        when += (
            f" {'and' if since_ns else 'started'} before {iso_utc(until_ns)[:16].replace('T', ' ')} UTC ({args.until})"
        )
    title = f"cost by {args.by}: {what}{report.runs} run{'s' if report.runs != 1 else ''}{when}"
    out = console()
    out.print(cost_table(args.by, rows, whole, title))
    for note in cost_notes(whole):
        out.print(note)
    if (
        args.outcome is not None and report.outcome not in report.labels.values()
    ):  # asked for, and none: under what name?
        for note in outcome_notes(report.name, report.outcome, report.elsewhere):
            out.print(note, markup=False)  # labels and names are the app's text
    return 0


def _export(args: argparse.Namespace) -> int:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from otel_agents._internal.config.settings import resolve_settings
    from otel_agents._internal.export.exporters import otlp_span_exporter
    from otel_agents._internal.export.replay import readable_spans
    from otel_agents._internal.export.store.reader import RunNotFound

    store = _existing_store(args.store)
    if args.all:
        spans = store.spans()
    else:
        try:
            run = store.find_run(args.run)
        except RunNotFound as error:  # a store that cannot be read is a failure at run time
            raise UsageError(str(error)) from None
        spans = store.spans(run.trace_id)
    settings = resolve_settings(
        endpoint=args.endpoint, protocol=args.protocol, store=False, environ=environment(strict=True)
    )
    if settings.traces.endpoint is None:
        raise UsageError("no OTLP endpoint: pass --endpoint URL or set OTEL_EXPORTER_OTLP_ENDPOINT")
    logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)  # one line of ours instead
    exporter = otlp_span_exporter(settings.traces)
    try:
        sent = 0
        readable = readable_spans(spans)
        for start in range(0, len(readable), 512):
            batch = readable[start : start + 512]
            if exporter.export(batch) is not SpanExportResult.SUCCESS:
                where = settings.traces.endpoint or "the configured endpoint"
                raise RunTimeFailure(f"could not export to {where} ({sent} of {len(readable)} spans sent)")
            sent += len(batch)
    finally:
        exporter.shutdown()
    print(f"exported {sent} spans")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from otel_agents._internal.explain.errors import ExplainError, Unreachable

    from ._explain import run

    try:
        return run(args, _existing_store)
    except ExplainError as error:  # bad input, an unknown id, not a run
        raise UsageError(str(error)) from None
    except Unreachable as error:
        raise RunTimeFailure(str(error)) from None


def _demo(args: argparse.Namespace) -> int:
    import otel_agents
    from otel_agents._internal.export.store.reader import Store, run_subtree
    from otel_agents._internal.export.store.writer import StoreWriter
    from otel_agents._internal.export.store_path import unwritable

    from ._demo import run_demo
    from ._render import console, trace_tree

    store_dir = _store_dir(args.store)
    problem = unwritable(store_dir)
    if problem is not None:
        raise RunTimeFailure(problem)
    with otel_agents.configure(store=store_dir) as telemetry:
        run_ids = asyncio.run(run_demo())
        telemetry.force_flush()
    store = Store(store_dir)
    run = store.find_run(run_ids[0])
    print()
    console().print(trace_tree(run, run_subtree(run.run_id, store.spans(run.trace_id))))
    StoreWriter(store_dir).settle()  # the demo wrote the store: it leaves it closed, as a run's process does
    command = called = how_to_call()
    if args.store is not None:
        command += f" --store {shlex.quote(args.store)}"
    print(f"\nstored in {store_dir}; from this shell:")
    print(f"  the runs       {command} runs")
    print(f"  this one       {command} show {run_ids[0][:8]}")
    print(f"  cost per user  {command} cost --by user")
    print(f"  in a web page  {command} ui")
    activate = _activate_script() if os.sep in called.split()[0] else None  # a path: not on PATH
    if activate is not None:
        print(f"  (after 'source {activate}', 'otel-agents ...' alone does the same)")
    return 0


def _ui(args: argparse.Namespace) -> int:
    from ._ui import run

    try:
        return run(args, _store_dir)
    except ValueError as error:
        raise UsageError(str(error)) from None


def how_to_call() -> str:
    """The command that runs this otel-agents from the caller's shell: `otel-agents` when that is
    the one on PATH, else its script's path (relative when under the working directory), else this
    Python's `-m otel_agents`."""
    script = Path(sys.argv[0]) if sys.argv and Path(sys.argv[0]).name == "otel-agents" else None
    if script is not None:
        on_path = shutil.which("otel-agents")
        if on_path is not None and os.path.abspath(on_path) == os.path.abspath(script):
            return "otel-agents"
        return _shown(script)
    for python in ("python", "python3"):
        on_path = shutil.which(python)  # a venv's python links to the base one: compare paths, not files
        if on_path is not None and os.path.abspath(on_path) == os.path.abspath(sys.executable):
            return f"{python} -m otel_agents"
    return f"{_shown(Path(sys.executable))} -m otel_agents"


def _shown(path: Path) -> str:
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    shown = absolute if relative.startswith(os.pardir) else relative
    return shlex.quote(shown if os.sep in shown else f".{os.sep}{shown}")


def _activate_script() -> str | None:
    """The activate script of the virtual environment this otel-agents runs from, if any."""
    if sys.prefix == sys.base_prefix:
        return None
    activate = Path(sys.prefix) / "bin" / "activate"
    return _shown(activate) if activate.is_file() else None


def main(argv: list[str] | None = None) -> int:
    from otel_agents._internal.export.store.schema import StoreError, StoreVersionError

    try:
        args = _parser().parse_args(argv)
        command = {
            "demo": _demo,
            "runs": _runs,
            "show": _show,
            "cost": _cost,
            "export": _export,
            "explain": _explain,
            "serve-demo-model": serve_demo_model,
            "prices": prices,
            "ui": _ui,
        }[args.command]
        return command(args)
    except MissingExtra as error:  # one line that says which `pip install` brings it
        print(f"otel-agents: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, ConfigError, StoreVersionError) as error:
        print(f"otel-agents: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except RunTimeFailure as error:
        print(f"otel-agents: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except StoreError as error:  # a store that cannot be read (locked past the timeout, damaged)
        print(f"otel-agents: error: {error}".splitlines()[0], file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("otel-agents: interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:  # `otel-agents runs | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit then goes nowhere
        return 0
    except Exception as error:  # one line, never a traceback
        print(f"otel-agents: error: {type(error).__name__}: {error}".splitlines()[0], file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    raise SystemExit(main())

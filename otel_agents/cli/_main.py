from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import NoReturn

from otel_agents._internal.config.settings import ConfigError, store_dir
from otel_agents._version import __version__

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
    runs.add_argument("--json", action="store_true", help="a JSON array instead of a table")
    show = commands.add_parser("show", help="show one run's trace as a tree with a waterfall")
    show.add_argument("run", help="a run id, or a unique prefix of one")
    show.add_argument("--json", action="store_true")
    export = commands.add_parser("export", help="replay stored runs to an OTLP endpoint, ids and times kept")
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("run", nargs="?", help="a run id, or a unique prefix of one")
    which.add_argument("--all", action="store_true", help="every stored span")
    export.add_argument("--endpoint", help="OTLP base URL (default: the OTEL_EXPORTER_OTLP_* variables)")
    export.add_argument("--protocol", choices=("grpc", "http/protobuf"))
    return parser


def _store_dir(argument: str | None) -> Path:
    """`--store`, else OTEL_AGENTS_STORE, else the user data directory's store."""
    return store_dir(argument)


def _runs(args: argparse.Namespace) -> int:
    from otel_agents._internal.export.store import Store

    from ._render import run_json, runs_table

    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: expected a number of at least 1")
    runs = Store(_store_dir(args.store)).runs(limit=args.limit)
    if args.json:
        print(json.dumps([run_json(r) for r in runs], indent=2))
    elif not runs:
        print("no runs yet")
    else:
        print(runs_table(runs))
    return 0


def _show(args: argparse.Namespace) -> int:
    from otel_agents._internal.export.store import Store, StoreError

    from ._render import trace_json, trace_tree

    store = Store(_store_dir(args.store))
    try:
        run = store.find_run(args.run)
    except StoreError as error:
        raise UsageError(str(error)) from None
    spans = store.spans(run.trace_id)
    if args.json:
        print(json.dumps(trace_json(run, spans), indent=2))
    else:
        print(trace_tree(run, spans))
    return 0


def _export(args: argparse.Namespace) -> int:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from otel_agents._internal.config.settings import resolve_settings
    from otel_agents._internal.export.exporters import otlp_span_exporter
    from otel_agents._internal.export.replay import readable_spans
    from otel_agents._internal.export.store import Store, StoreError

    store = Store(_store_dir(args.store))
    if args.all:
        spans = store.spans()
    else:
        try:
            run = store.find_run(args.run)
        except StoreError as error:
            raise UsageError(str(error)) from None
        spans = store.spans(run.trace_id)
    settings = resolve_settings(endpoint=args.endpoint, protocol=args.protocol, store=False)
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


def _demo(args: argparse.Namespace) -> int:
    import otel_agents
    from otel_agents._internal.export.store import Store

    from ._demo import run_demo
    from ._render import trace_tree

    store_dir = _store_dir(args.store)
    with otel_agents.configure(store=store_dir) as telemetry:
        run_id = asyncio.run(run_demo())
        telemetry.force_flush()
    store = Store(store_dir)
    run = store.find_run(run_id)
    print()
    print(trace_tree(run, store.spans(run.trace_id)))
    print(f"\nstored in {store_dir}; list runs with 'otel-agents runs', this one with 'otel-agents show {run_id[:8]}'")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        command = {"demo": _demo, "runs": _runs, "show": _show, "export": _export}[args.command]
        return command(args)
    except (UsageError, ConfigError) as error:
        print(f"otel-agents: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except RunTimeFailure as error:
        print(f"otel-agents: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("otel-agents: interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as error:  # one line, never a traceback
        print(f"otel-agents: error: {type(error).__name__}: {error}".splitlines()[0], file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    raise SystemExit(main())

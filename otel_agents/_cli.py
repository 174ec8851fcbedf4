"""The `otel-agents` command."""

from __future__ import annotations

import argparse
import sys

from ._version import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="otel-agents", description="OpenTelemetry for AutoGen team runs.")
    parser.add_argument("--version", action="version", version=f"otel-agents {__version__}")
    parser.parse_args(argv)
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

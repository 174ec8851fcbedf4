#!/usr/bin/env bash
# The benchmarks, from a fresh clone: installs otel-agents with the `bench` extra (OpenInference's
# AgentChat instrumentor) into .venv and Arize Phoenix into .venv-phoenix, then runs
# `python -m benchmarks` (extra arguments go to it; --quick for a short run). Writes BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh '[test,bench]'
PHOENIX_VERSION=20.26.1
if ! .venv-phoenix/bin/python -c "import phoenix, sys; sys.exit(phoenix.__version__ != '$PHOENIX_VERSION')" 2>/dev/null; then
  rm -rf .venv-phoenix
  "$PYTHON" -m venv .venv-phoenix
  .venv-phoenix/bin/python -m pip install -q --disable-pip-version-check "arize-phoenix==$PHOENIX_VERSION"
fi
export OTEL_AGENTS_TEST_PHOENIX="$PWD/.venv-phoenix/bin/phoenix"
exec .venv/bin/python -m benchmarks "$@"

#!/usr/bin/env bash
# The benchmarks, from a fresh clone: installs otel-agents with the `bench` extra (OpenInference's
# AgentChat instrumentor) into .venv and Arize Phoenix into .venv-phoenix, then runs
# `python -m benchmarks` (extra arguments go to it; --quick for a short run). Writes BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh '[test,bench]'
source scripts/_phoenix.sh
exec .venv/bin/python -m benchmarks "$@"

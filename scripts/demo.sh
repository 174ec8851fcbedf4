#!/usr/bin/env bash
# The demo, from a fresh clone: installs otel-agents into .venv and runs `otel-agents demo`
# (an offline team; its trace lands in the embedded store and is shown here). Extra arguments go
# to `otel-agents`, before the command (e.g. --store DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
exec .venv/bin/otel-agents "$@" demo

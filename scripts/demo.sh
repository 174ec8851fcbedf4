#!/usr/bin/env bash
# The demo, from a fresh clone: installs otel-agents into .venv and runs `otel-agents demo`
# (an offline team; its trace lands in the embedded store and is shown here). Extra arguments go
# to `otel-agents`, before the command (e.g. --store DIR). It runs in the caller's directory, so
# that the commands it prints at the end (`.venv/bin/otel-agents runs`, ...) work as printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
(cd "$root" && source scripts/_venv.sh "[openai,ui]")  # AutoGen's OpenAI client (the quick start) and the web page
exec "$root/.venv/bin/otel-agents" "$@" demo

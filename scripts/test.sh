#!/usr/bin/env bash
# The whole test suite, from a fresh clone: creates .venv, installs what the tests need (Arize
# Phoenix in its own .venv-phoenix, Debian's docker-compose, prometheus and alertmanager), runs
# lint, the type check and pytest. The tests start and stop
# their servers themselves, on 127.0.0.1. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh '[test]'

# Debian packages the tests run for real: docker-compose (validates deploy/ without an engine),
# Prometheus with promtool, and Alertmanager.
missing=()
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing Debian packages: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

source scripts/_phoenix.sh

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy otel_agents
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"

#!/usr/bin/env bash
# The whole test suite, from a fresh clone: creates .venv, installs what the tests need, runs
# lint, the type check and pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
  else
    echo "python3-venv is missing: run 'sudo apt-get install python3-venv' and try again" >&2
    exit 1
  fi
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy otel_agents
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"

# Sourced by the scripts here: makes .venv with otel-agents installed (extras in $1).
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
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${1:-}"

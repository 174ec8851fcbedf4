# Sourced by the scripts here: Arize Phoenix in its own .venv-phoenix, named in
# OTEL_AGENTS_TEST_PHOENIX for the tests and benchmarks that start it.
PHOENIX_VERSION=20.26.1
if ! .venv-phoenix/bin/python -c "import phoenix, sys; sys.exit(phoenix.__version__ != '$PHOENIX_VERSION')" 2>/dev/null; then
  rm -rf .venv-phoenix
  "$PYTHON" -m venv .venv-phoenix
  .venv-phoenix/bin/python -m pip install -q --disable-pip-version-check "arize-phoenix==$PHOENIX_VERSION"
fi
export OTEL_AGENTS_TEST_PHOENIX="$PWD/.venv-phoenix/bin/phoenix"

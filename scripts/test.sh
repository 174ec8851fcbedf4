#!/usr/bin/env bash
# The whole test suite, from a fresh clone: creates .venv, installs what the tests need (Arize
# Phoenix in its own .venv-phoenix, OpenLIT in its own .venv-openlit, Debian's docker-compose,
# prometheus, alertmanager and chromium; builds Jaeger and the Collector from their Go modules where
# Go is installed), runs lint, the type check, the layer contract (lint-imports) and the strict docs
# build; then, only when no pytest arguments are given, the tests marked for each further run (the
# markers in pyproject.toml say what each selects): the AutoGen- and SDK-facing tests
# (`lowest_versions`) on the lowest supported versions (.venv-lowest), the OpenLIT test (`openlit`,
# .venv-openlit), the AutoGen-facing tests (`every_autogen`) on every AutoGen release between the
# lowest and the newest (.venv-autogen), and the tests that touch the interpreter most
# (`every_python`) on every newer Python this machine has (.venv-py3.N); last, the whole suite on
# the newest versions. The tests start and stop their servers themselves, on 127.0.0.1. Extra
# arguments go to the whole suite's pytest (`-m "not backend and not slow"` leaves out the tests
# that start a real backend and the slowest others).
set -euo pipefail
cd "$(dirname "$0")/.."

# Jaeger v2 and the OpenTelemetry Collector, built from their Go modules at the versions deploy/
# pins; scripts/build_backends.sh keeps each binary in ~/.cache/otel-agents/bin by version, so only
# the first run on a machine builds (some 20 minutes on two cores). It builds in the background
# while the Python environments install (mostly downloads), and is waited for before the tests.
# In a session of its own, so that the trap below stops the whole build when this script stops
# early (a failed step, Ctrl-C); it writes each binary as .partial and renames it when done.
build_log=$(mktemp)
setsid bash scripts/build_backends.sh >/dev/null 2>"$build_log" &
build_pid=$!
trap 'kill -- -"$build_pid" 2>/dev/null || kill "$build_pid" 2>/dev/null || true; cat "$build_log" >&2; rm -f "$build_log"' EXIT

source scripts/_venv.sh '[test]'

# Debian packages the tests run for real: docker-compose (validates deploy/ without an engine),
# Prometheus with promtool, Alertmanager, and chromium (the web page's tests drive it headless
# through Playwright, which comes from PyPI: its own browser download is never used).
missing=()
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager)
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing Debian packages: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

source scripts/_phoenix.sh


# The lowest versions otel-agents supports (ci/lowest.txt: AutoGen 0.7.0, OpenTelemetry 1.43, and the
# floors of every other dependency), in a second environment without OpenInference, for the tests
# that touch AutoGen, the SDK, util-genai, wrapt and rich most.
[ -x .venv-lowest/bin/python ] || "$PYTHON" -m venv .venv-lowest
.venv-lowest/bin/python -m pip install -q --disable-pip-version-check -c ci/lowest.txt -e ".[test-core]"

# OpenLIT's OpenAI instrumentation, which otel-agents' model calls must not be doubled by
# (tests/test_openlit.py), in an environment of its own: OpenLIT requires openai<3, and the main
# environment's AutoGen stack has openai 3. About 90 s the first time, 35 s once installed.
[ -x .venv-openlit/bin/python ] || "$PYTHON" -m venv .venv-openlit
.venv-openlit/bin/python -m pip install -q --disable-pip-version-check -e ".[test-core]" "openlit>=1.45" "openai<3"

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy otel_agents
.venv/bin/lint-imports
# The documentation site (mkdocs.yml), built --strict into a directory thrown away after: a broken
# link, anchor or docstring reference fails the test command.
site=$(mktemp -d)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site"
rm -rf "$site"
newest_venv=""
# The further runs first, when no pytest arguments are given: they need neither Jaeger nor the
# Collector, so on a fresh machine they run while those still build.
if [ $# -eq 0 ]; then
  echo "== lowest versions ($(.venv-lowest/bin/python -m pip list --format=freeze 2>/dev/null | grep -E '^(autogen-agentchat|opentelemetry-sdk)==' | tr '\n' ' '))"
  .venv-lowest/bin/python -m pytest -q -p no:cacheprovider -m lowest_versions
  echo "== OpenLIT ($(.venv-openlit/bin/python -m pip list --format=freeze 2>/dev/null | grep -E '^(openlit|openai)==' | tr '\n' ' '))"
  .venv-openlit/bin/python -m pytest -q -p no:cacheprovider -m openlit
  # Every AutoGen release between those two ends (ci/autogen-releases.txt), one at a time, in a
  # third environment with the newest of everything else.
  [ -x .venv-autogen/bin/python ] || "$PYTHON" -m venv .venv-autogen
  .venv-autogen/bin/python -m pip install -q --disable-pip-version-check -e ".[test-core]"
  for release in $(sed -e '/^#/d' ci/autogen-releases.txt); do
    .venv-autogen/bin/python -m pip install -q --disable-pip-version-check \
      "autogen-core==$release" "autogen-agentchat==$release" "autogen-ext[openai,grpc]==$release"
    echo "== AutoGen $release"
    .venv-autogen/bin/python -m pytest -q -p no:cacheprovider -m every_autogen
  done
  # Newer Pythons (requires-python is >=3.11): each one found here (on PATH, or pyenv's), with the
  # newest versions of everything; a machine with Python 3.11 only says it skipped them. The newest
  # one found also runs the tests marked `newest_python` (the fault matrix), once the backends are
  # built; without a newer Python the whole suite below runs them.
  for version in $(sed -e '/^#/d' ci/pythons.txt); do
    interpreter=""
    for candidate in "$(command -v "python$version" || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version"; do
      if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c 'import ensurepip, venv' 2>/dev/null; then
        interpreter=$candidate
        break
      fi
    done
    if [ -z "$interpreter" ]; then
      echo "== Python $version: not on this machine, skipped"
      continue
    fi
    [ -x ".venv-py$version/bin/python" ] || "$interpreter" -m venv ".venv-py$version"
    ".venv-py$version/bin/python" -m pip install -q --disable-pip-version-check -e ".[test-core]"
    echo "== Python $(".venv-py$version/bin/python" -c 'import platform; print(platform.python_version())')"
    ".venv-py$version/bin/python" -m pytest -q -p no:cacheprovider -m every_python
    newest_venv=".venv-py$version"
  done
fi

# The backends' build (started above): without Go, their tests skip and say why.
built=0
wait "$build_pid" || built=$?
trap - EXIT
cat "$build_log" >&2
rm -f "$build_log"
case $built in
  0) ;;
  3) echo "== Go is not installed: the tests of Jaeger and the Collector skip" ;;
  *) exit "$built" ;;
esac

if [ $# -eq 0 ] && [ -n "$newest_venv" ]; then
  echo "== the newest Python, $("$newest_venv/bin/python" -c 'import platform; print(platform.python_version())'): the tests marked newest_python"
  "$newest_venv/bin/python" -m pytest -q -p no:cacheprovider -m newest_python
fi

echo "== newest versions: the whole suite"
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"

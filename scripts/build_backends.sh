#!/usr/bin/env bash
# Builds the real backends the tests run, from their Go modules at the versions pinned here:
#   Jaeger v2 from deploy/jaeger/go.mod (module github.com/jaegertracing/jaeger, program cmd/jaeger),
#   the OpenTelemetry Collector from deploy/collector/manifest.yaml with the builder pinned in
#   deploy/collector/go.mod.
# Each binary is kept outside the clone, named by its version, in $OTEL_AGENTS_BIN_DIR (default
# ~/.cache/otel-agents/bin), so a second run, a fresh clone or CI on the same machine builds nothing;
# the Go module and build caches stay where Go keeps them. Prints one NAME=path line per binary.
# Exits 3, saying so, when Go is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

go=$(command -v go || true)
if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then
  go=/usr/local/go/bin/go
fi
if [ -z "$go" ]; then
  echo "Go is not installed: Jaeger and the Collector are not built, their tests skip" >&2
  exit 3
fi

bin_dir=${OTEL_AGENTS_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/otel-agents/bin}
mkdir -p "$bin_dir"
# One build at a time per cache: a second caller (the tests, while the test command's own build
# runs in the background) waits for the first, then finds the binaries built.
exec 9>"$bin_dir/.build.lock"
flock 9

# Named by the module's version and the hash of go.mod and go.sum: the same version built against
# other dependency versions (a go.mod tidied from another release's) is another binary.
jaeger_version=$("$go" -C deploy/jaeger list -m -f '{{.Version}}' github.com/jaegertracing/jaeger)
jaeger_hash=$(cat deploy/jaeger/go.mod deploy/jaeger/go.sum | sha256sum | cut -c1-8)
jaeger="$bin_dir/jaeger-$jaeger_version-$jaeger_hash"
if [ ! -x "$jaeger" ]; then
  echo "building Jaeger $jaeger_version (module github.com/jaegertracing/jaeger) into $bin_dir" >&2
  started=$SECONDS
  "$go" -C deploy/jaeger build -trimpath -o "$jaeger.partial" github.com/jaegertracing/jaeger/cmd/jaeger
  mv "$jaeger.partial" "$jaeger"
  echo "built $(basename "$jaeger") in $((SECONDS - started)) s" >&2
fi

# The Collector's name carries the manifest's own hash too: a component added at the same release
# is a new binary.
collector_version=$(sed -n 's/^  version: *//p' deploy/collector/manifest.yaml)
manifest_hash=$(cat deploy/collector/manifest.yaml deploy/collector/go.mod | sha256sum | cut -c1-8)
collector="$bin_dir/otelcol-otel-agents-$collector_version-$manifest_hash"
if [ ! -x "$collector" ]; then
  echo "building the Collector $collector_version (deploy/collector/manifest.yaml) into $bin_dir" >&2
  started=$SECONDS
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$go" -C deploy/collector build -o "$work/builder" go.opentelemetry.io/collector/cmd/builder
  (cd "$work" && PATH="$(dirname "$go"):$PATH" ./builder --config "$repo/deploy/collector/manifest.yaml" >"$work/builder.log" 2>&1) || {
    tail -40 "$work/builder.log" >&2
    exit 1
  }
  mv "$work/otelcol-otel-agents/otelcol-otel-agents" "$collector"
  echo "built $(basename "$collector") in $((SECONDS - started)) s" >&2
fi

echo "OTEL_AGENTS_TEST_JAEGER=$jaeger"
echo "OTEL_AGENTS_TEST_COLLECTOR=$collector"

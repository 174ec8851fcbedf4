"""Runs sampled in the process (`OTEL_AGENTS_SAMPLE_RUNS`): what it costs a service, and what waits.

    python -m benchmarks.sampling [--rounds 100] [--concurrency 16] [--latency-ms 50] [--open-runs 1000]
                                  [--traces-only]

1. The service benchmark (`benchmarks.service`: concurrent two-agent runs through the real OpenAI
   client against a local server) with otel-agents exporting over OTLP/HTTP to a local sink (an
   HTTP server on 127.0.0.1 that reads each request and answers 200), so the export work is in the
   measure: untraced, default settings, and `OTEL_AGENTS_SAMPLE_RUNS=0.1`, alternated round by
   round in one sitting. The target (of the benchmark, never of a test): at 0.1 throughput within
   1.05x of untraced, and no worse than the default.
2. The memory waiting spans take (tracemalloc, the process's Python allocations): `concurrency`
   runs open at once, then `open-runs`, each holding the spans of its first turns while it waits
   for its decision (ratio 0, no rule: every run waits), against the bound
   (`OTEL_AGENTS_SAMPLE_MAX_WAITING_SPANS`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import service  # noqa: E402

MODES = ("untraced", "otel-agents-otlp", "otel-agents-otlp-sampled")
TRACES_ONLY = ("otel-agents-otlp-traces", "otel-agents-otlp-sampled-traces")
"""With `--traces-only`: the same with OTEL_METRICS_EXPORTER=none, to tell the spans' cost from the metrics'."""


@contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint on 127.0.0.1 that reads each request whole and answers 200."""

    class Sink(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def held_while_open(open_runs: int, *, sampled: bool) -> tuple[int, int, int]:
    """(bytes allocated, spans waiting, the bound) with `open_runs` team runs open at once, each
    three items in; `sampled`: every run waits for its decision (ratio 0, no rule), else none does."""
    import otel_agents
    from benchmarks.workloads import CountingExporter
    from otel_agents._internal.export.sampling import RunSamplingProcessor
    from tests.support.teams import writers_room

    telemetry = otel_agents.configure(
        span_exporter=CountingExporter(), store=False, sample_runs=0 if sampled else 1, keep_runs=""
    )
    samplers = [p for p in telemetry._processors if isinstance(p, RunSamplingProcessor)]
    streams = [otel_agents.tap(writers_room(max_messages=9).run_stream(task="go")) for _ in range(open_runs)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for stream in streams:  # each run open, three items in (its task, two answers, their calls)
        for _ in range(3):
            await stream.__anext__()
    telemetry.force_flush()  # what the batch queue holds goes: only what waits stays
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    waiting = samplers[0].waiting_spans if samplers else 0
    bound = samplers[0].sampling.max_waiting_spans if samplers else 0
    for stream in streams:
        await stream.aclose()
    telemetry.shutdown()
    return held, waiting, bound


async def waiting_memory(open_runs: int) -> dict[str, float]:
    """The memory spans waiting for their run's decision take: the same runs open with and without
    waiting, the difference over the spans waiting."""
    held, waiting, bound = await held_while_open(open_runs, sampled=True)
    unsampled, _, _ = await held_while_open(open_runs, sampled=False)
    per_span = (held - unsampled) / max(1, waiting)
    return {
        "open_runs": open_runs,
        "waiting_spans": waiting,
        "waiting_mb": (held - unsampled) / 1e6,
        "per_span_kb": per_span / 1e3,
        "bound_spans": bound,
        "bound_mb": bound * per_span / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sampling", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds of concurrent runs per mode (default 100)")
    parser.add_argument("--concurrency", type=int, default=16, help="team runs at once (default 16)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the model server's answer time (default 50)")
    parser.add_argument("--open-runs", type=int, default=1000, help="runs open at once for the memory (default 1000)")
    parser.add_argument(
        "--traces-only", action="store_true", help="also both OTLP modes with OTEL_METRICS_EXPORTER=none"
    )
    args = parser.parse_args(argv)
    modes = MODES + TRACES_ONLY if args.traces_only else MODES
    with otlp_sink() as endpoint:
        os.environ["BENCH_OTLP_ENDPOINT"] = endpoint  # the workers, spawned now, read it
        results = service.measure(args.rounds, args.concurrency, args.latency_ms / 1e3, modes)
    print(
        f"{args.rounds} rounds of {args.concurrency} concurrent runs, {args.latency_ms:g} ms a model call, "
        "exporting over OTLP/HTTP to a local sink (ratios: the mode over untraced)"
    )
    print("\n".join(service.table(results)))
    print("\nmemory of the spans waiting for their run's decision (tracemalloc, with waiting less without):")
    print("| runs open | spans waiting | MB | KB a span | bound (spans) | MB at the bound |")
    print("|---:|---:|---:|---:|---:|---:|")
    for open_runs in (args.concurrency, args.open_runs):
        m = asyncio.run(waiting_memory(open_runs))
        print(
            f"| {m['open_runs']:.0f} | {m['waiting_spans']:.0f} | {m['waiting_mb']:.1f} | {m['per_span_kb']:.1f} | "
            f"{m['bound_spans']:.0f} | {m['bound_mb']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Runs sampled in the process (`OTEL_AGENTS_SAMPLE_RUNS`): what it costs a service, and what waits.

    python -m benchmarks.sampling [--rounds 100] [--concurrency 16] [--latency-ms 50] [--open-runs 1000]
                                  [--traces-only] [--in-process] [--reference TREE] [--no-memory] [--json FILE]

1. The service benchmark (`benchmarks.service`: concurrent two-agent runs through the real OpenAI
   client against a local server) exporting over OTLP/HTTP to a local sink, so the export work is
   in the measure. The sink (an HTTP server on 127.0.0.1 that reads each request, answers 200, then
   counts the spans and metric points it carried, by the sender's `service.name`) runs in a
   process of its own, as a collector would. Modes, each in a worker process of its own, alternated
   round by round in one sitting: untraced; AutoGen's built-in tracing exporting through the SDK's
   own `BatchSpanProcessor(OTLPSpanExporter)` (`autogen-otlp`); otel-agents with default settings
   and the endpoint (traces and metrics, as the endpoint turns both on), and the same with
   `OTEL_AGENTS_SAMPLE_RUNS=0.1`. `--traces-only` adds both otel-agents modes with
   OTEL_METRICS_EXPORTER=none (what the metrics cost); `--in-process` adds AutoGen's and
   otel-agents' spans to a counting exporter in the process (what encoding and sending cost).
   `--reference TREE` adds each otel-agents OTLP mode with otel_agents imported from another tree (a
   worktree of an older commit), as `MODE@TREE`, in the same sitting. The
   targets (of the benchmark, never of a test): otel-agents with the endpoint within 1.08x of
   untraced in throughput and below `autogen-otlp`; sampled at 0.1 within 1.05x.
2. The memory waiting spans take (tracemalloc, the process's Python allocations): `concurrency`
   runs open at once, then `open-runs`, each holding the spans of its first turns while it waits
   for its decision (ratio 0, no rule: every run waits), against the bound
   (`OTEL_AGENTS_SAMPLE_MAX_WAITING_SPANS`). `--no-memory` leaves it out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import threading
import time
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import service  # noqa: E402

MODES = ("untraced", "autogen-otlp", "otel-agents-otlp", "otel-agents-otlp-sampled")
TRACES_ONLY = ("otel-agents-otlp-traces", "otel-agents-otlp-sampled-traces")
"""With `--traces-only`: the same with OTEL_METRICS_EXPORTER=none, to tell the spans' cost from the metrics'."""
IN_PROCESS = ("autogen", "otel-agents")
"""With `--in-process`: the spans to a counting exporter in the process (no encoding, no export), to
tell making the spans from sending them."""


def _serve_sink(connection: Connection) -> None:
    """A process of its own: an OTLP/HTTP endpoint on 127.0.0.1 that reads each request whole and
    answers 200, then counts what it carried by the sender's `service.name` (the benchmark's mode).
    Sends its port, then answers each "counts" with what it has counted, until None."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    counts: dict[str, Counter[str]] = defaultdict(Counter)
    lock = threading.Lock()

    def service_name(resource: Any) -> str:
        names = [a.value.string_value for a in resource.attributes if a.key == "service.name"]
        return names[0] if names else "?"

    class Sink(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()
            with lock:  # counted after the answer: the sender never waits for it
                if self.path.endswith("/v1/traces"):
                    traces = ExportTraceServiceRequest.FromString(body)
                    for spans in traces.resource_spans:
                        mode = counts[service_name(spans.resource)]
                        mode["trace requests"] += 1
                        mode["trace bytes"] += len(body)
                        mode["spans"] += sum(len(scope.spans) for scope in spans.scope_spans)
                elif self.path.endswith("/v1/metrics"):
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    for resource in metrics.resource_metrics:
                        mode = counts[service_name(resource.resource)]
                        mode["metric requests"] += 1
                        mode["metric bytes"] += len(body)
                        for scope in resource.scope_metrics:
                            for metric in scope.metrics:
                                kind = metric.WhichOneof("data")
                                mode["metric points"] += len(getattr(metric, kind).data_points) if kind else 0

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    connection.send(server.server_address[1])
    while connection.recv() is not None:
        with lock:
            connection.send({name: dict(c) for name, c in counts.items()})
    server.shutdown()
    server.server_close()


@contextmanager
def otlp_sink() -> Iterator[tuple[str, Callable[[], dict[str, dict[str, int]]]]]:
    """The sink in a process of its own (its reading and counting never in a measured process):
    its endpoint, and a call that returns what it has counted a mode."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve_sink, args=(child,), daemon=True)
    process.start()
    port = parent.recv()

    def counts() -> dict[str, dict[str, int]]:
        parent.send("counts")
        answer: dict[str, dict[str, int]] = parent.recv()
        return answer

    try:
        yield f"http://127.0.0.1:{port}", counts
    finally:
        parent.send(None)
        process.join(timeout=10)


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
    parser.add_argument(
        "--in-process", action="store_true", help="also AutoGen's and otel-agents' spans to a counting exporter"
    )
    parser.add_argument(
        "--reference",
        type=Path,
        metavar="TREE",
        help="also each otel-agents OTLP mode from this tree (a worktree of another commit), as MODE@TREE",
    )
    parser.add_argument("--no-memory", action="store_true", help="the service workload only")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    modes = MODES + (TRACES_ONLY if args.traces_only else ()) + (IN_PROCESS if args.in_process else ())
    if args.reference is not None:
        tree = args.reference.resolve()
        modes += tuple(f"{mode}@{tree}" for mode in modes if mode.startswith("otel-agents-otlp"))
    with otlp_sink() as (endpoint, counts):
        os.environ["BENCH_OTLP_ENDPOINT"] = endpoint  # the workers, spawned now, read it
        results = service.measure(args.rounds, args.concurrency, args.latency_ms / 1e3, modes)
        time.sleep(0.5)  # the workers have exited (their metrics exported): let the sink count the last
        received = counts()
    print(
        f"{args.rounds} rounds of {args.concurrency} concurrent runs, {args.latency_ms:g} ms a model call, "
        "exporting over OTLP/HTTP to a local sink in a process of its own (ratios: the mode over untraced)"
    )
    print("\n".join(service.table(results)))
    runs = (args.rounds + 1) * args.concurrency  # the warm-up round's runs export too
    print(f"\nwhat the sink received a run ({runs} runs a mode, the warm-up round's included):")
    print("| mode | spans | trace requests | trace KB | metric requests | metric points |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode in modes:
        got = received.get(mode, {})
        print(
            f"| {mode} | {got.get('spans', 0) / runs:.2f} | {got.get('trace requests', 0) / runs:.3f} | "
            f"{got.get('trace bytes', 0) / runs / 1e3:.2f} | {got.get('metric requests', 0)} (in all) | "
            f"{got.get('metric points', 0)} (in all) |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"modes": results, "received": received, "runs": runs}, indent=1))
    if args.no_memory:
        return 0
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

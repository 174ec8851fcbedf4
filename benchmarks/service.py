"""A service's cost of tracing: concurrent team runs on one event loop, through the real OpenAI client.

`python -m benchmarks.service [--rounds 100] [--concurrency 16] [--latency-ms 50]`: each round runs
`concurrency` two-agent team runs at once (two model calls each) through `OpenAIChatCompletionClient`
against a local OpenAI-compatible server that answers each call after `latency-ms`. Each mode (no
tracing; AutoGen's built-in tracing to an SDK provider; otel-agents with default settings, a run's
spans flushed as it ends) runs in a worker process of its own, the modes alternated in a shuffled
order every round. Reported: throughput (runs per second of a round), p50 and p99 of a run's
latency, and spans a run, each traced mode as a ratio to untraced measured in the same sitting.
`--reference TREE` adds otel-agents imported from another tree (a worktree of an older commit:
`git worktree add --detach /tmp/ref d606bb7`), in the same sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.workloads import Mode, from_tree, set_up, start_workers, stop_workers  # noqa: E402

SERVICE_MODES = ("untraced", "autogen", "otel-agents")


def _set_up(mode: str) -> Mode:
    """`workloads.set_up`, and "autogen-otlp": AutoGen's built-in tracing exporting through the SDK's
    own `BatchSpanProcessor(OTLPSpanExporter)` over OTLP/HTTP to `BENCH_OTLP_ENDPOINT`, as an app
    that sets its provider up itself would."""
    if mode != "autogen-otlp":
        return set_up(mode)
    import os

    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{os.environ['BENCH_OTLP_ENDPOINT']}/v1/traces")))
    trace.set_tracer_provider(provider)
    return Mode(mode, None, provider.force_flush)


def _team(base_url: str, index: int) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=base_url, api_key="bench", max_retries=0)
    agents = [AssistantAgent(name, model_client=client) for name in ("writer", "critic")]
    return RoundRobinGroupChat(agents, termination_condition=MaxMessageTermination(3), name="service")


async def _round(mode: Mode, base_url: str, concurrency: int) -> tuple[float, list[float], int]:
    teams = [_team(base_url, i) for i in range(concurrency)]  # built before the clock starts
    before = mode.exporter.spans if mode.exporter is not None else 0

    async def one(team: Any) -> float:
        started = time.perf_counter()
        await team.run(task="Answer the customer.")
        return time.perf_counter() - started

    started = time.perf_counter()
    latencies = await asyncio.gather(*(one(team) for team in teams))
    took = time.perf_counter() - started
    mode.flush()
    spans = (mode.exporter.spans - before) if mode.exporter is not None else 0
    return took, list(latencies), spans


def _worker(mode_name: str, connection: Connection) -> None:
    import logging
    import os

    logging.getLogger("otel_agents").setLevel(logging.ERROR)  # one-time unpriced-model warnings
    os.environ["OTEL_SERVICE_NAME"] = mode_name  # what an OTLP sink tells each mode's spans by
    mode = _set_up(from_tree(mode_name))
    connection.send("ready")
    loop = asyncio.new_event_loop()
    while (request := connection.recv()) is not None:
        base_url, concurrency = request
        connection.send(loop.run_until_complete(_round(mode, base_url, concurrency)))
    loop.close()


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(
    rounds: int, concurrency: int, latency_s: float, modes: tuple[str, ...] = SERVICE_MODES
) -> dict[str, dict[str, float]]:
    """Each of `modes` (the first is the base of the ratios: untraced) in a worker of its own."""
    from tests.support.openai_server import OpenAIServer, Reply

    pipes, processes = start_workers(_worker, modes)
    took: dict[str, list[float]] = {m: [] for m in modes}
    latencies: dict[str, list[float]] = {m: [] for m in modes}
    spans: dict[str, list[float]] = {m: [] for m in modes}
    try:
        with OpenAIServer(script=[Reply(text="Here is your answer.", delay_s=latency_s)]) as server:
            order = list(modes)
            for round_number in range(rounds + 1):  # the first round warms each worker up
                random.shuffle(order)
                for name in order:
                    pipes[name].send((server.base_url, concurrency))
                    seconds, each, count = pipes[name].recv()
                    if round_number:
                        took[name].append(seconds)
                        latencies[name] += each
                        spans[name].append(count / concurrency)
    finally:
        stop_workers(pipes, processes)
    base = {
        "throughput": concurrency / statistics.median(took["untraced"]),
        "p50": statistics.median(latencies["untraced"]),
        "p99": _percentile(latencies["untraced"], 0.99),
    }
    results: dict[str, dict[str, float]] = {}
    for name in modes:
        throughput = concurrency / statistics.median(took[name])
        p50, p99 = statistics.median(latencies[name]), _percentile(latencies[name], 0.99)
        results[name] = {
            "throughput_runs_per_s": throughput,
            "throughput_ratio": base["throughput"] / throughput,
            "p50_ms": p50 * 1e3,
            "p50_ratio": p50 / base["p50"],
            "p99_ms": p99 * 1e3,
            "p99_ratio": p99 / base["p99"],
            "spans_per_run": statistics.median(spans[name]),
        }
    return results


def table(results: dict[str, dict[str, float]]) -> list[str]:
    lines = [
        "| mode | runs/s | throughput cost | p50 ms | p50 ratio | p99 ms | p99 ratio | spans a run |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['throughput_runs_per_s']:.1f} | {r['throughput_ratio']:.3f}x | {r['p50_ms']:.1f} | "
            f"{r['p50_ratio']:.3f}x | {r['p99_ms']:.1f} | {r['p99_ratio']:.3f}x | {r['spans_per_run']:.0f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.service", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds of concurrent runs per mode (default 100)")
    parser.add_argument("--concurrency", type=int, default=16, help="team runs at once (default 16)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the server's answer time (default 50)")
    parser.add_argument(
        "--reference",
        type=Path,
        help="also otel-agents from this tree (a worktree of another commit), as the mode otel-agents@TREE",
    )
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    modes = SERVICE_MODES + ((f"otel-agents@{args.reference.resolve()}",) if args.reference else ())
    results = measure(args.rounds, args.concurrency, args.latency_ms / 1e3, modes)
    print(
        f"{args.rounds} rounds of {args.concurrency} concurrent runs, {args.latency_ms:g} ms a model call "
        "(throughput cost: untraced runs/s over the mode's; ratios: the mode over untraced)"
    )
    print("\n".join(table(results)))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Overhead of tracing AutoGen team runs, side by side in one sitting.

    python -m benchmarks            # the full tables, written to BENCHMARKS.md
    python -m benchmarks --quick    # a few runs of each, to prove it works (CI)

Each mode lives in a worker process of its own, instrumented as a user would instrument it
(untraced; AutoGen's built-in tracing; OpenInference's AgentChat instrumentor; otel-agents with
default settings, with its metrics read, and with runtime spans nested), each run a plain `await
team.run(...)` (otel-agents traces it with no call-site change). Traced modes export to the same
counting sink behind a batch processor. The coordinator asks the workers for one run at a time, in
a new random order each round, so every mode sees the same machine conditions. It reports medians,
min-max, the ratio of medians to the untraced run, and spans per run; then the memory a
10,000-message run adds when traced, and otel-agents exporting over OTLP to a real local Phoenix,
if one can be started."""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import random
import statistics
import sys
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.workloads import MODES, WORKLOADS, one_run, set_up  # noqa: E402


def _quiet() -> None:
    """Logging as an application leaves it (records below WARNING are never made), minus our
    one-time warnings about unpriced models. Disabling logging outright would hide what making log
    records costs a traced run."""
    import logging

    logging.getLogger("otel_agents").setLevel(logging.ERROR)


def _worker(mode: str, connection: Connection, endpoint: str | None) -> None:
    """Serve runs for one mode until told to stop."""
    _quiet()
    try:
        state = set_up(mode, endpoint=endpoint)
        connection.send(("ready", None))
    except Exception as error:  # a mode that cannot be set up (a missing optional package)
        connection.send(("unavailable", f"{type(error).__name__}: {error}"))
        return
    loop = asyncio.new_event_loop()
    while True:
        request = connection.recv()
        if request is None:
            break
        workload, base_url = request
        connection.send(loop.run_until_complete(one_run(state, workload, base_url)))
    loop.close()


def _memory_worker(traced: bool, messages: int, connection: Connection) -> None:
    """Peak memory (tracemalloc) of one long `team.run()`, traced by otel-agents or not."""
    import tracemalloc

    _quiet()
    set_up("otel-agents" if traced else "untraced")
    from benchmarks.workloads import build

    async def run() -> None:
        team = build(f"replay-{messages}", None)
        tracemalloc.start()
        await team.run(task="go")

    asyncio.run(run())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    connection.send(peak)


def _rss_mib() -> float:
    """This process's resident memory, MiB (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _many_runs_worker(mode: str, checkpoints: list[int], connection: Connection) -> None:
    """Resident memory after so many 5-message runs in one process, as a service runs them."""
    import gc

    _quiet()
    state = set_up(mode)
    from benchmarks.workloads import build

    async def run() -> dict[int, float]:
        marks: dict[int, float] = {}
        done = 0
        for checkpoint in checkpoints:
            while done < checkpoint:
                await build("replay-5", None).run(task="go")
                done += 1
            state.flush()
            gc.collect()
            marks[checkpoint] = _rss_mib()
        return marks

    connection.send(asyncio.run(run()))


def _conversation_worker(volleys: int, connection: Connection) -> None:
    """Traced memory (tracemalloc) a core-only conversation leaves behind, runtime spans nested:
    measured after its spans are exported (the batch queue, bounded on its own, is empty then)."""
    import gc
    import tracemalloc

    _quiet()
    state = set_up("otel-agents-nested")
    from tests.support.volleys import play

    tracemalloc.start()
    asyncio.run(play(volleys))
    state.flush()
    gc.collect()
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    connection.send({"kept": kept / 2**20, "peak": peak / 2**20})


def _in_workers(target: Any, argument_lists: list[tuple[Any, ...]]) -> list[Any]:
    """Run `target(*arguments, connection)` in a process each, side by side; their results in order."""
    context = multiprocessing.get_context("spawn")
    started = []
    for arguments in argument_lists:
        parent, child = context.Pipe()
        process = context.Process(target=target, args=(*arguments, child), daemon=True)
        process.start()
        started.append((parent, process))
    results = [parent.recv() for parent, _ in started]
    for _, process in started:
        process.join(timeout=60)
    return results


def many_runs(checkpoints: list[int]) -> dict[str, dict[int, float]]:
    """RSS (MiB) at each checkpoint, untraced and traced (`team.run()`), measured side by side."""
    untraced, traced = _in_workers(_many_runs_worker, [("untraced", checkpoints), ("otel-agents", checkpoints)])
    return {"untraced": untraced, "otel-agents": traced}


def conversation(volleys: list[int]) -> dict[int, dict[str, float]]:
    """Traced MiB kept after, and at the peak of, a core-only conversation of each length (nested)."""
    return dict(zip(volleys, _in_workers(_conversation_worker, [(v,) for v in volleys]), strict=True))


class Workers:
    def __init__(self, modes: list[str], endpoint: str | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: dict[str, Connection] = {}
        self.processes: list[Any] = []
        self.unavailable: dict[str, str] = {}
        for mode in modes:
            parent, child = context.Pipe()
            process = context.Process(target=_worker, args=(mode, child, endpoint), daemon=True)
            process.start()
            status, detail = parent.recv()
            if status == "ready":
                self.pipes[mode] = parent
                self.processes.append(process)
            else:
                self.unavailable[mode] = detail
                process.join(timeout=10)

    def run(self, mode: str, workload: str, base_url: str | None) -> tuple[float, int]:
        self.pipes[mode].send((workload, base_url))
        result: tuple[float, int] = self.pipes[mode].recv()
        return result

    def close(self) -> None:
        for pipe in self.pipes.values():
            pipe.send(None)
        for process in self.processes:
            process.join(timeout=30)


def measure(workers: Workers, workload: str, rounds: int, base_url: str | None) -> dict[str, dict[str, Any]]:
    modes = list(workers.pipes)
    for mode in modes:  # warm up each worker: imports, caches, first-call costs
        workers.run(mode, workload, base_url)
    samples: dict[str, list[float]] = {m: [] for m in modes}
    spans: dict[str, list[int]] = {m: [] for m in modes}
    for _ in range(rounds):
        random.shuffle(modes)
        for mode in modes:
            took, count = workers.run(mode, workload, base_url)
            samples[mode].append(took)
            spans[mode].append(count)
    base = statistics.median(samples["untraced"])
    return {
        mode: {
            "median_ms": statistics.median(samples[mode]) * 1e3,
            "min_ms": min(samples[mode]) * 1e3,
            "max_ms": max(samples[mode]) * 1e3,
            "ratio": statistics.median(samples[mode]) / base,
            "spans": statistics.median(spans[mode]),
            "runs": len(samples[mode]),
        }
        for mode in sorted(samples, key=MODES.index)
    }


def _operations_worker(repeat: int, connection: Connection) -> None:
    _quiet()
    from benchmarks.operations import measure_operations

    connection.send(measure_operations(repeat))


def operations(repeat: int) -> dict[str, dict[str, Any]]:
    """Per-operation costs, measured in a worker with otel-agents configured."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_operations_worker, args=(repeat, child), daemon=True)
    process.start()
    result: dict[str, dict[str, Any]] = parent.recv()
    process.join(timeout=60)
    return result


def memory(messages: int) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    peaks = {}
    for traced in (False, True):
        parent, child = context.Pipe()
        process = context.Process(target=_memory_worker, args=(traced, messages, child), daemon=True)
        process.start()
        peaks["traced" if traced else "untraced"] = parent.recv() / 1e6
        process.join(timeout=60)
    peaks["added_mb"] = peaks["traced"] - peaks["untraced"]
    return peaks


def phoenix_overhead(rounds: int) -> dict[str, dict[str, Any]] | str:
    executable = os.environ.get("OTEL_AGENTS_TEST_PHOENIX") or str(ROOT / ".venv-phoenix" / "bin" / "phoenix")
    if not Path(executable).exists():
        return "skipped: no Phoenix (scripts/bench.sh installs it into .venv-phoenix)"
    import tempfile

    from tests.support.phoenix import start_phoenix, stop_phoenix

    with tempfile.TemporaryDirectory() as workdir:
        phoenix = start_phoenix(executable, Path(workdir))
        os.environ["OTEL_METRICS_EXPORTER"] = "none"
        workers = Workers(["untraced", "otel-agents"], endpoint=phoenix.http_endpoint)
        try:
            return measure(workers, "replay-5", rounds, None)
        finally:
            workers.close()
            stop_phoenix(phoenix)


_ROUNDS_FACTOR = {"replay-5": 5.0, "replay-100": 0.25, "openai-tool": 3.0}
"""Short runs' medians move most with machine noise: many more of them (5-message runs take
milliseconds; the OpenAI-client runs wait on a local server that shares the machine)."""


def rounds_of(workload: str, rounds: int) -> int:
    return max(2, int(rounds * _ROUNDS_FACTOR.get(workload, 1.0)))


def table(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| mode | runs | median ms | min-max ms | ratio to untraced | spans per run |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode, r in results.items():
        spans = f"{r['spans']:g}" if r["spans"] or mode == "untraced" else "(in Phoenix)"
        lines.append(
            f"| {mode} | {r['runs']} | {r['median_ms']:.2f} | {r['min_ms']:.2f}-{r['max_ms']:.2f} "
            f"| {r['ratio']:.2f}x | {spans} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs of each, to prove it works")
    parser.add_argument(
        "--rounds",
        type=int,
        help="runs per mode (default 40, quick 3), times 5 for the 5-message runs, 3 for the "
        "OpenAI-client ones, a quarter for the 100-message ones",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md", help="where to write the tables")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 40)
    messages = 1000 if args.quick else 10_000

    from tests.support.openai_server import OpenAIServer, Reply

    command = (
        "python -m benchmarks"
        + (" --quick" if args.quick else "")
        + (f" --rounds {args.rounds}" if args.rounds else "")
    )
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    system = f"{platform.system()} {platform.release()}"
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {system}, Python {platform.python_version()}"
    results: dict[str, Any] = {}
    workers = Workers(list(MODES))
    try:
        with OpenAIServer(script=[Reply(tool_call=("lookup", {"city": "Oslo"})), Reply(text="12 degrees.")]) as server:
            for workload in WORKLOADS:
                if workload == "openai-tool":
                    server.script = [Reply(tool_call=("lookup", {"city": "Oslo"})), Reply(text="12 degrees.")] * 10_000
                results[workload] = measure(workers, workload, rounds_of(workload, rounds), server.base_url)
                print(f"\n{workload}")
                print("\n".join(table(results[workload])))
    finally:
        workers.close()
    results["operations"] = operations(200 if args.quick else 5000)
    print("\nwhat costs what (microseconds per operation)")
    print(json.dumps(results["operations"], indent=1))
    results["memory"] = memory(messages)
    print(f"\nmemory of a {messages}-message run: {json.dumps(results['memory'])}")
    checkpoints = [20, 60] if args.quick else [2000, 6000]
    results["many_runs"] = many_runs([0, *checkpoints])
    print(f"\nresident MiB after so many runs: {json.dumps(results['many_runs'])}")
    volleys = [1000, 4000] if args.quick else [10_000, 40_000]
    results["conversation"] = conversation(volleys)
    print(f"\nMiB of a core-only conversation (nested): {json.dumps(results['conversation'])}")
    results["phoenix"] = phoenix_overhead(rounds_of("replay-5", rounds))
    print(f"\nOTLP to Phoenix: {results['phoenix']}")

    lines = [
        "# Benchmarks",
        "",
        f"Command: `{command}` · machine: {machine} · date: {when}.",
        "Medians of runs alternated mode by mode in random order; each mode in a process of its own;",
        "traced modes export to a counting sink behind a batch processor. Ratios are to the untraced run.",
    ]
    if workers.unavailable:
        lines.append(
            "Modes that could not be set up: " + "; ".join(f"{m}: {d}" for m, d in workers.unavailable.items())
        )
    for workload in WORKLOADS:
        lines += ["", f"## {workload}", "", *table(results[workload])]
    mem = results["memory"]
    lines += [
        "",
        f"## Memory of a {messages:,}-message run (tracemalloc peak)",
        "",
        f"untraced {mem['untraced']:.1f} MB, traced {mem['traced']:.1f} MB: **{mem['added_mb']:.1f} MB added**.",
        "",
        f"## Memory of many runs in one process (resident MiB, 5-message runs, {checkpoints[-1]:,} a mode)",
        "",
        "| mode | at start | " + " | ".join(f"after {c:,} runs" for c in checkpoints) + " |",
        "|---|---:|" + "---:|" * len(checkpoints),
        *(
            f"| {mode} | {marks[0]:.1f} | " + " | ".join(f"{marks[c]:.1f}" for c in checkpoints) + " |"
            for mode, marks in results["many_runs"].items()
        ),
        "",
        "## Memory of a core-only conversation in one trace (runtime spans nested, tracemalloc)",
        "",
        " · ".join(
            f"{v:,} messages: {mib['kept']:.1f} MiB kept after it, {mib['peak']:.1f} MiB at the peak"
            for v, mib in results["conversation"].items()
        ),
        "",
        "## otel-agents exporting over OTLP/HTTP to a local Phoenix (replay-5)",
        "",
    ]
    lines += table(results["phoenix"]) if isinstance(results["phoenix"], dict) else [results["phoenix"]]
    lines += [
        "",
        "## What costs what (one process, each operation repeated, median of 5 batches)",
        "",
        "| operation | µs each | how often |",
        "|---|---:|---|",
        *(f"| {name} | {cost['us']:.1f} | {cost['when']} |" for name, cost in results["operations"].items()),
    ]
    lines += ["", "## Targets (medians, ratio to the untraced run)", "", *targets(results), "", NOTES]
    args.out.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out}")
    return 0


REPLAY_5_TARGET: Final = 1.45
"""The replay-5 run's target as the team settled it on 2026-12-04 (a median of three sittings)."""
NESTED_OVER_BUILTIN: Final = 0.20
"""Runtime spans nested: at most AutoGen's built-in tracing plus this (the same settlement)."""


def targets(results: dict[str, Any]) -> list[str]:
    """The issue's targets against this sitting's numbers: met or not, nothing hidden."""
    rows = ["| target | measured | met |", "|---|---:|:---:|"]

    def row(name: str, measured: float | None, limit: float | None, unit: str = "x", *, below: bool = False) -> None:
        if measured is None or limit is None:
            rows.append(f"| {name} | not measured | - |")
        else:
            met = measured < limit if below else measured <= limit
            rows.append(f"| {name} | {measured:.2f}{unit} | {'yes' if met else 'no'} |")

    replay5 = results["replay-5"]
    ours = replay5["otel-agents"]["ratio"]
    builtin = replay5.get("autogen", {}).get("ratio")
    row(f"5-message replay run, default settings: {REPLAY_5_TARGET}x or less", ours, REPLAY_5_TARGET)
    row("the same, below AutoGen's built-in tracing", ours, builtin, below=True)
    row("the same, below OpenInference", ours, replay5.get("openinference", {}).get("ratio"), below=True)
    metered = replay5.get("otel-agents-metrics", {}).get("ratio")
    row("the same with its metrics exported (not a target: the same limit, for reference)", metered, REPLAY_5_TARGET)
    row(
        f"runtime spans nested: at most AutoGen's built-in tracing + {NESTED_OVER_BUILTIN:.2f}x (5-message run)",
        replay5["otel-agents-nested"]["ratio"],
        builtin + NESTED_OVER_BUILTIN if builtin is not None else None,
    )
    row("OpenAI-client run: 1.05x or less", results["openai-tool"]["otel-agents"]["ratio"], 1.05)
    row("10,000-message run: under 10 MB added by tracing", results["memory"]["added_mb"], 10.0, " MB")
    untraced, traced = results["many_runs"]["untraced"], results["many_runs"]["otel-agents"]
    counted = sorted(c for c in traced if c)
    first, last = counted[0], counted[-1]
    row(f"many runs: under 1 MiB more at run {last:,} than at run {first:,}", traced[last] - traced[first], 1.0, " MiB")
    row(f"many runs: within 10 MiB of untraced at run {last:,}", traced[last] - untraced[last], 10.0, " MiB")
    short, long = sorted(results["conversation"])
    growth = results["conversation"][long]["kept"] - results["conversation"][short]["kept"]
    row(f"core-only conversation (nested): {long:,} messages under 3 MiB over {short:,}", growth, 3.0, " MiB")
    phoenix = results["phoenix"]
    row(
        "with OTLP export to Phoenix: 1.3x or less",
        phoenix["otel-agents"]["ratio"] if isinstance(phoenix, dict) else None,
        1.3,
    )
    return rows


NOTES = """## Notes

- Default settings send metrics nowhere (no endpoint), and then otel-agents makes no measurement.
  `otel-agents-metrics` has a metric reader, as a service exporting its metrics would: each model
  call then makes four or five measurements and each run three or four (see "what costs what").
- With runtime spans off, AutoGen still calls the tracer for each of its runtime spans (about ten a
  message) and builds their attributes; otel-agents makes the run's (or nested team's) span
  current for the block, or leaves it current, and AutoGen's parsing of each envelope's trace
  context is remembered (`otel_agents/_internal/autogen/private.py`).
- Every span goes through the SDK tracer's own `start_span`. Runtime spans nested records the
  messaging spans AutoGen's built-in tracing records that say something (`send`, `publish`,
  `process`; not `create` or `ack`), plus otel-agents' own spans (run, messages, model calls).
- Profiling (cProfile over a few hundred runs of each mode, and timers around otel-agents' own
  functions inside real runs) found what otel-agents no longer does: make a log record of every
  AutoGen event to read the model-call events among them (it reads the event objects now);
  let AutoGen parse the same envelope trace context again for every runtime span; start each
  dropped runtime span through generator-based context managers and a made-up span id that had
  to be attached; measure metrics that nothing reads; draw run ids from `os.urandom`; ask the
  SDK for a tracer on every run. What remains is mostly the spans' and, when exported, the
  measurements' own cost.
- Memory of many runs is the process's resident size after so many runs (side by side, one
  process a mode). Of a core-only conversation (two autogen-core agents publishing to each other),
  what tracemalloc still counts once its spans are exported, and its peak; the peak includes the
  batch queue, bounded at 8192 spans on its own, which fills when the export thread falls behind.
- "What costs what" times each operation of otel-agents on its own, many times over, so its
  numbers are steadier than differences between whole runs; "how often" says how many of each a
  run makes.
- Timings on a shared 2-core machine are noisy: compare ratios measured in the same sitting only."""

if __name__ == "__main__":
    raise SystemExit(main())

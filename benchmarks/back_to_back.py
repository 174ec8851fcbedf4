"""Runs back to back on one event loop, as a batch job or an evaluation loop makes them: what tracing
costs the process's CPU, all of its threads counted.

    python -m benchmarks.back_to_back [--rounds 15] [--runs 100] [--reference TREE] [--json FILE]

Each mode (untraced; otel-agents with default settings and a counting exporter; with `--reference
TREE`, otel-agents imported from another tree, such as a worktree of an older commit, as
`otel-agents@TREE`) lives in a worker process of its own. Each round, in a new random order, every
worker makes `runs` replay-5 runs one after the other (no pause between them: a run's end is the
next one's start), then flushes its pipeline (every span of the round exported within its
measure), and reports the process's CPU time (user and system, every thread's), the wall time, and
its voluntary context switches (every thread's). Reported: medians of a run's CPU and wall
time, each as a ratio to untraced in the same sitting, and the context switches a run.

Unlike `benchmarks.run` (one run at a time, the worker idle between runs) this leaves a thread of
ours no idle moment of the event loop to run in: whatever it does contends for the GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.workloads import start_workers, stop_workers  # noqa: E402

MODES = ("untraced", "otel-agents")
WARM_UP_RUNS = 10


def _worker(mode_name: str, connection: Connection) -> None:
    import logging
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)  # asyncio's SIGINT handler, as in a terminal
    logging.getLogger("otel_agents").setLevel(logging.ERROR)  # one-time unpriced-model warnings
    from benchmarks.workloads import from_tree, replay_team, set_up

    mode = set_up(from_tree(mode_name))

    async def back_to_back(runs: int) -> None:
        for _ in range(runs):
            await replay_team(5).run(task="go")

    asyncio.run(back_to_back(WARM_UP_RUNS))
    mode.flush()
    connection.send("ready")
    while (runs := connection.recv()) is not None:
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        asyncio.run(back_to_back(runs))
        mode.flush()  # the round's spans exported inside its measure, whenever the mode would export them
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        connection.send((cpu / runs, wall / runs, (after.ru_nvcsw - before.ru_nvcsw) / runs))


def measure(rounds: int, runs: int, modes: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Each of `modes` (the first is the base of the ratios: untraced) in a worker of its own."""
    pipes, processes = start_workers(_worker, modes)
    measured: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
    try:
        order = list(modes)
        for _ in range(rounds):
            random.shuffle(order)
            for name in order:
                pipes[name].send(runs)
                measured[name].append(pipes[name].recv())
    finally:
        stop_workers(pipes, processes)
    base_cpu = statistics.median(cpu for cpu, _, _ in measured[modes[0]])
    base_wall = statistics.median(wall for _, wall, _ in measured[modes[0]])
    results = {}
    for name, rows in measured.items():
        cpu = statistics.median(row[0] for row in rows)
        wall = statistics.median(row[1] for row in rows)
        results[name] = {
            "cpu_ms": cpu * 1e3,
            "cpu_ratio": cpu / base_cpu,
            "wall_ms": wall * 1e3,
            "wall_ratio": wall / base_wall,
            "switches_per_run": statistics.median(row[2] for row in rows),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.back_to_back", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--rounds", type=int, default=15, help="rounds, each mode once a round (default 15)")
    parser.add_argument("--runs", type=int, default=100, help="replay-5 runs back to back a round (default 100)")
    parser.add_argument(
        "--reference", type=Path, metavar="TREE", help="also otel-agents from this tree, as otel-agents@TREE"
    )
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    modes = MODES + ((f"otel-agents@{args.reference.resolve()}",) if args.reference else ())
    results = measure(args.rounds, args.runs, modes)
    print(f"{args.rounds} rounds of {args.runs} replay-5 runs back to back a mode (medians; ratios to untraced)")
    print("| mode | CPU ms a run | CPU ratio | wall ms a run | wall ratio | voluntary switches a run |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['cpu_ms']:.2f} | {r['cpu_ratio']:.3f}x | {r['wall_ms']:.2f} | {r['wall_ratio']:.3f}x | "
            f"{r['switches_per_run']:.1f} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

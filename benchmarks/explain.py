"""`otel-agents explain` of a long run: how long it answers, and that it reads only that run.

    python -m benchmarks.explain [--turns 1000] [--other-runs 200] [--repeat 5]

Records into a fresh store `other-runs` short runs and one run of `turns` agent turns (AutoGen's
`ReplayChatCompletionClient`, every turn a model call, a writer and a critic whose notes repeat),
then times, `repeat` times each: `otel-agents explain RUN --json` as a user runs it (a new process:
its start, the store read, the analysis, the print), and the same in this process (the store's
reader and the analysis alone). It also counts the spans `explain` read against the run's own.
The target (of the benchmark, never of a test): a 1,000-turn run explained in under a second.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


async def _record(store: Path, turns: int, other_runs: int) -> str:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    import otel_agents
    from otel_agents._internal.export.store.reader import Store
    from tests.support.teams import replay, text

    def team(turns: int, name: str) -> RoundRobinGroupChat:
        writer = AssistantAgent(
            "writer", model_client=replay(*(text(f"draft {i}", 40 + 20 * i, 30) for i in range(turns)))
        )
        critic = AssistantAgent(
            "critic", model_client=replay(*(text("Not yet.", 60 + 20 * i, 3) for i in range(turns)))
        )
        return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(turns + 1), name=name)

    with otel_agents.configure(store=store):
        for i in range(other_runs):
            await team(4, f"short-{i % 5}").run(task="go")
        await team(turns, "long").run(task="go")
    (long_run,) = Store(store).runs(team="long", limit=1)
    return long_run.run_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--other-runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    from otel_agents._internal.explain.analysis import explain_spans
    from otel_agents._internal.explain.findings import Thresholds
    from otel_agents._internal.export.store.explained import read_store
    from otel_agents._internal.export.store.reader import Store

    store = Path(tempfile.mkdtemp(prefix="bench-explain-"))
    started = time.perf_counter()
    run_id = asyncio.run(_record(store, args.turns, args.other_runs))
    print(
        f"recorded {args.other_runs} short runs and one of {args.turns} turns in {time.perf_counter() - started:.1f}s"
    )

    reader = Store(store)
    read = read_store(reader, run_id)
    every_span = sum(len(reader.spans(run.trace_id)) for run in reader.runs(limit=None))
    explanation = explain_spans(read.spans, read.run, Thresholds())
    print(
        f"explain read {len(read.spans):,} spans of {every_span:,} in the store (the run's trace only); "
        f"{len(explanation.turns):,} turns, findings: {', '.join(f.kind for f in explanation.findings) or 'none'}"
    )

    in_process, command = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        read = read_store(Store(store), run_id)
        explain_spans(read.spans, read.run, Thresholds()).to_dict()
        in_process.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "otel_agents", "--store", str(store), "explain", run_id, "--json"],
            capture_output=True,
            check=False,
        )
        command.append(time.perf_counter() - t0)
        if done.returncode != 0:
            print(done.stderr.decode(), file=sys.stderr)
            return 1
    print(f"in process (read + analysis): median {statistics.median(in_process):.3f}s, max {max(in_process):.3f}s")
    print(f"the command, a new process:   median {statistics.median(command):.3f}s, max {max(command):.3f}s")
    print(f"target: under 1 s for the command -> {'met' if statistics.median(command) < 1 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

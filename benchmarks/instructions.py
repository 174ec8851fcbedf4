"""Instructions per 5-message replay run, counted by callgrind: a count that does not depend on what
else the machine does, unlike a time.

    python -m benchmarks.instructions [--runs 30]

Each mode (untraced; otel-agents with default settings, `configure(span_exporter=...)` to the
counting sink behind its batch processor) runs in two processes under `valgrind --tool=callgrind`:
each sets the mode up and makes two warm-up runs, then one makes `runs` more and the other none;
their difference over `runs` is the instructions a run (start-up, imports and the first runs'
one-time work cancel out). `PYTHONHASHSEED=0` in both, so that they hash alike; SIGINT's handler
Python's own in both, so that asyncio's is in place as in an app started in a terminal (a shell's
background job inherits SIGINT ignored: then asyncio puts none in, and a run costs some 0.18 M less). Needs valgrind
(Debian's package); some 3 minutes a mode on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("untraced", "otel-agents")
WARM_UP_RUNS = 2


def _child(mode: str, runs: int) -> None:
    """Set `mode` up, make the warm-up runs, then `runs` replay-5 runs (in this process)."""
    import logging
    import signal

    # Python's own SIGINT handler, whatever the launcher left (a shell's background job starts with
    # SIGINT ignored): then asyncio.run puts its handler in, as for an app started in a terminal,
    # and a run's end looks at it (`run/uninterrupted.py`)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, str(ROOT))
    logging.getLogger("otel_agents").setLevel(logging.ERROR)
    from benchmarks.workloads import CountingExporter, replay_team

    if mode == "untraced":
        os.environ["AUTOGEN_DISABLE_RUNTIME_TRACING"] = "true"
    else:
        import otel_agents

        otel_agents.configure(span_exporter=CountingExporter())

    async def go() -> None:
        for _ in range(WARM_UP_RUNS + runs):
            await replay_team(5).run(task="go")

    asyncio.run(go())


def _count(mode: str, runs: int, out_dir: Path) -> int:
    """Instructions of a whole process that makes `runs` runs after the warm-up (callgrind's total)."""
    out = out_dir / f"{mode}-{runs}.callgrind"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
    command += ["-m", "benchmarks.instructions", "--child", mode, str(runs)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, timeout=1800)
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no total in {out}")


def measure(runs: int) -> dict[str, float]:
    """Instructions a run, per mode."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        jobs = {(mode, n): pool.submit(_count, mode, n, Path(tmp)) for mode in MODES for n in (0, runs)}
        return {mode: (jobs[mode, runs].result() - jobs[mode, 0].result()) / runs for mode in MODES}


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=description)
    parser.add_argument("--runs", type=int, default=30, help="measured runs a process (default 30)")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "RUNS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(args.child[0], int(args.child[1]))
        return 0
    counts = measure(args.runs)
    base = counts["untraced"]
    print(f"instructions per replay-5 run ({args.runs} runs less none, after {WARM_UP_RUNS} warm-up runs):")
    for mode, count in counts.items():
        added = f", {count - base:+,.0f} over untraced" if mode != "untraced" else ""
        print(f"  {mode}: {count / 1e6:.2f} M{added}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The export path a span takes from its end to the exporter, per span, for two trees side by side.

    python -m benchmarks.export_path --against /tmp/d606     # a worktree of the reference commit
    python -m benchmarks.export_path --against d606bb7       # the same, in a temporary worktree

What is measured: the spans one replay-5 run ends (`benchmarks/workloads.py`), captured as the SDK
hands them to the tracer provider's span processor, pushed again through the path they take from
their end to the exporter: the provider's span processor (`on_end`: otel-agents' processors, the
run sampler when one is configured, the SDK's batch queue), then, as a run's end asks
(`export/soon.py`), the provider's `force_flush()`: the batch processor hands the batch to the
exporter guard, which scrubs each span (content, lone surrogates) and hands them to the exporter, a
counting sink that drops them. Each tree is set up through the public `configure(span_exporter=...)`
with default settings, as `benchmarks.instructions` sets it up, and driven through the SDK
(`TracerProvider.force_flush()`, and the `on_end` of the provider's span processor, what
`Span.end()` calls: read as `_active_span_processor`, the one private name used, and the capturing
processor taken out of it again), so one harness drives trees whose internals differ. The spans
are each tree's own (what its run records).

- Time: a batch pushes `--copies` copies of the run's spans (each copy its spans' `on_end`, then the
  flush), per span; median and best of `--batches` batches, in `--rounds` processes a tree, the
  trees alternated (this, against, against, this, ...). A batch stays under the SDK's export batch
  (512 spans), so its worker thread never exports while `on_end` is timed. The parts apart (the
  same spans): `on_end` alone (the flush after it untimed), the flush alone, the scrub alone
  (`export/scrub.py`'s `scrub` of each span) and the guard with the scrub and the sink
  (`GuardedExporter.export`, called directly).
- Instructions (`valgrind --tool=callgrind`, `PYTHONHASHSEED=0`): a process that sets up, makes two
  warm-up runs and the captured run, then pushes `--count-copies` copies (a flush after each, as
  after each run), less one that pushes none, over the spans pushed. About a minute a process
  under valgrind; two at a time. Without valgrind the report says so and counts nothing.

Each tree runs in processes of its own with the tree first on `sys.path`; the child says which
`otel_agents` it imported.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WARM_UP_RUNS = 2
SDK_EXPORT_BATCH = 512
"""`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`'s default: the SDK's worker exports as soon as its queue holds as many."""


# --- in a child: one tree ------------------------------------------------------------------------


def _set_up(tree: Path) -> dict[str, Any]:
    """Import `tree`'s otel_agents, configure it with a counting sink, make the warm-up runs and the
    captured run; the spans that run ended, and what pushes them."""
    import asyncio
    import logging

    sys.path[:] = [str(tree)] + [p for p in sys.path if Path(p or ".").resolve() not in (ROOT, ROOT / "benchmarks")]
    logging.getLogger("otel_agents").setLevel(logging.ERROR)
    spec = importlib.util.spec_from_file_location("_bench_workloads", ROOT / "benchmarks" / "workloads.py")
    assert spec is not None and spec.loader is not None
    workloads = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(workloads)

    from opentelemetry.sdk.trace import SpanProcessor

    import otel_agents

    imported = Path(otel_agents.__file__).resolve()
    assert imported.is_relative_to(tree.resolve()), f"{imported} is not from {tree}"
    sink = workloads.CountingExporter()
    provider = otel_agents.configure(span_exporter=sink).sdk_tracer_provider  # the SDK's TracerProvider
    active = provider._active_span_processor  # what Span.end() calls: the SDK's, same in both trees

    class Capture(SpanProcessor):
        def __init__(self) -> None:
            self.spans: list[Any] = []
            self.on = False

        def on_end(self, span: Any) -> None:
            if self.on:
                self.spans.append(span)

    capture = Capture()
    provider.add_span_processor(capture)

    async def runs() -> None:
        for _ in range(WARM_UP_RUNS):
            await workloads.replay_team(5).run(task="go")
        provider.force_flush()
        capture.on = True
        await workloads.replay_team(5).run(task="go")
        provider.force_flush()
        capture.on = False

    asyncio.run(runs())
    # the path as configure() built it, without the capturing processor
    processors = tuple(p for p in active._span_processors if p is not capture)
    active._span_processors = processors
    spans = capture.spans
    sink.spans = 0
    return {
        "provider": provider,
        "on_end": active.on_end,
        "spans": spans,
        "sink": sink,
        "processors": processors,
        "otel_agents": str(imported.parent),
    }


def _push(state: dict[str, Any], copies: int) -> None:
    on_end, flush, spans = state["on_end"], state["provider"].force_flush, state["spans"]
    for _ in range(copies):
        for span in spans:
            on_end(span)
        flush()


def _guard(state: dict[str, Any]) -> Any:
    """The exporter guard configure() built (a processor's `guarded`, in both trees)."""
    for processor in state["processors"]:
        guarded = getattr(processor, "guarded", None)
        if guarded is None:  # a processor in front of the exporting ones (the run sampler)
            guarded = next(p.guarded for p in getattr(processor, "processors", ()))
        return guarded
    raise RuntimeError("no exporter guard")


def _per_span(
    operation: Callable[[], Any], spans: int, batches: int, untimed: Callable[[], Any] = lambda: None
) -> list[float]:
    """Microseconds a span of each batch; `untimed` runs after each batch, outside the clock."""
    out = []
    for _ in range(batches):
        started = time.perf_counter()
        operation()
        out.append((time.perf_counter() - started) / spans * 1e6)
        untimed()
    return out


def _time_child(tree: Path, copies: int, batches: int) -> dict[str, Any]:
    import gc

    from otel_agents._internal.export.scrub import scrub
    from otel_agents._internal.genai.content import ContentPolicy

    state = _set_up(tree)
    spans, on_end, flush = state["spans"], state["on_end"], state["provider"].force_flush
    guarded = _guard(state)
    policy = ContentPolicy()  # configure()'s default: no content captured
    assert not policy.enabled
    n = copies * len(spans)
    # fewer spans than the SDK's export batch (512): its worker thread stays asleep while on_end is
    # timed, and each flush exports in the timing thread
    assert n < SDK_EXPORT_BATCH, f"{n} spans a batch: --copies below {SDK_EXPORT_BATCH // len(spans)}"
    _push(state, 5)  # warm
    gc.collect()

    def ends() -> None:
        for _ in range(copies):
            for span in spans:
                on_end(span)

    def scrubs() -> None:
        for _ in range(copies):
            for span in spans:
                scrub(span, policy)

    def guard() -> None:
        for _ in range(copies):
            guarded.export(spans)

    flush_times = []
    for _ in range(batches):
        ends()
        started = time.perf_counter()
        flush()
        flush_times.append((time.perf_counter() - started) / n * 1e6)
    handed_before = state["sink"].spans
    parts = {
        "path": _per_span(lambda: _push(state, copies), n, batches),
        "on_end": _per_span(ends, n, batches, untimed=flush),
        "flush": flush_times,
        "scrub": _per_span(scrubs, n, batches),
        "guard": _per_span(guard, n, batches),
    }
    assert state["sink"].spans - handed_before == 3 * n * batches, "every span pushed reaches the sink"
    return {
        "otel_agents": state["otel_agents"],
        "spans": len(spans),
        "names": [s.name for s in spans],
        "attributes": sum(len(s.attributes or {}) for s in spans),
        "events": sum(len(s.events) for s in spans),
        "us": parts,
    }


def _count_child(tree: Path, copies: int) -> None:
    state = _set_up(tree)
    _push(state, copies)
    assert state["sink"].spans == copies * len(state["spans"])
    print(json.dumps({"spans": len(state["spans"]), "otel_agents": state["otel_agents"]}))


# --- the parent ----------------------------------------------------------------------------------


def _child(tree: Path, args: list[str], *, valgrind: Path | None = None) -> str:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), *args]
    if valgrind is not None:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={valgrind}", *command]
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def _instructions(tree: Path, copies: int, out: Path) -> tuple[int, dict[str, Any]]:
    total = None
    info = json.loads(_child(tree, ["count", str(copies)], valgrind=out).splitlines()[-1])
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            total = int(line.split()[1])
    assert total is not None, f"no total in {out}"
    return total, info


def _worktree(ref: str) -> tuple[Path, Callable[[], None]]:
    if Path(ref).is_dir():
        return Path(ref), lambda: None
    where = Path(tempfile.mkdtemp(prefix="export-path-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(where), ref], cwd=ROOT, check=True, capture_output=True)

    def remove() -> None:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT, check=False, capture_output=True)

    return where, remove


def _commit(tree: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "otel_agents"],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() + (" (+ uncommitted otel_agents changes)" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog="python -m benchmarks.export_path", description=description)
    parser.add_argument("--against", default="d606bb7", help="a tree (directory) or a commit (default d606bb7)")
    parser.add_argument("--tree", default=str(ROOT), help="the tree measured (default: this one)")
    parser.add_argument(
        "--copies", type=int, default=30, help="copies of the run's spans a timed batch (fewer spans than 512)"
    )
    parser.add_argument("--batches", type=int, default=9, help="timed batches a process")
    parser.add_argument("--rounds", type=int, default=3, help="timing processes a tree, alternated")
    parser.add_argument("--count-copies", type=int, default=200, help="copies pushed in the counted process")
    parser.add_argument("--no-instructions", action="store_true", help="time only")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        tree, what, *rest = args.child
        if what == "time":
            print(json.dumps(_time_child(Path(tree), int(rest[0]), int(rest[1]))))
        else:
            _count_child(Path(tree), int(rest[0]))
        return 0

    against, remove = _worktree(args.against)
    trees = {"this": Path(args.tree), "against": against}
    try:
        for line in _report(trees, args):
            print(line, flush=True)
    finally:
        remove()
    return 0


PARTS = (
    ("path", "the whole path: on_end of each span, then the flush that exports them"),
    ("on_end", "on_end alone (the span processors, into the batch queue)"),
    ("flush", "the flush alone (the batch handed to the guard: scrub, sink)"),
    ("scrub", "the scrub alone (`scrub(span, policy)` of each span)"),
    ("guard", "the guard alone (`GuardedExporter.export`: scrub and sink)"),
)


def _report(trees: dict[str, Path], args: argparse.Namespace) -> list[str]:
    """Time both trees, processes alternated (this, against, against, this, ...), then count."""
    lines = [f"export path per span, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.2f}"]
    lines += [f"- {name}: {tree} at {_commit(tree)}" for name, tree in trees.items()]
    times: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for round_number in range(args.rounds):
        names = list(trees) if round_number % 2 == 0 else list(reversed(trees))
        for name in names:
            times[name].append(json.loads(_child(trees[name], ["time", str(args.copies), str(args.batches)])))
    for name, runs in times.items():
        run = runs[0]
        lines.append(
            f"- {name}: a replay-5 run ends {run['spans']} spans ({run['attributes']} attributes, "
            f"{run['events']} events); otel_agents imported from {run['otel_agents']}"
        )
    lines += [
        "",
        f"time, us a span: median (best) of {args.batches} batches of {args.copies} runs' spans in each of "
        f"{args.rounds} processes a tree",
        "",
        "| part | this | against | this / against |",
        "|---|---:|---:|---:|",
    ]
    for part, what in PARTS:
        cells = {}
        for name, runs in times.items():
            values = [v for run in runs for v in run["us"][part]]
            cells[name] = (statistics.median(values), min(values))
        ratio = cells["this"][0] / cells["against"][0]
        lines.append(
            f"| {what} | {cells['this'][0]:.2f} ({cells['this'][1]:.2f}) | "
            f"{cells['against'][0]:.2f} ({cells['against'][1]:.2f}) | {ratio:.2f}x |"
        )
    if args.no_instructions:
        return lines
    if shutil.which("valgrind") is None:
        return [*lines, "", "instructions: not counted (valgrind is not installed; Debian: apt-get install valgrind)"]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=2) as pool:
        jobs = {
            (name, n): pool.submit(_instructions, tree, n, Path(tmp) / f"{name}-{n}.callgrind")
            for name, tree in trees.items()
            for n in (0, args.count_copies)
        }
        per_span = {}
        for name in trees:
            (full, info), (none, _) = jobs[name, args.count_copies].result(), jobs[name, 0].result()
            per_span[name] = (full - none) / (args.count_copies * info["spans"])
    ratio = per_span["this"] / per_span["against"]
    return [
        *lines,
        "",
        f"instructions a span (callgrind: a process pushing {args.count_copies} runs' spans, less one pushing none)",
        "",
        "| | this | against | this / against |",
        "|---|---:|---:|---:|",
        f"| the whole path | {per_span['this']:,.0f} | {per_span['against']:,.0f} | {ratio:.2f}x |",
        "",
        f"done {datetime.now(UTC):%H:%M} UTC, load {os.getloadavg()[0]:.2f}",
    ]


if __name__ == "__main__":
    raise SystemExit(main())

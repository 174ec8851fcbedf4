"""`otel-agents ui` on a full store: how fast its pages answer, and how soon a run that ends appears.

    python -m benchmarks.ui [--repeat 7] [--live 5] [--rebuild] [--no-phoenix]

The store: filled through the store's own writer (`StoreWriter.write`, in batches of 1,000 runs)
until it reaches the default bound (200 MiB) and starts dropping its oldest runs. Each run is a copy
of a real run with fresh trace, span and run ids: the seven runs of the web page's test fixture
(tests/support/ui_store.py: the real OpenAI client against the tests' local server; a success, a
message-limit stop, a loop-guard stop, a failing tool, a resumed conversation's two runs, a markup
message), started at a random time over the last 30 days, with one of eight teams and forty users,
its tokens and cost scaled by a random factor, its message content dropped as default settings drop
it (kept in one copy in ten). Two long runs come last, each a real run of AutoGen's replay client
(a writer and a critic, a model call a turn, as `benchmarks.explain` records): one of 1,000 turns
(3,002 spans) and one of 10,000 turns (30,002 spans). The built store is kept in
~/.cache/otel-agents/bench-ui-store-<schema>-<bound>mb (`--rebuild` makes it again); each sitting
works on a copy of it, so the runs it adds do not accumulate.

What is timed, against `otel-agents ui --store COPY --port 0` started as a user starts it (a new
process; ready at its first stdout line):

- each page over HTTP (urllib, a new connection a request, the whole body read): one warm-up
  request, then `repeat` requests; median and max;
- a run page opened in headless Chromium (Debian's, through Playwright) until its waterfall's rows
  are shown, and a run of its trace in a local Arize Phoenix (from .venv-phoenix, the runs exported
  with `otel-agents export`) until its spans are shown (`--no-phoenix` skips Phoenix);
- a run that ends while the runs page is open in Chromium: one new run written to the store, then
  the time until its row (`tr[data-run-id=ID]`) is on the page (the page polls every second);
  `live` runs, one after another.

The targets (issue 46 item 7; of the benchmark, never of a test): the runs page's first page, a
filter and the cost page over 30 days within 300 ms each; the 1,000-turn run within 1 s; the
30,000-span run within 3 s, folded; a run that ends on an open runs page within 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "otel-agents"
BOUND_MB = 200.0  # the store's default bound (DEFAULT_STORE_MAX_MB), in MiB
BATCH = 1000
"""Runs a write while filling."""
DAYS = 30
TEAMS = ("review", "slogans", "research", "notes", "support", "triage", "billing", "search")
USERS = tuple(f"user-{i:02d}" for i in range(40))
KINDS = {  # the fixture's runs, and how often each is copied
    "success": 35,
    "max_messages": 10,
    "loop_guard": 10,
    "failing_tool": 10,
    "resumed_first": 10,
    "resumed_second": 15,
    "markup": 10,
}
CONTENT_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "otel_agents.message.content",
        "input.value",
        "output.value",
    }
)
"""Attributes holding message content: default settings record none."""
CONTENT_EVENTS = frozenset({"otel_agents.message", "gen_ai.client.inference.operation.details"})
SCALED_TOKENS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "otel_agents.message.input_tokens",
    "otel_agents.message.output_tokens",
)
COST = "otel_agents.cost.usd"

TARGETS = {"page": 0.300, "1k": 1.0, "30k": 3.0, "live": 2.0}


# --- the store ---------------------------------------------------------------------------------


@dataclass
class Template:
    kind: str
    spans: list[Any]  # StoredSpan, start first


def _templates(scratch: Path) -> tuple[list[Template], Template, Template]:
    """The fixture's seven runs, and the 1,000-turn and 10,000-turn runs, recorded into `scratch`."""
    from benchmarks.explain import _record
    from otel_agents._internal.export.store.reader import Store
    from tests.support.ui_store import fill_ui_store
    from tests.support.ui_store_app import SESSION_PREFIX

    fixture = fill_ui_store(scratch / "fixture")
    reader = Store(fixture.store)
    short = []
    for row in fixture.rows:
        spans = sorted(reader.spans(row["trace_id"]), key=lambda s: s.start_ns)
        short.append(Template(str(row["session_id"]).removeprefix(SESSION_PREFIX), spans))
    long = []
    for turns in (1000, 10_000):
        directory = scratch / f"long-{turns}"
        started = time.perf_counter()
        # a queue that holds the whole run: the store's writer takes the spans slower than the replay
        # client makes them, and the default queue (2,048 spans) would drop some
        queue = os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE")
        os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(4 * turns + 100)
        try:
            run_id = asyncio.run(_record(directory, turns, 0))
        finally:
            if queue is None:
                del os.environ["OTEL_BSP_MAX_QUEUE_SIZE"]
            else:
                os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = queue
        reader = Store(directory)
        (run,) = [r for r in reader.runs(limit=None) if r.run_id == run_id]
        spans = sorted(reader.spans(run.trace_id), key=lambda s: s.start_ns)
        print(f"  recorded a run of {turns:,} turns ({len(spans):,} spans) in {time.perf_counter() - started:.0f} s")
        if len(spans) != 3 * turns + 2:  # the run, and a turn's agent, model call and message
            raise SystemExit(
                f"the run of {turns:,} turns has {len(spans):,} spans, not {3 * turns + 2:,}: spans dropped"
            )
        long.append(Template(f"{turns}-turns", spans))
    return short, long[0], long[1]


def _copy(
    template: Template,
    rng: random.Random,
    *,
    start_ns: int,
    team: str,
    user: str,
    scale: float,
    content: bool,
) -> tuple[str, str, list[Any]]:
    """A copy of the template's run with fresh ids, started at `start_ns`: (run id, trace id, spans)."""
    from otel_agents._internal.export.replay import readable_span
    from otel_agents._internal.export.store.rows import StoredSpan

    trace_id = f"{rng.getrandbits(128):032x}"
    run_id = f"{rng.getrandbits(128):032x}"
    conversation = f"{rng.getrandbits(128):032x}"
    ids = {s.span_id: f"{rng.getrandbits(64) | 1:016x}" for s in template.spans}
    shift = start_ns - template.spans[0].start_ns
    spans = []
    for span in template.spans:
        data = span.data
        attributes = {k: v for k, v in data["attributes"].items() if content or k not in CONTENT_KEYS}
        name = span.name
        if "otel_agents.run.id" in attributes:
            attributes["otel_agents.run.id"] = run_id
            if "gen_ai.workflow.name" in attributes:
                attributes["gen_ai.workflow.name"] = team
                name = f"invoke_workflow {team}"
            attributes["user.id"] = user
            attributes["session.id"] = f"bench-{run_id[:8]}"
        if "gen_ai.conversation.id" in attributes:
            attributes["gen_ai.conversation.id"] = conversation
        if scale != 1:
            for key in SCALED_TOKENS:
                if isinstance(attributes.get(key), int):
                    attributes[key] = int(attributes[key] * scale)
            if isinstance(attributes.get(COST), float):
                attributes[COST] = attributes[COST] * scale
        events = [
            {
                **event,
                "timestamp": event["timestamp"] + shift,
                "attributes": {
                    k: v for k, v in event.get("attributes", {}).items() if content or k not in CONTENT_KEYS
                },
            }
            for event in data["events"]
            if content or event["name"] not in CONTENT_EVENTS
        ]
        stored = StoredSpan(
            trace_id,
            ids[span.span_id],
            ids.get(span.parent_span_id) if span.parent_span_id else None,
            name,
            span.start_ns + shift,
            span.end_ns + shift,
            {**data, "attributes": attributes, "events": events},
        )
        spans.append(readable_span(stored))
    return run_id, trace_id, spans


def _used(directory: Path) -> tuple[int, int, int]:
    """(bytes in use, file bytes, runs) of the store, read only."""
    path = directory / "spans.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        page = connection.execute("PRAGMA page_size").fetchone()[0]
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        runs = connection.execute("SELECT count(*) FROM runs").fetchone()[0]
    connection.close()
    return (pages - free) * page, path.stat().st_size, runs


def _random_copy(templates: list[Template], rng: random.Random, now_ns: int, *, start_ns: int | None = None) -> Any:
    template = rng.choices(templates, weights=[KINDS.get(t.kind, 1) for t in templates])[0]
    return _copy(
        template,
        rng,
        start_ns=start_ns if start_ns is not None else now_ns - rng.randrange(3600, DAYS * 86400) * 1_000_000_000,
        team=rng.choice(TEAMS),
        user=rng.choice(USERS),
        scale=round(2 ** rng.uniform(0, 6), 2),
        content=rng.random() < 0.1,
    )


def build(directory: Path, *, bound_bytes: int, seed: int = 46) -> dict[str, Any]:
    """Fill `directory` to the bound, then add the two long runs; what was built."""
    from otel_agents._internal.export.store.writer import StoreWriter

    rng = random.Random(seed)
    began = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="bench-ui-templates-"))
    try:
        print("recording the template runs ...", flush=True)
        short, long_1k, long_30k = _templates(scratch)
        # the template runs' own store is gone after this; the copies' templates are kept in memory
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    writer = StoreWriter(directory, max_bytes=bound_bytes)
    now_ns = time.time_ns()
    written = 0
    print(f"filling the store to {bound_bytes / 2**20:.0f} MiB, {BATCH:,} runs a write ...", flush=True)
    while True:
        batch: list[Any] = []
        for _ in range(BATCH):
            batch += _random_copy(short, rng, now_ns)[2]
        writer.write(batch)
        written += BATCH
        used, _, runs = _used(directory)
        print(f"  {written:,} runs written, {runs:,} kept, {used / 2**20:.1f} MiB", flush=True)
        if runs < written:  # the writer dropped its oldest runs: the store is at its bound
            break
    long = {}
    for name, template, hours_ago in (("1k", long_1k, 3), ("30k", long_30k, 2)):
        run_id, trace_id, spans = _copy(
            template,
            rng,
            start_ns=now_ns - hours_ago * 3600 * 1_000_000_000,
            team=f"long-{name}",
            user="user-00",
            scale=1,
            content=True,  # as recorded (the replay client's runs record no content by default)
        )
        writer.write(spans)
        long[name] = {"run_id": run_id, "trace_id": trace_id, "spans": len(spans)}
    writer.settle()
    used, size, runs = _used(directory)
    return {
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "build_s": round(time.perf_counter() - began, 1),
        "written": written + 2,
        "runs": runs,
        "used_bytes": used,
        "file_bytes": size,
        "long": long,
        "templates": [t.kind for t in short],
        "seed": seed,
        "bound_bytes": bound_bytes,
    }


def cached_store(rebuild: bool, bound_mb: float) -> tuple[Path, dict[str, Any]]:
    """The built store (made now if missing or `rebuild`) and what was built."""
    from otel_agents._internal.export.store.schema import SCHEMA_VERSION

    name = f"bench-ui-store-{SCHEMA_VERSION}-{bound_mb:g}mb"
    directory, meta_path = CACHE / name, CACHE / f"{name}.json"
    if rebuild or not meta_path.is_file() or not directory.is_dir():
        shutil.rmtree(directory, ignore_errors=True)
        meta_path.unlink(missing_ok=True)
        partial = CACHE / f"{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        meta = build(partial, bound_bytes=int(bound_mb * 1024 * 1024))
        partial.rename(directory)
        meta_path.write_text(json.dumps(meta, indent=1))
        print(f"built {directory} in {meta['build_s']:.0f} s")
    else:
        print(f"using the store built {json.loads(meta_path.read_text())['built_at']}: {directory}")
    return directory, json.loads(meta_path.read_text())


# --- timing ------------------------------------------------------------------------------------


@dataclass
class Timed:
    what: str
    path: str
    times: list[float]
    status: int
    size: int
    target: float | None
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def verdict(self) -> str:
        if self.target is None:
            return ""
        return "met" if self.median <= self.target else "**missed**"


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def time_http(base: str, what: str, path: str, repeat: int, target: float | None) -> Timed:
    status, body = get(base + path.lstrip("/"))  # the warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        status, body = get(base + path.lstrip("/"))
        times.append(time.perf_counter() - t0)
    timed = Timed(what, path, times, status, len(body), target)
    print(
        f"  {what:<34} {path:<45} median {timed.median * 1000:7.1f} ms, max {max(times) * 1000:7.1f} ms"
        f"  ({status}, {len(body):,} B)",
        flush=True,
    )
    return timed


def drawn_rows(html: bytes) -> tuple[int, int]:
    """(waterfall rows drawn, rows that fold spans)."""
    return html.count(b'<tr class="span '), html.count(b'class="folded"')


@contextmanager
def browser() -> Iterator[Any]:
    from tests.support.browser import chromium

    with chromium(navigation_timeout_s=120) as opened:
        yield opened


def time_in_browser(opened: Any, url: str, selector: str, repeat: int, count: int = 1) -> tuple[list[float], str]:
    """Navigation start until the page's `load` event has passed and `count` elements match
    `selector`, `repeat` times after one warm-up, each on a fresh page; and the last page's text
    of what it shows (`selector`'s count)."""
    times, shown = [], ""
    for i in range(repeat + 1):
        page = opened.new_page()
        try:
            t0 = time.perf_counter()
            page.goto(url, wait_until="load", timeout=120_000)
            page.wait_for_function(
                "([s, n]) => document.querySelectorAll(s).length >= n", arg=[selector, count], timeout=120_000
            )
            elapsed = time.perf_counter() - t0
            shown = f"{page.evaluate('(s) => document.querySelectorAll(s).length', selector)} rows in the page"
            note = page.get_by_text("Viewing ")  # Phoenix's word of how many spans it shows
            with contextlib.suppress(Exception):
                note.first.wait_for(timeout=5000 if "redirects/traces" in url else 1)
            if note.count():
                shown += f"; it says {note.first.inner_text().strip()!r}"
        finally:
            page.close()
        if i:
            times.append(elapsed)
    return times, shown


def time_live(
    opened: Any, base: str, store: Path, templates: list[Template], times: int, bound_bytes: int
) -> list[tuple[float, float]]:
    """(write s, appeared s after the write returned) for `times` new runs on one open runs page."""
    from otel_agents._internal.export.store.writer import StoreWriter

    rng = random.Random(4646)
    page = opened.page
    opened.open(base)
    page.locator("tr[data-run-id]").first.wait_for(state="visible")
    writer = StoreWriter(store, max_bytes=bound_bytes)
    out = []
    for _ in range(times):
        time.sleep(rng.uniform(0.2, 1.2))  # not in step with the page's poll
        now = time.time_ns()
        run_id, _, spans = _random_copy(templates, rng, now, start_ns=now - 500_000_000)
        t0 = time.perf_counter()
        writer.write(spans)
        t1 = time.perf_counter()
        page.locator(f'tr[data-run-id="{run_id}"]').wait_for(state="attached", timeout=60_000)
        out.append((t1 - t0, time.perf_counter() - t1))
        print(f"  new run {run_id[:12]}: written in {(t1 - t0) * 1000:.0f} ms, on the page {out[-1][1]:.2f} s later")
    return out


# --- Phoenix -----------------------------------------------------------------------------------


def phoenix_executable() -> Path | None:
    path = ROOT / ".venv-phoenix" / "bin" / "phoenix"
    return path if path.is_file() else None


def phoenix_span_count(endpoint: str, trace_id: str) -> int:
    """Spans of the trace Phoenix holds (its REST API, paged)."""
    count, cursor = 0, None
    while True:
        url = f"{endpoint}/v1/projects/default/spans?trace_id={trace_id}&limit=1000"
        if cursor:
            url += f"&cursor={cursor}"
        status, body = get(url)
        if status != 200:
            return count
        answer = json.loads(body)
        count += len(answer["data"])
        cursor = answer.get("next_cursor")
        if not cursor:
            return count


def phoenix_side(store: Path, meta: dict[str, Any], opened: Any, repeat: int) -> dict[str, Any]:
    """Export both long runs to a local Phoenix and time its trace page until its spans show."""
    import subprocess

    from tests.support.phoenix import start_phoenix, stop_phoenix

    executable = phoenix_executable()
    assert executable is not None
    working = Path(tempfile.mkdtemp(prefix="bench-ui-phoenix-"))
    phoenix = start_phoenix(str(executable), working)
    results: dict[str, Any] = {"version": _phoenix_version()}
    try:
        for name, run in meta["long"].items():
            t0 = time.perf_counter()
            env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
            env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "120"  # Phoenix, ingesting, may take longer than 10 s a batch
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "otel_agents",
                    "--store",
                    str(store),
                    "export",
                    run["run_id"],
                    "--endpoint",
                    phoenix.http_endpoint,
                    "--protocol",
                    "http/protobuf",
                ],
                capture_output=True,
                text=True,
                check=False,
                env=env,
            )
            if done.returncode != 0:
                results[name] = {"error": done.stderr.strip()[-500:]}
                continue
            deadline = time.monotonic() + 300
            held = 0
            while time.monotonic() < deadline:
                held = phoenix_span_count(phoenix.http_endpoint, run["trace_id"])
                if held >= run["spans"]:
                    break
                time.sleep(1)
            ingested = time.perf_counter() - t0
            print(f"  Phoenix holds {held:,} of {run['spans']:,} spans of the {name} run ({ingested:.1f} s)")
            url = f"{phoenix.http_endpoint}/redirects/traces/{run['trace_id']}"
            try:
                times, shown = time_in_browser(opened, url, PHOENIX_SPAN_ROW, repeat, count=PHOENIX_ROWS)
                results[name] = {"times": times, "held": held, "ingest_s": ingested, "shown": shown}
                print(
                    f"  Phoenix trace page, {name}: median {statistics.median(times):.2f} s, max {max(times):.2f} s"
                    f" ({shown})"
                )
            except Exception as error:  # Playwright's timeout: say so, keep the rest
                results[name] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0]}", "held": held}
                print(f"  Phoenix trace page, {name}: {results[name]['error']}")
    finally:
        stop_phoenix(phoenix)
        shutil.rmtree(working, ignore_errors=True)
    return results


PHOENIX_SPAN_ROW = "[data-testid='trace-tree'] .span-node-wrap"
PHOENIX_ROWS = 2
"""The trace's tree in Phoenix's trace page (its spans as rows), at least two of them shown."""


def _phoenix_version() -> str:
    import subprocess

    python = ROOT / ".venv-phoenix" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('arize-phoenix'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "?"


# --- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="timed requests a page, after one warm-up")
    parser.add_argument("--browser-repeat", type=int, default=3, help="timed openings in Chromium, after one")
    parser.add_argument("--live", type=int, default=5, help="new runs written while the runs page is open")
    parser.add_argument("--rebuild", action="store_true", help="build the store again")
    parser.add_argument("--bound-mb", type=float, default=BOUND_MB, help="the store bound, MiB (default 200)")
    parser.add_argument("--no-phoenix", action="store_true", help="skip the comparison with a local Phoenix")
    args = parser.parse_args(argv)

    from tests.support.ui_server import ui_server

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}, "
        f"Python {platform.python_version()}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    cached, meta = cached_store(args.rebuild, args.bound_mb)
    print(
        f"store: {meta['runs']:,} runs ({meta['written']:,} written, the oldest dropped at the bound), "
        f"{meta['used_bytes'] / 2**20:.1f} MiB in use, file {meta['file_bytes'] / 2**20:.1f} MiB; "
        f"long runs: 1,000 turns ({meta['long']['1k']['spans']:,} spans), "
        f"10,000 turns ({meta['long']['30k']['spans']:,} spans)"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-ui-sitting-"))
    store = work / "store"
    shutil.copytree(cached, store)
    long_1k, long_30k = meta["long"]["1k"]["run_id"], meta["long"]["30k"]["run_id"]
    results: list[Timed] = []
    try:
        with ui_server(store) as ui:
            base = ui.url
            print(f"otel-agents ui: {base} (HTTP: median and max of {args.repeat} after one warm-up)")
            page, one_k, thirty_k = TARGETS["page"], TARGETS["1k"], TARGETS["30k"]
            for what, path, target in (
                ("runs, first page", "/", page),
                ("runs, team and stop kind", "/?team=slogans&stop_kind=loop_guard", page),
                ("runs, a finding", "/?finding=repeated_messages", page),
                ("runs, by cost", "/?sort=cost", page),
                ("runs, a late page", f"/?page={max(meta['runs'] // 50 - 1, 1)}", page),
                ("cost, 30 days", "/cost?since=30d", page),
                ("cost by team, 30 days", "/cost?by=team&since=30d", page),
                ("/api/runs", "/api/runs", page),
                ("/api/cost, 30 days", "/api/cost?since=30d", page),
                ("run of 1,000 turns", f"/runs/{long_1k}", one_k),
                ("run of 30,000 spans", f"/runs/{long_30k}", thirty_k),
                ("/api/runs/ 1,000 turns", f"/api/runs/{long_1k}", None),
                ("/api/runs/ 30,000 spans", f"/api/runs/{long_30k}", None),
            ):
                results.append(time_http(base, what, path, args.repeat, target))
            _, html = get(f"{base}runs/{long_30k}")
            rows_30k = drawn_rows(html)
            _, html = get(f"{base}runs/{long_1k}")
            rows_1k = drawn_rows(html)
            print(
                f"  waterfall rows drawn (of them folding spans): 1,000-turn run {rows_1k[0]:,} ({rows_1k[1]}), "
                f"30,000-span run {rows_30k[0]:,} ({rows_30k[1]})"
            )

            print(f"Chromium (Debian's, headless): navigation to rows shown, median of {args.browser_repeat}")
            ours: dict[str, list[float]] = {}
            with browser() as opened:
                for name, run_id in (("1k", long_1k), ("30k", long_30k)):
                    ours[name], shown = time_in_browser(opened, f"{base}runs/{run_id}", "tr.span", args.browser_repeat)
                    print(
                        f"  ours, {name}: median {statistics.median(ours[name]):.2f} s, max {max(ours[name]):.2f} s"
                        f" ({shown})"
                    )
                print("a run that ends while the runs page is open:")
                live = time_live(opened, base, store, _live_templates(), args.live, meta["bound_bytes"])
                theirs: dict[str, Any] = {}
                if args.no_phoenix:
                    print("Phoenix: skipped (--no-phoenix)")
                elif phoenix_executable() is None:
                    print("Phoenix: not set up on this machine (.venv-phoenix missing): skipped")
                else:
                    print("Phoenix: the same two runs exported with `otel-agents export`, opened in the same Chromium")
                    theirs = phoenix_side(store, meta, opened, args.browser_repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report(meta, results, rows_1k, rows_30k, ours, live, theirs, args)
    return 0


def _live_templates() -> list[Template]:
    """The fixture's runs again (a few seconds), as templates for the runs written while the page is open."""
    from otel_agents._internal.export.store.reader import Store
    from tests.support.ui_store import fill_ui_store
    from tests.support.ui_store_app import SESSION_PREFIX

    scratch = Path(tempfile.mkdtemp(prefix="bench-ui-live-"))
    try:
        fixture = fill_ui_store(scratch)
        reader = Store(fixture.store)
        return [
            Template(
                str(row["session_id"]).removeprefix(SESSION_PREFIX),
                sorted(reader.spans(row["trace_id"]), key=lambda s: s.start_ns),
            )
            for row in fixture.rows
        ]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def report(
    meta: dict[str, Any],
    results: list[Timed],
    rows_1k: tuple[int, int],
    rows_30k: tuple[int, int],
    ours: dict[str, list[float]],
    live: list[tuple[float, float]],
    theirs: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    print()
    print("| what | path | status | median | max | size | target | met |")
    print("|---|---|---:|---:|---:|---:|---|:---:|")
    for r in results:
        target = (
            f"{r.target * 1000:.0f} ms"
            if r.target is not None and r.target < 1
            else (f"{r.target:.0f} s" if r.target is not None else "")
        )
        path = r.path if len(r.path) < 40 else r.path[:18] + "…"
        print(
            f"| {r.what} | `{path}` | {r.status} | {r.median * 1000:.0f} ms | {max(r.times) * 1000:.0f} ms | "
            f"{r.size / 1024:,.0f} KiB | {target} | {r.verdict()} |"
        )
    appeared = [a for _, a in live]
    verdict = "met" if statistics.median(appeared) <= TARGETS["live"] else "**missed**"
    print(
        f"| a run that ends, on the open runs page | `/` | | {statistics.median(appeared):.2f} s | "
        f"{max(appeared):.2f} s | | 2 s | {verdict} |"
    )
    print(
        f"\nwaterfall rows drawn: {rows_1k[0]:,} for {meta['long']['1k']['spans']:,} spans "
        f"({rows_1k[1]} folding); {rows_30k[0]:,} for {meta['long']['30k']['spans']:,} ({rows_30k[1]} folding)"
    )
    print("\nIn Chromium, navigation until the trace's rows are shown (median, max):")
    for name in ("1k", "30k"):
        line = f"  {name}: ours {statistics.median(ours[name]):.2f} s, {max(ours[name]):.2f} s"
        if name in theirs and "times" in theirs[name]:
            t = theirs[name]["times"]
            line += (
                f"; Phoenix {theirs.get('version')} {statistics.median(t):.2f} s, {max(t):.2f} s "
                f"({theirs[name]['shown']}; it held {theirs[name]['held']:,} spans)"
            )
        elif name in theirs:
            line += f"; Phoenix: {theirs[name].get('error')}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())

"""A store holding the runs the web page's tests and the docs' screenshots look at, filled by an app
(tests/support/ui_store_app.py, in a process of its own) through the real OpenAI client against the
tests' OpenAI-compatible server, and read back through `otel-agents runs --json`.

    runs = fill_ui_store(directory)        # some 3 s
    runs.loop_guard["run_id"]              # each kind's row of `runs --json`
    runs.run_ids                           # every run id, newest first
    fill_ui_store(directory, env={"OTEL_EXPORTER_OTLP_ENDPOINT": url})   # and sent over OTLP too

The runs (teams review, slogans, research and notes; users ana and ben; content capture on):
success (outcome success), max_messages (stopped by MaxMessageTermination, outcome failure),
loop_guard (stopped by LoopGuard), failing_tool (its tool raised, outcome failure), resumed_first and
resumed_second (one conversation: the team's state saved after the first, loaded into a new team for
the second; outcomes success), markup (a task and reply holding MARKUP texts).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.cli import ROOT, cli
from tests.support.ui_store_app import IMG_MARKUP, MARKUP_REPLY, MARKUP_TASK, SCRIPT_MARKUP, SESSION_PREFIX

KINDS = ("success", "max_messages", "loop_guard", "failing_tool", "resumed_first", "resumed_second", "markup")
MARKUP = (SCRIPT_MARKUP, IMG_MARKUP)
"""The two texts of the markup run that a page must show as text and never run: they would set
`window.__xss` to 1 and 2."""

__all__ = ["KINDS", "MARKUP", "MARKUP_REPLY", "MARKUP_TASK", "UiRuns", "add_copies", "fill_ui_store", "run_store_app"]


@dataclass(frozen=True)
class UiRuns:
    store: Path
    rows: list[dict[str, Any]]
    """`otel-agents runs --json --limit 100` over the store, newest first."""

    def of(self, kind: str) -> dict[str, Any]:
        """The row of the run of `kind` (one of KINDS)."""
        (row,) = [r for r in self.rows if r["session_id"] == SESSION_PREFIX + kind]
        return row

    @property
    def run_ids(self) -> list[str]:
        return [str(r["run_id"]) for r in self.rows]

    def id(self, kind: str) -> str:
        return str(self.of(kind)["run_id"])

    @property
    def success(self) -> dict[str, Any]:
        return self.of("success")

    @property
    def max_messages(self) -> dict[str, Any]:
        return self.of("max_messages")

    @property
    def loop_guard(self) -> dict[str, Any]:
        return self.of("loop_guard")

    @property
    def failing_tool(self) -> dict[str, Any]:
        return self.of("failing_tool")

    @property
    def resumed(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The two runs of the resumed conversation, first run first."""
        return self.of("resumed_first"), self.of("resumed_second")

    @property
    def markup(self) -> dict[str, Any]:
        return self.of("markup")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_store_app(
    store: Path, *args: str, env: Mapping[str, str] | None = None, within_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """The store's app (tests/support/ui_store_app.py) in a process of its own, writing to `store`
    (`args` `--late NAME`: one run more), run to its end within `within_s`. Its telemetry goes to
    the store and, with `env` (OTEL_ variables), where they say: none of this process's OTEL_
    variables is passed on."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [environment.get("PYTHONPATH")])])
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tests.support.ui_store_app", str(store), *args],
        capture_output=True,
        text=True,
        timeout=within_s,
        cwd=ROOT,
        env=environment,
        preexec_fn=_default_sigint,
        check=False,
    )


def fill_ui_store(directory: Path, *, env: Mapping[str, str] | None = None, within_s: float = 120) -> UiRuns:
    """Fill `directory` (a store, made if missing) with the runs above and read them back; the app
    must succeed within `within_s`, its telemetry also going where `env`'s OTEL_ variables say (an
    OTLP endpoint, a service name). The runs are checked to be what their names say."""
    directory.mkdir(parents=True, exist_ok=True)
    done = run_store_app(directory, env=env, within_s=within_s)
    assert done.returncode == 0, f"the store's app failed ({done.returncode}):\n{done.stderr[-4000:]}"
    listed = cli("--store", str(directory), "runs", "--json", "--limit", "100")
    assert listed.returncode == 0, listed.stderr
    runs = UiRuns(directory, json.loads(listed.stdout))
    _check(runs)
    return runs


def _check(runs: UiRuns) -> None:
    """Each run is what its kind says (a change in AutoGen or the store would otherwise leave the
    page's tests looking at something else)."""
    assert sorted(str(r["session_id"]).removeprefix(SESSION_PREFIX) for r in runs.rows) == sorted(KINDS), runs.rows
    assert {r["team"] for r in runs.rows} == {"review", "slogans", "research", "notes"}
    assert {r["user_id"] for r in runs.rows} == {"ana", "ben"}
    labels = {kind: [o["label"] for o in runs.of(kind)["outcomes"]] for kind in KINDS}
    assert labels == {
        "success": ["success"],
        "max_messages": ["failure"],
        "loop_guard": [],
        "failing_tool": ["failure"],
        "resumed_first": ["success"],
        "resumed_second": ["success"],
        "markup": [],
    }, labels
    assert runs.success["stop_kind"] == "text_mention"
    assert runs.max_messages["stop_kind"] == "max_messages"
    assert runs.loop_guard["stop_kind"] == "loop_guard"
    first, second = runs.resumed
    assert first["conversation_id"] == second["conversation_id"], "one conversation, resumed"
    assert len({r["conversation_id"] for r in runs.rows}) == len(KINDS) - 1
    assert all(r["cost_usd"] and r["input_tokens"] > 0 for r in runs.rows), "every call priced and counted"


def add_copies(store: Path, row: dict[str, Any], count: int) -> list[str]:
    """`count` copies of the run of `row` (a row of `runs --json` in `store`) written to `store` by the
    store's own exporter, each with fresh trace, span and run ids and started a millisecond after the
    one before: their run ids, oldest first."""
    import random

    from otel_agents._internal import keys as sc
    from otel_agents._internal.export.replay import readable_span
    from otel_agents._internal.export.store.reader import Store
    from otel_agents._internal.export.store.rows import StoredSpan
    from otel_agents._internal.export.store.writer import StoreSpanExporter

    template = Store(store).spans(row["trace_id"])
    rng = random.Random(count)
    exporter = StoreSpanExporter(store)
    made = []
    try:
        for copy in range(1, count + 1):
            trace_id, run_id = f"{rng.getrandbits(128):032x}", f"{rng.getrandbits(128):032x}"
            ids = {span.span_id: f"{rng.getrandbits(64) | 1:016x}" for span in template}
            shift = copy * 1_000_000
            spans = []
            for span in template:
                attributes = {
                    key: run_id if key == sc.RUN_ID and value == row["run_id"] else value
                    for key, value in span.data["attributes"].items()
                }
                events = [{**event, "timestamp": event["timestamp"] + shift} for event in span.data.get("events", [])]
                parent = ids.get(span.parent_span_id) if span.parent_span_id else None
                data = {**span.data, "attributes": attributes, "events": events}
                copied = StoredSpan(
                    trace_id, ids[span.span_id], parent, span.name, span.start_ns + shift, span.end_ns + shift, data
                )
                spans.append(readable_span(copied))
            exporter.export(spans)
            made.append(run_id)
    finally:
        exporter.shutdown()
    return made

"""Ctrl-C in `otel-agents demo`: the team stops before its next model call, and the run under way
is stored as cancelled with the calls it made. The demo runs as a person runs it, in a process of
its own; the signal goes when the demo has printed a message the first model call made, which the
test reads as it comes (the demo prints each message as it comes, through a pipe too)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.lowest_versions, pytest.mark.every_python]

BIN = Path(sys.executable).parent
FULL_RUN_CALLS = 4
"""The model calls of the demo's first run (ana's) when it runs to its end."""


def otel_agents(store: Path, *args: str) -> Any:
    done = subprocess.run(
        [str(BIN / "otel-agents"), "--store", str(store), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_ctrl_c_stops_the_demo_before_its_next_model_call_and_stores_the_run_as_cancelled(tmp_path: Path) -> None:
    store = tmp_path / "store"
    demo = subprocess.Popen(
        [str(BIN / "otel-agents"), "--store", str(store), "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as in a terminal: a test run as a background job of a script (CI) inherits SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert demo.stdout is not None and demo.stderr is not None
    hung = threading.Timer(120, demo.kill)  # a bound on a hang, not a wait: the reads below end at its exit
    hung.start()
    try:
        printed = []
        for line in demo.stdout:
            printed.append(line)
            if line.startswith("[2 messages · 412 in / 18 out tokens"):  # the writer's first call has answered
                demo.send_signal(signal.SIGINT)  # Ctrl-C
                break
        printed.append(demo.stdout.read())
        err = demo.stderr.read()
        demo.wait()
    finally:
        hung.cancel()
    runs = otel_agents(store, "runs", "--json")
    assert [(r["user_id"], r["stop_kind"]) for r in runs] == [("ana", "cancelled")], "ben's run never started"
    (run,) = runs
    spans = otel_agents(store, "show", run["run_id"], "--json")["spans"]
    calls = [s for s in spans if s["name"].startswith("chat ")]
    assert 1 <= len(calls) < FULL_RUN_CALLS, [s["name"] for s in spans]
    assert run["input_tokens"] == sum(c["attributes"].get("gen_ai.usage.input_tokens", 0) for c in calls), (
        "the calls made so far, and only those"
    )
    assert "".join(printed).endswith("---------- stopped: cancelled ----------\n"), "".join(printed)[-1500:]
    assert demo.returncode != 0 and "Traceback" not in err, err

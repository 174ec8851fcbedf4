"""Bad variables, warned and defaulted (DESIGN section 3, "Settings": changed 2026-12-04): an app
of ours run unchanged under `opentelemetry-instrument`, exporting to the built Jaeger, with every
`OTEL_AGENTS_*` variable set to a value that cannot be used, runs traced: one trace per run, no
content, one warning per variable. Where otel-agents cannot start at all, AutoGen's own runtime
tracing stays off: no span with the app's content leaves through the distro's exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_agents._internal.config.params import VARIABLES
from tests.support.backends import built_backends
from tests.support.jaeger import Jaeger, poll, running_jaeger
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "support" / "zero_code_app.py"
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
CANARY = "Write a line about tracing."
"""The app's task: the user's content, which must not leave with content capture off."""
VALID_AS_ANY_TEXT = frozenset({"OTEL_AGENTS_STORE"})
BAD = {name: "not valid!" for name in sorted(VARIABLES) if name.startswith("OTEL_AGENTS_")}
for _name in VALID_AS_ANY_TEXT:
    del BAD[_name]


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    with running_jaeger(built_backends().jaeger, tmp_path_factory.mktemp("jaeger")) as running:
        yield running


def run_under_the_distro(jaeger: Jaeger, tmp_path: Path, service: str, **variables: str) -> str:
    """The app under `opentelemetry-instrument`, its traces to Jaeger by the distro: its stderr."""
    with OpenAIServer() as server:
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(APP)],
            env={
                "PATH": os.environ["PATH"],
                "PYTHONPATH": str(ROOT),  # this checkout's otel_agents, whatever the environment has
                "HOME": str(tmp_path),
                "XDG_DATA_HOME": str(tmp_path / "data"),
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": "test-key",
                "OTEL_SERVICE_NAME": service,
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_METRICS_EXPORTER": "none",
                "OTEL_LOGS_EXPORTER": "none",
                # the other instrumentations installed here capture content of their own: off, so
                # that what is checked is what otel-agents and AutoGen send
                "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "autogen_agentchat,openai,httpx,httpx2",
                **variables,
            },
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert server.request_count == 4, "the app ran: two runs of two calls"
    return done.stderr


def traces_of(jaeger: Jaeger, service: str) -> dict[str, list[dict[str, Any]]]:
    answer = jaeger.get("/api/traces", {"service": service, "limit": "100", "lookback": "1h"}) or {}
    return {trace["traceID"]: trace["spans"] for trace in answer.get("data") or []}


def with_content(traces: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The spans that carry the app's task text anywhere (tags, logs)."""
    return [span["operationName"] for spans in traces.values() for span in spans if CANARY in json.dumps(span)]


def test_every_bad_variable_of_ours_is_one_warning_and_the_app_runs_traced(jaeger: Jaeger, tmp_path: Path) -> None:
    stderr = run_under_the_distro(jaeger, tmp_path, "bad-variables", **BAD)
    found = poll(lambda: traces_of(jaeger, "bad-variables"), lambda traces: len(traces) >= 2, within_s=30)
    roots = [s["operationName"] for spans in found.values() for s in spans if not s["references"]]
    assert sorted(roots) == ["invoke_workflow writers-room"] * 2, "one trace per run, as with good values"
    assert with_content(found) == [], "no content leaves"
    ours = [line for line in stderr.splitlines() if line.startswith("otel-agents:")]
    for name in BAD:
        assert len([line for line in ours if f"{name}='not valid!'" in line]) == 1, (name, ours)
    assert len(ours) == len(BAD), ours
    assert "Instrumenting of otel_agents failed" not in stderr and "Traceback" not in stderr, stderr[-3000:]


def test_where_otel_agents_cannot_start_no_span_with_content_leaves(jaeger: Jaeger, tmp_path: Path) -> None:
    # the store into the distro's provider, with a standard variable the SDK warns about and
    # otel-agents refuses: otel-agents cannot start, the distro's exporter runs on
    stderr = run_under_the_distro(
        jaeger,
        tmp_path,
        "cannot-start",
        OTEL_AGENTS_STORE=str(tmp_path / "store"),
        OTEL_BSP_SCHEDULE_DELAY="soon",
    )
    ours = [line for line in stderr.splitlines() if line.startswith("otel-agents:")]
    assert len(ours) == 1 and ours[0].startswith("otel-agents: tracing is off: it could not start"), stderr[-3000:]
    assert "OTEL_BSP_SCHEDULE_DELAY" in ours[0], "it says why"
    assert with_content(traces_of(jaeger, "cannot-start")) == [], "AutoGen's runtime spans stay off"

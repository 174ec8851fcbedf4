"""`opentelemetry-instrument python app.py`: an app that never imports otel_agents, run the
OpenTelemetry way, gets one trace per `team.run()` with its run span, and one `chat` span per model
call even with OpenTelemetry's own OpenAI instrumentation loaded alongside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.phoenix import Phoenix
from tests.support.processes import free_port

pytestmark = [pytest.mark.lowest_versions]

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "support" / "zero_code_app.py"
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"


def instrumented_env(server: OpenAIServer, tmp_path: Path, **variables: str) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test-key",
        "OTEL_SERVICE_NAME": "zero-code",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        # OpenInference's AgentChat instrumentor is installed here (for the benchmarks): as the
        # docs/zero-code.md says, disable other AutoGen instrumentors by their entry point name
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "autogen_agentchat",
        **variables,
    }


def to_phoenix(phoenix: Phoenix, project: str) -> dict[str, str]:
    """The distro's variables that send its traces to Phoenix, in a project of their own."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.http_endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
    }


def run_instrumented(
    app: Path, server: OpenAIServer, tmp_path: Path, **variables: str
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(app)],
        env=instrumented_env(server, tmp_path, **variables),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def console_spans(stdout: str) -> list[dict[str, Any]]:
    decoder, spans, at = json.JSONDecoder(), [], 0
    while (at := stdout.find("{", at)) != -1:
        span, at = decoder.raw_decode(stdout, at)
        spans.append(span)
    return spans


def by_trace(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Console and Phoenix JSON alike: `context.trace_id`, `parent_id`."""
    traces: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        traces[span["context"]["trace_id"]].append(span)
    return traces


def assert_two_runs(traces: dict[str, list[dict[str, Any]]], server: OpenAIServer) -> None:
    assert len(traces) == 2, [sorted(s["name"] for s in t) for t in traces.values()]
    chats = 0
    for spans in traces.values():
        (root,) = [s for s in spans if s["parent_id"] is None]
        assert root["name"] == "invoke_workflow writers-room"
        assert root["attributes"]["otel_agents.stop_kind"] == "max_messages"
        assert root["attributes"]["otel_agents.message_count"] == 3
        calls = [s for s in spans if s["name"].startswith("chat")]
        assert {s["name"] for s in spans} >= {"invoke_agent writer", "invoke_agent critic", "message writer"}
        assert root["attributes"]["gen_ai.usage.input_tokens"] == sum(
            c["attributes"]["gen_ai.usage.input_tokens"] for c in calls
        )
        chats += len(calls)
    assert chats == server.request_count == 4, "one chat span per call, with the OpenAI instrumentation on"
    billed_in = sum(b.prompt_tokens for b in server.billed)
    in_spans = sum(
        s["attributes"].get("gen_ai.usage.input_tokens", 0)
        for t in traces.values()
        for s in t
        if s["name"].startswith("chat")
    )
    assert in_spans == billed_in, "each token counted once"


def test_two_team_runs_are_two_traces_under_opentelemetry_instrument(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with OpenAIServer() as server:
        done = run_instrumented(APP, server, tmp_path, OTEL_TRACES_EXPORTER="console", OTEL_AGENTS_STORE=str(store))
    spans = console_spans(done.stdout)
    assert_two_runs(by_trace(spans), server)
    calls = [s for s in spans if s["name"].startswith("chat")]
    assert all(c["attributes"].get("server.address") == "127.0.0.1" for c in calls), (
        "OpenTelemetry's OpenAI instrumentation was on and added to our chat span"
    )
    listed = subprocess.run(
        [str(Path(sys.executable).parent / "otel-agents"), "--store", str(store), "runs"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert listed.stdout.count("writers-room") == 2, listed.stdout


@pytest.mark.backend
def test_two_team_runs_arrive_in_phoenix_as_two_traces(phoenix: Phoenix, tmp_path: Path) -> None:
    project = "zero-code"
    with OpenAIServer() as server:
        run_instrumented(
            APP,
            server,
            tmp_path,
            **to_phoenix(phoenix, project),
        )
    spans = phoenix.project_spans(project, count=2 * 14)
    assert_two_runs(by_trace(spans), server)


def test_a_run_open_when_the_process_exits_is_exported_as_shutdown(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        done = run_instrumented(
            APP.with_name("zero_code_open_app.py"), server, tmp_path, OTEL_TRACES_EXPORTER="console"
        )
    (root,) = [s for s in console_spans(done.stdout) if s["parent_id"] is None]
    assert root["name"] == "invoke_workflow left-open"
    assert root["attributes"]["otel_agents.stop_kind"] == "shutdown"
    assert root["attributes"]["otel_agents.stop_reason"] == "shutdown"


@pytest.mark.backend
def test_a_service_answering_with_on_messages_shows_every_call_in_phoenix(phoenix: Phoenix, tmp_path: Path) -> None:
    project = "zero-code-service"
    with OpenAIServer() as server:
        run_instrumented(
            APP.with_name("zero_code_service_app.py"),
            server,
            tmp_path,
            **to_phoenix(phoenix, project),
        )
        billed = server.request_count
    spans = phoenix.project_spans(project, count=3 * 3 + 1 + 5)
    roots = {trace_id: [s for s in t if s["parent_id"] is None] for trace_id, t in by_trace(spans).items()}
    names = sorted(root["name"] for (root,) in roots.values())
    assert names == ["chat gpt-4o-mini", *["invoke_agent support"] * 3, "invoke_workflow live"], names
    chats = [s for s in spans if s["name"].startswith("chat")]
    assert len(chats) == billed == 5, "every billed call is a chat span, once"
    for trace_spans in by_trace(spans).values():
        (root,) = [s for s in trace_spans if s["parent_id"] is None]
        if root["name"] == "invoke_agent support":
            assert len(str(root["attributes"]["otel_agents.run.id"])) == 32
            assert root["attributes"]["otel_agents.stop_kind"] == "completed"
            (chat,) = [s for s in trace_spans if s["name"].startswith("chat")]
            assert root["attributes"]["gen_ai.usage.input_tokens"] == chat["attributes"]["gen_ai.usage.input_tokens"]
        if root["name"] == "invoke_workflow live":
            assert root["attributes"]["otel_agents.usage.unknown_calls"] == 1, "streamed without usage: unknown"
            (chat,) = [s for s in trace_spans if s["name"].startswith("chat")]
            assert "gen_ai.usage.input_tokens" not in chat["attributes"]


@pytest.mark.backend
def test_a_core_app_on_grpc_workers_is_one_trace_per_conversation_with_its_model_calls(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    project = "zero-code-core"
    app = APP.with_name("zero_code_core_app.py")
    address = f"127.0.0.1:{free_port()}"
    with OpenAIServer() as server:
        env = instrumented_env(
            server,
            tmp_path,
            **to_phoenix(phoenix, project),
            OTEL_BSP_SCHEDULE_DELAY="200",
        )
        serving = []
        try:
            for role in ("host", "writer", "editor"):
                process = subprocess.Popen(
                    [str(INSTRUMENT), sys.executable, str(app), role, address],
                    env={**env, "OTEL_SERVICE_NAME": role},
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                serving.append(process)
                assert process.stdout is not None
                assert process.stdout.readline().strip() == "ready", process.stderr.read() if process.stderr else ""
            main = subprocess.run(
                [str(INSTRUMENT), sys.executable, str(app), "main", address],
                env={**env, "OTEL_SERVICE_NAME": "main"},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert main.returncode == 0, main.stderr[-3000:]
        finally:
            for process in reversed(serving):  # workers flush their spans as they stop, then the host
                if process.stdin is not None:
                    process.stdin.close()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
        billed = server.request_count
    assert billed == 4
    traces = by_trace(phoenix.project_spans(project, count=2 * 6))
    with_calls = {
        trace_id: spans for trace_id, spans in traces.items() if any(s["name"].startswith("chat") for s in spans)
    }
    assert len(with_calls) == 2, [sorted(s["name"] for s in t) for t in traces.values()]
    for spans in with_calls.values():
        (root,) = [s for s in spans if s["parent_id"] is None]
        # the message main() published, AutoGen's own span (the gRPC worker names it `create`)
        assert root["name"] in ("autogen create draft-requests", "autogen publish draft-requests"), root["name"]
        assert len([s for s in spans if s["name"].startswith("chat")]) == 2, "the writer's and the editor's call"
        ids = {s["context"]["span_id"] for s in spans}
        assert all(s["parent_id"] in ids for s in spans if s["parent_id"] is not None), "no orphan"
        assert "otel_agents.run.id" not in root["attributes"], "a core app's root carries no run totals"


@pytest.mark.backend
def test_a_core_app_on_one_runtime_is_one_trace_per_conversation_and_a_publish_no_one_receives_none(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    project = "zero-code-core-local"
    app = APP.with_name("zero_code_core_app.py")
    with OpenAIServer() as server:
        env = instrumented_env(server, tmp_path, **to_phoenix(phoenix, project), OTEL_SERVICE_NAME="local")
        local = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(app), "local", "-"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert local.returncode == 0, local.stderr[-3000:]
        billed = server.request_count
    assert billed == 4
    spans = phoenix.project_spans(project, count=2 * 6)
    assert not [s["name"] for s in spans if "announcements" in s["name"]], "delivered to no one: no span"
    traces = by_trace(spans)
    assert len(traces) == 2, [sorted(s["name"] for s in t) for t in traces.values()]
    for trace_spans in traces.values():
        (root,) = [s for s in trace_spans if s["parent_id"] is None]
        assert root["name"] == "autogen create draft-requests", root["name"]
        assert len([s for s in trace_spans if s["name"].startswith("chat")]) == 2, "the writer's and the editor's call"
        ids = {s["context"]["span_id"] for s in trace_spans}
        assert all(s["parent_id"] in ids for s in trace_spans if s["parent_id"] is not None), "no orphan"

"""Seen in Jaeger for real: Jaeger v2 built from its Go module, on 127.0.0.1 with deploy/'s config,
read back through its query API (`/api/traces`, `/api/v3/traces`, `/api/services`), over OTLP/HTTP
and gRPC. Skipped, saying why, on a machine without Go."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.replay import ReplayChatCompletionClient

import otel_agents
from otel_agents._internal.export.store.reader import Store, StoredRun
from tests.support.backends import built_backends
from tests.support.cli import cli
from tests.support.jaeger import Jaeger, running_jaeger
from tests.support.processes import listening
from tests.support.teams import MODEL_INFO, replay, writers_room

pytestmark = [pytest.mark.backend]

PROTOCOLS = ["http/protobuf", "grpc"]
TASK = "plan the launch of project nightingale"  # a canary: no span may carry it with capture off
CONTENT_KEYS = {
    "otel_agents.message.content",
    "input.value",
    "output.value",
    "message",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
}


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    backends = built_backends()
    with running_jaeger(backends.jaeger, tmp_path_factory.mktemp("jaeger")) as server:
        yield server


@pytest.fixture(autouse=True)
def traces_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")  # deploy/'s Jaeger takes traces only
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)


def service_of(request: pytest.FixtureRequest) -> str:
    """One service per test, so searches see only that test's runs."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    return f"jaeger-{name}"[:120]


def tree_in_jaeger(trace: dict[str, Any]) -> set[tuple[str, str | None, str]]:
    """(span id, parent span id, name) of every span, the parent read from its CHILD_OF reference."""
    edges = set()
    for span in trace["spans"]:
        parents = [r["spanID"] for r in span.get("references") or [] if r["refType"] == "CHILD_OF"]
        assert len(parents) <= 1, span["operationName"]
        edges.add((span["spanID"], parents[0] if parents else None, span["operationName"]))
    return edges


def tree_shown(store: Path, run: StoredRun) -> set[tuple[str, str | None, str]]:
    """The same, as `otel-agents show --json` prints the run from the embedded store."""
    done = cli("--store", str(store), "show", run.run_id, "--json")
    assert done.returncode == 0, done.stderr
    return {(s["span_id"], s["parent_span_id"], s["name"]) for s in json.loads(done.stdout)["spans"]}


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {tag["key"]: tag["value"] for tag in span.get("tags") or []}


def root_of(trace: dict[str, Any]) -> dict[str, Any]:
    (root,) = [s for s in trace["spans"] if not any(r["refType"] == "CHILD_OF" for r in s.get("references") or [])]
    return root


def service_in(trace: dict[str, Any], span: dict[str, Any]) -> str:
    return str(trace["processes"][span["processID"]]["serviceName"])


async def run_team(team: Any, task: str = TASK) -> None:
    async for _ in team.run_stream(task=task):
        pass


def test_jaeger_listens_on_127_0_0_1_only_on_the_ports_the_test_gave_it(jaeger: Jaeger) -> None:
    assert listening(jaeger.pid) == {("127.0.0.1", port) for port in vars(jaeger.ports).values()}


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_each_run_is_one_trace_rooted_at_its_workflow_and_shaped_as_show_prints_it(
    jaeger: Jaeger, tmp_path: Path, protocol: str, request: pytest.FixtureRequest
) -> None:
    service = service_of(request)
    with otel_agents.configure(
        service_name=service, endpoint=jaeger.endpoint(protocol), protocol=protocol, store=tmp_path
    ) as telemetry:
        await run_team(writers_room(max_messages=4))
        await run_team(writers_room(max_messages=3))
        assert telemetry.force_flush()

    runs = Store(tmp_path).runs()
    assert len(runs) == 2 and len({r.trace_id for r in runs}) == 2, "a trace per run"
    for run in runs:
        shown = tree_shown(tmp_path, run)
        trace = jaeger.wait_for_trace(run.trace_id, len(shown))
        assert tree_in_jaeger(trace) == shown
        root = root_of(trace)
        assert root["operationName"] == "invoke_workflow writers-room"
        assert tags(root)["otel_agents.run.id"] == run.run_id
        assert {service_in(trace, s) for s in trace["spans"]} == {service}
        assert {s["traceID"] for s in trace["spans"]} == {run.trace_id}
        # a kind on every span: OpenInference's tag, and OpenTelemetry's (chat spans are clients)
        for span in trace["spans"]:
            kind = tags(span)["openinference.span.kind"]
            name = span["operationName"]
            assert kind == (
                "LLM" if name.startswith("chat") else "AGENT" if name.startswith("invoke_agent") else "CHAIN"
            )
            calls_out = name.startswith(("chat", "invoke_agent"))  # util-genai's and AutoGen's own choice
            assert tags(span)["span.kind"] == ("client" if calls_out else "internal"), name


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_runs_are_found_by_service_operation_and_tags(
    jaeger: Jaeger, tmp_path: Path, protocol: str, request: pytest.FixtureRequest
) -> None:
    service = service_of(request)
    with otel_agents.configure(
        service_name=service, endpoint=jaeger.endpoint(protocol), protocol=protocol, store=tmp_path
    ) as telemetry:
        with otel_agents.run_attributes(user_id="ana"):
            await run_team(writers_room(max_messages=4))
        with otel_agents.run_attributes(user_id="ben"):
            await run_team(writers_room(max_messages=2, name="proofreading"))
        assert telemetry.force_flush()
    by_user = {r.user_id: r for r in Store(tmp_path).runs()}
    ana, ben = by_user["ana"], by_user["ben"]
    for run in (ana, ben):
        jaeger.wait_for_trace(run.trace_id, len(Store(tmp_path).spans(run.trace_id)))

    assert service in jaeger.services()
    operations = set(jaeger.operations(service))
    assert {
        "invoke_workflow writers-room",
        "invoke_workflow proofreading",
        "invoke_agent writer",
        "chat",  # a replay client names no model
        "message user",
        "message critic",
    } <= operations

    assert jaeger.search(service) == {ana.trace_id, ben.trace_id}
    assert jaeger.search(service, operation="invoke_workflow writers-room") == {ana.trace_id}
    assert jaeger.search(service, tags={"gen_ai.workflow.name": "proofreading"}) == {ben.trace_id}
    assert jaeger.search(service, tags={"user.id": "ana"}) == {ana.trace_id}
    assert jaeger.search(service, tags={"otel_agents.stop_kind": "max_messages"}) == {ana.trace_id, ben.trace_id}
    assert ana.conversation_id and ana.conversation_id != ben.conversation_id
    assert jaeger.search(service, tags={"gen_ai.conversation.id": ana.conversation_id}) == {ana.trace_id}
    both = {"user.id": "ben", "gen_ai.workflow.name": "proofreading", "otel_agents.stop_kind": "max_messages"}
    assert jaeger.search(service, operation="invoke_workflow proofreading", tags=both) == {ben.trace_id}
    assert jaeger.search(service, tags={"user.id": "ben", "gen_ai.workflow.name": "writers-room"}) == set()
    assert jaeger.search(service, tags={"otel_agents.stop_kind": "error"}) == set()

    assert jaeger.v3_search(service, "invoke_workflow writers-room") == {ana.trace_id}
    spans = jaeger.v3_trace(ana.trace_id)
    assert {s["name"] for s in spans} == {s.name for s in Store(tmp_path).spans(ana.trace_id)}
    assert len(spans) == len(Store(tmp_path).spans(ana.trace_id))


async def test_a_run_the_loop_guard_stopped_is_found_by_its_stop_kind(
    jaeger: Jaeger, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    service = service_of(request)
    writer = AssistantAgent("writer", model_client=replay(*["same draft"] * 6))
    critic = AssistantAgent("critic", model_client=replay(*["same notes"] * 6))
    looping = RoundRobinGroupChat(
        [writer, critic], termination_condition=MaxMessageTermination(12) | otel_agents.LoopGuard(), name="loopy"
    )
    with otel_agents.configure(service_name=service, endpoint=jaeger.otlp_http, store=tmp_path) as telemetry:
        await run_team(looping)
        await run_team(writers_room(max_messages=3))
        assert telemetry.force_flush()
    by_kind = {r.stop_kind: r for r in Store(tmp_path).runs()}
    assert set(by_kind) == {"loop_guard", "max_messages"}
    for run in by_kind.values():
        jaeger.wait_for_trace(run.trace_id, len(Store(tmp_path).spans(run.trace_id)))

    looped = by_kind["loop_guard"].trace_id
    assert jaeger.search(service, tags={"otel_agents.stop_kind": "loop_guard"}) == {looped}
    root = root_of(jaeger.wait_for_trace(looped, 1))
    assert tags(root)["otel_agents.stop_reason"] == "loop guard: repeat: writer said the same thing 3 times"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_resumed_run_shows_its_link_to_the_run_before_the_save_as_a_reference(
    jaeger: Jaeger, tmp_path: Path, protocol: str, request: pytest.FixtureRequest
) -> None:
    service = service_of(request)
    with otel_agents.configure(
        service_name=service, endpoint=jaeger.endpoint(protocol), protocol=protocol, store=tmp_path
    ) as telemetry:
        team = writers_room(max_messages=2)
        await team.run(task="one")
        state = await team.save_state()
        resumed = writers_room(max_messages=2)
        await resumed.load_state(state)
        await resumed.run(task="two")
        assert telemetry.force_flush()
    first, second = sorted(Store(tmp_path).runs(), key=lambda r: r.started_ns)
    first_root = root_of(jaeger.wait_for_trace(first.trace_id, len(Store(tmp_path).spans(first.trace_id))))
    trace = jaeger.wait_for_trace(second.trace_id, len(Store(tmp_path).spans(second.trace_id)))

    root = root_of(trace)
    assert [(r["refType"], r["traceID"], r["spanID"]) for r in root["references"]] == [
        ("FOLLOWS_FROM", first.trace_id, first_root["spanID"])
    ]
    others = [s for s in trace["spans"] if s is not root]
    assert all(r["refType"] == "CHILD_OF" for s in others for r in s["references"]), "only the run links"
    (v3_root,) = [s for s in jaeger.v3_trace(second.trace_id) if not s.get("parentSpanId")]
    assert [(link["traceId"].lower(), link["spanId"].lower()) for link in v3_root["links"]] == [
        (first.trace_id, first_root["spanID"])
    ]
    assert tags(root)["gen_ai.conversation.id"] == tags(first_root)["gen_ai.conversation.id"]


class Outage(ReplayChatCompletionClient):
    """A model client whose service is down."""

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the model service is down")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_exception_shows_as_a_log_on_the_span_that_raised_it(
    jaeger: Jaeger, tmp_path: Path, protocol: str, request: pytest.FixtureRequest
) -> None:
    service = service_of(request)
    agent = AssistantAgent("writer", model_client=Outage([], model_info=MODEL_INFO))
    team = RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(3), name="outage")
    with otel_agents.configure(
        service_name=service, endpoint=jaeger.endpoint(protocol), protocol=protocol, store=tmp_path
    ) as telemetry:
        with pytest.raises(Exception, match="the model service is down"):
            await run_team(team)
        assert telemetry.force_flush()
    (run,) = Store(tmp_path).runs()
    trace = jaeger.wait_for_trace(run.trace_id, len(Store(tmp_path).spans(run.trace_id)))

    (chat,) = [s for s in trace["spans"] if s["operationName"].startswith("chat")]
    assert tags(chat)["error"] is True and tags(chat)["error.type"] == "ConnectionError"
    logged = [{f["key"]: f["value"] for f in log["fields"]} for log in chat["logs"]]
    assert {"event": "exception", "exception.type": "ConnectionError"} in logged
    assert all("exception.message" not in fields for fields in logged), "content off: no exception text"
    root = root_of(trace)
    assert tags(root)["otel_agents.stop_kind"] == "error" and tags(root)["error"] is True
    assert jaeger.search(service, tags={"otel_agents.stop_kind": "error"}) == {run.trace_id}


def every_tag(trace: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for span in trace["spans"]:
        found += [(t["key"], str(t["value"])) for t in span.get("tags") or []]
        found += [(f["key"], str(f["value"])) for log in span.get("logs") or [] for f in log["fields"]]
    found += [(t["key"], str(t["value"])) for p in trace["processes"].values() for t in p.get("tags") or []]
    return found


@pytest.mark.parametrize(("protocol", "capture_content"), [(p, c) for p in PROTOCOLS for c in (False, True)])
async def test_no_content_tag_reaches_jaeger_with_content_capture_off(
    jaeger: Jaeger, tmp_path: Path, protocol: str, capture_content: bool, request: pytest.FixtureRequest
) -> None:
    """With capture on, the same run carries the task: the check would see a leak."""
    service = service_of(request)
    with otel_agents.configure(
        service_name=service,
        endpoint=jaeger.endpoint(protocol),
        protocol=protocol,
        store=tmp_path,
        capture_content=capture_content,
    ) as telemetry:
        await run_team(writers_room(max_messages=3))
        assert telemetry.force_flush()
    (run,) = Store(tmp_path).runs()
    found = every_tag(jaeger.wait_for_trace(run.trace_id, len(Store(tmp_path).spans(run.trace_id))))

    keys = {key for key, _ in found}
    carrying_task = {key for key, value in found if "nightingale" in value}
    if capture_content:
        assert "otel_agents.message.content" in keys and carrying_task
    else:
        assert keys & CONTENT_KEYS == set()
        assert carrying_task == set()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_stored_run_exported_with_the_cli_is_the_same_trace_in_jaeger(
    jaeger: Jaeger, tmp_path: Path, protocol: str, request: pytest.FixtureRequest
) -> None:
    service = service_of(request)
    with otel_agents.configure(service_name=service, store=tmp_path) as telemetry:
        await run_team(writers_room(max_messages=3))
        assert telemetry.force_flush()
    (run,) = Store(tmp_path).runs()
    assert jaeger.trace(run.trace_id) is None, "nothing reached Jaeger before the export"

    endpoint = jaeger.endpoint(protocol)
    done = cli("--store", str(tmp_path), "export", run.run_id[:10], "--endpoint", endpoint, "--protocol", protocol)
    assert done.returncode == 0, done.stderr

    shown = tree_shown(tmp_path, run)
    trace = jaeger.wait_for_trace(run.trace_id, len(shown))
    assert tree_in_jaeger(trace) == shown
    root = root_of(trace)
    assert tags(root)["otel_agents.run.id"] == run.run_id
    assert root["startTime"] == run.started_ns // 1000, "times kept, to the microsecond Jaeger keeps"
    assert jaeger.search(service, operation="invoke_workflow writers-room") == {run.trace_id}

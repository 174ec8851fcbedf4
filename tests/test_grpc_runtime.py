"""AutoGen's gRPC worker runtime: a request that crosses a host and worker processes is one trace.

A `GrpcWorkerAgentRuntimeHost` in the test process, workers B and C as processes of their own, the
test process as caller A; every process exports over OTLP to a real Phoenix and keeps its spans in
an embedded store of its own (to check each process's `service.instance.id`, which Phoenix drops).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from autogen_core import AgentId, TopicId

import otel_agents
from otel_agents._internal.export.store.reader import Store
from tests.support.grpc_agents import Done, Hop, News, Ping, Pong, add_serializers
from tests.support.phoenix import Phoenix
from tests.support.processes import free_port
from tests.support.waits import wait_until_async

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "grpc-workers"


@pytest.fixture
async def cluster(phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[dict[str, Any]]:
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHost

    address = f"127.0.0.1:{free_port()}"
    host = GrpcWorkerAgentRuntimeHost(address=address)
    host.start()
    env = {
        **os.environ,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.http_endpoint,
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    workers = []
    for role in ("b", "c"):
        worker_env = {**env, "OTEL_SERVICE_NAME": f"worker-{role}", "OTEL_AGENTS_STORE": str(tmp_path / role)}
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.grpc_agents", address, role],
            cwd=ROOT,
            env=worker_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), timeout=60)  # the host serves
        assert line.strip() == "ready", process.stderr.read() if process.stderr else line
        workers.append(process)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "caller-a")
    monkeypatch.setenv("OTEL_AGENTS_STORE", str(tmp_path / "a"))
    try:
        yield {"address": address, "stores": {role: tmp_path / role for role in ("a", "b", "c")}, "workers": workers}
    finally:
        for process in workers:
            if process.poll() is None:
                assert process.stdin is not None
                process.stdin.close()
                try:
                    await asyncio.to_thread(process.wait, 30)
                except subprocess.TimeoutExpired:
                    process.kill()
        await host.stop()


async def stop_workers(cluster: dict[str, Any]) -> None:
    """Close the workers' stdin: they stop and flush their spans (the host keeps serving meanwhile)."""
    for process in cluster["workers"]:
        assert process.stdin is not None
        process.stdin.close()
        code = await asyncio.to_thread(process.wait, 30)
        assert code == 0, process.stderr.read() if process.stderr else ""


def assert_one_tree(spans: list[dict[str, Any]], root_name: str) -> dict[str, dict[str, Any]]:
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    roots = [s for s in spans if s["parent_id"] is None]
    assert [r["name"] for r in roots] == [root_name]
    orphans = [s["name"] for s in spans if s["parent_id"] is not None and s["parent_id"] not in by_id]
    assert not orphans, f"spans whose parent is not in the trace: {orphans}"
    return by_id


def ancestors(span: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> list[str]:
    names = []
    while span["parent_id"] is not None:
        span = by_id[span["parent_id"]]
        names.append(span["name"])
    return names


@pytest.mark.backend
async def test_requests_across_processes_are_one_trace_each(cluster: dict[str, Any], phoenix: Phoenix) -> None:
    telemetry = otel_agents.configure(runtime_spans="nested", store=cluster["stores"]["a"])
    runtime: Any = otel_agents.create_runtime(host_address=cluster["address"])
    await runtime.start()
    add_serializers(runtime)
    tracer = telemetry.tracer_provider.get_tracer("caller")
    trace_ids = {}
    with tracer.start_as_current_span("ping request") as span:
        assert await runtime.send_message(Ping("hi"), AgentId("ponger", "default")) == Pong("pong to hi")
        trace_ids["ping request"] = span.get_span_context().trace_id
    with tracer.start_as_current_span("news broadcast") as span:
        await runtime.publish_message(News("extra"), TopicId("news", "default"))
        trace_ids["news broadcast"] = span.get_span_context().trace_id
    with tracer.start_as_current_span("hop chain") as span:
        assert await runtime.send_message(Hop(0), AgentId("relay", "default")) == Done(2)
        trace_ids["hop chain"] = span.get_span_context().trace_id
    # with no span open: the request's own `create` span is the root its processing joins
    assert await runtime.send_message(Ping("alone"), AgentId("ponger", "default")) == Pong("pong to alone")
    # the broadcast is delivered after publish returns: wait until both listeners' work is in Phoenix
    news = format(trace_ids["news broadcast"], "032x")
    listeners = {"autogen process listener_b", "autogen process listener_c"}
    assert await wait_until_async(
        lambda: listeners <= {s["name"] for s in phoenix.spans(PROJECT, news)}, 60, every_s=0.25
    )
    await runtime.stop()
    telemetry.shutdown()
    await stop_workers(cluster)

    arrived = {}
    expected = {"ping request": 4, "news broadcast": 5, "hop chain": 7}  # root + the runtime's spans
    for root, trace_id in trace_ids.items():
        spans = phoenix.wait_for_spans(PROJECT, format(trace_id, "032x"), expected[root])
        arrived[root] = spans
        by_id = assert_one_tree(spans, root)
        assert by_id
    names = {root: {s["name"] for s in spans} for root, spans in arrived.items()}
    assert "autogen process ponger" in names["ping request"]
    assert {"autogen process listener_b", "autogen process listener_c"} <= names["news broadcast"]
    chain = {s["context"]["span_id"]: s for s in arrived["hop chain"]}
    (sink,) = [s for s in arrived["hop chain"] if s["name"] == "autogen process sink"]
    assert "autogen process relay" in ancestors(sink, chain), "the sink's work is under the relay's"
    (alone,) = [s for s in Store(cluster["stores"]["a"]).spans() if s.name == "autogen create ponger"]
    spans = phoenix.wait_for_spans(PROJECT, alone.trace_id, 3)
    assert_one_tree(spans, "autogen create ponger")
    assert "autogen process ponger" in {s["name"] for s in spans}, "worker B's processing is in the request's trace"

    instances = {}
    for role, store in cluster["stores"].items():
        spans = Store(store).spans()
        assert spans, f"process {role} recorded spans"
        instances[role] = {json.dumps(s.data["resource"].get("service.instance.id")) for s in spans}
        assert {s.data["resource"]["service.name"] for s in spans} == {
            f"{'caller' if role == 'a' else 'worker'}-{role}"
        }
    assert all(len(ids) == 1 for ids in instances.values())
    assert len(set.union(*instances.values())) == 3, "each process has its own service.instance.id"


def test_create_runtime_refuses_a_bad_host_address() -> None:
    with pytest.raises(otel_agents.ConfigError, match="host_address=''"):
        otel_agents.create_runtime(host_address="")

"""Outcomes where people read them (issue "Outcomes"): an app of ours, through the real OpenAI
client, records outcomes both ways; the callable's are span events that the built Jaeger shows on
the run span, one recorded after its run is a log event in the run's trace that the built Collector
passes on (to a small OTLP/gRPC logs receiver the test starts), and the dashboard's two panels'
numbers come out of a real Prometheus as the runs say."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.backends import built_backends
from tests.support.jaeger import Jaeger, running_jaeger
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.processes import free_port, launch, stop_process
from tests.support.prometheus import scraped_pipeline
from tests.support.waits import wait_until_async
from tests.test_outcomes import approved, review

pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[1]

APP = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
import otel_agents
from tests.support.openai_server import OpenAIServer, Reply
from tests.test_outcomes import approved, review

async def main(jaeger, collector):
    logs = LoggerProvider()  # the application's logs pipeline, to the Collector
    logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=collector + "/v1/logs")))
    set_logger_provider(logs)
    ran = []
    with OpenAIServer() as server, otel_agents.configure(endpoint=jaeger, outcome=approved, store=False):
        for approves in (True, False):
            result = await review(server, approves=approves).run(task="Write the launch note.")
            ran.append(result)
        otel_agents.record_outcome(ran[1], "poor", score=0.25, name="quality")
    logs.shutdown()
    print(json.dumps([r.stop_reason for r in ran]))

asyncio.run(main(sys.argv[2], sys.argv[3]))
"""


class LogsReceiver(logs_service_pb2_grpc.LogsServiceServicer):
    """OTLP/gRPC logs, kept as they come."""

    def __init__(self) -> None:
        self.records: list[logs_pb2.LogRecord] = []

    def Export(self, request: Any, context: Any) -> Any:
        for resource in request.resource_logs:
            for scope in resource.scope_logs:
                self.records.extend(scope.log_records)
        return logs_service_pb2.ExportLogsServiceResponse()


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    with running_jaeger(built_backends().jaeger, tmp_path_factory.mktemp("jaeger")) as running:
        yield running


@pytest.fixture
def collector_to_receiver(tmp_path: Path) -> Iterator[tuple[str, LogsReceiver]]:
    """The built Collector: OTLP/HTTP in, logs out over OTLP/gRPC to a receiver of ours."""
    receiver = LogsReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(receiver, server)
    receiver_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    http, health = free_port(), free_port()
    config = {
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{http}"}}}},
        "exporters": {"otlp_grpc/ours": {"endpoint": f"127.0.0.1:{receiver_port}", "tls": {"insecure": True}}},
        "extensions": {"health_check": {"endpoint": f"127.0.0.1:{health}"}},
        "service": {
            "extensions": ["health_check"],
            "pipelines": {"logs": {"receivers": ["otlp"], "exporters": ["otlp_grpc/ours"]}},
            "telemetry": {"metrics": {"level": "none"}},
        },
    }
    path = tmp_path / "collector.yaml"
    path.write_text(yaml.safe_dump(config))
    process = launch(
        built_backends().collector, [f"--config={path}"], tmp_path / "collector.log", f"http://127.0.0.1:{health}/"
    )
    try:
        yield f"http://127.0.0.1:{http}", receiver
    finally:
        stop_process(process)
        server.stop(grace=None)


def run_span_events(jaeger: Jaeger) -> dict[str, list[dict[str, Any]]]:
    """Each `invoke_workflow review` span in Jaeger: trace id -> its events' fields."""
    found = jaeger.get("/api/traces", {"service": "otel-agents", "operation": "invoke_workflow review", "limit": "20"})
    out = {}
    for trace_data in (found or {}).get("data") or []:
        for span in trace_data["spans"]:
            if span["operationName"] == "invoke_workflow review":
                out[trace_data["traceID"]] = [
                    {f["key"]: f["value"] for f in log["fields"]} for log in span.get("logs") or []
                ]
    return out


async def test_jaeger_shows_the_outcome_on_the_run_span_and_the_collector_gets_the_later_one_as_a_log(
    jaeger: Jaeger, collector_to_receiver: tuple[str, LogsReceiver]
) -> None:
    collector, receiver = collector_to_receiver
    done = subprocess.run(
        [sys.executable, "-c", APP, str(ROOT), jaeger.otlp_http, collector],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "OTEL_METRICS_EXPORTER": "none", "HOME": str(Path.home())},
    )
    assert done.returncode == 0, done.stderr

    assert await wait_until_async(lambda: len(run_span_events(jaeger)) == 2, 30, every_s=0.5)
    events = run_span_events(jaeger)
    labels = sorted(
        e["gen_ai.evaluation.score.label"]
        for found in events.values()
        for e in found
        if e.get("event") == "gen_ai.evaluation.result"
    )
    assert labels == ["failure", "success"]

    assert await wait_until_async(lambda: len(receiver.records) >= 1, 30, every_s=0.2)
    (record,) = receiver.records
    attributes = {a.key: a.value for a in record.attributes}
    assert record.event_name == "gen_ai.evaluation.result"
    assert (
        attributes["gen_ai.evaluation.name"].string_value,
        attributes["gen_ai.evaluation.score.label"].string_value,
    ) == (
        "quality",
        "poor",
    )
    assert attributes["gen_ai.evaluation.score.value"].double_value == 0.25
    (failed_trace,) = [
        trace_id
        for trace_id, found in events.items()
        if any(e.get("gen_ai.evaluation.score.label") == "failure" for e in found)
    ]
    assert record.trace_id.hex() == failed_trace.rjust(32, "0"), "in the trace of the run it judges"


async def test_the_dashboards_outcome_panels_say_what_the_runs_did_in_a_real_prometheus(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    with scraped_pipeline(tmp_path, outcome=approved) as (prometheus, telemetry, exporter):
        assert isinstance(exporter, InMemorySpanExporter)
        for approves in (True, False, True, True, False):
            await review(openai_server, approves=approves).run(task="Write the launch note.")
        assert telemetry.force_flush()
        runs = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("otel_agents.run.id")]
        spent = sum(float((s.attributes or {})["otel_agents.cost.usd"]) for s in runs)
        last = time.time()
        assert await wait_until_async(lambda: prometheus.scraped_since(last), 30, every_s=0.2)
        success = (
            'otel_agents_run_outcomes_total{gen_ai_evaluation_name="outcome", gen_ai_evaluation_score_label="success"}'
        )
        (per_success,) = prometheus.query(f"sum(otel_agents_run_cost_USD_sum) / sum({success})")
        (share,) = prometheus.query(f"sum({success}) / sum(otel_agents_runs_total)")
    assert float(per_success["value"][1]) == pytest.approx(spent / 3)
    assert float(share["value"][1]) == pytest.approx(3 / 5)


async def test_zero_code_the_variables_outcome_reaches_jaeger_and_a_later_one_the_distros_logs(
    jaeger: Jaeger, collector_to_receiver: tuple[str, LogsReceiver], openai_server: OpenAIServer, tmp_path: Path
) -> None:
    """The app of ours, unchanged, under `opentelemetry-instrument`: `OTEL_AGENTS_OUTCOME` judges each
    run (span events in Jaeger), and an outcome recorded after a run is a log event that the distro's
    logs pipeline (`OTEL_LOGS_EXPORTER=otlp`) sends through the built Collector."""
    from tests.test_opentelemetry_instrument import run_instrumented

    collector, receiver = collector_to_receiver
    openai_server.play(
        [Reply(text="A draft."), Reply(text="APPROVE"), Reply(text="Another draft."), Reply(text="Not yet.")]
    )
    run_instrumented(
        ROOT / "tests" / "support" / "zero_code_outcome_app.py",
        openai_server,
        tmp_path,
        PYTHONPATH=str(ROOT),
        OTEL_AGENTS_OUTCOME="tests.support.outcome_judge:verdict",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{jaeger.otlp_http}/v1/traces",
        OTEL_LOGS_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=f"{collector}/v1/logs",
        OTEL_SERVICE_NAME="zero-code-outcomes",
    )
    assert await wait_until_async(
        lambda: (
            len((jaeger.get("/api/traces", {"service": "zero-code-outcomes", "limit": "20"}) or {}).get("data") or [])
            == 2
        ),
        30,
        every_s=0.5,
    )
    found = jaeger.get("/api/traces", {"service": "zero-code-outcomes", "limit": "20"})
    labels = sorted(
        {f["key"]: f["value"] for f in log["fields"]}.get("gen_ai.evaluation.score.label")
        for trace_data in found["data"]
        for span in trace_data["spans"]
        if span["operationName"] == "invoke_workflow review"
        for log in span.get("logs") or []
    )
    assert labels == ["failure", "success"]
    assert await wait_until_async(lambda: len(receiver.records) >= 1, 30, every_s=0.2)
    (record,) = [r for r in receiver.records if r.event_name == "gen_ai.evaluation.result"]
    assert {a.key: a.value.string_value for a in record.attributes}["gen_ai.evaluation.score.label"] == "poor"
    assert record.trace_id.hex() in {t["traceID"].rjust(32, "0") for t in found["data"]}

"""One analysis, three readers (issue "Explain a run", item 4): a run recorded once to the store,
sent on to a real Jaeger (the binary the tests build) by `otel-agents export`, is explained alike from the store,
from Jaeger's `/api/v3` query API, from that answer saved to a file, from OTLP/JSON lines written
with the protobuf encoder and `json_format`, and in process from its `ReadableSpan`s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from tests.support.backends import built_backends
from tests.support.cli import cli
from tests.support.explain_apps import explain_json, review_that_never_ends
from tests.support.jaeger import Jaeger, running_jaeger
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.backend


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    with running_jaeger(built_backends().jaeger, tmp_path_factory.mktemp("jaeger")) as running:
        yield running


def explained_from(*arguments: str) -> dict[str, Any]:
    done = cli("explain", *arguments, "--json")
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


async def test_the_store_jaeger_a_file_and_the_spans_give_one_explanation(
    jaeger: Jaeger, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    captured = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=captured, store=tmp_path / "store") as telemetry:
        await review_that_never_ends(openai_server).run(task="Write the launch note.")
        assert telemetry.force_flush()
    spans = list(captured.get_finished_spans())
    (run_span,) = [s for s in spans if (s.attributes or {}).get("otel_agents.run.id")]
    run_id = str((run_span.attributes or {})["otel_agents.run.id"])
    trace_id = format(run_span.context.trace_id, "032x")
    sent = cli("--store", str(tmp_path / "store"), "export", run_id, "--endpoint", jaeger.otlp_http)
    assert sent.returncode == 0, sent.stderr
    jaeger.wait_for_trace(trace_id, span_count=len(spans))

    from_store = explain_json(tmp_path / "store", run_id[:8])
    from_jaeger = explained_from(trace_id, "--jaeger", f"http://127.0.0.1:{jaeger.ports.query_http}")
    jaeger_answer = tmp_path / "jaeger-answer.json"
    jaeger_answer.write_text(json.dumps(jaeger.get(f"/api/v3/traces/{trace_id}")))
    from_jaeger_file = explained_from("--file", str(jaeger_answer))
    otlp_lines = tmp_path / "spans.jsonl"  # one OTLP/JSON request a line, as a file exporter writes
    half = len(spans) // 2
    otlp_lines.write_text(
        "".join(
            json_format.MessageToJson(encode_spans(part), indent=None) + "\n" for part in (spans[:half], spans[half:])
        )
    )
    from_lines = explained_from("--file", str(otlp_lines))
    in_process = otel_agents.explain(spans).to_dict()

    assert from_store["run"]["run_id"] == run_id and from_store["run"]["stop_kind"] == "max_messages"
    assert len(from_store["turns"]) == 12 and from_store["repeats"], "a run with something to explain"
    for name, other in (
        ("Jaeger", from_jaeger),
        ("Jaeger's answer in a file", from_jaeger_file),
        ("OTLP/JSON lines", from_lines),
        ("the spans in process", in_process),
    ):
        assert other == from_store, name


def test_a_short_id_given_to_jaeger_says_that_jaeger_needs_the_whole_one(jaeger: Jaeger) -> None:
    base = f"http://127.0.0.1:{jaeger.ports.query_http}"
    done = cli("explain", "6c760d08", "--jaeger", base)
    assert done.returncode != 0
    assert "its whole id, 32 hexadecimal digits, not a prefix" in done.stderr, done.stderr
    assert f"{base}/api/traces?service=NAME" in done.stderr, "where its ids are found"

"""Odd input never breaks a run or a process, and what it exports stays bounded (issue "Nothing
lost", item 5): a 5 MB message, lone surrogates and undecodable bytes, an image, a tool that returns
bytes or an object JSON cannot write, non-ASCII names and descriptions, 10,000 messages. Each run
completes as it would untraced, its spans encode as OTLP (the protobuf encoder every OTLP exporter
uses) and land in the store, its attributes stay within the content limit, and its numbers add up."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import MultiModalMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import Image
from autogen_core.model_context import BufferedChatCompletionContext
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import otel_agents
from otel_agents._internal.export.store.reader import Store
from tests.support.cli import cli
from tests.support.teams import replay, text, tool_call

LIMIT = 4096  # the content limit's default (OTEL_AGENTS_CONTENT_MAX_CHARS)
LONE = "a \ud800 b \udfff c " + b"caf\xe9 \xff\xfe".decode("utf-8", "surrogateescape")
"""Lone surrogates, and bytes that are not UTF-8 as `surrogateescape` decodes them (a file name)."""
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c49444154789c63f8cfc00000"
        "03010100c9fe92ef0000000049454e44ae426082"
    )
).decode()
"""A 1x1 red pixel."""


class OtlpEncoding(SpanExporter):
    """What an OTLP exporter does first with a batch: encode it as protobuf (raising as it does);
    keeps what it encoded."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializeToString()
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class Recorded:
    def __init__(self, exporter: OtlpEncoding, store: Path) -> None:
        self.spans = exporter.spans
        self.store = store

    @property
    def run(self) -> ReadableSpan:
        (run,) = [s for s in self.spans if (s.attributes or {}).get("otel_agents.run.id")]
        return run

    def strings(self) -> Iterator[tuple[str, str, str]]:
        """(span, key, text) of every text attribute and event attribute."""
        for span in self.spans:
            for key, value in (span.attributes or {}).items():
                for each in value if isinstance(value, tuple) else (value,):
                    if isinstance(each, str):
                        yield span.name, key, each
            for event in span.events:
                for key, value in (event.attributes or {}).items():
                    if isinstance(value, str):
                        yield span.name, f"{event.name}/{key}", value


async def recorded(team: Any, task: Any, tmp_path: Path, *, capture: bool = True) -> tuple[Any, Recorded]:
    exporter = OtlpEncoding()
    store = tmp_path / f"store-{capture}"
    with otel_agents.configure(span_exporter=exporter, store=store, capture_content=capture) as telemetry:
        result = await team.run(task=task)
        assert telemetry.force_flush()
    return result, Recorded(exporter, store)


def assert_exported_whole(recorded: Recorded) -> None:
    """The spans encode as OTLP, are within the limit, and the store holds the run."""
    encode_spans(recorded.spans).SerializeToString()  # raises on text protobuf cannot hold
    too_long = [(s, k, len(v)) for s, k, v in recorded.strings() if len(v) > LIMIT]
    assert not too_long, too_long
    run_id = (recorded.run.attributes or {})["otel_agents.run.id"]
    assert [r.run_id for r in Store(recorded.store).runs()] == [run_id]


def totals(span: ReadableSpan) -> tuple[Any, Any, Any]:
    a = span.attributes or {}
    return a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"], a["otel_agents.message_count"]


@pytest.mark.parametrize("capture", [False, True], ids=["capture off", "capture on"])
async def test_lone_surrogates_and_undecodable_bytes_are_exported_as_replacement_characters(
    tmp_path: Path, capture: bool
) -> None:
    writer = AssistantAgent("writer", model_client=replay(text(LONE, 11, 5)), description=f"writes {LONE}")
    team = RoundRobinGroupChat(
        [writer], termination_condition=MaxMessageTermination(2), name=f"team {LONE}", description=LONE
    )
    result, run = await recorded(team, LONE, tmp_path, capture=capture)

    assert result.messages[-1].content == LONE, "the run's own messages are untouched"
    assert_exported_whole(run)
    assert (run.run.attributes or {})["gen_ai.workflow.name"] == "team a \ufffd b \ufffd c caf\ufffd \ufffd\ufffd"
    assert totals(run.run) == (11, 5, 2)
    assert not [(s, k) for s, k, v in run.strings() if any(0xD800 <= ord(c) <= 0xDFFF for c in v)]


async def test_a_5_mb_message_is_cut_to_the_content_limit_and_counted_in_full(tmp_path: Path) -> None:
    huge = "word " * 1_000_000  # 5 MB
    writer = AssistantAgent("writer", model_client=replay(text(huge, 1_250_000, 1_000_000)))
    team = RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2), name="huge")
    result, run = await recorded(team, huge, tmp_path)

    assert result.messages[-1].content == huge
    assert_exported_whole(run)
    assert totals(run.run) == (1_250_000, 1_000_000, 2)
    assert sum(len(v) for _, _, v in run.strings()) < 200 * LIMIT, "bounded: nothing near the message's size"


async def test_an_image_in_a_multimodal_task_is_never_exported_as_its_bytes(tmp_path: Path) -> None:
    looker = AssistantAgent("looker", model_client=replay(text("a red dot", 9, 3)))
    team = RoundRobinGroupChat([looker], termination_condition=MaxMessageTermination(2), name="vision")
    task = MultiModalMessage(content=["What is this?", Image.from_base64(PNG)], source="user")
    result, run = await recorded(team, task, tmp_path)

    assert result.messages[-1].content == "a red dot"
    assert_exported_whole(run)
    assert not [(s, k) for s, k, v in run.strings() if PNG[:40] in v], "the image's base64 is not an attribute"
    types = {(s.attributes or {}).get("otel_agents.message.type") for s in run.spans}
    assert "MultiModalMessage" in types and totals(run.run) == (9, 3, 2)


class Opaque:
    """An object JSON cannot write, with a repr that says what it is."""

    def __repr__(self) -> str:
        return "Opaque(42)"


async def fetch_bytes(url: str) -> bytes:
    """Fetch a page as bytes."""
    return b"\x89PNG\r\n\x1a\n\xff\xfe raw"


async def lookup(key: str) -> Any:
    """Look a key up."""
    return Opaque()


ARGUMENTS = {"fetch_bytes": '{"url": "https://example.invalid/dot.png"}', "lookup": '{"key": "k"}'}


@pytest.mark.parametrize("tool", [fetch_bytes, lookup], ids=["bytes", "an object JSON cannot write"])
async def test_a_tool_returning_what_json_cannot_write_leaves_its_call_traced(tmp_path: Path, tool: Any) -> None:
    agent = AssistantAgent(
        "fetcher",
        model_client=replay(tool_call(tool.__name__, ARGUMENTS[tool.__name__], prompt_tokens=7, completion_tokens=2)),
        tools=[tool],
    )
    team = RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(2), name="tools")
    result, run = await recorded(team, "go", tmp_path)

    assert result.stop_reason is not None
    assert_exported_whole(run)
    (call,) = [s for s in run.spans if s.name == f"execute_tool {tool.__name__}"]
    assert (call.attributes or {}).get("otel_agents.tool.fingerprint")
    assert totals(run.run)[:2] == (7, 2)


async def test_non_ascii_names_and_descriptions_are_kept_exactly(tmp_path: Path) -> None:
    writer = AssistantAgent("écrivain", model_client=replay(text("Voilà, 完成了。", 12, 4)), description="作家")
    team = RoundRobinGroupChat(
        [writer], termination_condition=MaxMessageTermination(2), name="équipe-作家", description="チーム"
    )
    _, run = await recorded(team, "Écris «un haïku»", tmp_path)

    assert_exported_whole(run)
    names = {(s.attributes or {}).get("gen_ai.agent.name") for s in run.spans}
    assert "écrivain" in names
    assert (run.run.attributes or {})["gen_ai.workflow.name"] == "équipe-作家"
    assert {"message user", "message écrivain"} <= {s.name for s in run.spans}, "each message by its source"
    assert [r.team for r in Store(run.store).runs()] == ["équipe-作家"]
    assert "équipe-作家" in cli("--store", str(run.store), "runs").stdout


@pytest.mark.slow
async def test_a_run_of_ten_thousand_messages_keeps_its_numbers(tmp_path: Path) -> None:
    talker = AssistantAgent(
        "talker",
        model_client=replay(*(text(f"m{i}", 3, 1) for i in range(10_000))),
        model_context=BufferedChatCompletionContext(buffer_size=4),
    )
    team = RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(10_001), name="long")
    result, run = await recorded(team, "go", tmp_path, capture=False)

    assert len(result.messages) == 10_001
    assert totals(run.run) == (30_000, 10_000, 10_001)
    assert (run.run.attributes or {})["otel_agents.turns"] == 10_000
    assert_exported_whole(run)


@pytest.mark.backend
async def test_a_run_with_lone_surrogates_arrives_in_jaeger(tmp_path: Path) -> None:
    """Over real OTLP to the built Jaeger: the run whose agent's description holds lone surrogates
    arrives whole, U+FFFD in their place (the protobuf encoder refused its batch before)."""
    from tests.support.backends import built_backends
    from tests.support.jaeger import poll, running_jaeger

    with running_jaeger(built_backends().jaeger, tmp_path) as jaeger:
        with otel_agents.configure(endpoint=jaeger.otlp_http, store=False) as telemetry:
            writer = AssistantAgent("writer", model_client=replay(text("fine", 5, 2)), description=LONE)
            team = RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2), name="odd")
            await team.run(task="go")
            assert telemetry.force_flush()
        found = poll(lambda: jaeger.search("otel-agents", operation="invoke_workflow odd"), bool)
        assert len(found) == 1, "the run arrived"
        (trace_id,) = found
        spans = jaeger.wait_for_trace(trace_id, span_count=4)["spans"]
    described = [tag["value"] for span in spans for tag in span["tags"] if tag["key"] == "gen_ai.agent.description"]
    assert "a \ufffd b \ufffd c caf\ufffd \ufffd\ufffd" in described

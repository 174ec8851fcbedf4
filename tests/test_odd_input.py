"""Odd input never breaks a run or a process, and what it exports stays bounded (issue "Nothing
lost", item 5): a 5 MB message, lone surrogates and undecodable bytes, an image, a tool that returns
bytes or an object JSON cannot write, non-ASCII names, sources and descriptions, 10,000 messages. Each
run completes as it would untraced, its spans encode as OTLP (the protobuf encoder every OTLP exporter
uses) and land in the store, its attributes stay within the content limit, and its numbers add up.

AutoGen refuses an agent name that is not a Python identifier (lone surrogates are not), so odd text
reaches names through a message's source, a team's name and descriptions instead."""

from __future__ import annotations

import base64
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import MultiModalMessage, TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat
from autogen_core import Image
from autogen_core.model_context import BufferedChatCompletionContext
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import otel_agents
from otel_agents._internal.export.store.reader import Store
from tests.support.cli import cli
from tests.support.teams import replay, text, tool_call

LIMIT = 4096  # the content limit's default, in characters (docs/configuration.md, "Content stays home")
LONE = "a \ud800 b \udfff c " + b"caf\xe9 \xff\xfe".decode("utf-8", "surrogateescape")
"""Lone surrogates, and bytes that are not UTF-8 as `surrogateescape` decodes them (a file name)."""
REPLACED = "a \ufffd b \ufffd c caf\ufffd \ufffd\ufffd"
"""`LONE` as exported: each code point UTF-8 cannot encode is U+FFFD."""
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


async def recorded(team: Any, task: Any, tmp_path: Path, *, capture: bool | str = True) -> tuple[Any, Recorded]:
    exporter = OtlpEncoding()
    store = tmp_path / f"store-{capture}"
    with otel_agents.configure(span_exporter=exporter, store=store, capture_content=capture) as telemetry:
        result = await team.run(task=task)
        assert telemetry.force_flush()
    return result, Recorded(exporter, store)


def assert_exported_whole(recorded: Recorded, limit: int = LIMIT) -> None:
    """The spans encode as OTLP, are within the limit, and the store holds the run."""
    encode_spans(recorded.spans).SerializeToString()  # raises on text protobuf cannot hold
    too_long = [(s, k, len(v)) for s, k, v in recorded.strings() if len(v) > limit]
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
    result, run = await recorded(team, TextMessage(content=LONE, source=f"user {LONE}"), tmp_path, capture=capture)

    assert [m.content for m in result.messages] == [LONE, LONE], "the run's own messages are untouched"
    assert result.messages[0].source == f"user {LONE}"
    assert_exported_whole(run)
    assert (run.run.attributes or {})["gen_ai.workflow.name"] == f"team {REPLACED}"
    (source,) = [s for s in run.spans if (s.attributes or {}).get("otel_agents.message.index") == 0]
    assert source.name == f"message user {REPLACED}"
    assert (source.attributes or {})["gen_ai.agent.name"] == f"user {REPLACED}"
    assert totals(run.run) == (11, 5, 2)
    assert not [(s, k) for s, k, v in run.strings() if any(0xD800 <= ord(c) <= 0xDFFF for c in v)]
    assert [r.team for r in Store(run.store).runs()] == [f"team {REPLACED}"]


async def test_lone_surrogates_in_a_team_name_leave_its_metrics_exportable() -> None:
    """A run's team name labels its metrics: the Prometheus endpoint must still answer (its UTF-8
    encode of the page raised, every scrape a 500 from that run on) and OTLP keep the label."""
    reader = InMemoryMetricReader()
    with otel_agents.configure(
        span_exporter=InMemorySpanExporter(), metric_readers=[reader], store=False, prometheus=("127.0.0.1", 0)
    ) as telemetry:
        assert telemetry.prometheus is not None
        writer = AssistantAgent("writer", model_client=replay(text("fine", 5, 2)))
        team = RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2), name=f"team {LONE}")
        await team.run(task="go")
        url = f"http://{telemetry.prometheus.host}:{telemetry.prometheus.port}/metrics"
        page = urllib.request.urlopen(url, timeout=10).read().decode()
        got = reader.get_metrics_data()

    assert [line for line in page.splitlines() if line.startswith("otel_agents_runs_total{")], page
    assert f'gen_ai_workflow_name="team {REPLACED}"' in page
    assert got is not None
    points = [p for r in got.resource_metrics for s in r.scope_metrics for m in s.metrics for p in m.data.data_points]
    teams = {(p.attributes or {}).get("gen_ai.workflow.name") for p in points}
    assert f"team {REPLACED}" in teams and f"team {LONE}" not in teams, "OTLP's encoder dropped the label"


@pytest.mark.parametrize(
    ("capture", "limit"),
    [("SPAN_ONLY", LIMIT), ("SPAN_AND_EVENT", 256)],
    ids=["default limit", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=256, events too"],
)
async def test_a_5_mb_message_is_cut_to_the_content_limit_and_counted_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture: str, limit: int
) -> None:
    if limit != LIMIT:
        monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", str(limit))
    huge = "mot 作家 " * 500_000  # 5.5 MB of UTF-8; the limit counts characters
    writer = AssistantAgent("writer", model_client=replay(text(huge, 1_250_000, 1_000_000)))
    team = RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2), name="huge")
    result, run = await recorded(team, huge, tmp_path, capture=capture)

    assert result.messages[-1].content == huge
    assert_exported_whole(run, limit)
    (said,) = [s for s in run.spans if s.name == "message writer"]
    assert (said.attributes or {})["otel_agents.message.content"] == huge[: limit - 1] + "…"
    assert totals(run.run) == (1_250_000, 1_000_000, 2)
    assert sum(len(v) for _, _, v in run.strings()) < 200 * limit, "bounded: nothing near the message's size"


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

    (executed,) = [m for m in result.messages if m.type == "ToolCallExecutionEvent"]
    assert not executed.content[0].is_error, executed
    assert_exported_whole(run)
    (call,) = [s for s in run.spans if s.name == f"execute_tool {tool.__name__}"]
    assert call.status.status_code is not StatusCode.ERROR
    assert (call.attributes or {}).get("otel_agents.tool.fingerprint")
    assert (call.attributes or {})["gen_ai.tool.call.result"] == executed.content[0].content, "as AutoGen wrote it"
    assert totals(run.run)[:2] == (7, 2)


async def test_non_ascii_names_and_sources_are_kept_exactly(tmp_path: Path) -> None:
    writer = AssistantAgent("écrivain", model_client=replay(text("Voilà, 完成了。", 12, 4)), description="作家")
    team = RoundRobinGroupChat(
        [writer], termination_condition=MaxMessageTermination(2), name="équipe-作家", description="チーム"
    )
    _, run = await recorded(team, TextMessage(content="Écris «un haïku»", source="編集者"), tmp_path)

    assert_exported_whole(run)
    by_name = {s.name: s.attributes or {} for s in run.spans}
    assert by_name["invoke_agent écrivain"]["gen_ai.agent.description"] == "作家"
    assert (run.run.attributes or {})["gen_ai.workflow.name"] == "équipe-作家"
    assert by_name["message 編集者"]["gen_ai.agent.name"] == "編集者", "each message by its source"
    assert by_name["message écrivain"]["otel_agents.message.content"] == "Voilà, 完成了。"
    assert totals(run.run) == (12, 4, 2)
    assert [r.team for r in Store(run.store).runs()] == ["équipe-作家"]
    assert "équipe-作家" in cli("--store", str(run.store), "runs").stdout


async def test_a_teams_non_ascii_description_reaches_the_selector_prompt_exactly(tmp_path: Path) -> None:
    """A team's description is exported where AutoGen uses it: a selector's prompt, kept as
    written (the JSON holds the characters, not escapes)."""
    drafting = RoundRobinGroupChat(
        [AssistantAgent("writer", model_client=replay(text("brouillon")))],
        termination_condition=MaxMessageTermination(2),
        name="drafting",
        description="チーム «écrit»",
    )
    editor = AssistantAgent("editor", model_client=replay(text("fini", 5, 1)))
    team = SelectorGroupChat(
        [drafting, editor],
        model_client=replay(text("editor", 4, 1)),
        termination_condition=MaxMessageTermination(2),
        name="sélection",
    )
    result, run = await recorded(team, TextMessage(content="Écris", source="作家"), tmp_path)

    assert [m.source for m in result.messages] == ["作家", "editor"]
    assert_exported_whole(run)
    (selector,) = [s for s in run.spans if s.name == "chat" and "gen_ai.agent.name" not in (s.attributes or {})]
    prompt = str((selector.attributes or {})["gen_ai.input.messages"])
    assert "drafting: チーム «écrit»" in prompt and "作家: Écris" in prompt, prompt
    assert totals(run.run) == (9, 2, 2), "the selector's call counts"


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
    assert REPLACED in described

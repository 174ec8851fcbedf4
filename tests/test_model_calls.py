"""A chat span per model call; tokens counted once; cost from offline prices."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat
from autogen_core.models import UserMessage
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import otel_agents
from otel_agents._internal.config.settings import ConfigError, load_prices
from otel_agents._internal.genai.prices import base_names
from tests.conftest import Capture
from tests.support.metrics import points
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import Tree, one_trace, traces
from tests.support.teams import openai_client, replay, text

pytestmark = [pytest.mark.lowest_versions, pytest.mark.every_autogen, pytest.mark.every_python]


def listed_cost(model: str, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0) -> float:
    """What `genai-prices` itself charges OpenAI for this usage."""
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cache_read_tokens)
    return float(calc_price(usage, model_ref=model, provider_id="openai").total_price)


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def billed(server: OpenAIServer) -> tuple[int, int]:
    return sum(b.prompt_tokens for b in server.billed), sum(b.completion_tokens for b in server.billed)


def chat_totals(tree: Tree) -> tuple[int, int]:
    calls = tree.named("chat")
    return (
        sum(c.attributes["gen_ai.usage.input_tokens"] for c in calls),
        sum(c.attributes["gen_ai.usage.output_tokens"] for c in calls),
    )


def run_totals(tree: Tree) -> tuple[int, int]:
    return tree.root.attributes["gen_ai.usage.input_tokens"], tree.root.attributes["gen_ai.usage.output_tokens"]


def two_agents(server: OpenAIServer, **client_kwargs: Any) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=openai_client(server, **client_kwargs))
    critic = AssistantAgent("critic", model_client=openai_client(server, **client_kwargs))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(4), name="pair")


async def test_a_plain_call_gets_a_chat_span_under_its_agents_turn(
    capture: Capture, openai_server: OpenAIServer
) -> None:
    openai_server.script = [Reply(text="first draft"), Reply(text="needs work"), Reply(text="second draft")]
    await drain(otel_agents.tap(two_agents(openai_server).run_stream(task="write")))

    tree = one_trace(capture.spans())
    calls = tree.named("chat")
    assert [c.name for c in calls] == ["chat gpt-4o-mini"] * 3
    for call, agent in zip(calls, ["writer", "critic", "writer"], strict=True):
        turn = tree.parent(call)
        assert turn is not None and turn.name == f"invoke_agent {agent}"
        assert tree.parent(turn) is tree.root
        attributes = call.attributes
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == "gpt-4o-mini"
        assert attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
        assert attributes["gen_ai.agent.name"] == agent
        assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
        expected = listed_cost(
            "gpt-4o-mini-2024-07-18", attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]
        )
        assert attributes["otel_agents.cost.usd"] == round(expected, 9)
        assert call.status.status_code is StatusCode.UNSET
        assert "gen_ai.request.stream" not in attributes
        assert call.end_time - call.start_time > 0
    assert run_totals(tree) == chat_totals(tree) == billed(openai_server)
    assert tree.root.attributes["otel_agents.cost.usd"] == pytest.approx(
        sum(c.attributes["otel_agents.cost.usd"] for c in calls)
    )
    writer_message = tree.named("message writer")[0]
    assert tree.parent(writer_message) is tree.parent(calls[0]), "a message hangs under the turn that said it"
    assert "otel_agents.cost.usd" not in writer_message.attributes, "each turn's cost reads once: on its chat span"
    assert "gen_ai.usage.input_tokens" not in writer_message.attributes
    assert (
        writer_message.attributes["otel_agents.message.input_tokens"]
        == calls[0].attributes["gen_ai.usage.input_tokens"]
    )


async def test_a_streamed_call_with_usage_in_the_last_chunk(capture: Capture, openai_server: OpenAIServer) -> None:
    openai_server.script = [Reply(text="words one by one")]
    talker = AssistantAgent(
        "talker",
        model_client=openai_client(openai_server, stream_options={"include_usage": True}),
        model_client_stream=True,
    )
    team = RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(2), name="streaming")
    await drain(otel_agents.tap(team.run_stream(task="stream")))

    tree = one_trace(capture.spans())
    (call,) = tree.named("chat")
    assert openai_server.requests[0]["stream"] is True
    assert tree.parent(call) is tree.one("invoke_agent talker")
    assert (call.attributes["gen_ai.usage.input_tokens"], call.attributes["gen_ai.usage.output_tokens"]) == billed(
        openai_server
    )
    assert call.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert call.attributes["gen_ai.request.stream"] is True
    assert run_totals(tree) == billed(openai_server)


async def test_a_tool_call_loop_makes_two_calls_in_one_turn(capture: Capture, openai_server: OpenAIServer) -> None:
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: 12 degrees"

    openai_server.script = [Reply(tool_call=("lookup", {"city": "Oslo"})), Reply(text="12 degrees in Oslo")]
    agent = AssistantAgent(
        "assistant", model_client=openai_client(openai_server), tools=[lookup], reflect_on_tool_use=True
    )
    team = RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(2), name="weather")
    await drain(otel_agents.tap(team.run_stream(task="weather?")))

    tree = one_trace(capture.spans())
    turn = tree.one("invoke_agent assistant")
    children = [c.name for c in tree.children(turn)]
    assert [c for c in children if not c.startswith("message ")] == [
        "chat gpt-4o-mini",
        "execute_tool lookup",
        "chat gpt-4o-mini",
    ]
    assert children.count("message assistant") == 3, "the call request, its result and the answer: under the turn"
    first, second = tree.named("chat")
    assert first.attributes["gen_ai.response.finish_reasons"] == ("function_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert run_totals(tree) == chat_totals(tree) == billed(openai_server)


async def test_speaker_selection_calls_go_under_the_run_and_are_counted(
    capture: Capture, openai_server: OpenAIServer
) -> None:
    openai_server.script = [
        Reply(text="writer"),  # selector
        Reply(text="a draft"),  # writer
        Reply(text="critic"),  # selector
        Reply(text="APPROVE"),  # critic
    ]
    writer = AssistantAgent("writer", model_client=openai_client(openai_server), description="writes")
    critic = AssistantAgent("critic", model_client=openai_client(openai_server), description="reviews")
    team = SelectorGroupChat(
        [writer, critic],
        model_client=openai_client(openai_server),
        termination_condition=TextMentionTermination("APPROVE"),
        allow_repeated_speaker=True,  # so the selector asks the model every turn
        name="selected",
    )
    await drain(otel_agents.tap(team.run_stream(task="write")))

    tree = one_trace(capture.spans())
    calls = tree.named("chat")
    assert len(calls) == openai_server.request_count == 4
    selections = [c for c in calls if tree.parent(c) is tree.root]
    assert len(selections) == 2
    assert all("gen_ai.agent.name" not in c.attributes for c in selections)
    by_agent = {c.attributes.get("gen_ai.agent.name") for c in calls if tree.parent(c) is not tree.root}
    assert by_agent == {"writer", "critic"}
    assert run_totals(tree) == chat_totals(tree) == billed(openai_server)
    message_tokens = sum(m.attributes.get("gen_ai.usage.input_tokens", 0) for m in tree.named("message "))
    assert message_tokens < run_totals(tree)[0], "messages do not carry the selector's tokens; the run does"


@pytest.mark.parametrize(("status", "error_type"), [(500, "InternalServerError"), (429, "RateLimitError")])
async def test_a_failing_call_is_an_error_span_and_the_run_fails_as_autogen_makes_it(
    capture: Capture, openai_server: OpenAIServer, status: int, error_type: str
) -> None:
    openai_server.script = [Reply(status=status)]
    untraced_error: BaseException | None = None
    otel_agents.AutoGenInstrumentor().uninstrument()  # the same run as AutoGen makes it on its own
    try:
        await drain(two_agents(openai_server).run_stream(task="write"))
    except Exception as error:
        untraced_error = error
    assert untraced_error is not None

    with pytest.raises(type(untraced_error)) as raised:
        await drain(otel_agents.tap(two_agents(openai_server).run_stream(task="write")))
    assert str(raised.value).splitlines()[0] == str(untraced_error).splitlines()[0]

    (tree,) = [t for t in traces(capture.spans()).values() if t.root.name == "invoke_workflow pair"]
    (call,) = tree.named("chat")
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes["error.type"] == error_type
    assert "scripted" not in str(call.status.description), "the type only: an exception's message may carry content"
    assert [dict(e.attributes or {}) for e in call.events if e.name == "exception"] == [{"exception.type": error_type}]
    assert "gen_ai.usage.input_tokens" not in call.attributes and "otel_agents.cost.usd" not in call.attributes
    assert tree.root.attributes["otel_agents.stop_kind"] == "error"


async def test_cached_input_tokens_are_read_and_priced(capture: Capture, openai_server: OpenAIServer) -> None:
    openai_server.script = [Reply(text="cached answer", cached_tokens=10)]
    agent = AssistantAgent("solo", model_client=openai_client(openai_server))
    await drain(otel_agents.tap(agent.run_stream(task="hello")))

    (call,) = one_trace(capture.spans()).named("chat")
    attributes = call.attributes
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 10
    tokens = attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]
    expected = listed_cost("gpt-4o-mini-2024-07-18", *tokens, 10)
    assert attributes["otel_agents.cost.usd"] == round(expected, 9)
    assert expected < listed_cost("gpt-4o-mini-2024-07-18", *tokens)


async def test_a_client_reporting_no_model_gives_a_plain_chat_span(capture: Capture) -> None:
    agent = AssistantAgent("solo", model_client=replay(text("hi", 11, 2)))
    await drain(otel_agents.tap(agent.run_stream(task="hello")))

    tree = one_trace(capture.spans())
    (call,) = tree.named("chat")
    assert call.name == "chat"
    assert "gen_ai.request.model" not in call.attributes and "otel_agents.cost.usd" not in call.attributes
    assert call.attributes["gen_ai.provider.name"] == "autogen.replay"
    assert tree.parent(call) is tree.one("invoke_agent solo")
    assert "otel_agents.cost.usd" not in tree.root.attributes, "an unpriced call: no made-up total"
    assert run_totals(tree) == (11, 2)


@pytest.mark.parametrize("how", ["configure(instrument=False)", "uninstrument() then a tap"])
async def test_only_tapped_runs_get_chat_spans_when_autogen_is_not_instrumented(how: str) -> None:
    """Model calls are patched for `tap`; a call outside any tapped run stays untraced then."""
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=False, instrument=how == "uninstrument() then a tap"):
        if how != "configure(instrument=False)":
            otel_agents.AutoGenInstrumentor().uninstrument()
        await drain(otel_agents.tap(AssistantAgent("tapped", model_client=replay(text("hi"))).run_stream(task="hi")))
        await AssistantAgent("untapped", model_client=replay(text("hi"))).run(task="hi")
        await replay(text("direct")).create([UserMessage(content="hi", source="user")])
    spans = list(exporter.get_finished_spans())
    chats = [s for s in spans if s.name == "chat"]
    tapped_trace = {s.context.trace_id for s in spans if s.name == "invoke_workflow tapped"}
    assert len(chats) == 1 and {chats[0].context.trace_id} == tapped_trace


async def test_an_instrumented_autogen_gives_a_call_outside_any_run_its_own_span(capture: Capture) -> None:
    await replay(text("direct", 5, 1)).create([UserMessage(content="hi", source="user")])
    (call,) = [s for s in capture.spans() if s.name == "chat"]
    assert call.parent is None and call.attributes["gen_ai.usage.input_tokens"] == 5


async def test_unpriced_models_warn_once_and_count_their_tokens(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    openai_server.model = "house-model-v1"
    openai_server.script = [Reply(text="one"), Reply(text="two")]
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader]) as telemetry:
        agent = AssistantAgent("solo", model_client=openai_client(openai_server, model_info=_info()))
        await drain(otel_agents.tap(agent.run_stream(task="a")))
        await drain(otel_agents.tap(agent.run_stream(task="b")))
        telemetry.force_flush()
        points = _points(reader, "otel_agents.tokens.unpriced")

    calls = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert len(calls) == 2 and all("otel_agents.cost.usd" not in c.attributes for c in calls)
    assert sum(points.values()) == sum(b.prompt_tokens + b.completion_tokens for b in openai_server.billed)
    assert set(points) == {(("gen_ai.request.model", "house-model-v1"),)}, "priced by the model that answered"
    warnings = [r for r in caplog.records if "no price for model 'house-model-v1'" in r.getMessage()]
    assert len(warnings) == 1


def _info() -> Any:
    return {
        "vision": False,
        "function_calling": True,
        "json_output": False,
        "family": "unknown",
        "structured_output": False,
    }


def _points(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], float]:
    return {tuple(sorted(p.attributes.items())): p.value for p in points(reader.get_metrics_data(), name)}


def test_dated_versions_fall_back_to_their_base_name() -> None:
    assert base_names("gpt-4o-mini-2024-07-18")[-1] == "gpt-4o-mini"
    assert base_names("claude-3-5-sonnet-20241022")[-1] == "claude-3-5-sonnet"
    assert base_names("openai/gpt-4o")[-1] == "gpt-4o"
    table = load_prices({"house-model": {"input": 1, "output": 2}}, environ={})
    found = table.lookup("house-model-2025-01-01")
    assert found is not None and found.name == "house-model" and found.source == "your prices"


def test_a_price_file_overrides_built_in_prices(tmp_path: Path) -> None:
    json_file = tmp_path / "prices.json"
    json_file.write_text(json.dumps({"gpt-4o-mini": {"input": 1, "output": 2}, "house": {"input": 3, "output": 4}}))
    table = load_prices(json_file, environ={})
    assert table.cost("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(1.0)
    assert table.cost("house", 0, 1_000_000) == pytest.approx(4.0)
    assert table.cost("gpt-4o", 1_000_000, 0, provider="openai") == pytest.approx(2.5), (
        "genai-prices' data for the rest"
    )
    toml_file = tmp_path / "prices.toml"
    toml_file.write_text("[house]\ninput = 5\noutput = 6\ncached_input = 1\n")
    assert load_prices(None, environ={"OTEL_AGENTS_PRICES": str(toml_file)}).cost("house", 2_000_000, 0, 1_000_000) == (
        pytest.approx(6.0)
    )
    assert load_prices({"house": {"input": 7, "output": 8}}, environ={}).cost("house", 1_000_000, 0) == pytest.approx(7)


async def test_prices_argument_reaches_the_chat_spans(tmp_path: Path, openai_server: OpenAIServer) -> None:
    exporter = InMemorySpanExporter()
    openai_server.script = [Reply(text="priced")]
    with otel_agents.configure(
        span_exporter=exporter, prices={"gpt-4o-mini": {"input": 1000, "output": 0}}
    ) as telemetry:
        agent = AssistantAgent("solo", model_client=openai_client(openai_server))
        await drain(otel_agents.tap(agent.run_stream(task="a")))
        telemetry.force_flush()
    (call,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert call.attributes["otel_agents.cost.usd"] == pytest.approx(call.attributes["gen_ai.usage.input_tokens"] / 1000)


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ('{"gpt-x": {"input": 1}}', ".json", "entry 'gpt-x': missing 'output'"),
        ('{"gpt-x": {"input": -1, "output": 1}}', ".json", "entry 'gpt-x': input=-1 is not a price"),
        ('{"gpt-x": {"input": "cheap", "output": 1}}', ".json", "entry 'gpt-x': input='cheap' is not a price"),
        ('{"gpt-x": {"input": 1, "output": 1, "per": "token"}}', ".json", "entry 'gpt-x': unknown key(s) per"),
        ('{"gpt-x": 3}', ".json", "entry 'gpt-x': expected a table"),
        ("{not json", ".json", "is not valid JSON"),
        ("[gpt-x\ninput = 1", ".toml", "is not valid TOML"),
        ('["a", "b"]', ".json", "must map model names to prices"),
        ('{"gpt-x": {"input": Infinity, "output": 1}}', ".json", "entry 'gpt-x': input=inf is not a price"),
        ('{"gpt-x": {"input": 1, "output": 1e400}}', ".json", "entry 'gpt-x': output=inf is not a price"),
        ('{"gpt-x": {"input": NaN, "output": 1}}', ".json", "entry 'gpt-x': input=nan is not a price"),
        ('{"gpt-x": {"input": 1%s, "output": 1}}' % ("0" * 400), ".json", "entry 'gpt-x': input=1000"),
    ],
)
def test_a_malformed_price_file_is_refused_naming_file_and_entry(
    tmp_path: Path, content: str, suffix: str, message: str
) -> None:
    path = tmp_path / f"prices{suffix}"
    path.write_text(content)
    with pytest.raises(ConfigError) as raised:
        otel_agents.configure(prices=path, set_global=False)
    assert str(path) in str(raised.value) and message in str(raised.value)
    with pytest.raises(ConfigError) as from_env:
        load_prices(None, environ={"OTEL_AGENTS_PRICES": str(path)})
    assert "OTEL_AGENTS_PRICES" in str(from_env.value) and message in str(from_env.value)


def test_a_price_file_that_is_not_utf8_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_bytes('{"caf\u00e9": {"input": 1, "output": 1}}'.encode("latin-1"))
    with pytest.raises(ConfigError, match="is not UTF-8 text") as raised:
        load_prices(path, environ={})
    assert str(path) in str(raised.value)


def test_a_missing_price_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_prices(tmp_path / "nope.json", environ={})


async def test_reading_llm_events_does_not_change_what_the_application_logs(
    capture: Capture, openai_server: OpenAIServer
) -> None:
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    root = logging.getLogger()
    handler = Keep(level=logging.NOTSET)
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        openai_server.script = [Reply(text="quiet")]
        agent = AssistantAgent("solo", model_client=openai_client(openai_server))
        await drain(otel_agents.tap(agent.run_stream(task="a")))
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)

    assert not [r for r in seen if r.name == "autogen_core.events"], "INFO events stay hidden at WARNING"
    events = logging.getLogger("autogen_core.events")
    assert events.level == logging.NOTSET and not events.filters, "its logging configuration is not touched"
    (call,) = one_trace(capture.spans()).named("chat")
    assert call.attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18", "yet the event was read"


async def test_a_model_stream_closed_early_ends_its_call_at_once(capture: Capture) -> None:
    from autogen_core.models import UserMessage

    client = replay(text("a long answer that streams in many chunks"))
    stream = client.create_stream([UserMessage(content="go", source="user")])
    await stream.__anext__()
    await stream.aclose()  # the consumer leaves after the first chunk

    (call,) = [s for s in capture.spans() if s.name.startswith("chat")]
    assert call.end_time is not None, "ended when its stream was closed, not when collected"


def test_an_unpriced_model_is_named_once_and_the_names_kept_for_that_are_bounded(
    capture: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    from otel_agents._internal.autogen import model_clients

    with caplog.at_level(logging.WARNING, logger="otel_agents"):
        for _ in range(3):
            model_clients._unpriced(capture.telemetry, "house-model-7", 10)
    assert [r.getMessage() for r in caplog.records].count(
        "otel-agents: no price for model 'house-model-7'; its calls get no cost (add it with OTEL_AGENTS_PRICES)"
    ) == 1
    logger = logging.getLogger("otel_agents")
    level = logger.level
    logger.setLevel(logging.ERROR)  # the next 3,000 warnings are not the point
    try:
        for i in range(3 * model_clients._UNPRICED_NAMES_KEPT):
            model_clients._unpriced(capture.telemetry, f"fine-tuned-{i}", 1)
    finally:
        logger.setLevel(level)
    assert 0 < len(model_clients._warned_unpriced) <= model_clients._UNPRICED_NAMES_KEPT
    model_clients._warned_unpriced.clear()

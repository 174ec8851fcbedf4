"""One run, one trace, one root; turns are children of the run span; nothing from another run."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import HandoffTermination, MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat, Swarm
from autogen_agentchat.ui import Console
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, RequestUsage
from opentelemetry.sdk.trace import ReadableSpan

import otel_agents
from tests.conftest import Capture
from tests.support.spans import Tree, one_trace, traces
from tests.support.teams import replay, text, writers_room

pytestmark = [pytest.mark.lowest_versions, pytest.mark.every_autogen, pytest.mark.every_python]

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def turns_of(tree: Tree) -> list[ReadableSpan]:
    return tree.named("invoke_agent ")


def assert_turns_under(tree: Tree, workflow: ReadableSpan, agents: set[str]) -> None:
    turns = [t for t in turns_of(tree) if tree.parent(t) is workflow]
    assert turns, f"no invoke_agent span under {workflow.name}"
    assert {t.attributes["gen_ai.agent.name"] for t in turns} == agents


async def test_embedded_runtime_run_is_one_flat_trace(capture: Capture) -> None:
    await drain(otel_agents.tap(writers_room(max_messages=5).run_stream(task="write a haiku")))

    tree = one_trace(capture.spans())
    assert tree.root.name == "invoke_workflow writers-room"
    assert_turns_under(tree, tree.root, {"writer", "critic"})
    assert len(turns_of(tree)) == 4
    assert [s.name for s in tree.named("message ")] == [
        "message user",
        "message writer",
        "message critic",
        "message writer",
        "message critic",
    ]
    (task, *said) = tree.named("message ")
    assert tree.parent(task) is tree.root, "the task: no turn said it"
    for message in said:  # each turn reads once: what it said hangs under it
        turn = tree.parent(message)
        assert turn is not None and turn.name == f"invoke_agent {message.attributes['gen_ai.agent.name']}"
        assert message.start_time >= turn.start_time, "no child starts before its parent"
        assert (
            "gen_ai.usage.input_tokens" not in message.attributes and "otel_agents.cost.usd" not in message.attributes
        )
    assert tree.depth() <= 4
    assert not tree.named("autogen "), "runtime spans are off by default"


async def test_depth_does_not_grow_with_turns(nested_capture: Capture) -> None:
    await drain(otel_agents.tap(writers_room(max_messages=12).run_stream(task="go")))

    tree = one_trace(nested_capture.spans())
    assert len(turns_of(tree)) == 11
    assert all(tree.parent(t) is tree.root for t in turns_of(tree))
    assert tree.depth() <= 4


async def test_twenty_concurrent_runs_on_one_shared_runtime(capture: Capture) -> None:
    runtime = otel_agents.create_runtime()
    runtime.start()  # outside any span, shared by every run
    try:
        teams = [writers_room(max_messages=3 + i % 3, runtime=runtime, name=f"team-{i}") for i in range(20)]
        await asyncio.gather(*(drain(otel_agents.tap(t.run_stream(task=f"task {i}"))) for i, t in enumerate(teams)))
    finally:
        await runtime.stop_when_idle()

    by_trace = traces(capture.spans())
    assert len(by_trace) == 20
    for tree in by_trace.values():
        name = tree.root.name.removeprefix("invoke_workflow ")
        expected_messages = 3 + int(name.removeprefix("team-")) % 3
        assert tree.root.attributes["otel_agents.message_count"] == expected_messages
        assert len(tree.named("message ")) == expected_messages
        assert len(turns_of(tree)) == expected_messages - 1
        assert_turns_under(tree, tree.root, {"writer", "critic"})


async def test_runtime_spans_nested_are_under_the_turn_that_caused_them(nested_capture: Capture) -> None:
    runtime = otel_agents.create_runtime()
    runtime.start()
    try:
        await drain(otel_agents.tap(writers_room(max_messages=4, runtime=runtime).run_stream(task="go")))
    finally:
        await runtime.stop_when_idle()

    tree = one_trace(nested_capture.spans())
    runtime_spans = tree.named("autogen ")
    assert runtime_spans
    for span in runtime_spans:
        parent = tree.parent(span)
        assert parent is not None and (parent is tree.root or parent.name.startswith("invoke_agent ")), span.name
        assert not UUID.search(span.name), f"per-team uuid left in {span.name!r}"
        assert "message" not in (span.attributes or {}), "AutoGen's message JSON must not leave the process"
    names = {s.name for s in runtime_spans}
    assert "autogen process writer" in names and "autogen process critic" in names
    assert not [n for n in names if n.startswith(("autogen ack", "autogen create", "autogen publish"))]
    assert any(tree.parent(s) is not tree.root for s in runtime_spans), "some runtime spans sit under turns"
    assert tree.depth() <= 4


async def test_what_autogen_handlers_see_as_current_is_a_span_of_the_run(capture: Capture) -> None:
    """With runtime spans off, code in AutoGen's handlers (here a termination condition) sees a real
    span of the run as current, so a span a foreign tracer starts there has a parent that exists."""
    from autogen_agentchat.conditions import FunctionalTermination
    from opentelemetry import trace

    seen: list[int] = []

    def five_messages(new_messages: Any) -> bool:
        seen.append(trace.get_current_span().get_span_context().span_id)
        return len(seen) >= 5  # called once per new message here

    await drain(otel_agents.tap(writers_room(termination=FunctionalTermination(five_messages)).run_stream(task="go")))

    tree = one_trace(capture.spans())
    assert seen and set(seen) == {tree.root.context.span_id}


def test_a_recorded_runtime_span_ends_with_its_block_and_records_its_error(nested_capture: Capture) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import Link, StatusCode

    from otel_agents._internal.run.start import start_run

    workflow = start_run(nested_capture.telemetry, "blocks")
    assert workflow is not None
    tracer = nested_capture.telemetry.tracer_provider.get_tracer("autogen SingleThreadedAgentRuntime")
    cause = [Link(workflow.span.get_span_context())]
    with tracer.start_as_current_span("autogen process writer", links=cause) as fine:
        assert trace.get_current_span() is fine and fine.is_recording()
    with pytest.raises(ValueError), tracer.start_as_current_span("autogen process critic", links=cause):
        raise ValueError("the handler failed")
    with pytest.raises(GeneratorExit), tracer.start_as_current_span("autogen send writer", links=cause):
        raise GeneratorExit  # not an error, as for use_span
    assert trace.get_current_span() is trace.INVALID_SPAN, "every block detached its span"
    workflow.end()

    by_name = {s.name: s for s in nested_capture.spans()}
    assert by_name["autogen process writer"].status.status_code is StatusCode.UNSET
    failed = by_name["autogen process critic"]
    assert failed.status.status_code is StatusCode.ERROR
    events = [(e.name, (e.attributes or {}).get("exception.type")) for e in failed.events]
    assert events == [("exception", "ValueError")]
    assert by_name["autogen send writer"].status.status_code is StatusCode.UNSET
    assert not by_name["autogen send writer"].events


async def test_shared_runtime_started_inside_another_run_does_not_mix_runs(capture: Capture) -> None:
    runtime = otel_agents.create_runtime()
    first = writers_room(max_messages=3, runtime=runtime, name="first")
    stream = otel_agents.tap(first.run_stream(task="one"))
    runtime.start()  # started while no run is active, but reused by both runs below
    await drain(stream)
    await drain(otel_agents.tap(writers_room(max_messages=3, runtime=runtime, name="second").run_stream(task="two")))
    await runtime.stop_when_idle()

    by_trace = traces(capture.spans())
    assert sorted(t.root.name for t in by_trace.values()) == [
        "invoke_workflow first",
        "invoke_workflow second",
    ]


async def test_create_agent_outside_a_run_makes_no_trace(capture: Capture) -> None:
    AssistantAgent("lonely", model_client=replay("hi"))
    assert not [s for s in capture.spans() if s.name.startswith("create_agent")]


async def test_assistant_with_a_function_tool(capture: Capture) -> None:
    async def web_search(query: str) -> str:
        """Search the web."""
        return f"results for {query}"

    call = CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="c1", name="web_search", arguments='{"query": "otel"}')],
        usage=RequestUsage(prompt_tokens=12, completion_tokens=5),
        cached=False,
    )
    researcher = AssistantAgent("researcher", model_client=replay(call, text("done")), tools=[web_search])
    team = RoundRobinGroupChat([researcher], termination_condition=MaxMessageTermination(3), name="research")
    await drain(otel_agents.tap(team.run_stream(task="find otel")))

    tree = one_trace(capture.spans())
    tool = tree.one("execute_tool web_search")
    turn = tree.parent(tool)
    assert turn is not None and turn.name == "invoke_agent researcher"
    assert tree.parent(turn) is tree.root
    types = [m.attributes["otel_agents.message.type"] for m in tree.named("message ")]
    assert "ToolCallRequestEvent" in types and "ToolCallExecutionEvent" in types


async def test_a_model_call_inside_a_tool_is_in_the_run_and_its_totals(capture: Capture) -> None:
    from autogen_core.models import UserMessage

    inner = replay(text("a summary", 1000, 500))

    async def summarize(topic: str) -> str:
        """Summarize a topic with a model of its own."""
        result = await inner.create([UserMessage(content=topic, source="tool")])
        return str(result.content)

    call = CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="c1", name="summarize", arguments='{"topic": "otel"}')],
        usage=RequestUsage(prompt_tokens=12, completion_tokens=5),
        cached=False,
    )
    researcher = AssistantAgent("researcher", model_client=replay(call, text("done")), tools=[summarize])
    team = RoundRobinGroupChat([researcher], termination_condition=MaxMessageTermination(3), name="research")
    await drain(otel_agents.tap(team.run_stream(task="summarize otel")))

    tree = one_trace(capture.spans())
    calls = tree.named("chat")
    in_tool = [c for c in calls if tree.parent(c) is tree.one("execute_tool summarize")]
    assert len(in_tool) == 1 and in_tool[0].attributes["gen_ai.agent.name"] == "researcher"
    assert tree.root.attributes["gen_ai.usage.input_tokens"] == sum(
        c.attributes["gen_ai.usage.input_tokens"] for c in calls
    )
    assert tree.root.attributes["gen_ai.usage.input_tokens"] >= 1000, "the tool's call counted in the run"


async def test_selector_group_chat(capture: Capture) -> None:
    writer = AssistantAgent("writer", model_client=replay(text("draft"), text("draft 2")))
    critic = AssistantAgent("critic", model_client=replay(text("APPROVE")))
    selector = replay("writer", "critic", "writer", "critic")
    team = SelectorGroupChat(
        [writer, critic],
        model_client=selector,
        termination_condition=TextMentionTermination("APPROVE"),
        allow_repeated_speaker=True,
        name="selector-room",
    )
    await drain(otel_agents.tap(team.run_stream(task="write")))

    tree = one_trace(capture.spans())
    assert tree.root.attributes["otel_agents.stop_kind"] == "text_mention"
    assert_turns_under(tree, tree.root, {"writer", "critic"})


async def test_swarm_with_a_handoff(capture: Capture) -> None:
    handoff = CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="h1", name="transfer_to_critic", arguments="{}")],
        usage=RequestUsage(prompt_tokens=8, completion_tokens=2),
        cached=False,
    )
    writer = AssistantAgent("writer", model_client=replay(handoff), handoffs=["critic"])
    critic_to_user = CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="h2", name="transfer_to_user", arguments="{}")],
        usage=RequestUsage(prompt_tokens=9, completion_tokens=2),
        cached=False,
    )
    critic = AssistantAgent("critic", model_client=replay(critic_to_user), handoffs=["user"])
    team = Swarm([writer, critic], termination_condition=HandoffTermination(target="user"), name="swarm")
    await drain(otel_agents.tap(team.run_stream(task="write")))

    tree = one_trace(capture.spans())
    assert tree.root.attributes["otel_agents.stop_kind"] == "handoff"
    assert_turns_under(tree, tree.root, {"writer", "critic"})
    assert "HandoffMessage" in [m.attributes["otel_agents.message.type"] for m in tree.named("message ")]


async def test_nested_team_gets_a_span_of_its_own(capture: Capture) -> None:
    inner = writers_room(max_messages=3, name="drafting")
    editor = AssistantAgent("editor", model_client=replay(text("edited"), text("edited again")))
    outer = RoundRobinGroupChat([inner, editor], termination_condition=MaxMessageTermination(4), name="publishing")
    items = await drain(otel_agents.tap(outer.run_stream(task="a story")))

    tree = one_trace(capture.spans())
    assert tree.root.name == "invoke_workflow publishing"
    inner_runs = tree.named("invoke_workflow drafting")
    assert inner_runs, "the inner team's run has a span"
    for inner_run in inner_runs:
        assert tree.parent(inner_run) is tree.root
        assert inner_run.attributes["gen_ai.workflow.name"] == "drafting"
        assert "otel_agents.run.id" not in inner_run.attributes, "one run, one run id"
    assert_turns_under(tree, inner_runs[0], {"writer", "critic"})
    assert_turns_under(tree, tree.root, {"editor"})
    # the inner team's messages appear once, as message spans of the tapped run only, each under
    # the turn that said it (the inner team's turns under the inner team's span)
    messages = tree.named("message ")
    for message in messages[1:]:
        turn = tree.parent(message)
        assert turn is not None and turn.name == f"invoke_agent {message.attributes['gen_ai.agent.name']}", message.name
    assert len(messages) == len([i for i in items if not type(i).__name__ == "TaskResult"])
    assert tree.depth() <= 5


async def test_one_agent_run_stream(capture: Capture) -> None:
    agent = AssistantAgent("solo", model_client=replay(text("hello", 7, 2)))
    items = await drain(otel_agents.tap(agent.run_stream(task="hi")))

    tree = one_trace(capture.spans())
    assert tree.root.name == "invoke_workflow solo"
    assert tree.root.attributes["gen_ai.workflow.name"] == "solo"
    assert_turns_under(tree, tree.root, {"solo"})
    assert tree.root.attributes["otel_agents.message_count"] == 2
    assert tree.root.attributes["gen_ai.usage.input_tokens"] == 7
    # AutoGen gives none for one agent: its response ended it
    assert tree.root.attributes["otel_agents.stop_reason"] == "completed: TextMessage"
    assert tree.root.attributes["otel_agents.stop_kind"] == "completed"
    assert items[-1].messages[-1].content == "hello"


async def test_console_over_a_tap(capture: Capture) -> None:
    result = await Console(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))

    assert result.stop_reason is not None
    tree = one_trace(capture.spans())
    assert tree.root.attributes["otel_agents.message_count"] == 3


async def test_runs_nested_in_the_callers_span_join_its_trace(capture: Capture) -> None:
    tracer = capture.telemetry.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("handle request"):
        await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))

    tree = one_trace(capture.spans())
    assert tree.root.name == "handle request"
    run = tree.one("invoke_workflow writers-room")
    assert tree.parent(run) is tree.root
    assert_turns_under(tree, run, {"writer", "critic"})


async def test_nested_team_in_an_outer_team_on_a_shared_runtime(nested_capture: Capture) -> None:
    runtime = otel_agents.create_runtime()
    runtime.start()
    try:
        inner = writers_room(max_messages=3, name="drafting")
        editor = AssistantAgent("editor", model_client=replay(text("edited"), text("edited again")))
        outer = RoundRobinGroupChat(
            [inner, editor],
            termination_condition=MaxMessageTermination(4),
            runtime=runtime,
            name="publishing",
        )
        await drain(otel_agents.tap(outer.run_stream(task="a story")))
    finally:
        await runtime.stop_when_idle()

    tree = one_trace(nested_capture.spans())
    inner_run = tree.named("invoke_workflow drafting")[0]
    assert tree.parent(inner_run) is tree.root
    assert_turns_under(tree, inner_run, {"writer", "critic"})
    assert_turns_under(tree, tree.root, {"editor"})
    assert tree.depth() <= 5


async def test_two_runs_in_one_callers_span_and_the_callers_own_spans_after_them(capture: Capture) -> None:
    tracer = capture.telemetry.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("handle request"):
        await drain(otel_agents.tap(writers_room(max_messages=3, name="first").run_stream(task="go")))
        await drain(otel_agents.tap(writers_room(max_messages=3, name="second").run_stream(task="go")))
        with tracer.start_as_current_span("respond"):
            pass

    tree = one_trace(capture.spans())
    assert [tree.parent(s) for s in tree.named("invoke_workflow ")] == [tree.root, tree.root]
    assert tree.parent(tree.one("respond")) is tree.root
    for run in tree.named("invoke_workflow "):
        assert_turns_under(tree, run, {"writer", "critic"})


async def test_spans_a_run_causes_after_it_ended_are_dropped_not_orphaned(capture: Capture) -> None:
    runtime = otel_agents.create_runtime()
    runtime.start()
    team = writers_room(max_messages=8, runtime=runtime)
    stream = otel_agents.tap(team.run_stream(task="go"))
    async for _item in stream:
        break  # the team runs on in the background, on the shared runtime
    await stream.aclose()
    await runtime.stop_when_idle()  # ... until it finishes, after its run span ended

    tree = one_trace(capture.spans())
    assert tree.root.attributes["otel_agents.stop_kind"] == "consumer_closed"
    assert all(s.end_time <= tree.root.end_time for s in tree.named("invoke_agent ")), "nothing recorded late"


def test_each_envelope_trace_context_is_parsed_once_and_links_stay_the_same(capture: Capture, monkeypatch: Any) -> None:
    from autogen_core._telemetry import _propagation, _tracing
    from opentelemetry import propagate
    from opentelemetry.propagators.composite import CompositePropagator

    parses: list[Any] = []

    def counting_extract(carrier: Any, *args: Any, **kwargs: Any) -> Any:
        parses.append(carrier)
        return propagate.extract(carrier, *args, **kwargs)

    monkeypatch.setattr(_propagation, "extract", counting_extract)
    envelope = _propagation.EnvelopeMetadata(
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate="vendor=1"
    )
    expected = [link.context for link in _propagation.get_telemetry_links(envelope) or ()]
    parses.clear()

    first = [link.context for link in _tracing.get_telemetry_links(envelope) or ()]
    again = [link.context for link in _tracing.get_telemetry_links(envelope) or ()]
    assert first == again == expected and expected[0].span_id == 0xB7AD6B7169203331
    assert len(parses) == 1, "installed on the pinned autogen-core: the second lookup is remembered"

    monkeypatch.setattr(propagate, "_HTTP_TEXT_FORMAT", CompositePropagator([]))  # a propagator reading nothing
    (ignored,) = _tracing.get_telemetry_links(envelope) or ()
    assert not ignored.context.is_valid, "what was parsed is remembered per propagator"

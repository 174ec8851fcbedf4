"""The run and message attributes of the contract, and stop reasons and kinds exactly as listed."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult, TerminationCondition
from autogen_agentchat.conditions import (
    ExternalTermination,
    MaxMessageTermination,
    TextMentionTermination,
    TimeoutTermination,
    TokenUsageTermination,
)
from autogen_agentchat.teams import RoundRobinGroupChat

import otel_agents
from otel_agents._internal.run.stop import stop_kind_of
from tests.conftest import Capture
from tests.support.spans import one_trace
from tests.support.teams import replay, writers_room


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def test_run_span_attributes(capture: Capture) -> None:
    items = await drain(otel_agents.tap(writers_room(max_messages=5).run_stream(task="write")))
    result = items[-1]
    assert isinstance(result, TaskResult)

    root = one_trace(capture.spans()).root
    attributes = root.attributes
    assert attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert attributes["gen_ai.workflow.name"] == "writers-room"
    assert re.fullmatch(r"[0-9a-f]{32}", attributes["otel_agents.run.id"])
    assert attributes["otel_agents.stop_reason"] == result.stop_reason
    assert attributes["otel_agents.stop_kind"] == "max_messages"
    assert attributes["otel_agents.message_count"] == 5
    usages = [m.models_usage for m in result.messages if m.models_usage is not None]
    assert attributes["gen_ai.usage.input_tokens"] == sum(u.prompt_tokens for u in usages) == 2 * 20 + 2 * 30
    assert attributes["gen_ai.usage.output_tokens"] == sum(u.completion_tokens for u in usages) == 2 * 2 + 2 * 4


async def test_each_run_has_its_own_run_id(capture: Capture) -> None:
    team = writers_room(max_messages=2)
    await drain(otel_agents.tap(team.run_stream(task="one")))
    await drain(otel_agents.tap(team.run_stream(task="two")))

    roots = [s for s in capture.spans() if s.name.startswith("invoke_workflow")]
    assert len({r.attributes["otel_agents.run.id"] for r in roots}) == 2


async def test_message_span_attributes(capture: Capture) -> None:
    await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="write")))

    tree = one_trace(capture.spans())
    messages = tree.named("message ")
    assert [m.attributes["otel_agents.message.index"] for m in messages] == [0, 1, 2]
    task, writer, critic = messages
    assert task.name == "message user" and task.attributes["gen_ai.agent.name"] == "user"
    assert "otel_agents.message.input_tokens" not in task.attributes  # the echoed task has no usage
    assert writer.attributes["gen_ai.agent.name"] == "writer"
    assert writer.attributes["otel_agents.message.type"] == "TextMessage"
    assert writer.attributes["otel_agents.message.input_tokens"] == 20
    assert writer.attributes["otel_agents.message.output_tokens"] == 2
    assert critic.attributes["otel_agents.message.input_tokens"] == 30
    assert not any("gen_ai.usage.input_tokens" in m.attributes for m in messages), "tokens read once: on chat"
    # a message's latency: from the previous item's arrival (or the run start) to its own; its
    # span ends at its arrival and starts no earlier than that, nor before its turn
    assert task.start_time == tree.root.start_time
    assert task.attributes["otel_agents.message.latency_ms"] == pytest.approx(
        (task.end_time - tree.root.start_time) / 1e6
    )
    for previous, message in itertools.pairwise(messages):
        assert message.start_time >= previous.end_time
        assert message.attributes["otel_agents.message.latency_ms"] == pytest.approx(
            (message.end_time - previous.end_time) / 1e6
        )
        turn = tree.parent(message)
        assert turn is not None and message.start_time >= turn.start_time
        assert "otel_agents.message.content" not in message.attributes  # content capture is off


async def test_streaming_chunks_get_no_span_and_are_not_counted(capture: Capture) -> None:
    talker = AssistantAgent("talker", model_client=replay("one two three four"), model_client_stream=True)
    team = RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(2), name="streaming")
    items = await drain(otel_agents.tap(team.run_stream(task="talk")))

    chunks = [i for i in items if type(i).__name__ == "ModelClientStreamingChunkEvent"]
    assert chunks, "the replay client streamed chunks"
    tree = one_trace(capture.spans())
    assert tree.root.attributes["otel_agents.message_count"] == 2
    assert [m.name for m in tree.named("message ")] == ["message user", "message talker"]


def _external() -> TerminationCondition:
    condition = ExternalTermination()
    condition.set()
    return condition


@pytest.mark.parametrize(
    ("termination", "kind"),
    [
        (lambda: MaxMessageTermination(3), "max_messages"),
        (lambda: TextMentionTermination("notes 0"), "text_mention"),
        (lambda: TokenUsageTermination(max_total_token=10), "token_budget"),
        (lambda: TimeoutTermination(0), "timeout"),
        (_external, "external"),
        (lambda: TextMentionTermination("notes 0") | MaxMessageTermination(2), "max_messages"),
    ],
)
async def test_stop_kind_of_autogen_conditions(capture: Capture, termination: Any, kind: str) -> None:
    items = await drain(
        otel_agents.tap(writers_room(termination=termination() | MaxMessageTermination(10)).run_stream(task="go"))
    )

    root = one_trace(capture.spans()).root
    assert root.attributes["otel_agents.stop_kind"] == kind
    assert root.attributes["otel_agents.stop_reason"] == items[-1].stop_reason


async def test_max_turns_is_a_max_messages_stop(capture: Capture) -> None:
    await drain(otel_agents.tap(writers_room(max_messages=10, max_turns=2).run_stream(task="go")))

    root = one_trace(capture.spans()).root
    assert root.attributes["otel_agents.stop_reason"] == "Maximum number of turns 2 reached."
    assert root.attributes["otel_agents.stop_kind"] == "max_messages"


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("Maximum number of messages 5 reached, current message count: 5", "max_messages"),
        ("Maximum number of turns 3 reached.", "max_messages"),
        ("Text 'APPROVE' mentioned", "text_mention"),
        ("Handoff to user from critic detected.", "handoff"),
        ("Timeout of 30 seconds reached", "timeout"),
        ("Token usage limit reached, total token count: 120, prompt token count: 100.", "token_budget"),
        ("External termination requested", "external"),
        ("loop guard: repeat: critic said the same thing 3 times", "loop_guard"),
        (
            "Text 'X' mentioned, Maximum number of messages 4 reached, current message count: 4",
            "text_mention",
        ),
        ("Stop message received", "other"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_stop_kind_of(reason: str | None, kind: str) -> None:
    assert stop_kind_of(reason) == kind

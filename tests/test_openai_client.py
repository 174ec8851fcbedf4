"""The real OpenAIChatCompletionClient over HTTP to the tests' OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat

import otel_agents
from tests.conftest import Capture
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import one_trace
from tests.support.teams import openai_client


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def billed(server: OpenAIServer) -> tuple[int, int]:
    return sum(b.prompt_tokens for b in server.billed), sum(b.completion_tokens for b in server.billed)


async def test_plain_calls(capture: Capture, openai_server: OpenAIServer) -> None:
    openai_server.script = [
        Reply(text="a first draft"),
        Reply(text="needs work"),
        Reply(text="a second draft"),
    ]
    writer = AssistantAgent("writer", model_client=openai_client(openai_server))
    critic = AssistantAgent("critic", model_client=openai_client(openai_server))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(4), name="http-room")
    await drain(otel_agents.tap(team.run_stream(task="write about tracing")))

    tree = one_trace(capture.spans())
    assert openai_server.request_count == 3
    assert (
        tree.root.attributes["gen_ai.usage.input_tokens"],
        tree.root.attributes["gen_ai.usage.output_tokens"],
    ) == billed(openai_server)
    assert len(tree.named("invoke_agent ")) == 3


async def test_streaming_with_usage_in_the_last_chunk(capture: Capture, openai_server: OpenAIServer) -> None:
    openai_server.script = [Reply(text="streamed words arrive one by one")]
    talker = AssistantAgent(
        "talker",
        model_client=openai_client(openai_server, stream_options={"include_usage": True}),
        model_client_stream=True,
    )
    team = RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(2), name="streaming")
    items = await drain(otel_agents.tap(team.run_stream(task="stream please")))

    assert openai_server.requests[0]["stream"] is True
    assert any(type(i).__name__ == "ModelClientStreamingChunkEvent" for i in items)
    tree = one_trace(capture.spans())
    talker_message = tree.one("message talker")
    assert (
        talker_message.attributes["otel_agents.message.input_tokens"],
        talker_message.attributes["otel_agents.message.output_tokens"],
    ) == billed(openai_server)
    assert tree.root.attributes["otel_agents.message_count"] == 2


async def test_a_scripted_tool_call(capture: Capture, openai_server: OpenAIServer) -> None:
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: 12 degrees"

    openai_server.script = [
        Reply(tool_call=("lookup", {"city": "Oslo"})),
        Reply(text="It is 12 degrees in Oslo."),
    ]
    agent = AssistantAgent(
        "assistant", model_client=openai_client(openai_server), tools=[lookup], reflect_on_tool_use=True
    )
    team = RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(2), name="weather")
    items = await drain(otel_agents.tap(team.run_stream(task="weather in Oslo?")))

    assert openai_server.request_count == 2
    assert openai_server.requests[0]["tools"][0]["function"]["name"] == "lookup"
    tree = one_trace(capture.spans())
    tool = tree.one("execute_tool lookup")
    assert tree.parent(tool) is tree.one("invoke_agent assistant")
    assert items[-1].messages[-1].content == "It is 12 degrees in Oslo."
    assert (
        tree.root.attributes["gen_ai.usage.input_tokens"],
        tree.root.attributes["gen_ai.usage.output_tokens"],
    ) == billed(openai_server)

"""Teams and clients the tests run: replay clients (no network) and the real OpenAI client."""

from __future__ import annotations

from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TerminationCondition
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import AgentRuntime
from autogen_core.models import CreateResult, ModelInfo, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient

from tests.support.openai_server import OpenAIServer

MODEL_INFO: ModelInfo = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "gpt-4o",
    "structured_output": False,
}


def replay(*replies: str | CreateResult) -> ReplayChatCompletionClient:
    return ReplayChatCompletionClient(list(replies), model_info=MODEL_INFO)


def text(content: str, prompt_tokens: int = 10, completion_tokens: int = 3) -> CreateResult:
    return CreateResult(
        finish_reason="stop",
        content=content,
        usage=RequestUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        cached=False,
    )


def writers_room(
    *,
    max_messages: int = 5,
    runtime: AgentRuntime | None = None,
    termination: TerminationCondition | None = None,
    name: str = "writers-room",
    **team_kwargs: Any,
) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=replay(*(text(f"draft {i}", 20, 2) for i in range(20))))
    critic = AssistantAgent("critic", model_client=replay(*(text(f"notes {i}", 30, 4) for i in range(20))))
    return RoundRobinGroupChat(
        [writer, critic],
        termination_condition=termination or MaxMessageTermination(max_messages),
        runtime=runtime,
        name=name,
        **team_kwargs,
    )


def openai_client(server: OpenAIServer, **kwargs: Any) -> Any:
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    return OpenAIChatCompletionClient(
        model="gpt-4o-mini", base_url=server.base_url, api_key="test-key", max_retries=0, **kwargs
    )


def selector_room() -> Any:
    from autogen_agentchat.conditions import TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat

    writer = AssistantAgent("writer", model_client=replay(text("draft"), text("draft 2")))
    critic = AssistantAgent("critic", model_client=replay(text("APPROVE")))
    return SelectorGroupChat(
        [writer, critic],
        model_client=replay("writer", "critic", "writer", "critic"),
        termination_condition=TextMentionTermination("APPROVE"),
        allow_repeated_speaker=True,
        name="selector-room",
    )


def tool_call(
    name: str, arguments: str, *, call_id: str = "1", prompt_tokens: int = 10, completion_tokens: int = 3
) -> CreateResult:
    """A model's answer asking for one tool call."""
    from autogen_core import FunctionCall

    return CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id=call_id, name=name, arguments=arguments)],
        usage=RequestUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        cached=False,
    )


def swarm() -> Any:
    from autogen_agentchat.conditions import HandoffTermination
    from autogen_agentchat.teams import Swarm

    def handoff(to: str) -> CreateResult:
        return tool_call(f"transfer_to_{to}", "{}", call_id=f"to-{to}", prompt_tokens=8, completion_tokens=2)

    writer = AssistantAgent("writer", model_client=replay(handoff("critic")), handoffs=["critic"])
    critic = AssistantAgent("critic", model_client=replay(handoff("user")), handoffs=["user"])
    return Swarm([writer, critic], termination_condition=HandoffTermination(target="user"), name="swarm")


def graph_flow() -> Any:
    from autogen_agentchat.teams import DiGraphBuilder, GraphFlow

    writer = AssistantAgent("writer", model_client=replay(text("draft", 20, 2)))
    critic = AssistantAgent("critic", model_client=replay(text("notes", 30, 4)))
    builder = DiGraphBuilder()
    builder.add_node(writer).add_node(critic)
    builder.add_edge(writer, critic)
    return GraphFlow(participants=builder.get_participants(), graph=builder.build(), name="graph")


def publishing() -> RoundRobinGroupChat:
    """A team nested in a team: `drafting` (writer, critic) is a participant of `publishing`."""
    inner = writers_room(max_messages=3, name="drafting")
    editor = AssistantAgent("editor", model_client=replay(text("edited", 40, 5), text("edited again", 45, 6)))
    return RoundRobinGroupChat([inner, editor], termination_condition=MaxMessageTermination(4), name="publishing")

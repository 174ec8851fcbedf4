"""An AutoGen app that knows nothing of otel-agents: run by the tests under `opentelemetry-instrument`.

Two `team.run()` calls of a two-agent RoundRobin team on the real OpenAI client, whose base URL
and key come from the standard `OPENAI_BASE_URL` / `OPENAI_API_KEY` variables. Prints nothing.
"""

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient


async def main() -> None:
    client = OpenAIChatCompletionClient(model="gpt-4o-mini", max_retries=0)
    for _ in range(2):
        writer = AssistantAgent("writer", model_client=client)
        critic = AssistantAgent("critic", model_client=client)
        team = RoundRobinGroupChat(
            [writer, critic], termination_condition=MaxMessageTermination(3), name="writers-room"
        )
        await team.run(task="Write a line about tracing.")
    await client.close()


asyncio.run(main())

"""A service that knows nothing of otel-agents, as AutoGen apps are written past `team.run()`: run by
the tests under `opentelemetry-instrument`, which loads otel-agents before this file imports AutoGen.

- three "requests", each answered with an agent's `on_messages` (the agent protocol a service calls);
- a health check calling the model client directly, outside any run;
- a streaming team shown with `Console`, its client streaming without usage (AutoGen's default).

The OpenAI client's base URL and key come from `OPENAI_BASE_URL` / `OPENAI_API_KEY`. Prints only
what `Console` prints.
"""

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_agentchat.ui import Console
from autogen_core import CancellationToken
from autogen_core.models import UserMessage
from autogen_ext.models.openai import OpenAIChatCompletionClient


async def answer(client: OpenAIChatCompletionClient, question: str) -> str:
    agent = AssistantAgent("support", model_client=client)
    response = await agent.on_messages([TextMessage(content=question, source="user")], CancellationToken())
    return response.chat_message.to_text()


async def main() -> None:
    client = OpenAIChatCompletionClient(model="gpt-4o-mini", max_retries=0)
    for question in ("Where is my order?", "Can I change it?", "Thanks!"):
        await answer(client, question)
    await client.create([UserMessage(content="ping", source="health-check")])
    talker = AssistantAgent("talker", model_client=client, model_client_stream=True)
    team = RoundRobinGroupChat([talker], termination_condition=MaxMessageTermination(2), name="live")
    await Console(team.run_stream(task="Say something, word by word."))
    await client.close()


asyncio.run(main())

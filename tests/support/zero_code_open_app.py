"""An app that knows nothing of otel-agents and exits while a team run is still open (it keeps the
stream and never finishes it): run by the tests under `opentelemetry-instrument`."""

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient

KEPT = []


async def main() -> None:
    client = OpenAIChatCompletionClient(model="gpt-4o-mini", max_retries=0)
    writer = AssistantAgent("writer", model_client=client)
    critic = AssistantAgent("critic", model_client=client)
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(5), name="left-open")
    stream = team.run_stream(task="Write a line about tracing.")
    KEPT.append(stream)  # never closed, never dropped: still open when the process exits
    await stream.__anext__()


asyncio.run(main())

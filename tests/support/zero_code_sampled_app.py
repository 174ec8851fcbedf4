"""An app run under `opentelemetry-instrument` that sets up its own exporter through otel-agents
(`configure(span_exporter=...)`, the console's), so that runs are sampled where otel-agents exports:
the distro's own exporter is off (`OTEL_TRACES_EXPORTER=none`). Two `team.run()` calls of a
two-agent team on the real OpenAI client (base URL and key from `OPENAI_BASE_URL`/`OPENAI_API_KEY`)."""

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

import otel_agents


async def main() -> None:
    with otel_agents.configure(span_exporter=ConsoleSpanExporter()):
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

"""An app run unchanged under `opentelemetry-instrument`, with no import of otel-agents: two runs of
a writer and a critic on the real OpenAI client (base URL and key from `OPENAI_BASE_URL` and
`OPENAI_API_KEY`), the critic approving the first and never the second. `OTEL_AGENTS_OUTCOME` judges
both; then a reviewer's verdict on the second is recorded after it ended, by the result it returned
(`record_outcome` is the one otel-agents call an app makes for that)."""

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient


async def main() -> None:
    client = OpenAIChatCompletionClient(model="gpt-4o-mini", max_retries=0)
    results = []
    for _ in range(2):
        writer = AssistantAgent("writer", model_client=client)
        critic = AssistantAgent("critic", model_client=client)
        stop = TextMentionTermination("APPROVE") | MaxMessageTermination(5)
        team = RoundRobinGroupChat([writer, critic], termination_condition=stop, name="review")
        results.append(await team.run(task="Write the launch note."))
    await client.close()

    import otel_agents

    otel_agents.record_outcome(results[1], "poor", score=0.25, name="quality")


asyncio.run(main())

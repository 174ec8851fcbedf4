"""otel-agents quick start: an AutoGen team, traced with one line (the README's quick start is this code).

    pip install '/path/to/otel-agents[openai]'      # into your project's environment
    OPENAI_API_KEY=sk-... python examples/quickstart.py
    otel-agents runs            # the run, its stop reason, tokens and cost
    otel-agents show <run id>   # its trace, as a tree

That environment's Python and `otel-agents`: in a clone, after `bash scripts/demo.sh`, they are
`.venv/bin/python` and `.venv/bin/otel-agents` (the demo installs the `openai` extra there), or
`source .venv/bin/activate` once. Without OTEL_EXPORTER_OTLP_ENDPOINT the trace goes to the local
store that `otel-agents` reads; with it (e.g. http://localhost:4318 for a Collector or Jaeger),
over OTLP.
"""

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient

import otel_agents


async def main() -> None:
    otel_agents.configure()  # the one line: every AutoGen run from here on is one trace

    model = OpenAIChatCompletionClient(model="gpt-4o-mini")
    writer = AssistantAgent("writer", model_client=model, system_message="Write one short line.")
    critic = AssistantAgent("critic", model_client=model, system_message="Improve the line in a few words.")
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3), name="writers-room")
    result = await team.run(task="A line about tracing agent teams.")
    print(result.messages[-1].to_text())
    print("stopped:", result.stop_reason)
    await model.close()


asyncio.run(main())

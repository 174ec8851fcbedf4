"""A script whose OTLP endpoint is down: it configures otel-agents for a closed port on 127.0.0.1
(the endpoint comes from the environment, `OTEL_EXPORTER_OTLP_ENDPOINT`), runs the writers' room
once on replay clients, prints "ran" and exits. The tests time how long its exit takes."""

from __future__ import annotations

import asyncio

import otel_agents
from tests.support.teams import writers_room


async def main() -> None:
    otel_agents.configure()
    await writers_room(max_messages=3).run(task="Write a line about tracing.")


asyncio.run(main())
print("ran", flush=True)

"""A store filled by five real runs (the real OpenAI client against the local OpenAI-compatible
server) with what the runs list filters by: users, a conversation, outcomes of two names, and the
findings explain makes (a limit stop, a failing tool, repeated messages and tool calls)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import otel_agents
from tests.support.explain_apps import critic_never_approves, failing_tool, repeating_speaker
from tests.support.openai_server import OpenAIServer

PRICES = {"gpt-4o-mini-2024-07-18": {"input": 0.15, "output": 0.6}}


def scripted(team: Any, server: OpenAIServer) -> Any:
    """`team`, the server playing the script its maker set from its first reply."""
    server.play(server.script)
    return team


async def fill(store: Path, server: OpenAIServer) -> None:
    """Five runs: ana's in conversation ticket-7 (failure), ben's failing tool (success), ana's
    repeating speaker, then two of nobody's (success; quality=good)."""
    with otel_agents.configure(store=store, prices=PRICES) as telemetry:
        with otel_agents.run_attributes(user_id="ana", conversation_id="ticket-7"):
            ran = await scripted(critic_never_approves(server, turns=4), server).run(task="Write the launch note.")
            otel_agents.record_outcome(ran, "failure")
        with otel_agents.run_attributes(user_id="ben"):
            ran = await scripted(failing_tool(server), server).run(task="Read the page.")
            otel_agents.record_outcome(ran, "success")
        with otel_agents.run_attributes(user_id="ana"):
            await scripted(repeating_speaker(server, rounds=3), server).run(task="When is the launch?")
        ran = await scripted(critic_never_approves(server, turns=2), server).run(task="Again.")
        otel_agents.record_outcome(ran, "success")
        ran = await scripted(critic_never_approves(server, turns=6), server).run(task="Once more.")
        otel_agents.record_outcome(ran, "good", name="quality")
        assert telemetry.force_flush()

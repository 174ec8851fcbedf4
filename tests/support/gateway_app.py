"""One app process of tests/test_multi_host_gateway_samples_whole_runs.py: `python -m
tests.support.gateway_app KIND=COUNT ...` runs that many teams of each kind on replay clients (no
network), ten at a time, each run's `user.id` its kind. `otel_agents.configure()` reads everything
from the environment: OTLP to the gateway (OTEL_EXPORTER_OTLP_*) and the local store beside it
(OTEL_AGENTS_STORE), where the test reads what this process recorded. Prints "ran" and exits.

The kinds, priced at the built-in list prices (gpt-4o-mini, gpt-4o):
- plain: writer and critic, two cheap calls;
- pricey: two gpt-4o calls, $0.40 the run: below the gateway's $0.50 cost rule;
- costly: two gpt-4o calls, $0.80 the run: above it;
- guarded_loop: the writer repeats itself until LoopGuard stops the run (stop kind `loop_guard`);
- detected_loop: the same with no guard: the run ends at its message limit, the loop detected
  (an `otel_agents.loop_detected` event on the run);
- failed: the critic's model service is down: the run raises (status ERROR, stop kind `error`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.models import CreateResult
from autogen_ext.models.replay import ReplayChatCompletionClient

import otel_agents
from tests.support.teams import MODEL_INFO, text

AT_ONCE = 10


class Priced(ReplayChatCompletionClient):
    """A replay client that reports its model name, as real clients do (so its calls are priced)."""

    def __init__(self, model: str, *replies: CreateResult) -> None:
        super().__init__(list(replies), model_info=MODEL_INFO)
        self.model = model


class Outage(Priced):
    async def create(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the model service is down")


def team(writer: Priced, critic: Priced, termination: Any) -> RoundRobinGroupChat:
    agents = [AssistantAgent("writer", model_client=writer), AssistantAgent("critic", model_client=critic)]
    return RoundRobinGroupChat(agents, termination_condition=termination, name="writers-room")


def two_calls(model: str, input_tokens: int) -> RoundRobinGroupChat:
    return team(
        Priced(model, text("draft", input_tokens, 20)),
        Priced(model, text("notes", input_tokens, 20)),
        MaxMessageTermination(3),
    )


def looping(*, guard: bool) -> RoundRobinGroupChat:
    termination: Any = MaxMessageTermination(8)
    if guard:
        termination = termination | otel_agents.LoopGuard()
    return team(
        Priced("gpt-4o-mini", *[text("the same draft")] * 8),
        Priced("gpt-4o-mini", *[text("rewrite it")] * 8),
        termination,
    )


KINDS: dict[str, Callable[[], RoundRobinGroupChat]] = {
    "plain": lambda: two_calls("gpt-4o-mini", 200),
    "pricey": lambda: two_calls("gpt-4o", 79_000),  # 2 x (79,000 x $2.50 + 20 x $10) / 1M = $0.399
    "costly": lambda: two_calls("gpt-4o", 159_000),  # $0.799
    "guarded_loop": lambda: looping(guard=True),
    "detected_loop": lambda: looping(guard=False),
    "failed": lambda: team(Priced("gpt-4o-mini", text("draft")), Outage("gpt-4o-mini"), MaxMessageTermination(3)),
}


async def run(kind: str) -> None:
    with otel_agents.run_attributes(user_id=kind):
        try:
            await KINDS[kind]().run(task="Write a line about tracing.")
        except Exception as error:  # AutoGen may wrap the client's ConnectionError
            if kind != "failed" or "the model service is down" not in str(error):
                raise


async def main(plan: list[str]) -> None:
    with otel_agents.configure():
        pending: list[Awaitable[None]] = [run(kind) for kind in plan]
        for start in range(0, len(pending), AT_ONCE):
            await asyncio.gather(*pending[start : start + AT_ONCE])


def planned(arguments: list[str]) -> list[str]:
    """KIND=COUNT arguments as one list of kinds, interleaved so each batch mixes them."""
    counts = {kind: int(count) for kind, count in (a.split("=") for a in arguments)}
    assert set(counts) <= set(KINDS), counts
    plan: list[str] = []
    while any(counts.values()):
        for kind in counts:
            if counts[kind]:
                plan.append(kind)
                counts[kind] -= 1
    return plan


if __name__ == "__main__":
    asyncio.run(main(planned(sys.argv[1:])))
    print("ran", flush=True)

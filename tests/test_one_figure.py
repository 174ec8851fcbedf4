"""One figure everywhere: a call, a turn, an agent and a run read the same in `show`, `explain`,
`runs` and `cost`. A run's total is the exact sum of its calls rounded once; the parts shown beside
it share it by largest remainder; cost attributes carry a call's cost to the nano-dollar; the run
span's context growth is measured in turn order, as `explain` measures it."""

from __future__ import annotations

import re
from decimal import Decimal

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.models import CreateResult
from autogen_ext.models.replay import ReplayChatCompletionClient
from opentelemetry.sdk.trace import ReadableSpan

from tests.conftest import Capture
from tests.support.cli import cli
from tests.support.teams import MODEL_INFO, text

COST = "otel_agents.cost.usd"
MONEY = re.compile(r"\$(\d[\d,]*)\.(\d{6})$")


def micro_of(shown: str) -> int:
    """`$0.000461` as 461 micro-dollars (the CLI prints six places)."""
    match = MONEY.fullmatch(shown) if shown.startswith("$") else None
    assert match is not None, shown
    return int(match.group(1).replace(",", "")) * 1_000_000 + int(match.group(2))


def micro(usd: float) -> int:
    return round(usd * 1_000_000)


def ok(*args: str) -> str:
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- cost attributes carry the call's cost to the nano-dollar ------------------------------------


class GptMini(ReplayChatCompletionClient):
    """A replay client that names its model (gpt-4o-mini: $0.15 in, $0.60 out per million tokens)."""

    def __init__(self, *replies: CreateResult) -> None:
        super().__init__(list(replies), model_info=MODEL_INFO)
        self.model = "gpt-4o-mini"


async def test_cost_attributes_carry_the_calls_cost_rounded_to_the_nano_dollar(capture: Capture) -> None:
    writer = AssistantAgent("writer", model_client=GptMini(text("draft", 100, 18)))  # 25.8 micro-dollars
    critic = AssistantAgent("critic", model_client=GptMini(text("notes", 412, 18)))  # 72.6 micro-dollars
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3), name="pair")
    await team.run(task="go")

    spans = capture.spans()
    calls = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
    assert [repr((s.attributes or {})[COST]) for s in sorted(calls, key=start)] == ["2.58e-05", "7.26e-05"]
    (run,) = [s for s in spans if "otel_agents.run.id" in (s.attributes or {})]
    assert repr((run.attributes or {})[COST]) == "9.84e-05"
    assert Decimal(repr((run.attributes or {})[COST])) == sum(Decimal(repr((s.attributes or {})[COST])) for s in calls)


def start(span: ReadableSpan) -> int:
    return span.start_time or 0

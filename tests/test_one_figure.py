"""One figure everywhere: a call, a turn, an agent and a run read the same in `show`, `explain`,
`runs` and `cost`. A run's total is the exact sum of its calls rounded once; the parts shown beside
it share it by largest remainder; cost attributes carry a call's cost to the nano-dollar; the run
span's context growth is measured in turn order, as `explain` measures it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import DiGraphBuilder, GraphFlow, RoundRobinGroupChat
from autogen_core.models import CreateResult
from autogen_ext.models.replay import ReplayChatCompletionClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.export.store.reader import Store
from tests.conftest import Capture
from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.teams import MODEL_INFO, openai_client, text, writers_room

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


# --- a call reads the same in show, explain and cost ---------------------------------------------


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline demo's two runs: gpt-4o-mini calls whose costs are fractions of a micro-dollar
    (ana's writer's first call is 72.6 micro-dollars; her run's four calls 460.95 in all)."""
    store = tmp_path_factory.mktemp("demo-store")
    ok("--store", str(store), "demo")
    return store


def shown_calls(store: Path, run_id: str) -> tuple[int, list[tuple[str, int]], int]:
    """`show RUN`: the run's cost on its head line, each `chat` line's (agent, cost) in order, and
    the run span line's cost."""
    lines = ok("--store", str(store), "show", run_id).splitlines()
    head = re.search(r", cost (\S+), stopped: ", lines[1])
    assert head is not None, lines[1]
    calls = []
    for line in lines:
        if re.match(r"^(│   |    )[├└]── chat ", line):
            found = re.search(r"  (\w+)  [\d,]+ in / [\d,]+ out  (\S+)$", line)
            assert found is not None, line
            calls.append((found.group(1), micro_of(found.group(2))))
    (run_line,) = [line for line in lines if line.startswith("invoke_workflow ")]
    return micro_of(head.group(1)), calls, micro_of(run_line.split()[-1])


def test_a_call_reads_the_same_in_show_explain_and_cost_and_the_calls_add_up_to_the_run(demo_store: Path) -> None:
    runs = json.loads(ok("--store", str(demo_store), "runs", "--json"))
    per_agent: dict[str, int] = defaultdict(int)
    for run in runs:
        head, calls, run_line = shown_calls(demo_store, run["run_id"])
        explained = json.loads(ok("--store", str(demo_store), "explain", run["run_id"], "--json"))
        assert all(turn["calls"] == 1 for turn in explained["turns"]), "one call a turn: a turn's cost is its call's"
        assert calls == [(t["agent"], micro(t["cost_usd"])) for t in explained["turns"]], (
            "each call as explain counts it"
        )
        assert (
            sum(c for _, c in calls)
            == head
            == run_line
            == micro(run["cost_usd"])
            == micro(explained["run"]["cost_usd"])
        ), "the calls add up to the run, the run reads the same everywhere"
        for agent, cost in calls:
            per_agent[agent] += cost
    by_agent = json.loads(ok("--store", str(demo_store), "cost", "--by", "agent", "--json"))
    assert {row["key"]: micro(row["cost_usd"]) for row in by_agent} == per_agent, "and as cost counts it"


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


# --- the run span's context growth is explain's, on a fan-out -----------------------------------


class HoldsB(OpenAIServer):
    """Holds agent B's call until the test releases it (B is the slow one); the rest as scripted."""

    def take_reply(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
        reply = super().take_reply(body, headers)
        system = str(body["messages"][0].get("content") or "")
        return dataclasses.replace(reply, hold=True) if system.startswith("You are B.") else reply


async def test_the_run_spans_context_growth_is_explains_on_a_graph_flow_fan_out(tmp_path: Path) -> None:
    with HoldsB() as server:
        server.script = [Reply(text="ok")]

        def agent(name: str, words: int) -> AssistantAgent:
            system = f"You are {name}. " + "background " * words  # each its own context size
            return AssistantAgent(name, model_client=openai_client(server), system_message=system)

        a, b, c, d = agent("A", 10), agent("B", 2000), agent("C", 10), agent("D", 500)
        builder = DiGraphBuilder()
        for node in (a, b, c, d):
            builder.add_node(node)
        for node in (b, c, d):
            builder.add_edge(a, node)
        flow = GraphFlow(participants=builder.get_participants(), graph=builder.build(), name="fan-out")
        exporter = InMemorySpanExporter()
        said: list[str] = []
        with otel_agents.configure(span_exporter=exporter, store=tmp_path) as telemetry:
            async for item in flow.run_stream(task="go"):
                if isinstance(item, TextMessage):
                    said.append(item.source)
                    if {"C", "D"} <= set(said) and "B" not in said:
                        # B's call runs beside C's and D's: it may reach the server after they answered
                        assert await asyncio.to_thread(server.wait_until_held), "B's call is held"
                        server.release()
            assert telemetry.force_flush()

    # C's and D's calls run side by side, neither held: either may answer first
    assert said[:2] == ["user", "A"] and sorted(said[2:4]) == ["C", "D"], said
    assert said[4:] == ["B"], "B, held, ends last"
    spans = exporter.get_finished_spans()
    explained = otel_agents.explain(spans).to_dict()
    assert [t["agent"] for t in explained["turns"]] == ["A", "B", "C", "D"], "turns in the order they started"
    (run,) = [s for s in spans if "otel_agents.run.id" in (s.attributes or {})]
    growth = explained["context"]["growth_tokens_per_turn"]
    assert growth is not None and growth < 0, "B's large context comes second of four"
    assert (run.attributes or {})["otel_agents.context.growth_tokens_per_turn"] == pytest.approx(growth)


# --- an open run read by trace id ------------------------------------------------------------------


async def test_an_open_run_read_by_its_trace_id_is_explained_as_an_open_run(tmp_path: Path) -> None:
    with otel_agents.configure(store=tmp_path) as telemetry:
        stream = otel_agents.run_stream(writers_room(max_messages=5), task="go")
        async for item in stream:
            if getattr(item, "source", None) == "critic":  # two turns have ended; the run goes on
                break
        assert telemetry.force_flush()
        assert Store(tmp_path).runs() == [], "the run is still open"
        (trace_id,) = {s.trace_id for s in Store(tmp_path).spans()}

        done = cli("--store", str(tmp_path), "explain", trace_id)
        explained = json.loads(ok("--store", str(tmp_path), "explain", trace_id, "--json"))
        async for _ in stream:  # the run goes on to its end
            pass

    assert done.returncode == 0, done.stderr
    first, _, third = done.stdout.splitlines()[:3]
    assert first.startswith("(open run) · ") and first.endswith(" · still open: no stop reason yet"), first
    assert third.startswith("an open run: its run span has not ended"), third
    assert "autogen-core" not in done.stdout and "no run span" not in done.stdout
    assert (explained["run"]["run_id"], explained["run"]["stop_kind"]) == (None, None)
    assert [t["agent"] for t in explained["turns"]] == ["writer", "critic"]

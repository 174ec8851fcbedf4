"""Apps of ours that show each finding of `otel-agents explain`, through the real
`OpenAIChatCompletionClient` against the tests' OpenAI-compatible server (which records what it
billed per request), and what the tests read back from a recorded run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from tests.support.cli import cli
from tests.support.openai_server import Billed, OpenAIServer, Reply
from tests.support.teams import openai_client

MODEL = "gpt-4o-mini-2024-07-18"
"""What the server answers as its model: priced in the built-in table."""


def critic_never_approves(server: OpenAIServer, turns: int = 6) -> RoundRobinGroupChat:
    """A writer and a critic who never says APPROVE: the team stops at its message limit. Every
    draft and every note differs, and each is short (no repeat, no growth)."""
    server.script = [
        Reply(
            text=f"Draft {i // 2 + 1} of the launch note." if i % 2 == 0 else f"Not yet: point {i // 2 + 1} is vague."
        )
        for i in range(turns)
    ]
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    stop = TextMentionTermination("APPROVE") | MaxMessageTermination(turns + 1)
    return RoundRobinGroupChat([writer, critic], termination_condition=stop, name="review-loop")


def growing_drafts(server: OpenAIServer, turns: int = 6) -> RoundRobinGroupChat:
    """A writer whose every draft is longer than the last (some 750 tokens more each time), and an
    editor asking for more: each turn resends the whole conversation, so its context grows."""
    server.script = [
        Reply(text=" ".join(["expand"] * 600 * (i // 2 + 1)) if i % 2 == 0 else f"Longer, please ({i // 2 + 1}).")
        for i in range(turns)
    ]
    writer = AssistantAgent("writer", model_client=openai_client(server))
    editor = AssistantAgent("editor", model_client=openai_client(server))
    return RoundRobinGroupChat(
        [writer, editor], termination_condition=MaxMessageTermination(turns + 1), name="growing-drafts"
    )


async def fetch_page(url: str) -> str:
    """Fetch a web page."""
    raise ConnectionError(f"{url}: host unreachable")


def failing_tool(server: OpenAIServer) -> RoundRobinGroupChat:
    """A researcher whose tool fails: one turn, two model calls (the tool call, the answer after it)."""
    server.script = [
        Reply(tool_call=("fetch_page", {"url": "https://example.invalid/launch"})),
        Reply(text="I could not fetch the page."),
    ]
    researcher = AssistantAgent(
        "researcher", model_client=openai_client(server), tools=[fetch_page], reflect_on_tool_use=True
    )
    return RoundRobinGroupChat([researcher], termination_condition=MaxMessageTermination(2), name="research")


async def search(query: str) -> str:
    """Search the archive."""
    return f"no results for {query}"


def repeating_speaker(server: OpenAIServer, rounds: int = 3) -> RoundRobinGroupChat:
    """A speaker that repeats: every other turn it searches for the same thing, and in between says
    the same sentence, `rounds` times each."""
    script: list[Reply] = []
    for _ in range(rounds):
        script += [Reply(tool_call=("search", {"query": "launch date"})), Reply(text="Let me look again.")]
    server.script = script
    looper = AssistantAgent("looper", model_client=openai_client(server), tools=[search])
    return RoundRobinGroupChat(
        [looper], termination_condition=MaxMessageTermination(2 * rounds + 1), name="search-loop"
    )


@dataclass
class Recorded:
    """A run recorded to an in-memory exporter and a store at once."""

    spans: list[ReadableSpan]
    store: Path
    billed: list[Billed]

    @property
    def run_span(self) -> ReadableSpan:
        (run,) = [s for s in self.spans if (s.attributes or {}).get("otel_agents.run.id")]
        return run

    @property
    def run_id(self) -> str:
        return str((self.run_span.attributes or {})["otel_agents.run.id"])


async def record(team: Any, server: OpenAIServer, store: Path, task: str = "Write the launch note.") -> Recorded:
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=store) as telemetry:
        await team.run(task=task)
        assert telemetry.force_flush()
    return Recorded(list(exporter.get_finished_spans()), store, list(server.billed))


def explain_json(store: Path, *args: str) -> dict[str, Any]:
    """`otel-agents --store STORE explain ARGS --json`, parsed (it must succeed)."""
    done = cli("--store", str(store), "explain", *args, "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def billed_per_turn(turns: Sequence[dict[str, Any]], billed: Sequence[Billed]) -> list[tuple[int, int]]:
    """What the server billed for each turn's model calls, the requests taken in order, each turn
    its `calls` of them."""
    out, at = [], 0
    for turn in turns:
        mine = billed[at : at + turn["calls"]]
        at += turn["calls"]
        out.append((sum(b.prompt_tokens for b in mine), sum(b.completion_tokens for b in mine)))
    assert at == len(billed), "every request the server billed is a call of a turn"
    return out


def kinds(explanation: dict[str, Any]) -> set[str]:
    return {finding["kind"] for finding in explanation["findings"]}


def review_that_never_ends(server: OpenAIServer, rounds: int = 6) -> RoundRobinGroupChat:
    """The README's run: a writer whose drafts grow, a critic who answers each with the same note
    and never approves; the team stops at its message limit (every finding of a costly loop)."""
    script: list[Reply] = []
    for i in range(rounds):
        script += [Reply(text=" ".join(["draft"] * 400 * (i + 1))), Reply(text="Not yet: make it tighter.")]
    server.script = script
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    stop = TextMentionTermination("APPROVE") | MaxMessageTermination(2 * rounds + 1)
    return RoundRobinGroupChat([writer, critic], termination_condition=stop, name="launch-review")

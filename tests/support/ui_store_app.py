"""Fills a store with the runs the web page's tests look at, as an app does: the real
`OpenAIChatCompletionClient` against the tests' OpenAI-compatible server (started here, in this
process), `otel_agents.configure(store=...)` with content capture on. Run as
`python -m tests.support.ui_store_app STORE` (tests/support/ui_store.py does): the test process's
global tracer provider stays untouched. Each run's session id names its kind (`ui-fixture-success`,
...), so the caller finds each through `otel-agents runs --json`.

Every reply is scripted; nothing sleeps. The runs, in order:
  success      team "review", user ana: the critic approves (TextMentionTermination), outcome success
  max_messages team "review", user ben: the critic never approves, MaxMessageTermination, outcome failure
  loop_guard   team "slogans", user ana: the same note again and again, stopped by LoopGuard
  failing_tool team "research", user ben: its tool raises, outcome failure
  resumed      team "research" (a researcher with a tool, a writer), user ana: two runs of one
               conversation, the second after the team's state was saved and loaded into a new team
               (the same conversation id, a span link), outcomes success
  markup       team "notes", user ben: a task and a reply holding <script> and an onerror attribute
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat

import otel_agents
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.teams import openai_client

SCRIPT_MARKUP = "<script>window.__xss=1</script>"
IMG_MARKUP = '<img src=x onerror="window.__xss=2">'
MARKUP_TASK = f"Summarise this note: {SCRIPT_MARKUP} and {IMG_MARKUP}"
SESSION_PREFIX = "ui-fixture-"
"""Each run's session id is this and its kind."""
MARKUP_REPLY = f"The note says {IMG_MARKUP} then {SCRIPT_MARKUP}. APPROVE"


def review(server: OpenAIServer, limit: int, name: str = "review") -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    stop = TextMentionTermination("APPROVE") | MaxMessageTermination(limit)
    return RoundRobinGroupChat([writer, critic], termination_condition=stop, name=name)


async def fetch_page(url: str) -> str:
    """Fetch a web page."""
    raise ConnectionError(f"{url}: host unreachable")


async def search(query: str) -> str:
    """Search the archive."""
    return f"two results for {query}"


def research(server: OpenAIServer, tool: Any, *, writer: bool = False) -> RoundRobinGroupChat:
    """A researcher with one tool (and, with `writer`, a writer after it, in turn), until someone
    says DONE."""
    researcher = AssistantAgent(
        "researcher", model_client=openai_client(server), tools=[tool], reflect_on_tool_use=True
    )
    participants = [researcher]
    if writer:
        participants.append(AssistantAgent("writer", model_client=openai_client(server)))
    stop = TextMentionTermination("DONE") | MaxMessageTermination(10)
    return RoundRobinGroupChat(participants, termination_condition=stop, name="research")


def kind(user: str, name: str) -> Any:
    """The run attributes of one run: its user, and its kind as its session id (so the caller finds
    each run by what it shows)."""
    return otel_agents.run_attributes(user_id=user, session_id=f"{SESSION_PREFIX}{name}")


async def fill(server: OpenAIServer) -> None:
    """Make the runs."""
    server.play([Reply(text="Draft: our launch is on Monday."), Reply(text="Clear and short. APPROVE")])
    with kind("ana", "success"):
        result = await review(server, limit=6).run(task="Write the launch note.")
    otel_agents.record_outcome(result, "success", score=1.0)

    server.play([Reply(text=f"Draft {i // 2 + 1}." if i % 2 == 0 else f"Not yet ({i}).") for i in range(4)])
    with kind("ben", "max_messages"):
        result = await review(server, limit=4).run(task="Write the pricing note.")
    otel_agents.record_outcome(result, "failure", score=0.0)

    server.play([Reply(text="Not good enough. Rewrite it.")])
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    stop = TextMentionTermination("APPROVE") | MaxMessageTermination(20) | otel_agents.LoopGuard()
    with kind("ana", "loop_guard"):
        await RoundRobinGroupChat([writer, critic], termination_condition=stop, name="slogans").run(
            task="Write a slogan."
        )

    server.play(
        [
            Reply(tool_call=("fetch_page", {"url": "https://example.invalid/launch"})),
            Reply(text="I could not fetch the page. DONE"),
        ]
    )
    with kind("ben", "failing_tool"):
        result = await research(server, fetch_page).run(task="Read the launch page.")
    otel_agents.record_outcome(result, "failure")

    server.play(
        [
            Reply(tool_call=("search", {"query": "launch date"})),
            Reply(text="Found: the launch is on Monday."),
            Reply(text="Draft: we launch on Monday."),
            Reply(tool_call=("search", {"query": "launch venue"})),
            Reply(text="Found: it is in the main hall."),
            Reply(text="Final: we launch on Monday, in the main hall. DONE"),
        ]
    )
    first = research(server, search, writer=True)
    with kind("ana", "resumed_first"):
        result = await first.run(task="Write a line on when and where we launch.")
    otel_agents.record_outcome(result, "success")
    state = await first.save_state()
    server.play(
        [
            Reply(tool_call=("search", {"query": "launch time"})),
            Reply(text="Found: the doors open at nine."),
            Reply(text="Final: we launch on Monday at nine, in the main hall. DONE"),
        ]
    )
    second = research(server, search, writer=True)
    await second.load_state(state)
    with kind("ana", "resumed_second"):
        result = await second.run(task="Add the time.")
    otel_agents.record_outcome(result, "success")

    server.play([Reply(text=MARKUP_REPLY)])
    writer = AssistantAgent("writer", model_client=openai_client(server))
    with kind("ben", "markup"):
        await RoundRobinGroupChat(
            [writer], termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(3), name="notes"
        ).run(task=MARKUP_TASK)


async def one_more(server: OpenAIServer, name: str) -> None:
    """One more run (team "late", user ana, session `ui-fixture-NAME`): a run that ends while a page is open."""
    server.play([Reply(text="Draft: doors open at nine."), Reply(text="Fine. APPROVE")])
    with kind("ana", name):
        await review(server, limit=6, name="late").run(task="Write the door note.")


async def main(store: str, late: str | None = None) -> None:
    with OpenAIServer() as server:
        with otel_agents.configure(store=store, capture_content="SPAN_AND_EVENT") as telemetry:
            await (fill(server) if late is None else one_more(server, late))
            assert telemetry.force_flush(), "the store took every run"


if __name__ == "__main__":
    # `STORE` fills it; `STORE --late NAME` adds one run, session ui-fixture-NAME
    asyncio.run(main(sys.argv[1], sys.argv[3] if sys.argv[2:3] == ["--late"] else None))

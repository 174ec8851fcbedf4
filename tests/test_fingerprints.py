"""What a run says about itself for explaining it with content capture off (DESIGN section 3,
"Explaining a run"): a fingerprint on every message and tool call, and the run's turns, context
growth and repeats on its span."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat

import otel_agents
from otel_agents._internal.genai.fingerprints import text_fingerprint, tool_fingerprint
from otel_agents._internal.genai.growth import growth_per_turn
from tests.conftest import Capture
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import one_trace
from tests.support.teams import openai_client, replay, text


async def drain(stream: AsyncIterator[Any]) -> None:
    async for _ in stream:
        pass


def critic_who_repeats(max_messages: int) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=replay(*(text(f"draft {i}") for i in range(20))))
    critic = AssistantAgent("critic", model_client=replay(*(text("not yet") for _ in range(20))))
    return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(max_messages))


async def test_every_message_span_carries_a_fingerprint_equal_for_equal_texts_only(capture: Capture) -> None:
    await critic_who_repeats(7).run(task="go")

    messages = one_trace(capture.spans()).named("message ")
    fingerprints = {m.attributes["otel_agents.message.fingerprint"] for m in messages}
    assert all(len(f) == 16 and int(f, 16) >= 0 for f in fingerprints)
    by_text = {(m.attributes["gen_ai.agent.name"], m.attributes["otel_agents.message.fingerprint"]) for m in messages}
    # the task, three different drafts, and one critique said three times
    assert len(by_text) == 5 and len(messages) == 7
    assert "otel_agents.message.content" not in messages[0].attributes, "content capture stays off"


def test_a_fingerprint_is_keyed_per_process_so_no_text_can_be_guessed_from_it() -> None:
    here = text_fingerprint("not yet")
    assert here == text_fingerprint("not yet") != text_fingerprint("not yet!")
    assert here != hashlib.blake2b(b"not yet", digest_size=8).hexdigest(), "not the plain hash of the text"
    elsewhere = subprocess.run(
        [sys.executable, "-c", "from otel_agents._internal.genai.fingerprints import text_fingerprint as f; "
         "print(f('not yet'))"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    assert len(elsewhere) == 16 and elsewhere != here, "another process has another key"


def test_a_tool_fingerprint_reads_the_arguments_as_canonical_json() -> None:
    assert tool_fingerprint("lookup", {"city": "Oslo", "unit": "C"}) == tool_fingerprint(
        "lookup", '{"unit": "C",  "city": "Oslo"}'
    )
    assert tool_fingerprint("lookup", {"city": "Oslo"}) != tool_fingerprint("lookup", {"city": "Bergen"})
    assert tool_fingerprint("lookup", {"city": "Oslo"}) != tool_fingerprint("search", {"city": "Oslo"})
    assert len(tool_fingerprint("lookup", object())) == 16, "what JSON cannot hold is fingerprinted as its text"


async def test_tool_calls_carry_their_fingerprint_and_the_run_counts_the_repeats(
    capture: Capture, openai_server: OpenAIServer
) -> None:
    async def lookup(city: str, unit: str) -> str:
        """Look a city up."""
        return f"{city}: 12 {unit}"

    openai_server.script = [
        Reply(tool_call=("lookup", {"city": "Oslo", "unit": "C"})),
        Reply(tool_call=("lookup", {"unit": "C", "city": "Oslo"})),  # the same call, arguments in another order
        Reply(tool_call=("lookup", {"city": "Bergen", "unit": "C"})),
    ]
    agent = AssistantAgent("assistant", model_client=openai_client(openai_server), tools=[lookup])
    team = RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(4), name="weather")
    await team.run(task="weather?")

    tree = one_trace(capture.spans())
    tools = tree.named("execute_tool lookup")
    assert len(tools) == 3
    first, second, third = (t.attributes["otel_agents.tool.fingerprint"] for t in tools)
    assert first == second != third
    assert first == tool_fingerprint("lookup", {"city": "Oslo", "unit": "C"})
    # the same tool with the same arguments, once more (its summary message, the same text again,
    # is that tool call's: not counted twice)
    assert tree.root.attributes["otel_agents.repeats"] == 1


async def test_the_run_span_counts_turns_and_repeats(capture: Capture) -> None:
    await critic_who_repeats(7).run(task="go")

    tree = one_trace(capture.spans())
    assert tree.root.attributes["otel_agents.turns"] == len(tree.named("invoke_agent ")) == 6
    assert tree.root.attributes["otel_agents.repeats"] == 2, "the critic's third 'not yet' and its second"


async def test_the_run_span_carries_the_growth_of_each_turns_first_input(
    capture: Capture, openai_server: OpenAIServer
) -> None:
    openai_server.script = [Reply(text="draft " + "word " * 50 * i) for i in range(1, 7)]
    writer = AssistantAgent("writer", model_client=openai_client(openai_server))
    critic = AssistantAgent("critic", model_client=openai_client(openai_server))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(7))
    await team.run(task="go")

    tree = one_trace(capture.spans())
    billed = [b.prompt_tokens for b in openai_server.billed]
    assert len(billed) == 6
    growth = tree.root.attributes["otel_agents.context.growth_tokens_per_turn"]
    assert growth == growth_per_turn(billed) and growth > 40, "the drafts grow, and every turn reads them all"


async def test_no_growth_is_said_under_three_turns(capture: Capture) -> None:
    await critic_who_repeats(3).run(task="go")
    root = one_trace(capture.spans()).root
    assert root.attributes["otel_agents.turns"] == 2
    assert "otel_agents.context.growth_tokens_per_turn" not in root.attributes


def test_the_growth_is_the_least_squares_slope() -> None:
    assert growth_per_turn([100, 200, 300]) == 100.0
    assert growth_per_turn([100, 100, 100, 100]) == 0.0
    assert growth_per_turn([10, 40, 20, 50]) == 10.0
    assert growth_per_turn([100, 200]) is None


async def test_what_the_figures_were_counted_from_goes_with_the_run(capture: Capture) -> None:
    stream = otel_agents.tap(critic_who_repeats(7).run_stream(task="go"))
    await drain(stream)
    recorder = stream.recorder
    assert recorder is not None
    assert recorder.run.said == set() and recorder.run.first_inputs == {}
    assert one_trace(capture.spans()).root.attributes["otel_agents.repeats"] == 2

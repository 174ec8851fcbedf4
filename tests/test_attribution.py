"""Who a run is for: `run_attributes` and baggage on the run span; a team's runs between resets are
one conversation, carried through `save_state`/`load_state` into another process with a link."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_core import CancellationToken
from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan

import otel_agents
from otel_agents._internal.run.attribution import STATE_KEY
from tests.conftest import Capture
from tests.support.spans import Tree, traces
from tests.support.teams import replay, selector_room, text, writers_room

pytestmark = [pytest.mark.lowest_versions, pytest.mark.every_autogen, pytest.mark.every_python]

CONVERSATION = "gen_ai.conversation.id"


def runs_of(capture: Capture) -> list[Tree]:
    """The traces of the runs recorded so far, oldest first."""
    trees = [t for t in traces(capture.spans()).values() if t.root.name.startswith("invoke_workflow")]
    return sorted(trees, key=lambda t: t.root.start_time or 0)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_run_attributes_go_on_the_run_and_the_conversation_id_on_turns_and_calls(capture: Capture) -> None:
    with otel_agents.run_attributes(
        user_id="u-1", session_id="s-1", conversation_id="c-1", attributes={"tenant": "acme", "plan": 3}
    ):
        await selector_room().run(task="write")

    (tree,) = runs_of(capture)
    run = attributes(tree.root)
    assert (run["user.id"], run["session.id"], run[CONVERSATION]) == ("u-1", "s-1", "c-1")
    assert (run["tenant"], run["plan"]) == ("acme", 3)
    turns, calls = tree.named("invoke_agent "), tree.named("chat")
    assert turns and calls
    assert {attributes(s).get(CONVERSATION) for s in [*turns, *calls]} == {"c-1"}
    assert any(tree.parent(c) is tree.root for c in calls), "the speaker selection's call too"


async def test_nested_blocks_merge_the_inner_value_winning(capture: Capture) -> None:
    async with otel_agents.run_attributes(user_id="u-1", attributes={"a": 1, "b": 2}):
        async with otel_agents.run_attributes(session_id="s-2", attributes={"b": 3}):
            await writers_room(max_messages=2, name="inner").run(task="go")
        await writers_room(max_messages=2, name="outer").run(task="go")

    inner, outer = (attributes(t.root) for t in runs_of(capture))
    assert (inner["user.id"], inner["session.id"], inner["a"], inner["b"]) == ("u-1", "s-2", 1, 3)
    assert (outer["user.id"], outer["a"], outer["b"]) == ("u-1", 1, 2) and "session.id" not in outer


async def test_without_run_attributes_baggage_names_the_user(capture: Capture) -> None:
    ctx = baggage.set_baggage("user.id", "from-front-end")
    ctx = baggage.set_baggage("session.id", "web-7", ctx)
    ctx = baggage.set_baggage(CONVERSATION, "conv-9", ctx)
    token = otel_context.attach(ctx)
    try:
        await writers_room(max_messages=2, name="baggage").run(task="go")
        with otel_agents.run_attributes(user_id="given"):
            await writers_room(max_messages=2, name="given").run(task="go")
    finally:
        otel_context.detach(token)

    from_baggage, given = (attributes(t.root) for t in runs_of(capture))
    assert (from_baggage["user.id"], from_baggage["session.id"], from_baggage[CONVERSATION]) == (
        "from-front-end",
        "web-7",
        "conv-9",
    )
    assert (given["user.id"], given["session.id"]) == ("given", "web-7"), "run_attributes wins, key by key"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"attributes": {"gen_ai.system": "x"}}, ValueError, "reserved"),
        ({"attributes": {"otel_agents.cost": 1}}, ValueError, "reserved"),
        ({"attributes": {"tags": ["a", "b"]}}, TypeError, "'tags' is a list"),
        ({"attributes": {f"k{i}": i for i in range(33)}}, ValueError, "33 keys, at most 32"),
        ({"attributes": {"k" * 257: 1}}, ValueError, "over 256 characters"),
        ({"attributes": {"note": "x" * 257}}, ValueError, "'note' is over 256"),
        ({"attributes": {3: "x"}}, TypeError, "key 3"),
        ({"attributes": "tenant=acme"}, TypeError, "expected a mapping"),
        ({"user_id": 42}, TypeError, "user_id=42"),
        ({"session_id": ""}, TypeError, "session_id=''"),
    ],
)
def test_bad_run_attributes_are_refused_clearly(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("[", r"\[")):
        otel_agents.run_attributes(**kwargs)


def test_nested_blocks_together_keep_to_the_attribute_limit() -> None:
    with otel_agents.run_attributes(attributes={f"outer{i}": i for i in range(32)}):
        with otel_agents.run_attributes(attributes={"outer0": "replaced"}):
            pass  # the same key: still 32
        with pytest.raises(ValueError, match="33 keys with the blocks around it, at most 32"):
            with otel_agents.run_attributes(attributes={"inner": 1}):
                pass


async def test_a_teams_runs_between_resets_are_one_conversation(capture: Capture) -> None:
    team = writers_room(max_messages=2)
    await team.run(task="one")
    await team.run(task="two")
    await team.reset()
    await team.run(task="three")
    agent = AssistantAgent("solo", model_client=replay(text("a"), text("b")))
    await agent.run(task="one")
    await agent.run(task="two")

    one, two, three, solo_one, solo_two = (attributes(t.root)[CONVERSATION] for t in runs_of(capture))
    assert one == two != three, "reset() starts a new conversation"
    assert solo_one == solo_two and solo_one not in (one, three)
    assert len(one) == 32


class ComparedAgent(AssistantAgent):
    """An agent compared by value, hence not hashable (as a dataclass is)."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return self is other


async def test_an_unhashable_agent_runs_and_resets_traced_each_run_its_own_conversation(capture: Capture) -> None:
    other = AssistantAgent("other", model_client=replay(text("c")))
    await other.run(task="zero")  # a conversation kept: the registry of them is not empty
    agent = ComparedAgent("solo", model_client=replay(text("a"), text("b")))
    await agent.run(task="one")
    await agent.on_reset(CancellationToken())
    await agent.run(task="two")
    _, one, two = (attributes(t.root)[CONVERSATION] for t in runs_of(capture))
    assert one != two, "no conversation kept for it: each run has its own"


async def test_a_run_attributes_conversation_id_wins_and_is_kept_by_the_team(capture: Capture) -> None:
    team = writers_room(max_messages=2)
    with otel_agents.run_attributes(conversation_id="chat-42"):
        await team.run(task="one")
    await team.run(task="two")
    assert [attributes(t.root)[CONVERSATION] for t in runs_of(capture)] == ["chat-42", "chat-42"]


RESUME = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import otel_agents
from tests.support.teams import writers_room

async def main(step, path):
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=False) as telemetry:
        team = writers_room(max_messages=2)
        if step == "resume":
            with open(path) as state:
                await team.load_state(json.load(state))
        await team.run(task=step)
        if step == "first":
            with open(path, "w") as state:
                json.dump(await team.save_state(), state)
        telemetry.force_flush()
    (run,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow")]
    print(json.dumps({{
        "trace_id": format(run.context.trace_id, "032x"),
        "span_id": format(run.context.span_id, "016x"),
        "run_id": run.attributes["otel_agents.run.id"],
        "conversation": run.attributes["gen_ai.conversation.id"],
        "links": [[format(l.context.trace_id, "032x"), format(l.context.span_id, "016x")] for l in run.links],
    }}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def run_step(script: Path, step: str, state: Path, tmp_path: Path) -> dict[str, Any]:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(script), step, str(state)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_conversation_saved_in_one_process_resumes_in_another_with_a_link(tmp_path: Path) -> None:
    script, state = tmp_path / "resume.py", tmp_path / "state.json"
    script.write_text(RESUME.format(root=str(Path(__file__).resolve().parents[1])))

    first = run_step(script, "first", state, tmp_path)
    saved = json.loads(state.read_text())[STATE_KEY]
    assert saved["conversation_id"] == first["conversation"]
    assert saved["last_run"] == {"trace_id": first["trace_id"], "span_id": first["span_id"], "run_id": first["run_id"]}

    resumed = run_step(script, "resume", state, tmp_path)
    assert resumed["conversation"] == first["conversation"], "the same conversation, in another process"
    assert resumed["links"] == [[first["trace_id"], first["span_id"]]], "linked to the last run before the save"
    assert resumed["trace_id"] != first["trace_id"], "a trace of its own"


async def test_only_the_first_run_after_a_load_links_back(capture: Capture) -> None:
    team = writers_room(max_messages=2)
    await team.run(task="one")
    state = await team.save_state()
    other = writers_room(max_messages=2)
    await other.load_state(state)
    await other.run(task="two")
    await other.run(task="three")

    one, two, three = runs_of(capture)
    assert [link.context.span_id for link in two.root.links] == [one.root.context.span_id]
    assert not three.root.links
    assert {attributes(t.root)[CONVERSATION] for t in (one, two, three)} == {attributes(one.root)[CONVERSATION]}


async def test_a_state_saved_untraced_loads_and_starts_a_new_conversation(capture: Capture) -> None:
    otel_agents.AutoGenInstrumentor().uninstrument()
    team = writers_room(max_messages=2)
    result = await team.run(task="untraced")
    assert isinstance(result, TaskResult)
    state = await team.save_state()
    assert STATE_KEY not in state
    otel_agents.AutoGenInstrumentor().instrument()
    other = writers_room(max_messages=2)
    await other.load_state(state)
    await other.run(task="traced")
    (tree,) = runs_of(capture)
    assert not tree.root.links and len(attributes(tree.root)[CONVERSATION]) == 32


# --- review: the corners -----------------------------------------------------------------------


async def test_a_stream_is_attributed_where_it_was_made(capture: Capture) -> None:
    with otel_agents.run_attributes(user_id="maker"):
        stream = writers_room(max_messages=2, name="made-inside").run_stream(task="go")
    with otel_agents.run_attributes(user_id="consumer"):
        [_ async for _ in stream]

    (tree,) = runs_of(capture)
    assert attributes(tree.root)["user.id"] == "maker", "with its parent: where the run was made"


async def test_one_run_attributes_object_serves_concurrent_tasks(capture: Capture) -> None:
    import asyncio

    shared = otel_agents.run_attributes(user_id="shared")

    async def request(name: str, pause: float) -> None:
        async with shared:
            await asyncio.sleep(pause)
            await writers_room(max_messages=2, name=name).run(task="go")

    await asyncio.gather(request("a", 0.02), request("b", 0.0))
    assert sorted(attributes(t.root)["user.id"] for t in runs_of(capture)) == ["shared", "shared"]


async def test_loading_a_state_we_did_not_save_starts_a_new_conversation(capture: Capture) -> None:
    team = writers_room(max_messages=2)
    await team.run(task="first user")
    otel_agents.AutoGenInstrumentor().uninstrument()
    foreign = await writers_room(max_messages=2).save_state()  # saved untraced: no conversation in it
    otel_agents.AutoGenInstrumentor().instrument()
    await team.load_state(foreign)
    await team.run(task="second user")

    first, second = runs_of(capture)
    assert attributes(first.root)[CONVERSATION] != attributes(second.root)[CONVERSATION]
    assert not second.root.links


async def test_a_refused_run_is_not_the_conversations_last(capture: Capture) -> None:
    import asyncio

    team = writers_room(max_messages=4)
    running = asyncio.ensure_future(team.run(task="real"))
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="already running"):
        await team.run(task="refused")
    await running
    saved = (await team.save_state())[STATE_KEY]["last_run"]
    real = [t for t in runs_of(capture) if (attributes(t.root).get("otel_agents.message_count") or 0) > 0]
    assert saved["run_id"] == attributes(real[0].root)["otel_agents.run.id"]


async def test_saved_again_before_any_run_the_state_keeps_its_link(capture: Capture) -> None:
    team = writers_room(max_messages=2)
    await team.run(task="one")
    first = await team.save_state()
    relay = writers_room(max_messages=2)
    await relay.load_state(first)
    second = await relay.save_state()  # a process that loaded and saved without running
    assert second[STATE_KEY] == first[STATE_KEY]


async def test_only_the_team_carries_the_conversation_not_its_participants(capture: Capture) -> None:
    team = writers_room(max_messages=2)
    writer = team._participants[0]  # type: ignore[attr-defined]
    await writer.run(task="alone first")  # the agent has a conversation of its own now
    await team.run(task="together")
    state = await team.save_state()
    assert STATE_KEY in state
    assert f'"{STATE_KEY}"' not in json.dumps(state["agent_states"]), "participants' states: as AutoGen makes them"
    other = writers_room(max_messages=2)
    await other.load_state(state)
    await other.run(task="resumed")
    assert attributes(runs_of(capture)[-1].root)[CONVERSATION] == state[STATE_KEY]["conversation_id"]

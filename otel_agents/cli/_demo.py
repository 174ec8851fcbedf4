"""`otel-agents demo`: an offline writers' room, traced into the embedded store.

Scripted model replies (no network, no API key) that report a priced model name and token usage;
the writer calls one tool. Two users run it (`run_attributes(user_id=...)`): ana asks for a blurb
(four model calls and a tool call), ben for a tagline (two calls), so `otel-agents cost --by user`
has something to show. Each run streams live like AutoGen's Console, with a status line of
messages, tokens and cost so far. Ctrl-C stops the run under way before its next model call (the
scripted model honours the cancellation token, as a real client does); the run is stored as
`cancelled` with the calls it made, and the next user's run does not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, Final, TextIO

from otel_agents._internal.autogen import conventions as ag

DEMO_MODEL = "gpt-4o-mini-2024-07-18"
CALL_SECONDS = 0.25


def _scripted_client(replies: Sequence[Any]) -> Any:
    from autogen_core.models import ModelInfo
    from autogen_ext.models.replay import ReplayChatCompletionClient

    class ScriptedChatCompletionClient(ReplayChatCompletionClient):
        """Replays scripted results, taking a moment as a real call would, and reports a model name."""

        model = DEMO_MODEL

        async def create(self, *args: Any, **kwargs: Any) -> Any:
            # as a real client does, a cancelled token ends the call at once (and refuses the next)
            wait = asyncio.ensure_future(asyncio.sleep(CALL_SECONDS))
            token = kwargs.get("cancellation_token")
            if token is not None:
                token.link_future(wait)
            await wait
            return await super().create(*args, **kwargs)

    info: ModelInfo = {
        "vision": False,
        "function_calling": True,
        "json_output": False,
        "family": "gpt-4o",
        "structured_output": False,
    }
    return ScriptedChatCompletionClient(list(replies), model_info=info)


def _result(content: Any, prompt_tokens: int, completion_tokens: int) -> Any:
    from autogen_core.models import CreateResult, RequestUsage

    return CreateResult(
        finish_reason="function_calls" if isinstance(content, list) else "stop",
        content=content,
        usage=RequestUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        cached=False,
    )


DEMO_USERS = ("ana", "ben")

WRITER_LINES: Final = (
    "Tracing agent teams: one run, one trace. Every turn, tool call and token in one tree.",
    "Tracing agent teams: one run, one trace, priced per call. Loops are caught early.",
)
CRITIC_LINES: Final = ("Good start. Say what it costs and what happens when a team loops.", "APPROVE")


def build_team(user: str = "ana") -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core import FunctionCall

    async def web_search(query: str) -> str:
        """Search the web (offline: canned results)."""
        return f"3 results for {query!r}: OpenTelemetry traces, AutoGen teams, cost per run"

    if user == "ana":
        writer_replies = [
            _result(
                [FunctionCall(id="call-1", name="web_search", arguments='{"query": "tracing agent teams"}')],
                412,
                18,
            ),
            _result(WRITER_LINES[0], 655, 36),
            _result(WRITER_LINES[1], 921, 31),
        ]
        critic_replies = [_result(CRITIC_LINES[0], 702, 24), _result(CRITIC_LINES[1], 980, 3)]
    else:
        writer_replies = [_result("Every agent run, one trace: who ran it, what it cost.", 388, 14)]
        critic_replies = [_result("APPROVE", 430, 3)]
    writer = AssistantAgent(
        "writer",
        model_client=_scripted_client(writer_replies),
        tools=[web_search],
        system_message="You write short blurbs.",
    )
    critic = AssistantAgent("critic", model_client=_scripted_client(critic_replies), system_message="You review.")
    return RoundRobinGroupChat(
        [writer, critic],
        termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(12),
        name="writers-room",
    )


def _content(item: Any) -> str:
    to_text = getattr(item, "to_text", None)
    return str(to_text()) if callable(to_text) else str(getattr(item, "content", item))


class _NotTheReplayTokenCount(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != ag.REPLAY_TOKEN_COUNT_WARNING


_NOT_THE_REPLAY_TOKEN_COUNT: Final = _NotTheReplayTokenCount()


class _NotACancelledHandler(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


_NOT_A_CANCELLED_HANDLER: Final = _NotACancelledHandler()


TASKS = MappingProxyType(
    {
        "ana": "Write a two-line blurb about tracing agent teams.",
        "ben": "Write a one-line tagline for tracing agent teams.",
    }
)


async def run_demo(out: TextIO = sys.stdout) -> list[str]:
    """Run the demo team for each demo user in turn; print the runs live; return their run ids."""
    from autogen_core import EVENT_LOGGER_NAME, ROOT_LOGGER_NAME

    # once each, however often called: the replay client warns about its own token counting (not
    # the demo's point), and AutoGen's runtime logs a traceback for each handler a Ctrl-C cancels
    logging.getLogger(EVENT_LOGGER_NAME).addFilter(_NOT_THE_REPLAY_TOKEN_COUNT)
    logging.getLogger(ROOT_LOGGER_NAME).addFilter(_NOT_A_CANCELLED_HANDLER)
    from otel_agents._internal.run.attribution import run_attributes

    run_ids: list[str] = []
    for number, user in enumerate(DEMO_USERS, start=1):
        print(f"========== run {number} of {len(DEMO_USERS)}, for user {user}: {TASKS[user]} ==========", file=out)
        with run_attributes(user_id=user, attributes={"demo": True}):
            run_ids.append(await _run_one(build_team(user), TASKS[user], out))
    return run_ids


async def _run_one(team: Any, task: str, out: TextIO) -> str:
    from autogen_core import CancellationToken

    from otel_agents._internal.autogen.tap import run_stream

    token = CancellationToken()
    stream = run_stream(team, task=task, cancellation_token=token)
    following = asyncio.ensure_future(_follow(stream, out))
    try:
        # Shielded, so that a Ctrl-C (asyncio.run cancels this task) lands here, not in AutoGen's
        # stream: there its cleanup would wait for the team to finish every turn. Here the team's
        # token is cancelled first, which ends the model call under way and refuses the next.
        return await asyncio.shield(following)
    except asyncio.CancelledError:
        token.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following  # the run ends (stop kind cancelled) with the calls made so far
        print("---------- stopped: cancelled ----------", file=out, flush=True)
        raise


async def _follow(stream: Any, out: TextIO) -> str:
    """Print the run's items as they come, with a status line; return its run id."""
    from otel_agents._internal.tracing.globals import current

    recording = current(None)
    messages = tokens_in = tokens_out = 0
    cost = 0.0
    result: Any = None
    async for item in stream:
        if type(item).__name__ == ag.TASK_RESULT_CLASS:
            result = item
            continue
        messages += 1
        usage = getattr(item, "models_usage", None)
        if usage is not None:
            tokens_in += usage.prompt_tokens
            tokens_out += usage.completion_tokens
            cost += recording.prices.cost(DEMO_MODEL, usage.prompt_tokens, usage.completion_tokens) or 0.0
        print(f"---------- {type(item).__name__} ({item.source}) ----------", file=out)
        print(_content(item), file=out)
        print(f"[{messages} messages · {tokens_in:,} in / {tokens_out:,} out tokens · ${cost:.6f}]", file=out)
        out.flush()  # live through a pipe too (`otel-agents demo | tee demo.txt`)
    stop = result.stop_reason if result is not None else None
    print(f"---------- stopped: {stop} ----------", file=out)
    run_id = getattr(stream.recorder, "run_id", None)
    return run_id if isinstance(run_id, str) else ""

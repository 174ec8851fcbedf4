"""A small app of ours for the fault matrix (tests/test_fault_matrix.py): one AutoGen run through the
real `OpenAIChatCompletionClient` against the tests' local server, ended the way `FAULT_ENDING`
says, in a process ended the way `FAULT_EXIT` says.

Traced (`FAULT_TRACED=1`) it calls `otel_agents.configure()` and nothing else of ours (but
`LoopGuard`, the termination condition the `loop_guard` ending is about), with what the
environment says (`OTEL_AGENTS_STORE`, `OTEL_EXPORTER_OTLP_ENDPOINT`, ...); untraced it is the same
app without `configure()`. What it prints on stdout is the app's own output, compared with the
untraced app's; what the test needs besides goes to the notes file `FAULT_NOTES`: `running` once
the run is under way, and, at an exit that runs exit handlers,
`dropped N` (the spans the pipeline could not deliver, which the metric `otel_agents.spans.dropped`
reads) and `account {...}` (each exporter's `otel_agents.SpanAccount`, as JSON).

`FAULT_OPENAI_URL`: the local server's base URL (the test scripts its replies per ending).
`FAULT_GATE`: a file the app waits for between its two runs (the `recovering` destination: the
backend comes back between them).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult, TerminationCondition
from autogen_agentchat.conditions import (
    ExternalTermination,
    HandoffTermination,
    MaxMessageTermination,
    TextMentionTermination,
    TimeoutTermination,
    TokenUsageTermination,
)
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import CancellationToken
from autogen_ext.models.openai import OpenAIChatCompletionClient

ENDING = os.environ["FAULT_ENDING"]
EXIT = os.environ.get("FAULT_EXIT", "returns")
TRACED = os.environ.get("FAULT_TRACED", "1") == "1"
NOTES = Path(os.environ["FAULT_NOTES"])
TASK = "Write one line about tracing."


def note(line: str) -> None:
    with NOTES.open("a") as notes:
        notes.write(line + "\n")


def model(url: str | None = None) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        model="gpt-4o-mini", base_url=url or os.environ["FAULT_OPENAI_URL"], api_key="test-key", max_retries=0
    )


def lookup(query: str) -> str:
    """Look something up (a tool that always fails)."""
    raise ValueError("the lookup service is down")


def team(termination: TerminationCondition, *, url: str | None = None, **writer: Any) -> RoundRobinGroupChat:
    client = model(url)
    return RoundRobinGroupChat(
        [AssistantAgent("writer", model_client=client, **writer), AssistantAgent("critic", model_client=client)],
        termination_condition=termination,
        name="fault-room",
    )


def loop_guard() -> TerminationCondition:
    from otel_agents import LoopGuard, LoopLimits

    return LoopGuard(LoopLimits(max_repeats=2)) | MaxMessageTermination(10)


TEAMS: dict[str, Callable[[], RoundRobinGroupChat]] = {
    "max_messages": lambda: team(MaxMessageTermination(3)),
    "text_mention": lambda: team(TextMentionTermination("APPROVE") | MaxMessageTermination(6)),
    "handoff": lambda: team(HandoffTermination(target="user") | MaxMessageTermination(6), handoffs=["user"]),
    "timeout": lambda: team(TimeoutTermination(0.3) | MaxMessageTermination(6)),
    "token_budget": lambda: team(TokenUsageTermination(max_total_token=1) | MaxMessageTermination(6)),
    "loop_guard": lambda: team(loop_guard()),
    "tool_raises": lambda: team(MaxMessageTermination(4), tools=[lookup]),
    "model_429": lambda: team(MaxMessageTermination(3)),
    "model_connection_error": lambda: team(MaxMessageTermination(3), url=os.environ["FAULT_REFUSING_URL"]),
}
"""Runs awaited whole (`team.run`): each ends by its termination condition, or by the model's error."""


def say(result: object) -> None:
    if isinstance(result, TaskResult):
        print("stopped:", result.stop_reason)
    else:
        print("answered:", type(result).__name__)


def leave_mid_run(item: object) -> None:
    """Once the run is under way (the writer's message came), end the process the way FAULT_EXIT
    says; with FAULT_EXIT `returns`, or a signal the test sends, go on to the end and say how the
    run stopped."""
    if isinstance(item, TaskResult):
        say(item)
    if getattr(item, "source", None) != "writer":
        return
    note("running")
    if EXIT == "sys_exit":
        sys.exit(3)
    if EXIT == "raise_system_exit":
        raise SystemExit(3)
    if EXIT == "unhandled":
        raise RuntimeError("the app's own error")


async def one_run() -> None:
    if ENDING in TEAMS:
        try:
            say(await TEAMS[ENDING]().run(task=TASK))
        except Exception as error:  # a model's error ends the run: the app says so and goes on
            print("failed:", type(error).__name__)
        return
    if ENDING == "completed":
        say(await AssistantAgent("solo", model_client=model()).run(task=TASK))
    elif ENDING == "external":
        stop = ExternalTermination()
        async for item in team(stop | MaxMessageTermination(6)).run_stream(task=TASK):
            if getattr(item, "source", None) == "writer":
                stop.set()
            if isinstance(item, TaskResult):
                say(item)
    elif ENDING == "cancellation_token":
        token = CancellationToken()
        try:
            async for item in team(MaxMessageTermination(6)).run_stream(task=TASK, cancellation_token=token):
                if getattr(item, "source", None) == "writer":
                    token.cancel()
        except asyncio.CancelledError:
            print("cancelled")
    elif ENDING == "break":
        async for item in team(MaxMessageTermination(6)).run_stream(task=TASK):
            if getattr(item, "source", None) == "writer":
                break
        print("left")
    elif ENDING == "aclosing":
        async with contextlib.aclosing(team(MaxMessageTermination(6)).run_stream(task=TASK)) as stream:
            async for item in stream:
                if getattr(item, "source", None) == "writer":
                    break
        print("left")
    elif ENDING == "consumer_raises":
        try:
            async for item in team(MaxMessageTermination(6)).run_stream(task=TASK):
                if getattr(item, "source", None) == "writer":
                    raise LookupError("the consumer's own error")
        except LookupError:
            print("consumer failed")
    elif ENDING in ("asyncio_timeout", "wait_for"):
        try:
            if ENDING == "wait_for":
                await asyncio.wait_for(team(MaxMessageTermination(6)).run(task=TASK), 0.5)
            else:
                async with asyncio.timeout(0.5):
                    await team(MaxMessageTermination(6)).run(task=TASK)
        except TimeoutError:
            print("timed out")
    elif ENDING == "mid_run":  # the process ends inside the run (FAULT_EXIT), the stream held by the loop only
        async for item in team(MaxMessageTermination(4)).run_stream(task=TASK):
            leave_mid_run(item)
        print("finished")
    elif ENDING == "mid_run_kept":  # the same, the stream kept in a variable
        stream = team(MaxMessageTermination(4)).run_stream(task=TASK)
        async for item in stream:
            leave_mid_run(item)
        print("finished")
    elif ENDING == "mid_run_awaited":  # the process ends while `team.run` is awaited
        say(await team(MaxMessageTermination(4)).run(task=TASK))
    else:
        raise SystemExit(f"unknown FAULT_ENDING {ENDING!r}")


async def main() -> None:
    if TRACED:
        import otel_agents

        otel_agents.configure()
    if EXIT == "signal_sys_exit":
        signal.signal(signal.SIGUSR1, lambda *_: sys.exit(4))
    await one_run()
    gate = os.environ.get("FAULT_GATE")
    if gate:  # a second run, once the test has brought the backend back
        note("waiting")
        deadline = time.monotonic() + 60
        while not Path(gate).exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await one_run()


async def service(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The run as a service's request (`FAULT_EXIT=sigterm_uvicorn`): `/run` answers with its result."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b"ok"
    if scope["path"] == "/run":
        result = await team(MaxMessageTermination(4)).run(task=TASK)
        body = (result.stop_reason or "").encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def served() -> None:
    import uvicorn

    if TRACED:
        import otel_agents

        otel_agents.configure()
    uvicorn.run(service, host="127.0.0.1", port=int(os.environ["FAULT_PORT"]), log_level="warning")


def dropped_at_exit() -> None:
    """Registered before otel-agents is imported, so that it runs after otel-agents' own exit
    handler (exit handlers run last registered first): the spans it could not deliver."""
    from otel_agents._internal.telemetry import latest

    telemetry = latest()
    note(f"dropped {telemetry.dropped_spans if telemetry is not None else 0}")
    for account in telemetry.span_accounts() if telemetry is not None else ():
        note(f"account {json.dumps(dataclasses.asdict(account))}")


if __name__ == "__main__":
    # Ctrl-C as in a terminal: a process started in the background by a shell without job control
    # (a CI step, `cmd &` in a script) inherits SIGINT ignored, and Python then leaves it ignored,
    # so the SIGINT cells would test nothing (the run went on to its end, traced and untraced).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if TRACED:
        atexit.register(dropped_at_exit)
    if EXIT == "sigterm_uvicorn":
        served()
    else:
        asyncio.run(main())

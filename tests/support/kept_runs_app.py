"""An app of ours for tests/test_every_kept_run_delivered.py: team runs through the real
`OpenAIChatCompletionClient` against the tests' local server (`OPENAI_BASE_URL`), traced by
`otel_agents.configure()` as the OTEL_* and OTEL_AGENTS_* variables say, ending right after its
calls, without waiting.

`python -m tests.support.kept_runs_app MODE END`:
- MODE `many`: `RUNS` runs one after the other (the server's script makes some fail);
- MODE `open`: `OPEN` runs started and left open (each stream read up to its first item; the
  server holds their calls);
- MODE `fork`: one run is open when the app forks; the child exits normally at once, the parent
  waits for it, then finishes the run;
- END `shutdown`: `force_flush()` then `shutdown()`, then the process ends; END `exit`: the
  process ends with nothing called (the exit delivers).
Prints `accounts [...]` (each exporter's `SpanAccount`) after `shutdown()`, and `done`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient

import otel_agents

HELD: list[Any] = []
"""The open runs' streams, referenced until the process ends."""


def team(client: Any, name: str) -> RoundRobinGroupChat:
    writer = AssistantAgent("writer", model_client=client)
    return RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2), name=name)


async def main(mode: str, end: str) -> None:
    telemetry = otel_agents.configure()
    client = OpenAIChatCompletionClient(
        model="gpt-4o-mini", base_url=os.environ["OPENAI_BASE_URL"], api_key="test-key", max_retries=0
    )
    if mode == "many":
        for i in range(int(os.environ["RUNS"])):
            try:
                await team(client, "room").run(task=f"task {i}")
            except Exception:  # a failing run: its model call answered 500
                pass
    elif mode == "open":
        for i in range(int(os.environ["OPEN"])):
            stream = team(client, "open-room").run_stream(task=f"task {i}")
            await stream.__anext__()  # the task message: the run is open from here on
            HELD.append(stream)  # open until the process ends
    elif mode == "fork":
        stream = team(client, "forked-room").run_stream(task="task")
        await stream.__anext__()
        pid = os.fork()
        if pid == 0:  # the child: ends normally, its exit handlers run
            sys.stdout.flush()
            sys.exit(0)
        os.waitpid(pid, 0)
        async for _ in stream:
            pass
    if end == "shutdown":
        flushed = telemetry.force_flush()
        telemetry.shutdown()
        accounts = [dataclasses.asdict(account) for account in telemetry.span_accounts()]
        print("accounts", json.dumps({"flushed": flushed, "accounts": accounts}), flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    # not asyncio.run(): its clean-up would end the open runs (cancelled) before the exit does;
    # the loop is left as it is, with the runs' tasks pending, as in an app that just ends
    asyncio.new_event_loop().run_until_complete(main(sys.argv[1], sys.argv[2]))

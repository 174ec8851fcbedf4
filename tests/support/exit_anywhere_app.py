"""An app that runs replay teams one after another, traced into the store, until a `SystemExit`
raised by a signal handler (SIGALRM, `EXIT_AFTER_S` seconds after its first run) ends it, wherever
the main thread is then: in AutoGen, in the app, or in otel-agents' own code (holding a lock,
recording a message, ending a run). It prints `done` after each run that returned, and the handler
says `under way` on stderr when a run had started (its first item came) and not yet been printed.

Python swallows an exception raised inside a weak reference's callback (asyncio's own set of tasks
has them), so a signal landing there loses its `SystemExit`: the loop then exits by the flag the
handler set, as an app that means to exit would."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import otel_agents
from tests.support.teams import writers_room

LEAVING: list[int] = []
UNDER_WAY: list[bool] = [False]


def leave(signum: int, frame: object) -> None:
    LEAVING.append(signum)
    if UNDER_WAY[0]:
        os.write(2, b"under way\n")
    sys.exit(7)


async def main() -> None:
    if os.environ.get("TRACED", "1") == "1":
        otel_agents.configure()
    await writers_room(max_messages=6).run(task="warm up")
    print("done", flush=True)
    signal.signal(signal.SIGALRM, leave)
    signal.setitimer(signal.ITIMER_REAL, float(os.environ["EXIT_AFTER_S"]))
    while not LEAVING:
        async for _ in writers_room(max_messages=6).run_stream(task="go"):
            UNDER_WAY[0] = True  # the first item came: the run has started
        UNDER_WAY[0] = False
        print("done", flush=True)
    os.write(2, b"swallowed\n")  # the handler ran, and its SystemExit was lost: the run went on
    sys.exit(7)


if __name__ == "__main__":
    asyncio.run(main())

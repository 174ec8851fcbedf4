"""Waiting for something to happen: a condition polled until it holds or a deadline passes, rather
than a fixed sleep that is too short on a busy machine and too long everywhere else."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], within_s: float = 20, *, every_s: float = 0.02) -> T:
    """Call `condition` until it returns something true or `within_s` passed; return its last value
    (false at the deadline, so `assert wait_until(...)` fails there)."""
    deadline = time.monotonic() + within_s
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(every_s)
    return value


async def wait_until_async(condition: Callable[[], T], within_s: float = 20, *, every_s: float = 0.02) -> T:
    """`wait_until` for a coroutine: the event loop runs on between the calls."""
    deadline = time.monotonic() + within_s
    while not (value := condition()) and time.monotonic() < deadline:
        await asyncio.sleep(every_s)
    return value


def only_this_task_left() -> bool:
    """No task of the running event loop but the caller's is left: whatever work the test started
    in the background (a team AutoGen goes on with, a stream's cleanup) has ended."""
    return asyncio.all_tasks() == {asyncio.current_task()}

"""A child forked now, and what it says."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable


def said_in_a_forked_child(say: Callable[[], str]) -> tuple[str, int]:
    """What `say()` returns in a child forked now, and the child's wait status; a child stuck on a
    lock is killed by its alarm (30 s), and says nothing."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            signal.alarm(30)
            os.write(write, say().encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    return said, os.waitpid(child, 0)[1]

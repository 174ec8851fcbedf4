"""Fork handling: a forked child resets the counts of the pipelines alive at the fork (it counts
what it loses, not what its parent lost), through one set of fork hooks for the process. What must
not be half-way through at the fork (a store write: SQLite's state of an open transaction would
stay in the child) holds still across it (`before_fork`, `after_fork_in_parent`)."""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Protocol

from otel_agents._internal import process_state

logger = logging.getLogger(__name__)


class _ResetInForkedChild(Protocol):
    def reset_after_fork(self) -> None: ...


_reset_in_forked_child: weakref.WeakSet[_ResetInForkedChild] = weakref.WeakSet()
"""What a forked child resets (health and processors alive at the fork): one fork hook for the
process, however often `configure()` runs, and nothing kept alive by it."""
process_state.hold(
    __name__,
    "_reset_in_forked_child",
    bound="weak: each goes with its pipeline",
    size=_reset_in_forked_child.__len__,
    forget=None,
)


def _each(method: str) -> None:
    """Call `method` of each one alive that has it (the fork goes on, and the others are called,
    whatever one of them raises)."""
    for alive in list(_reset_in_forked_child):
        call = getattr(alive, method, None)
        if call is not None:
            try:
                call()
            except Exception:
                logger.warning("otel-agents: %s of %r failed", method, alive, exc_info=True)


os.register_at_fork(
    before=lambda: _each("before_fork"),
    after_in_parent=lambda: _each("after_fork_in_parent"),
    after_in_child=lambda: _each("reset_after_fork"),
)


def reset_in_forked_child(alive: _ResetInForkedChild) -> None:
    """Reset `alive` (`reset_after_fork()`) in a forked child, as long as it lives; where it has
    `before_fork()` and `after_fork_in_parent()`, the parent calls them around each fork."""
    _reset_in_forked_child.add(alive)


class HeldAcrossForks:
    """A lock (`with` it) that the parent holds across each fork, waiting for the holder under way
    if any, and that a forked child makes anew: what is done under it (a store write: SQLite's
    state of an open transaction would stay in the child) is never half-way through in the child."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        reset_in_forked_child(self)

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.lock.release()

    def before_fork(self) -> None:
        self.lock.acquire()

    def after_fork_in_parent(self) -> None:
        self.lock.release()

    def reset_after_fork(self) -> None:
        self.lock = threading.Lock()

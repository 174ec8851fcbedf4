"""Everything otel-agents keeps for the whole process, in one list, with one reset for tests.

Each piece of state lives in the module that owns it (the layers keep it there: a lower layer may
not reach up), and that module declares it here at import with `hold()`: the module-level names that
hold it, what bounds it, how much it holds now, and how to forget it. So this module is the one
place that knows the process state: `held()` lists it, `reset()` forgets all of it, the latest
declared first. `tests/test_process_state.py` fails when a module-level name that can change is not declared.

State that cannot be forgotten says so (`forget=None`) and why: what goes with its owner (weakly
held) or what OpenTelemetry or Python allows to be set only once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Held:
    """One piece of process state, as its owning module declared it."""

    module: str
    names: tuple[str, ...]
    """The module-level names that hold it."""
    bound: str
    """What bounds it and what releases it."""
    size: Callable[[], int]
    """How many entries it holds now (0: nothing)."""
    forget: Callable[[], None] | None
    """Forget it as if the process had just started (None: it cannot be, `bound` says why)."""


_lock = threading.Lock()
_held: list[Held] = []


def hold(
    module: str,
    *names: str,
    bound: str,
    size: Callable[[], int],
    forget: Callable[[], None] | None,
) -> None:
    """Declare state of `module` (its `__name__`) held in `names`; called once, at its import."""
    if not names:
        raise ValueError("hold() needs the names that hold the state")
    with _lock:
        _held.append(Held(module, names, bound, size, forget))


def held() -> tuple[Held, ...]:
    """Every piece of state declared so far (by the modules imported), in declaration order."""
    with _lock:
        return tuple(_held)


def reset() -> None:
    """Forget all the process state, the latest declared first: a module is imported after those
    it imports, so what is built on other state (AutoGen's patches, the latest pipeline) goes before
    what it is built on. For tests: an application has no use for it. Every piece is tried; the
    first failure is raised after the others were forgotten."""
    failed: BaseException | None = None
    for state in reversed(held()):
        if state.forget is None:
            continue
        try:
            state.forget()
        except Exception as exc:  # the others are forgotten all the same
            failed = failed or exc
    if failed is not None:
        raise failed

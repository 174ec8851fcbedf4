"""Everything otel-agents keeps for the whole process, in one list, with one reset for tests.

Each piece of state lives in the module that owns it (the layers keep it there: a lower layer may
not reach up), and that module declares it here at import with `hold()`: the module-level names that
hold it, what bounds it, how much it holds now, and how to forget it. So this module is the one
place that knows the process state: `held()` lists it, `reset()` forgets all of it, the latest
declared first. `tests/test_process_state.py` fails when a module-level name that can change is not declared.

State that cannot be forgotten says so (`forget=None`) and why: what goes with its owner (weakly
held) or what OpenTelemetry or Python allows to be set only once.

The locks that guard it are declared here too (`new_locks_in_forked_child`): a forked child makes
them anew, unheld, so that a lock another thread of the parent held at the fork does not hang the
child (the export side's pipelines reset themselves, `export/fork.py`).
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
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


_RLOCK = type(threading.RLock())
_locks_to_renew: weakref.WeakKeyDictionary[object, tuple[str, ...]] = weakref.WeakKeyDictionary()
"""Owner (a module, or an object of ours) -> the names of its locks a forked child makes anew."""


def new_locks_in_forked_child(owner: object, *names: str) -> None:
    """In a child forked from now on, `owner`'s locks `names` (module-level names of the module
    named `owner`, or attributes of an object, held weakly) are new ones of the same kind, not
    held: a thread of the parent that held one at the fork is not in the child and would never
    release it (a worker pool forking while a run ends in another thread). What they guard is left
    as the fork found it: the parent's runs are the parent's, and each piece of state has its bound."""
    if isinstance(owner, str):
        owner = sys.modules[owner]
    with _lock:
        _locks_to_renew[owner] = (*_locks_to_renew.get(owner, ()), *names)


def _renew_locks() -> None:
    global _lock
    _lock = threading.Lock()
    for owner, names in list(_locks_to_renew.items()):
        for name in names:
            setattr(owner, name, threading.RLock() if isinstance(getattr(owner, name), _RLOCK) else threading.Lock())


os.register_at_fork(after_in_child=_renew_locks)

"""A value kept per tracer or meter provider, found by the provider's identity.

A provider need not be hashable (Logfire's providers are dataclasses, compared by value), so it
cannot key a dict, a `WeakKeyDictionary` or a `WeakSet`. An entry goes when its provider is
collected; a provider that cannot be weakly referenced is held, as a global provider is anyway.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from otel_agents._internal import process_state

V = TypeVar("V")


def _same(value: object) -> object:
    return value


class PerProvider(Generic[V]):
    """`setdefault(provider, make)`: the value made once for `provider` (looked up by `id()`)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Callable[[], object], V]] = {}
        self._lock = threading.Lock()
        process_state.new_locks_in_forked_child(self, "_lock")

    def get(self, provider: object) -> V | None:
        entry = self._entries.get(id(provider))
        return entry[1] if entry is not None and entry[0]() is provider else None

    def setdefault(self, provider: object, make: Callable[[], V]) -> V:
        value = self.get(provider)
        if value is not None:
            return value
        made = make()  # not under the lock: it may collect garbage, and so call `_forget`
        with self._lock:
            value = self.get(provider)
            if value is not None:  # another thread made one first
                return value
            key = id(provider)
            held: Callable[[], object]
            try:
                held = weakref.ref(provider)
            except TypeError:  # cannot be weakly referenced: held for good
                held = functools.partial(_same, provider)
            self._entries[key] = (held, made)
        if isinstance(held, weakref.ref):
            weakref.finalize(provider, self._forget, key, held)
        return made

    def _forget(self, key: int, held: Callable[[], object]) -> None:
        """Called as the provider is collected (its id not free for reuse yet), in any thread, maybe
        while this thread holds the lock: no lock taken, only this entry removed."""
        entry = self._entries.get(key)
        if entry is not None and entry[0] is held:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every value (`process_state.reset`)."""
        with self._lock:
            self._entries.clear()

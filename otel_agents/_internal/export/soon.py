"""Export soon after a run ends: one daemon thread flushes the tracer providers asked for.

A run's spans wait in a batch queue until the SDK's schedule (`OTEL_BSP_SCHEDULE_DELAY`) exports
them; a service stopped before then loses them. So a root run's end asks the provider that records
it to flush, on this thread, never in the caller's (an event loop must not wait for an export).

- The caller's cost is a set insertion under a lock and setting an event.
- Requests coalesce: one flush per provider however many runs ended while the previous one ran;
  what is pending is at most one entry per provider (by identity: a provider need not be
  hashable).
- The thread is a daemon (it never keeps the process alive), started at the first request; a
  forked child starts its own at its first request; `stop()` ends it (a later request starts a
  new one).
- Public SDK API only: `TracerProvider.force_flush()`.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from otel_agents._internal import process_state

logger = logging.getLogger(__name__)


class FlushSoon:
    """Flushes, on one daemon thread, the providers `request()` was called with."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # also in a forked child: the parent's thread is not there, its requests are the parent's
        # re-entrant: a stream dropped in a reference cycle ends its run (and so asks for a flush)
        # from the garbage collector, perhaps inside an allocation made under this very lock
        self._lock = threading.RLock()
        self._wanted = threading.Event()
        self._pending: dict[int, Any] = {}  # by id: a provider need not be hashable
        self._thread: threading.Thread | None = None

    def request(self, provider: Any) -> None:
        """Flush `provider` soon (its `force_flush()`, on the flush thread); returns at once."""
        with self._lock:
            self._pending[id(provider)] = provider
            if self._thread is None:
                thread = threading.Thread(target=self._work, name="otel-agents-flush-soon", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # at interpreter exit: the exit's own shutdown delivers
                    self._pending.clear()
                    return
                self._thread = thread
        if not self._wanted.is_set():
            self._wanted.set()

    def forget(self, provider: Any) -> None:
        """`provider` is shut down: no flush of it is pending any more; with none pending for any
        other provider, the thread stops."""
        with self._lock:
            self._pending.pop(id(provider), None)
            if self._pending:
                return
            self._thread = None
        self._wanted.set()

    def stop(self) -> None:
        """End the thread (once it is done with a flush under way) and drop what is pending."""
        with self._lock:
            self._thread = None
            self._pending.clear()
        self._wanted.set()

    def running(self) -> bool:
        """Whether the flush thread is there (or told to end and not yet gone)."""
        return self._thread is not None

    def pending(self) -> list[Any]:
        """The providers asked for and not flushed yet."""
        with self._lock:
            return list(self._pending.values())

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            self._wanted.wait()
            with self._lock:
                if self._thread is not me:
                    return  # stopped (or forked: this object now belongs to another process's thread)
                self._wanted.clear()
                providers, self._pending = self._pending, {}
            for provider in providers.values():
                flush = getattr(provider, "force_flush", None)
                if flush is None:
                    continue
                try:
                    flush()
                except Exception:  # the next run's spans are flushed all the same
                    logger.debug("otel-agents: flushing a provider after a run failed", exc_info=True)


FLUSH_SOON = FlushSoon()
"""The process's one flush thread."""
process_state.hold(
    __name__,
    "FLUSH_SOON",
    bound="one daemon thread (a forked child starts its own), while a flush is asked for",
    size=lambda: FLUSH_SOON.running() + len(FLUSH_SOON.pending()),
    forget=FLUSH_SOON.stop,
)

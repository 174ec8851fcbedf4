"""Export soon after a run ends: one daemon thread flushes the tracer providers asked for.

A run's spans wait in a batch queue until the SDK's schedule (`OTEL_BSP_SCHEDULE_DELAY`) exports
them; a service stopped before then loses them. So a root run's end asks the provider that records
it to flush, on this thread, never in the caller's (an event loop must not wait for an export).

- The caller's cost is a set insertion under a lock and setting an event.
- Requests coalesce: one flush per provider however many runs ended while the previous one ran;
  what is pending is at most one entry per provider (by identity: a provider need not be
  hashable).
- At most one flush each `FLUSH_INTERVAL_S`: a run that ends when the last flush began longer ago
  than that is flushed at once; one that ends sooner is flushed that long after the last flush
  began, together with every run ending meanwhile. A thread that wants the GIL while the event
  loop holds it is woken at each of the loop's short releases of it (each `select`, each
  `os.urandom`) and mostly goes back to sleep, up to the interpreter's switch interval (5 ms):
  with a flush at each run's end, some fifty context switches a run and 1.2 ms of the process's
  CPU in a loop of 6 ms replay runs, whatever the flush exports (BENCHMARKS.md, "a thread of ours
  waiting for the GIL").
- The thread is a daemon (it never keeps the process alive), started at the first request; a
  forked child starts its own at its first request; `stop()` ends it (a later request starts a
  new one).
- Public SDK API only: `TracerProvider.force_flush()`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Final

from otel_agents._internal import process_state

logger = logging.getLogger(__name__)

FLUSH_INTERVAL_S: Final = 0.2
"""The least time between the starts of two flushes (the module docstring says why)."""


class FlushSoon:
    """Flushes, on one daemon thread, the providers `request()` was called with, at most one flush
    each `interval_s`."""

    def __init__(self, interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.interval_s = interval_s
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
        self._cut_short = threading.Event()
        """Set to end the thread's wait between two flushes (`forget`, `stop`); a new one each thread."""

    def request(self, provider: Any) -> None:
        """Flush `provider` soon (its `force_flush()`, on the flush thread); returns at once."""
        with self._lock:
            self._pending[id(provider)] = provider
            if self._thread is None:
                self._cut_short = threading.Event()
                thread = threading.Thread(
                    target=self._work, args=(self._cut_short,), name="otel-agents-flush-soon", daemon=True
                )
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
            self._cut_short.set()
        self._wanted.set()

    def stop(self) -> None:
        """End the thread (once it is done with a flush under way) and drop what is pending."""
        with self._lock:
            self._thread = None
            self._pending.clear()
            self._cut_short.set()
        self._wanted.set()

    def running(self) -> bool:
        """Whether the flush thread is there (or told to end and not yet gone)."""
        return self._thread is not None

    def pending(self) -> list[Any]:
        """The providers asked for and not flushed yet."""
        with self._lock:
            return list(self._pending.values())

    def _work(self, cut_short: threading.Event) -> None:
        me = threading.current_thread()
        interval_s = self.interval_s
        began = time.monotonic() - interval_s
        while not cut_short.is_set():  # (set: stopped while flushing; a new thread may have the event)
            self._wanted.wait()
            wait_s = began + interval_s - time.monotonic()
            if wait_s > 0:  # flushed less than an interval ago: the runs ending meanwhile go together
                cut_short.wait(wait_s)
            with self._lock:
                if self._thread is not me:
                    return  # stopped (or forked: this object now belongs to another process's thread)
                self._wanted.clear()
                providers, self._pending = self._pending, {}
            if not providers:  # woken by a request already taken: no flush, no new interval
                continue
            began = time.monotonic()
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
